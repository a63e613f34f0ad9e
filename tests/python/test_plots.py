#!/usr/bin/python3
"""The plots' numbers against an independent computation.

Runs `ulpprof demo` (cache miss, hit, split of the reference transformer)
and `ulpprof plot`, then recomputes from the snapshots with numpy and h5py
-- bit patterns, ULP distances, histograms, logits margins and flips --
and checks every number of the plot data files against it and against the
JSON report.  Also checks that the PNGs and SVGs are valid files and the
error paths of `ulpprof plot`.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
import zlib

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import aligned_ref  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")


def raw_bits(ds):
    """The dataset's stored bits, unconverted (bf16 has no numpy type)."""
    size = ds.id.get_type().get_size()
    arr = np.empty(ds.shape, dtype={2: np.uint16, 4: np.uint32, 8: np.uint64}[size])
    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, arr, mtype=ds.id.get_type())
    return arr.reshape(-1)


def decode(bits, dtype):
    """(values as float64, ordered integers) of raw bits."""
    if dtype == "bf16":
        vals = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        mag = (bits & 0x7FFF).astype(np.int64)
        neg = (bits & 0x8000) != 0
    elif dtype == "f32":
        vals = bits.view(np.float32).astype(np.float64)
        mag = (bits & 0x7FFFFFFF).astype(np.int64)
        neg = (bits & 0x80000000) != 0
    else:
        raise AssertionError("unexpected dtype " + dtype)
    return vals, np.where(neg, -mag, mag)


def hist_bin(d):
    return 0 if d == 0 else (int(d) - 1).bit_length() + 1


def compare(pa, pb):
    """Per capture name: the metrics, recomputed.  Captures with positions on
    both sides (the demo's) are compared on their common (request, position)
    keys, all occurrences together (aligned_ref.py, from FORMAT.md)."""
    fa, fb = h5py.File(pa, "r"), h5py.File(pb, "r")
    out = {}
    for name in fa["captures"]:
        da, db = fa["captures"][name]["0"], fb["captures"][name]["0"]
        dtype = da.attrs["dtype"]
        dtype = dtype.decode() if isinstance(dtype, bytes) else dtype
        shape_a = shape_b = da.shape
        if aligned_ref.has_positions(fa, name) and aligned_ref.has_positions(fb, name):
            al = aligned_ref.compare(fa, fb, name)
            ba, bb = al["A"].reshape(-1), al["B"].reshape(-1)
            shape_a = shape_b = (al["positions_compared"],) + al["row_shape"]
        else:
            ba, bb = raw_bits(da), raw_bits(db)
        va, oa = decode(ba, dtype)
        vb, ob = decode(bb, dtype)
        assert np.all(np.isfinite(va)) and np.all(np.isfinite(vb))
        ulp = np.abs(oa - ob)
        hist = {}
        for d, c in zip(*np.unique(ulp, return_counts=True)):
            k = hist_bin(d)
            hist[k] = hist.get(k, 0) + int(c)
        layer = int(da.attrs["layer"]) if "layer" in da.attrs else -1
        role = da.attrs.get("role", "activation")
        role = role.decode() if isinstance(role, bytes) else role
        m = {
            "layer": layer,
            "role": role,
            "elements": ba.size,
            "differing": int(np.count_nonzero(ba != bb)),
            "max_ulp": int(ulp.max()),
            "max_abs_diff": float(np.abs(va - vb).max()),
            "hist": hist,
            "shape": shape_a,
        }
        if role == "logits":
            za = va.reshape(shape_a)
            zb = vb.reshape(shape_b)
            sa, sb = np.sort(za, axis=1), np.sort(zb, axis=1)
            m["argmax_a"] = za.argmax(axis=1)  # first index on ties
            m["argmax_b"] = zb.argmax(axis=1)
            m["margin_a"] = sa[:, -1] - sa[:, -2]
            m["margin_b"] = sb[:, -1] - sb[:, -2]
            m["max_perturbation"] = np.abs(za - zb).max(axis=1)
        out[name] = m
    return out


def read_blocks(path):
    """Data lines of a .dat file, split at blank lines into blocks."""
    blocks, cur = [], []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("#"):
                continue
            if not line:
                if cur:
                    blocks.append(cur)
                    cur = []
                continue
            cur.append(line.split())
    if cur:
        blocks.append(cur)
    return blocks


