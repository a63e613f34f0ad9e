"""Requests paired by their tokens (FORMAT.md "Requests paired by their
tokens").  Snapshots written by the C capture API (capwriter), engine-style
token-major [T, H] captures; every expected figure recomputed here with
numpy from the arrays written.

Run A is batch 1: prompt P alone (request 0), then two decode steps.  Run B
is batch 4: prompts Q, R, P, S as requests 0..3 (P in row 2), then the same
decode steps.  Rows depend on (token, position) only, so the same prompt
gives the same rows wherever it sits, except where the test moves one row of
B's P by one float32 ULP.  The diff must compare A's 0 with B's 2 (and say
so), find the one-ULP row at the position numpy finds, and never report B's
other prompts as numeric divergences."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capwriter  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
H, V = 6, 32
RNG = np.random.default_rng(29)
EMB = RNG.standard_normal((V, H)).astype(np.float32)
POS = RNG.standard_normal((64, H)).astype(np.float32)
WL = RNG.standard_normal((H, V)).astype(np.float32)

P = [5, 9, 2, 7]
Q = [5, 11, 3]
R = [1, 4, 4, 8, 6]
S = [5, 9, 2, 30]  # shares P's first three tokens: a prefix match would be wrong


def rows_of(tokens, positions):
    """embed, layers.0.out, lm_head rows of tokens at positions."""
    e = EMB[tokens]
    l0 = np.tanh(e + POS[positions]).astype(np.float32)
    z = (l0 @ WL).astype(np.float32)
    return {"embed": e, "layers.0.out": l0, "lm_head": z}


def write(path, steps, bump=None):
    """steps: [(tokens, positions, requests)] per pass.  bump: (step, row):
    layers.0.out of that row moves one ULP up.  Returns the rows written."""
    w = capwriter.Writer(path, os.path.basename(path))
    written = []
    for s, (tok, pos, req) in enumerate(steps):
        tok, pos, req = (np.array(x, dtype=np.int64) for x in (tok, pos, req))
        rows = rows_of(tok, pos)
        if bump is not None and bump[0] == s:
            x = rows["layers.0.out"].copy()
            x[bump[1], 0] = np.nextafter(x[bump[1], 0], np.float32(np.inf))
            rows["layers.0.out"] = x
        assert w.capture("input_ids", tok, "i64", positions=pos, requests=req, role="input",
                         step=s) == 0
        for n, inputs in (("embed", []), ("layers.0.out", ["embed"]),
                          ("lm_head", ["layers.0.out"])):
            assert w.capture(n, rows[n], "f32", positions=pos, requests=req, inputs=inputs,
                             role="logits" if n == "lm_head" else "activation", step=s) == 0
        written.append((tok, pos, req, rows))
    w.close()
    return written


def prefill(prompts):
    tok, pos, req = [], [], []
    for r, p in enumerate(prompts):
        tok += p
        pos += list(range(len(p)))
        req += [r] * len(p)
    return tok, pos, req


def decode(prompts, fed):
    """One decode step: fed[r] at the next position of each request."""
    return ([fed[r] for r in range(len(prompts))], [len(p) for p in prompts],
            list(range(len(prompts))))


def keyed(written, name):
    """{(request, position): row} of one side."""
    out = {}
    for tok, pos, req, rows in written:
        for i in range(len(tok)):
            out[(int(req[i]), int(pos[i]))] = rows[name][i]
    return out


def diff(*args):
    p = subprocess.run([ULPPROF, "diff"] + list(args), capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


class RequestTokensTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def runs(self, b_prompts, b_fed, bump=None):
        a = self.path("bs1.h5")
        b = self.path("bs4.h5")
        wa = write(a, [prefill([P]), decode([P], [20])])
        wb = write(b, [prefill(b_prompts), decode(b_prompts, b_fed)], bump=bump)
        return a, b, wa, wb

    def test_bs1_prompt_pairs_with_bs4_row_2(self):
        row = len(Q) + len(R) + 2  # B's P, position 2, in the prefill's rows
        a, b, wa, wb = self.runs([Q, R, P, S], [21, 22, 20, 23], bump=(0, row))
        # numpy: the pairing by tokens, and the keys whose rows differ under it.
        ka, kb = keyed(wa, "layers.0.out"), keyed(wb, "layers.0.out")
        partner = {0: 2}  # B's P is request 2 (same prompt, same fed token)
        differing = [k for k in sorted(ka) if not np.array_equal(
            ka[k].view(np.uint32), kb[(partner[k[0]], k[1])].view(np.uint32))]
        self.assertEqual(differing, [(0, 2)])
        ea, eb = keyed(wa, "embed"), keyed(wb, "embed")
        self.assertTrue(all(np.array_equal(ea[k], eb[(partner[k[0]], k[1])]) for k in ea))
        # Batch row 0 is another prompt: compared by row it would differ at embed.
        self.assertFalse(np.array_equal(ea[(0, 1)], eb[(0, 1)]))

        rc, out, err = diff("--format", "json", a, b)
        self.assertEqual(rc, 1, err)
        doc = json.loads(out)
        self.assertEqual(doc["requests_paired"], [{"b": 2, "a": 0}])
        self.assertEqual(doc["requests_apart_b"], [0])  # B's 0 would land on A's 0
        self.assertEqual(doc["streams_part"], [])
        fd = doc["first_divergence"]
        self.assertEqual((fd["name"], fd["request"], fd["position"]), ("layers.0.out", 0, 2))
        rows = {r["name"]: r for r in doc["rows"]}
        self.assertEqual(rows["embed"]["status"], "identical")
        l0 = rows["layers.0.out"]
        self.assertEqual(l0["positions_compared"], len(ka))
        self.assertEqual(l0["positions_differing"], len(differing))
        self.assertEqual(l0["positions_only_in_a"], 0)
        only_b = sum(len(p) + 1 for p in (Q, R, S))
        self.assertEqual(l0["positions_only_in_b"], only_b)
        self.assertEqual(l0["differing"], 1)
        rc, out, _ = diff("--color", "never", a, b)
        self.assertEqual(rc, 1)
        self.assertIn("requests paired by tokens: B's 2 is A's 0", out)
        self.assertIn("kept apart: 0", out)

    def test_same_prompt_twice_pairs_in_order(self):
        """B holds P in rows 1 and 2: A's 0 pairs with the first, B's 1."""
        a, b, wa, wb = self.runs([Q, P, P, R], [21, 20, 20, 22])
        rc, out, err = diff("--format", "json", a, b)
        self.assertEqual(rc, 0, err + out)
        doc = json.loads(out)
        self.assertEqual(doc["requests_paired"], [{"b": 1, "a": 0}])
        self.assertTrue(doc["identical"])
        for r in doc["rows"]:
            self.assertEqual(r["positions_compared"], len(P) + 1, r["name"])

    def test_fed_token_differs_is_a_part_not_a_divergence(self):
        """B's P is decoded with another token: a parted stream at A's
        request 0, position len(P), never a numeric divergence."""
        a, b, wa, wb = self.runs([Q, R, P, S], [21, 22, 25, 23])
        rc, out, err = diff("--format", "json", a, b)
        self.assertEqual(rc, 1, err)
        doc = json.loads(out)
        self.assertEqual(doc["requests_paired"], [{"b": 2, "a": 0}])
        self.assertEqual(len(doc["streams_part"]), 1)
        sp = doc["streams_part"][0]
        self.assertEqual((sp["request"], sp["position"], sp["token_a"], sp["token_b"]),
                         (0, len(P), 20, 25))
        self.assertIsNone(doc["first_divergence"])
        for r in doc["rows"]:
            self.assertEqual((r["positions_compared"], r["positions_parted"]),
                             (len(P), 1), r["name"])
            self.assertEqual(r["positions_differing"], 0, r["name"])

    def test_same_numbers_renumber_nothing(self):
        """Both runs batch 1 with P: no pair is reported."""
        a = self.path("x.h5")
        b = self.path("y.h5")
        write(a, [prefill([P])])
        write(b, [prefill([P])])
        rc, out, err = diff("--format", "json", a, b)
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual((doc["requests_paired"], doc["requests_apart_b"]), ([], []))
        rc, out, _ = diff("--color", "never", a, b)
        self.assertNotIn("paired by tokens", out)


if __name__ == "__main__":
    unittest.main()
