"""Parted token streams and ties that change the token (FORMAT.md "Parted
token streams", "logits").  Snapshots written by the C capture API
(capwriter); every expected figure recomputed here with numpy.

1. Greedy decode, one position per step: at step 3 run B's layer 1 moves
   by one float32 ULP and its logits emit another token, which B feeds at
   position 4.  The diff must say the first divergence is layer 1 at
   position 3, that the streams part at position 4 (the tokens each run
   fed, the margins at position 3) and leave positions 4-7 out of every
   row -- with recorded token ids, and inferred from the embedding and the
   argmax when none are recorded.
2. bf16 logits: a row where A's top two are tied and A emits the lower
   index while B emits the other is a flip (A tied), with its request and
   position."""
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
H, V, STEPS = 8, 12, 8
INPUTS = {"embed": [], "layers.0.out": ["embed"], "layers.1.out": ["layers.0.out"],
          "lm_head": ["layers.1.out"]}
LAYER = {"embed": -1, "layers.0.out": 0, "layers.1.out": 1, "lm_head": -1}


def diff(*args):
    p = subprocess.run([ULPPROF, "diff"] + list(args), capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def decode(bump_at=None, seed=5):
    """A toy causal model, greedy decode from token 3, one position per step.
    bump_at: the step whose layer-1 row moves one ULP up and whose logits
    then emit the runner-up (B's side).  Returns the per-position rows and
    the token fed at each position."""
    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((V, H)).astype(np.float32)
    w0 = (rng.standard_normal((H, H)) / 4).astype(np.float32)
    wl = rng.standard_normal((H, V)).astype(np.float32)
    tok, rows = [3], {n: [] for n in INPUTS}
    for p in range(STEPS):
        e = emb[tok[p]]
        l0 = np.tanh(e @ w0).astype(np.float32)
        hist = np.mean(np.array(rows["layers.0.out"] + [l0], dtype=np.float64), axis=0)
        l1 = (l0 + hist.astype(np.float32)).astype(np.float32)
        z = (l1 @ wl).astype(np.float32)
        if p == bump_at:
            l1 = l1.copy()
            l1[0] = np.nextafter(l1[0], np.float32(np.inf))
            z = z.copy()
            order = np.argsort(z)
            z[order[-2]] = z[order[-1]] + np.float32(0.25)  # the runner-up wins in B
        for n, v in (("embed", e), ("layers.0.out", l0), ("layers.1.out", l1), ("lm_head", z)):
            rows[n].append(v)
        tok.append(int(np.argmax(z)))
    return {n: np.array(v) for n, v in rows.items()}, tok[:STEPS]


def write(path, rows, tok, label, ids):
    w = capwriter.Writer(path, label)
    for p in range(STEPS):
        pos = np.array([p])
        if ids:
            assert w.capture("input_ids", np.array([tok[p]], dtype=np.int64), "i64", positions=pos,
                             role="input", step=p) == 0
        for n in INPUTS:
            role = "logits" if n == "lm_head" else "activation"
            assert w.capture(n, rows[n][p:p + 1], "f32", positions=pos, inputs=INPUTS[n],
                             layer=LAYER[n], role=role, step=p) == 0
    w.close()


def margin(z):
    s = np.sort(z.astype(np.float64))
    return float(s[-1] - s[-2])


class StreamsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def check_parted(self, ids):
        ra, ta = decode()
        rb, tb = decode(bump_at=3)
        # The expectations, from the arrays themselves.
        part = next(p for p in range(STEPS) if ta[p] != tb[p])
        self.assertEqual(part, 4)
        za, zb = ra["lm_head"], rb["lm_head"]
        at = part - 1
        self.assertNotEqual(int(np.argmax(za[at])), int(np.argmax(zb[at])))
        first = min((p, i, n) for i, n in enumerate(INPUTS) for p in range(part)
                    if not np.array_equal(ra[n][p].view(np.uint32), rb[n][p].view(np.uint32)))
        self.assertEqual((first[0], first[2]), (3, "layers.1.out"))
        a, b = self.path("a%d.h5" % ids), self.path("b%d.h5" % ids)
        write(a, ra, ta, "a", ids)
        write(b, rb, tb, "b", ids)
        rc, out, err = diff("--format", "json", a, b)
        self.assertEqual(rc, 1, err)
        doc = json.loads(out)
        fd = doc["first_divergence"]
        self.assertEqual((fd["name"], fd["request"], fd["position"]), ("layers.1.out", 0, 3))
        self.assertEqual(len(doc["streams_part"]), 1)
        sp = doc["streams_part"][0]
        self.assertEqual((sp["request"], sp["position"], sp["token_a"], sp["token_b"]),
                         (0, part, ta[part], tb[part]))
        self.assertEqual(sp["from"], "ids" if ids else "argmax")
        self.assertEqual(sp["source"], "input_ids" if ids else "embed")
        self.assertEqual((sp["logits"], sp["logits_position"], sp["step"]), ("lm_head", at, at))
        self.assertEqual((sp["argmax_a"], sp["argmax_b"]),
                         (int(np.argmax(za[at])), int(np.argmax(zb[at]))))
        self.assertEqual(sp["margin_a"], margin(za[at]))
        self.assertEqual(sp["margin_b"], margin(zb[at]))
        self.assertEqual(sp["positions_parted"], STEPS - part)
        # Every aligned row compares positions 0..3 only; 4..7 follow the other token.
        for row in doc["rows"]:
            self.assertEqual((row["positions_compared"], row["positions_parted"]),
                             (part, STEPS - part), row["name"])
            want = sum(not np.array_equal(ra[row["name"]][p].view(np.uint32),
                                          rb[row["name"]][p].view(np.uint32))
                       for p in range(part)) if row["name"] in ra else 0
            self.assertEqual(row["positions_differing"], want, row["name"])
        emb = [r for r in doc["rows"] if r["name"] == "embed"][0]
        self.assertEqual(emb["status"], "identical")
        # One flip, at position 3: the rows after it are not more flips.
        lg = doc["logits"][0]
        self.assertEqual(lg["rows"], part)
        self.assertEqual(lg["argmax_flips"], 1)
        f = lg["flipped"][0]
        self.assertEqual((f["row"], f["request"], f["position"], f["tied"]), (at, 0, at, None))
        # The table says it in words.
        rc, out, _ = diff("--color", "never", a, b)
        self.assertEqual(rc, 1)
        self.assertIn("token streams part at request 0, position %d: A fed token %d, B fed "
                      "token %d" % (part, ta[part], tb[part]), out)
        self.assertIn("emitted %d in A" % int(np.argmax(za[at])), out)
        self.assertIn("the %d after it follow another token's stream" % (STEPS - part - 1),
                      " ".join(out.split()))
        self.assertNotIn("embed", out.split("first divergence:")[1].split("\n")[0])

    def test_streams__parted_with_ids(self):
        self.check_parted(ids=True)

    def test_streams__parted_inferred(self):
        self.check_parted(ids=False)

    def test_streams__prefill_flip_is_no_part(self):
        """A flip in a prefill (the next position's token is the prompt's,
        the same in both runs) parts nothing: every key is compared."""
        ra, ta = decode()
        rb = {n: v.copy() for n, v in ra.items()}
        order = np.argsort(ra["lm_head"][2])
        rb["lm_head"][2, order[-2]] = ra["lm_head"][2, order[-1]] + np.float32(0.25)
        a, b = self.path("pa.h5"), self.path("pb.h5")
        write(a, ra, ta, "a", False)
        write(b, rb, ta, "b", False)
        rc, out, err = diff("--format", "json", a, b)
        self.assertEqual(rc, 1, err)
        doc = json.loads(out)
        self.assertEqual(doc["streams_part"], [])
        self.assertEqual(doc["logits"][0]["argmax_flips"], 1)
        self.assertTrue(all(r["positions_parted"] == 0 and r["positions_compared"] == STEPS
                            for r in doc["rows"]))

    def test_streams__prefill_without_embedding_is_no_part(self):
        """One prefill pass, no embedding captured and no inputs listed (as the
        reference workload writes its layers): B's layers differ from position
        2 on and its logits at 2 flip.  A layer's output is never the stream's
        entry, and a prompt's rows are computed before any logits: the streams
        do not part, and the first divergence is the layer at position 2."""
        ra, ta = decode()
        rb = {n: v.copy() for n, v in ra.items()}
        for n in ("layers.0.out", "layers.1.out"):
            rb[n][2:, 0] = np.nextafter(ra[n][2:, 0], np.float32(np.inf))
        order = np.argsort(ra["lm_head"][2])
        rb["lm_head"][2, order[-2]] = ra["lm_head"][2, order[-1]] + np.float32(0.25)
        flips = int(np.sum(ra["lm_head"].argmax(1) != rb["lm_head"].argmax(1)))
        a, b = self.path("fa.h5"), self.path("fb.h5")
        for path, rows, label in ((a, ra, "a"), (b, rb, "b")):
            w = capwriter.Writer(path, label)
            pos = np.arange(STEPS)
            for n in ("layers.0.out", "layers.1.out", "lm_head"):
                role = "logits" if n == "lm_head" else "activation"
                assert w.capture(n, rows[n], "f32", positions=pos, layer=LAYER[n], role=role) == 0
            w.close()
        rc, out, err = diff("--format", "json", a, b)
        self.assertEqual(rc, 1, err)
        doc = json.loads(out)
        self.assertEqual(doc["streams_part"], [])
        fd = doc["first_divergence"]
        self.assertEqual((fd["name"], fd["position"]), ("layers.0.out", 2))
        self.assertEqual(doc["logits"][0]["argmax_flips"], flips)
        self.assertTrue(all(r["positions_parted"] == 0 and r["positions_compared"] == STEPS
                            for r in doc["rows"]))

    def test_streams__tie_that_changes_the_token_is_a_flip(self):
        """bf16 logits, 4 rows of 1000: row 1 tied in A (116 and 633; A emits
        116), B emits 633; row 2 tied in both (no flip); row 3 a plain flip."""
        Vb = 1000
        rng = np.random.default_rng(11)
        # Values a bf16 holds exactly: multiples of 1/8 in [-4, 4).
        za = (rng.integers(-32, 32, size=(4, Vb)) / 8).astype(np.float32)
        for r in range(4):
            za[r, 116] = za[r, 633] = 6.0
        za[0, 633] = 5.5
        zb = za.copy()
        zb[0, 116] = 6.125            # row 0: A 116 (margin 0.5), B 116: same token
        zb[1, 633] = 6.25             # row 1: A tied -> 116, B 633
        za[3, 633] = 5.0
        zb[3, 633] = 7.0              # row 3: 116 -> 633, no tie
        bits = lambda z: (z.view(np.uint32) >> 16).astype(np.uint16)  # exact: low bits are 0
        self.assertTrue(np.array_equal(bits(za).astype(np.uint32) << 16, za.view(np.uint32)))
        pos = np.array([10, 11, 12, 13])
        req = np.full(4, 7)
        a, b = self.path("ta.h5"), self.path("tb.h5")
        for path, z in ((a, za), (b, zb)):
            w = capwriter.Writer(path, os.path.basename(path))
            self.assertEqual(w.capture("lm_head", bits(z), "bf16", positions=pos, requests=req,
                                       role="logits"), 0)
            w.close()
        am_a, am_b = za.argmax(1), zb.argmax(1)  # numpy: the first (lowest) index on ties
        ma = np.array([margin(x) for x in za])
        mb = np.array([margin(x) for x in zb])
        flips = [r for r in range(4) if am_a[r] != am_b[r]]
        ties = [r for r in flips if ma[r] == 0 or mb[r] == 0]
        self.assertEqual((flips, ties), ([1, 3], [1]))
        self.assertEqual((am_a[1], am_b[1]), (116, 633))
        rc, out, err = diff("--format", "json", a, b)
        self.assertEqual(rc, 1, err)
        lg = json.loads(out)["logits"][0]
        self.assertEqual(lg["argmax_flips"], len(flips))
        self.assertEqual(lg["argmax_ties"], len(ties))
        got = [(f["row"], f["request"], f["position"], f["argmax_a"], f["argmax_b"], f["tied"])
               for f in lg["flipped"]]
        want = [(r, 7, int(pos[r]), int(am_a[r]), int(am_b[r]),
                 "a" if ma[r] == 0 else "b" if mb[r] == 0 else None) for r in flips]
        self.assertEqual(got, want)
        self.assertEqual([(t["row"], t["request"], t["position"]) for t in lg["tied"]],
                         [(r, 7, int(pos[r])) for r in ties])
        self.assertEqual([f["margin_a"] for f in lg["flipped"]], [float(ma[r]) for r in flips])
        rc, out, _ = diff("--color", "never", a, b)
        self.assertIn("2 of 4 rows flip argmax", out)
        self.assertIn("row 1 (request 7, position 11): token 116 -> 633 (A tied", out)
        rc, out, _ = diff("--format", "markdown", a, b)
        self.assertIn("| 1 | 7 | 11 | 116 | 633 | A |", out)


if __name__ == "__main__":
    unittest.main()