def check_png(testcase, path):
    with open(path, "rb") as f:
        data = f.read()
    testcase.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n", path)
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        ctype = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        testcase.assertEqual(zlib.crc32(ctype + body) & 0xFFFFFFFF, crc, path)
        chunks.append((ctype, body))
        pos += 12 + length
    testcase.assertEqual(chunks[0][0], b"IHDR", path)
    testcase.assertEqual(len(chunks[0][1]), 13)
    w, h = struct.unpack(">II", chunks[0][1][:8])
    testcase.assertGreater(w, 300)
    testcase.assertGreater(h, 300)
    testcase.assertEqual(chunks[-1][0], b"IEND", path)
    testcase.assertTrue(any(c == b"IDAT" for c, _ in chunks))


def check_svg(testcase, path):
    root = ET.parse(path).getroot()
    testcase.assertTrue(root.tag.endswith("svg"), path)
    # Something was drawn: paths or polylines, and the title text.
    testcase.assertGreater(sum(1 for _ in root.iter()), 50)


class PlotTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ulpprof-plots-")
        cls.dir = os.path.join(cls.tmp.name, "demo")
        p = subprocess.run([ULPPROF, "demo", "--dir", cls.dir], capture_output=True, text=True)
        if p.returncode != 0:
            raise AssertionError("demo failed: %d\n%s\n%s" % (p.returncode, p.stdout, p.stderr))
        cls.demo_out = p.stdout
        cls.plots = os.path.join(cls.dir, "plots")
        cls.ref = compare(os.path.join(cls.dir, "miss.h5"), os.path.join(cls.dir, "hit.h5"))
        with open(os.path.join(cls.dir, "miss_vs_hit.json")) as f:
            cls.json = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_plots__amplification_matches_numpy_and_json(self):
        blocks = read_blocks(os.path.join(self.plots, "amplification.dat"))
        seen = set()
        jrows = {r["name"]: r for r in self.json["rows"]}
        for block in blocks:
            for cols in block:
                x, elements, differing = float(cols[0]), int(cols[2]), int(cols[3])
                frac, max_ulp, max_abs, name = float(cols[4]), int(cols[5]), float(cols[6]), cols[7]
                ref = self.ref[name]
                if ref["role"] == "activation":
                    self.assertEqual(x, ref["layer"], name)
                self.assertEqual(elements, ref["elements"], name)
                self.assertEqual(differing, ref["differing"], name)
                self.assertEqual(max_ulp, ref["max_ulp"], name)
                self.assertEqual(max_abs, ref["max_abs_diff"], name)
                self.assertAlmostEqual(frac, ref["differing"] / ref["elements"], places=15)
                self.assertEqual(differing, jrows[name]["differing"])
                self.assertEqual(max_abs, jrows[name]["max_abs_diff"])
                seen.add(name)
        # Every capture is drawn: 3 series of 12 layers and the logits.
        # (activations without a layer, the embedding, are not drawn)
        self.assertEqual(seen, {n for n, m in self.ref.items()
                                if m["role"] != "activation" or m["layer"] >= 0})
        self.assertEqual(len(blocks), 4)
        first = self.json["first_divergence"]["name"]
        with open(os.path.join(self.plots, "amplification.dat")) as f:
            self.assertIn("# first divergence: %s" % first, f.read())
        # The first divergence is the earliest differing capture in seq order.
        fa = h5py.File(os.path.join(self.dir, "miss.h5"), "r")
        order = sorted(fa["captures"], key=lambda n: int(fa["captures"][n]["0"].attrs["seq"]))
        self.assertEqual(first, next(n for n in order if self.ref[n]["differing"]))

    def test_plots__heatmap_matches_numpy(self):
        rows = [r for b in read_blocks(os.path.join(self.plots, "ulp_heatmap.dat")) for r in b]
        self.assertTrue(rows)
        max_bin = max(int(r[1]) for r in rows)
        want = {}
        for m in self.ref.values():
            if m["role"] != "activation" or m["layer"] < 0:
                continue
            for k, c in m["hist"].items():
                if k >= 1:
                    want[(m["layer"], k)] = want.get((m["layer"], k), 0) + c
        self.assertEqual(max_bin, max(k for (_, k) in want))
        elements = {}
        for m in self.ref.values():
            if m["role"] == "activation" and m["layer"] >= 0:
                elements[m["layer"]] = elements.get(m["layer"], 0) + m["elements"]
        for r in rows:
            layer, k, lo, hi, count, frac = int(float(r[0])), int(r[1]), int(r[2]), int(r[3]), int(r[4]), float(r[5])
            self.assertEqual(count, want.get((layer, k), 0), (layer, k))
            self.assertAlmostEqual(frac, count / elements[layer], places=15)
            self.assertEqual(hist_bin(lo), k)
            self.assertEqual(hist_bin(hi), k)
            if k > 1:
                self.assertEqual(hist_bin(lo - 1), k - 1)
        self.assertEqual(len(rows), len(elements) * max_bin)

    def test_plots__logits_margins_match_numpy(self):
        ref = self.ref["lm_head.logits"]
        rows = read_blocks(os.path.join(self.plots, "logits_margin.dat"))[0]
        self.assertEqual(len(rows), len(ref["argmax_a"]))
        flips = 0
        for r in rows:
            i = int(r[0])
            self.assertEqual(int(r[1]), ref["argmax_a"][i])
            self.assertEqual(int(r[2]), ref["argmax_b"][i])
            self.assertEqual(float(r[3]), ref["margin_a"][i])
            self.assertEqual(float(r[4]), ref["margin_b"][i])
            self.assertEqual(float(r[5]), min(ref["margin_a"][i], ref["margin_b"][i]))
            self.assertEqual(float(r[6]), ref["max_perturbation"][i])
            flipped = int(ref["argmax_a"][i] != ref["argmax_b"][i])
            self.assertEqual(int(r[7]), flipped)
            at_risk = int(not flipped and min(ref["margin_a"][i], ref["margin_b"][i]) < ref["max_perturbation"][i])
            self.assertEqual(int(r[8]), at_risk)
            flips += flipped
        # The demo's promise: at least one greedy token flips, and the JSON agrees.
        self.assertGreaterEqual(flips, 1)
        self.assertEqual(self.json["logits"][0]["argmax_flips"], flips)
        self.assertEqual([f["row"] for f in self.json["logits"][0]["flipped"]],
                         [i for i in range(len(rows)) if ref["argmax_a"][i] != ref["argmax_b"][i]])
        # A flip needs the perturbation to exceed half the margin.
        for i in range(len(rows)):
            if ref["argmax_a"][i] != ref["argmax_b"][i]:
                self.assertLess(ref["margin_a"][i], 2 * ref["max_perturbation"][i])

    def test_plots__images_are_valid(self):
        for base in ("amplification", "ulp_heatmap", "logits_margin"):
            check_png(self, os.path.join(self.plots, base + ".png"))
            check_svg(self, os.path.join(self.plots, base + ".svg"))
            self.assertTrue(os.path.exists(os.path.join(self.plots, base + ".gp")))

    def test_plots__plot_command_and_identical_pair(self):
        out = os.path.join(self.tmp.name, "p-identical")
        p = subprocess.run([ULPPROF, "plot", "-o", out, os.path.join(self.dir, "split.h5"),
                            os.path.join(self.dir, "hit.h5")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        listed = p.stdout.split()
        for base in ("amplification", "ulp_heatmap", "logits_margin"):
            for ext in ("dat", "gp", "png", "svg"):
                path = os.path.join(out, base + "." + ext)
                self.assertIn(path, listed)
                self.assertTrue(os.path.getsize(path) > 0)
            check_png(self, os.path.join(out, base + ".png"))
            check_svg(self, os.path.join(out, base + ".svg"))
        rows = [r for b in read_blocks(os.path.join(out, "amplification.dat")) for r in b]
        self.assertTrue(all(int(r[3]) == 0 for r in rows))

    def test_plots__errors(self):
        miss = os.path.join(self.dir, "miss.h5")
        # No gnuplot: one line, the data and scripts still written, exit 2.
        out = os.path.join(self.tmp.name, "p-nognuplot")
        env = dict(os.environ, ULPPROF_GNUPLOT="/nonexistent/gnuplot")
        p = subprocess.run([ULPPROF, "plot", "-o", out, miss, os.path.join(self.dir, "hit.h5")],
                           capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("gnuplot not found", p.stderr)
        self.assertTrue(os.path.exists(os.path.join(out, "amplification.dat")))
        self.assertFalse(os.path.exists(os.path.join(out, "amplification.png")))
        # A missing snapshot, a missing -o, an output path that is a file.
        for args in (["-o", out, miss, os.path.join(self.tmp.name, "nope.h5")],
                     [miss, miss],
                     ["-o", miss, miss, miss]):
            p = subprocess.run([ULPPROF, "plot"] + args, capture_output=True, text=True)
            self.assertEqual(p.returncode, 2, args)
            self.assertTrue(p.stderr.startswith("ulpprof"), p.stderr)
        p = subprocess.run([ULPPROF, "plot", "--help"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0)
        self.assertIn("usage: ulpprof plot", p.stdout)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
