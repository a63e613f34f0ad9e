#!/usr/bin/python3
"""`ulpprof diff` on token-aligned captures (FORMAT.md "Rows and tokens",
"Aligned diff") against aligned_ref.py, an independent recomputation with
h5py and numpy.  The files are written through the C capture API (ctypes,
capwriter.py): miss vs hit with the prefix in its own pass and in chunks of
32, batch 1 vs batch 4 with the request in row 2, 8 greedy decode steps at
batch 1 vs batch 4, positions on one side only, repeated keys (exit 2), and
--rows on captures without positions.
"""
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aligned_ref as ref  # noqa: E402
import capwriter  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
H, V = 16, 12


def diff(*args):
    p = subprocess.run([ULPPROF, "diff", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def diff_json(pa, pb, *extra):
    rc, out, err = diff("--format", "json", *extra, pa, pb)
    assert rc in (0, 1), (rc, err)
    return rc, json.loads(out)


def bump(x, rows):
    """x with the given rows moved one float32 ULP up."""
    y = x.copy()
    y[rows] = np.nextafter(y[rows], np.float32(np.inf))
    return y


def model(T, prefix_bump=(), seed=1):
    """A causal toy model in float32: embed -> layer0 (row-local) -> layer1
    (attends to every earlier position) -> logits.  prefix_bump: positions
    whose layer-0 rows move one ULP (as a GEMM with another M would)."""
    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((T, H)).astype(np.float32)
    w = rng.standard_normal((H, H)).astype(np.float32) / np.float32(4)
    l0 = np.tanh(emb @ w).astype(np.float32)
    l0 = bump(l0, list(prefix_bump)) if prefix_bump else l0
    csum = np.cumsum(l0.astype(np.float64), axis=0) / np.arange(1, T + 1)[:, None]
    l1 = (l0 + csum.astype(np.float32)).astype(np.float32)
    wl = rng.standard_normal((H, V)).astype(np.float32)
    logits = (l1 @ wl).astype(np.float32)
    return {"embed": emb, "layers.0.out": l0, "layers.1.out": l1, "logits": logits}


INPUTS = {"embed": [], "layers.0.out": ["embed"], "layers.1.out": ["layers.0.out"],
          "logits": ["layers.1.out"]}
LAYER = {"embed": -1, "layers.0.out": 0, "layers.1.out": 1, "logits": -1}


def write_passes(path, m, passes, logits_from, label):
    """One capture per name and pass [lo, hi); logits for positions >= logits_from."""
    w = capwriter.Writer(path, label)
    for lo, hi in passes:
        for name in ("embed", "layers.0.out", "layers.1.out"):
            assert w.capture(name, m[name][lo:hi], "f32", positions=np.arange(lo, hi),
                             inputs=INPUTS[name], layer=LAYER[name]) == 0
        l = max(lo, logits_from)
        if hi > l:
            assert w.capture("logits", m["logits"][l:hi], "f32", positions=np.arange(l, hi),
                             inputs=INPUTS["logits"], role="logits") == 0
    w.close()


class AlignTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(os.environ.get("TMPDIR", "/tmp"), exist_ok=True)
        cls.tmp = tempfile.TemporaryDirectory(prefix="ulpprof-align-")
        cls.d = cls.tmp.name

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.d, name)

    def check_rows(self, pa, pb, doc):
        """Every aligned row of the report against the recomputation."""
        bad, rows, org = ref.check_report(pa, pb, doc)
        self.assertEqual(bad, [])
        return rows, org

    def test_align__miss_vs_hit_prefix_pass(self):
        """The prefix's layer-0 rows 88-95 differ in the hit's earlier pass."""
        for tag, passes in (("own pass", [(0, 96), (96, 104)]),
                            ("chunks of 32", [(0, 32), (32, 64), (64, 96), (96, 104)])):
            with self.subTest(tag):
                pa, pb = self.path("miss.h5"), self.path("hit-%d.h5" % len(passes))
                write_passes(pa, model(104), [(0, 104)], 96, "miss")
                write_passes(pb, model(104, prefix_bump=range(88, 96)), passes, 96, "hit")
                rc, doc = diff_json(pa, pb)
                self.assertEqual(rc, 1)
                rows, org = self.check_rows(pa, pb, doc)
                # The check itself can fail: a report one key off is caught.
                bent = json.loads(json.dumps(doc))
                bent["rows"][1]["positions_differing"] += 1
                bent["first_divergence"]["position"] = 87
                self.assertEqual(len(ref.check_report(pa, pb, bent)[0]), 2)
                fd = doc["first_divergence"]
                self.assertEqual((fd["name"], fd["position"], fd["origin"]),
                                 ("layers.0.out", 88, "introduced"))
                self.assertIn("positions 88-95", fd["text"])
                l1 = [r for r in doc["rows"] if r["name"] == "layers.1.out"][0]
                self.assertEqual(l1["origin"], "carried_in")
                # Every row of the hit was compared: nothing only on one side.
                self.assertEqual(l1["positions_only_in_b"], 0)
                # The logits' argmax per aligned row, against numpy.
                lg = doc["logits"][0]
                al = rows["logits"]
                za, zb = al["A"].view(np.float32), al["B"].view(np.float32)
                self.assertEqual(lg["rows"], 8)
                self.assertEqual(lg["per_row"]["argmax_a"], [int(x) for x in za.argmax(1)])
                self.assertEqual(lg["per_row"]["argmax_b"], [int(x) for x in zb.argmax(1)])
                # The table says it in words.
                rc, out, _ = diff("--color", "never", pa, pb)
                self.assertIn("introduced here", out)

    def test_align__hit_suffix_only_is_not_captured(self):
        """Only the hit's suffix captured: layer 1 differs at 96+ through rows
        the hit never captured -- 'not captured', naming what to capture."""
        pa, pb = self.path("miss-s.h5"), self.path("hit-s.h5")
        write_passes(pa, model(104), [(0, 104)], 96, "miss")
        m = model(104, prefix_bump=range(88, 96))
        write_passes(pb, m, [(96, 104)], 96, "hit")
        # Where the bumped prefix first shows at layer 1 depends on the values
        # (numpy's BLAS computes them): the first suffix row that differs.
        moved = [p for p in range(96, 104)
                 if model(104)["layers.1.out"][p].tobytes() != m["layers.1.out"][p].tobytes()]
        self.assertTrue(moved, "the bump never reaches layer 1: the case tests nothing")
        rc, doc = diff_json(pa, pb)
        self.assertEqual(rc, 1)
        self.check_rows(pa, pb, doc)
        fd = doc["first_divergence"]
        self.assertEqual((fd["name"], fd["position"], fd["origin"]),
                         ("layers.1.out", moved[0], "not_captured"))
        row = doc["rows"][fd["row"]]
        self.assertEqual(row["positions_only_in_a"], 96)
        self.assertEqual(row["capture_next"],
                         {"name": "layers.0.out", "request": 0, "first": 0, "last": 95})

    def test_align__batch1_vs_batch4_row2(self):
        T, req = 10, 42
        m = model(T)
        a, b = self.path("bs1.h5"), self.path("bs4.h5")
        wa = capwriter.Writer(a, "bs1")
        wb = capwriter.Writer(b, "bs4")
        others = [model(T, seed=s) for s in (5, 6, 7)]
        reqs = np.array([[10] * T, [11] * T, [req] * T, [13] * T])
        pos = np.tile(np.arange(T), (4, 1))
        for name in ("embed", "layers.0.out", "layers.1.out"):
            xa = m[name][None]
            xb = np.stack([others[0][name], others[1][name], m[name], others[2][name]])
            if name == "layers.1.out":
                xb = xb.copy()
                xb[2, 5:7] = bump(xb[2, 5:7], slice(None))
            self.assertEqual(wa.capture(name, xa, "f32", positions=pos[:1], requests=reqs[2:3],
                                        inputs=INPUTS[name], layer=LAYER[name]), 0)
            self.assertEqual(wb.capture(name, xb, "f32", positions=pos, requests=reqs,
                                        inputs=INPUTS[name], layer=LAYER[name]), 0)
        wa.close()
        wb.close()
        rc, doc = diff_json(a, b)
        self.assertEqual(rc, 1)
        self.check_rows(a, b, doc)
        fd = doc["first_divergence"]
        self.assertEqual((fd["name"], fd["request"], fd["position"], fd["origin"]),
                         ("layers.1.out", req, 5, "introduced"))
        row = doc["rows"][fd["row"]]
        self.assertEqual((row["positions_compared"], row["positions_only_in_b"]), (T, 3 * T))
        self.assertIn("request 42, positions 5-6", fd["text"])
        rc, out, _ = diff("--color", "never", a, b)
        self.assertIn("tokens: 3 captures compared on (request, position): %d positions in both "
                      "runs, 0 only in A, %d only in B (per capture)" % (T, 3 * T),
                      " ".join(out.split()))
        # ulpprof ls shows the token metadata as the file holds it.
        p = subprocess.run([ULPPROF, "ls", "--json", b], capture_output=True, text=True)
        caps = json.loads(p.stdout)[0]["captures"]
        with h5py.File(b, "r") as f:
            for c in caps:
                ds = f["captures"][c["name"]][str(c["occurrence"])]
                self.assertEqual(c["positions"], ds.attrs["positions"].reshape(-1).tolist())
                self.assertEqual(c["requests"], ds.attrs["requests"].reshape(-1).tolist())
                self.assertEqual(c["row_rank"], ds.attrs["positions"].ndim)
                self.assertEqual(c.get("inputs", []), ref.inputs_of(f, c["name"]))
        p = subprocess.run([ULPPROF, "ls", b], capture_output=True, text=True)
        self.assertIn("pos 0-%d several requests (%d rows)" % (T - 1, 4 * T), p.stdout)
        rc, out, _ = diff("--format", "csv", a, b)
        rec = next(csv.DictReader(io.StringIO(out)))
        self.assertEqual((rec["aligned"], rec["positions_compared"], rec["positions_only_in_b"]),
                         ("1", str(T), str(3 * T)))

    def test_align__decode_steps_bs1_vs_bs4(self):
        """Prefill of 6, then 8 greedy steps; the request is row 2 of 4 in B,
        whose other rows sit at other positions.  Step 5 differs at layer 0;
        the logits of step 6 flip, those of step 3 tie in A."""
        T0, steps, req = 6, 8, 7
        rng = np.random.default_rng(3)
        a, b = self.path("dec1.h5"), self.path("dec4.h5")
        wa, wb = capwriter.Writer(a, "bs1"), capwriter.Writer(b, "bs4")
        reqs = np.array([[1], [2], [req], [4]])
        want_flip, want_tie = set(), set()
        for s in range(-1, steps):
            n = T0 if s < 0 else 1
            p0 = 0 if s < 0 else T0 + s
            pa = np.arange(p0, p0 + n)[None]
            pb = np.stack([pa[0] + 20, pa[0] + 3, pa[0], pa[0] + 40])
            x = {nm: rng.standard_normal((1, n, H)).astype(np.float32) for nm in
                 ("embed", "layers.0.out", "layers.1.out")}
            z = rng.standard_normal((1, n, V)).astype(np.float32)
            xb = {nm: np.concatenate([rng.standard_normal((2, n, H)).astype(np.float32), v,
                                      rng.standard_normal((1, n, H)).astype(np.float32)])
                  for nm, v in x.items()}
            zb = np.concatenate([rng.standard_normal((2, n, V)).astype(np.float32), z,
                                 rng.standard_normal((1, n, V)).astype(np.float32)])
            if s == 5:
                for nm in ("layers.0.out", "layers.1.out"):
                    xb[nm][2, 0, :4] = bump(xb[nm][2, 0, :4], slice(None))
            if s == 6:  # a real flip: B's runner-up overtakes
                top = int(np.argsort(z[0, 0])[-1])
                sec = int(np.argsort(z[0, 0])[-2])
                zb[2, 0, sec] = z[0, 0, top] + np.float32(0.5)
                want_flip.add(p0)
            if s == 3:  # a tie in A, broken the other way in B
                top = int(np.argmax(z[0, 0]))
                other = (top + 1) % V
                z[0, 0, other] = z[0, 0, top]
                zb[2, 0] = z[0, 0]
                lo, hi = min(top, other), max(top, other)
                zb[2, 0, hi] = np.nextafter(zb[2, 0, hi], np.float32(np.inf))
                want_tie.add(p0)
            ra, rb = np.broadcast_to(reqs[2:3], pa.shape), np.broadcast_to(reqs, pb.shape)
            for nm in x:
                self.assertEqual(wa.capture(nm, x[nm], "f32", positions=pa, requests=ra,
                                            inputs=INPUTS[nm], layer=LAYER[nm]), 0)
                self.assertEqual(wb.capture(nm, xb[nm], "f32", positions=pb, requests=rb,
                                            inputs=INPUTS[nm], layer=LAYER[nm]), 0)
            self.assertEqual(wa.capture("logits", z, "f32", positions=pa, requests=ra,
                                        inputs=INPUTS["logits"], role="logits"), 0)
            self.assertEqual(wb.capture("logits", zb, "f32", positions=pb, requests=rb,
                                        inputs=INPUTS["logits"], role="logits"), 0)
        wa.close()
        wb.close()
        rc, doc = diff_json(a, b)
        self.assertEqual(rc, 1)
        rows, _ = self.check_rows(a, b, doc)
        emb = [r for r in doc["rows"] if r["name"] == "embed"][0]
        self.assertEqual(emb["positions_compared"], T0 + steps)
        fd = doc["first_divergence"]
        self.assertEqual((fd["name"], fd["request"], fd["position"]),
                         ("layers.0.out", req, T0 + 5))
        # Logits: flips and ties recomputed on the aligned rows (key order).
        al = rows["logits"]
        za, zb = al["A"].view(np.float32), al["B"].view(np.float32)
        sa, sb = np.sort(za, 1), np.sort(zb, 1)
        ma, mb = sa[:, -1] - sa[:, -2], sb[:, -1] - sb[:, -2]
        am_a, am_b = za.argmax(1), zb.argmax(1)
        # A tie that emits another token is a flip (the text changes there).
        tie = [i for i in range(len(za)) if am_a[i] != am_b[i] and (ma[i] == 0 or mb[i] == 0)]
        flip = [i for i in range(len(za)) if am_a[i] != am_b[i]]
        keys = al["keys"]
        self.assertEqual({keys[i][1] for i in flip}, want_flip | want_tie)
        self.assertEqual({keys[i][1] for i in tie}, want_tie)
        lg = doc["logits"][0]
        self.assertEqual(lg["argmax_flips"], len(flip))
        self.assertEqual([f["row"] for f in lg["flipped"]], flip)
        self.assertEqual([(f["request"], f["position"]) for f in lg["flipped"]],
                         [tuple(keys[i]) for i in flip])
        self.assertEqual([f["tied"] for f in lg["flipped"]],
                         ["a" if ma[i] == 0 else "b" if mb[i] == 0 else None for i in flip])
        self.assertEqual(lg["argmax_ties"], len(tie))
        self.assertEqual([t["row"] for t in lg["tied"]], tie)

    def test_align__positions_on_one_side(self):
        m = model(8)
        a, b, c = self.path("pos-a.h5"), self.path("pos-none.h5"), self.path("pos-short.h5")
        write_passes(a, m, [(0, 8)], 0, "a")
        w = capwriter.Writer(b, "b")
        for name in ("embed", "layers.0.out", "layers.1.out"):
            self.assertEqual(w.capture(name, m[name], "f32", layer=LAYER[name]), 0)
        self.assertEqual(w.capture("logits", m["logits"], "f32", role="logits"), 0)
        w.close()
        rc, doc = diff_json(a, b)
        self.assertEqual(rc, 0)
        for r in doc["rows"]:
            self.assertFalse(r["aligned"])
            self.assertEqual(r["positions_only_on"], "a")
            self.assertEqual(r["status"], "identical")
        rc, out, _ = diff(a, b)
        self.assertIn("positions only in A for 4 captures", out)
        # Different lengths without positions on B: a shape mismatch that says what compares it.
        w = capwriter.Writer(c, "c")
        self.assertEqual(w.capture("layers.0.out", m["layers.0.out"][5:], "f32", layer=0), 0)
        w.close()
        rc, doc = diff_json(a, c)
        row = [r for r in doc["rows"] if r["name"] == "layers.0.out"][0]
        self.assertEqual(row["status"], "shape_mismatch")
        self.assertIn("--rows tail:3", row["hint"])

    def test_align__no_common_keys(self):
        """Positions on both sides but none in common: a mismatch, never identical."""
        m = model(8)
        a, b = self.path("disjoint-a.h5"), self.path("disjoint-b.h5")
        wa, wb = capwriter.Writer(a, "a"), capwriter.Writer(b, "b")
        self.assertEqual(wa.capture("x", m["embed"][:4], "f32", positions=np.arange(4)), 0)
        self.assertEqual(wb.capture("x", m["embed"][:4], "f32", positions=np.arange(4, 8)), 0)
        wa.close()
        wb.close()
        rc, doc = diff_json(a, b)
        self.assertEqual(rc, 1)
        row = doc["rows"][0]
        self.assertEqual((row["status"], row["positions_compared"], row["positions_only_in_a"],
                          row["positions_only_in_b"]), ("shape_mismatch", 0, 4, 4))
        self.assertIn("no (request, position) in common", row["hint"])

    def test_align__repeated_keys(self):
        m = model(8)
        # In one capture: the C API refuses it ...
        a = self.path("rep-api.h5")
        w = capwriter.Writer(a, "a")
        self.assertEqual(w.capture("x", m["embed"][:4], "f32", positions=[0, 1, 1, 2]), -1)
        w.close()
        # ... and the reader refuses a file that has it (written with h5py).
        good, bad = self.path("rep-good.h5"), self.path("rep-bad.h5")
        write_passes(good, m, [(0, 8)], 0, "good")
        write_passes(bad, m, [(0, 8)], 0, "bad")
        with h5py.File(bad, "r+") as f:
            ds = f["captures"]["layers.0.out"]["0"]
            p = np.arange(8, dtype=np.int64)
            p[3] = 2
            del ds.attrs["positions"]
            ds.attrs["positions"] = p
        rc, out, err = diff(good, bad)
        self.assertEqual(rc, 2, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn(bad, err)
        self.assertIn("position 2 appears twice", err)
        # In two occurrences: the reader takes it, the aligned diff refuses it.
        two = self.path("rep-two.h5")
        write_passes(two, m, [(0, 8), (6, 8)], 0, "two")
        rc, out, err = diff(good, two)
        self.assertEqual(rc, 2, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn(two, err)
        self.assertIn("position 6 is in occurrences 0 and 1", err)

    def test_align__rows_flag(self):
        """--rows on captures without positions, against numpy slices."""
        rng = np.random.default_rng(9)
        xa = rng.standard_normal((3, 20, H)).astype(np.float32)
        xb = xa.copy()
        xb[1, 17, 2] = np.nextafter(xb[1, 17, 2], np.float32(np.inf))
        xb[0, 1, 0] = np.nextafter(xb[0, 1, 0], np.float32(-np.inf))
        miss = rng.standard_normal((104, H)).astype(np.float32)
        hit = miss[96:].copy()
        hit[7, 3] = np.nextafter(hit[7, 3], np.float32(np.inf))
        a, b = self.path("rows-a.h5"), self.path("rows-b.h5")
        wa, wb = capwriter.Writer(a, "a"), capwriter.Writer(b, "b")
        for w, x, t in ((wa, xa, miss), (wb, xb, hit)):
            self.assertEqual(w.capture("bth", x, "f32"), 0)
            self.assertEqual(w.capture("th", t, "f32"), 0)
        wa.close()
        wb.close()
        rc, doc = diff_json(a, b)
        th = [r for r in doc["rows"] if r["name"] == "th"][0]
        self.assertEqual(th["status"], "shape_mismatch")
        self.assertIn("--rows tail:8", th["hint"])
        for spec, sa, sb in (("tail:8", (slice(None), slice(12, 20)), (slice(None), slice(12, 20))),
                             ("head:4", (slice(None), slice(0, 4)), (slice(None), slice(0, 4))),
                             ("2:18", (slice(None), slice(2, 18)), (slice(None), slice(2, 18)))):
            with self.subTest(spec):
                rc, doc = diff_json(a, b, "--rows", spec)
                row = [r for r in doc["rows"] if r["name"] == "bth"][0]
                va, vb = xa[sa], xb[sb]
                self.assertEqual(row["elements"], va.size)
                self.assertEqual(row["differing"], int(np.count_nonzero(va != vb)))
                self.assertEqual(row["shape"], list(va.shape))
                self.assertEqual(rc, 1 if np.any(va != vb) else 0)
        rc, doc = diff_json(a, b, "--rows", "tail:8")
        th = [r for r in doc["rows"] if r["name"] == "th"][0]
        self.assertEqual((th["status"], th["differing"], th["max_ulp"]), ("differs", 1, 1))
        self.assertEqual(th["worst_index"], [7, 3])
        self.assertEqual(th["rows_slice"], {"axis": 0, "first_a": 96, "first_b": 0, "count": 8})
        # Selections that select nothing are errors, never "identical".
        for args in (["--rows", "tail:200"], ["--rows", "0:0"], ["--rows", "bogus"],
                     ["--match", "nothing*"], ["--role", "kv"]):
            rc, out, err = diff(*args, a, b)
            self.assertEqual(rc, 2, (args, out))
            self.assertEqual(len(err.strip().splitlines()), 1, err)


    def test_align__rows_flag_logits(self):
        """--rows on logits: the slice's rows, taken by the element pass in
        chunks smaller than a row and across rows, against numpy."""
        rng = np.random.default_rng(10)
        V = 1031
        za = (rng.standard_normal((20, V)) * 4).astype(np.float32)
        zb = za[12:].copy()
        j1, j2 = np.argsort(za[14])[-2:][::-1]  # row 2 of the slice flips
        za[14, j2] = np.nextafter(za[14, j1], np.float32(-np.inf))
        zb[2, j2] = np.nextafter(za[14, j1], np.float32(np.inf))
        zb[5, 7] = np.nextafter(zb[5, 7], np.float32(np.inf))
        a, b = self.path("rows-lg-a.h5"), self.path("rows-lg-b.h5")
        wa, wb = capwriter.Writer(a, "a"), capwriter.Writer(b, "b")
        self.assertEqual(wa.capture("lm", za, "f32", role="logits"), 0)
        self.assertEqual(wb.capture("lm", zb, "f32", role="logits"), 0)
        wa.close()
        wb.close()
        va, vb = za[12:].astype(np.float64), zb.astype(np.float64)
        top_a, top_b = np.sort(va, 1), np.sort(vb, 1)
        for extra in ([], ["-j", "3", "--chunk-elements", "100"], ["-t", "1.0"]):
            with self.subTest(extra=extra):
                rc, doc = diff_json(a, b, "--rows", "tail:8", *extra)
                self.assertEqual(rc, 1)
                lg = doc["logits"][0]
                self.assertEqual((lg["rows"], lg["vocab"]), (8, V))
                pr = lg["per_row"]
                self.assertEqual(pr["argmax_a"], [int(x) for x in va.argmax(1)])
                self.assertEqual(pr["argmax_b"], [int(x) for x in vb.argmax(1)])
                self.assertEqual(pr["margin_a"], list(top_a[:, -1] - top_a[:, -2]))
                self.assertEqual(pr["margin_b"], list(top_b[:, -1] - top_b[:, -2]))
                self.assertEqual(pr["max_perturbation"], list(np.abs(va - vb).max(1)))
                self.assertEqual([f["row"] for f in lg["flipped"]], [2])
    def test_align__first_divergence_words(self):
        """The first-divergence line leads with ulp@max, says when the ULP count
        comes from a zero crossing, prints the shortest digits that tell the
        two values apart (numpy's shortest repr), and claims no x0
        amplification when the last activation is identical again."""
        a, b = self.path("words-a.h5"), self.path("words-b.h5")
        x0 = np.array([[1.0, 2.0, 0.1], [3.0, 1e-30, 4.0]], np.float32)
        y0 = x0.copy()
        y0[0, 2] = np.nextafter(np.float32(0.1), np.float32(1))  # 1 ULP: 0.1 vs 0.10000001
        y0[1, 1] = np.float32(-1e-30)                           # crosses zero
        x1 = np.arange(6, dtype=np.float32).reshape(2, 3)
        wa, wb = capwriter.Writer(a, "a"), capwriter.Writer(b, "b")
        for w, first in ((wa, x0), (wb, y0)):
            self.assertEqual(w.capture("l0", first, "f32", layer=0), 0)
            self.assertEqual(w.capture("l1", x1, "f32", layer=1), 0)
        wa.close()
        wb.close()
        rc, out, _ = diff("--color", "never", a, b)
        self.assertEqual(rc, 1)
        text = " ".join(out.split())
        line = text[text.index("first divergence: "):]
        self.assertTrue(line.startswith("first divergence: "), line)
        rc, doc = diff_json(a, b)
        row = doc["rows"][0]
        ulpm = row["max_abs_diff_ulps_at_max"]
        self.assertTrue(doc["first_divergence"]["text"].startswith("%.3g ulp@max" % ulpm),
                        doc["first_divergence"]["text"])
        self.assertIn("only because the values crossed zero", line)
        # The worst element is the zero crossing, shown with its shortest digits.
        wa_, wb_ = np.float32(row["worst_a"]), np.float32(row["worst_b"])
        self.assertIn("%s vs %s" % (wa_, wb_), line)
        self.assertIn("none, the last activation is identical again", text)
        self.assertNotIn("(x0)", text)
        # 0.1 against the next float: the digits that tell them apart.
        c = self.path("words-c.h5")
        w = capwriter.Writer(c, "c")
        z = x0.copy()
        z[0, 2] = y0[0, 2]
        self.assertEqual(w.capture("l0", z, "f32", layer=0), 0)
        self.assertEqual(w.capture("l1", x1, "f32", layer=1), 0)
        w.close()
        rc, out, _ = diff("--color", "never", a, c)
        self.assertIn("0.1 vs %s" % str(np.float32(y0[0, 2])), " ".join(out.split()))


if __name__ == "__main__":
    unittest.main(verbosity=2)
