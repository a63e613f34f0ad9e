"""Block by block, the comparison kernels against numpy at every instruction-set level.

The element kernels (analyzer/diff_metrics.c) take a block of 1,024
elements through a fast kernel when every element of both sides is
finite and no pair differs in sign, and through the full one otherwise
(and for the few blocks after such a block).  This pair puts a block of
each kind side by side in one tensor per float dtype: identical blocks,
sparse and dense 1..4-ULP moves, distances past the 4-ULP bins and past
what the fast kernel sums in its lanes (f32: over 2^22 ULP; 16-bit: over
64), a lone zero crossing, a lone +0/-0 pair, NaN and infinities equal on
both sides or facing finite values, the blocks right after those, and a
worst element in a late block; and beside it, small tensors of three blocks
whose middle one holds one special case alone (so that the blocks around
it meet the fast kernel).  Under ULPPROF_ISA=x86-64-v4, x86-64-v3 and
baseline (each this CPU has) every number of `ulpprof diff -f json` is
recomputed with numpy (test_diff_numpy.expected_row: distances from the
decoded values, not the bits), and the reports of all levels must be
byte-identical.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffsnap as ds  # noqa: E402
from test_diff_numpy import close, expected_row  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.environ.get("ULPPROF") or os.path.join(BUILD, "programs", "ulpprof")
LEVELS = ["baseline", "x86-64-v3", "x86-64-v4"]
BLOCK = 1024
FAILS = []

MAG_MAX = {"bf16": 0x7f7f, "f16": 0x7bff, "f32": 0x7f7fffff, "f8e4m3": 0x7e, "f8e5m2": 0x7b}
SPECIAL = {  # NaN, +inf (e4m3 has none: its largest finite value), -0 bit
    "bf16": (0x7fc1, 0x7f80, 0x8000), "f16": (0x7e01, 0x7c00, 0x8000),
    "f32": (0x7fc00001, 0x7f800000, 0x80000000), "f8e4m3": (0x7f, 0x7e, 0x80),
    "f8e5m2": (0x7e, 0x7c, 0x80)}


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def run(args, isa):
    env = dict(os.environ, ULPPROF_ISA=isa)
    return subprocess.run([ULPPROF] + args, capture_output=True, env=env)


def tensor(rng, dt):
    """A and B bits for one tensor of 25 blocks and a tail, a kind of block each."""
    raw, size = ds.STORAGE[dt]
    w = 8 * size
    top = MAG_MAX[dt]
    nblocks = 24
    n = nblocks * BLOCK + 100
    mag = rng.integers(top // 8, top // 2, size=n, dtype=np.int64)
    sign = rng.integers(0, 2, size=n, dtype=np.int64)
    step = np.zeros(n, np.int64)           # away from zero: no sign crossing

    def blk(k):
        return slice(k * BLOCK, (k + 1) * BLOCK)

    def moves(k, share, lo, hi):
        s = blk(k)
        m = rng.random(BLOCK) < share
        step[s] = np.where(m, rng.integers(lo, hi + 1, size=BLOCK), 0)

    small = dt.startswith("f8")
    far = {"f32": 1 << 24, "bf16": 5000, "f16": 5000}.get(dt, 40)
    moves(2, 0.005, 1, 4)                  # sparse, in the bins k0 counts
    moves(3, 0.005, 1, 4)
    moves(4, 0.09, 1, 4)                   # dense
    moves(5, 0.09, 1, 4)
    moves(6, 0.3, 1, 20 if small else 300)  # past the 4-ULP bins
    moves(7, 0.05, far // 2, far)          # past k0's lane sums
    for k in range(9, 18):                 # after a block k0 refused, and again
        moves(k, 0.05, 1, 4)
    moves(19, 0.002, 1, 2)
    step[-100:] = rng.integers(0, 3, size=100)
    step[23 * BLOCK + 777] = top // 4      # the worst element, late
    ob = mag + step
    a = np.where(sign == 1, (1 << (w - 1)) | mag, mag).astype(np.uint64)
    b = np.where(sign == 1, (1 << (w - 1)) | ob, ob).astype(np.uint64)
    nan, inf, neg = SPECIAL[dt]
    at = 8 * BLOCK + 5                     # a lone zero crossing: +1 step vs -1 step
    a[at], b[at] = 1, neg | 1
    return a.astype(raw), b.astype(raw)


def special(rng, dt, kind):
    """Three blocks of 2% 1..3-ULP moves; in the middle one, a special case alone."""
    raw, size = ds.STORAGE[dt]
    w = 8 * size
    top = MAG_MAX[dt]
    n = 3 * BLOCK
    mag = rng.integers(top // 8, top // 2, size=n, dtype=np.int64)
    sign = rng.integers(0, 2, size=n, dtype=np.int64)
    ob = mag + np.where(rng.random(n) < 0.02, rng.integers(1, 4, size=n), 0)
    a = np.where(sign == 1, (1 << (w - 1)) | mag, mag).astype(np.uint64)
    b = np.where(sign == 1, (1 << (w - 1)) | ob, ob).astype(np.uint64)
    nan, inf, neg = SPECIAL[dt]
    at = BLOCK + 9
    if kind == "zeros":                    # a lone +0 / -0 pair
        a[at], b[at] = 0, neg
    elif kind == "nan":                    # NaN equal on both sides
        a[at] = b[at] = nan
        a[at + 500] = b[at + 500] = nan | neg
    elif kind == "inf":                    # -inf equal on both sides (masked scores)
        a[at:at + 300] = b[at:at + 300] = neg | inf
    elif kind == "inf_fin":                # inf against a finite value
        a[at], b[at] = inf, a[at - 1]
    elif kind == "nan_fin":                # NaN against 0
        a[at], b[at] = nan, 0
    return a.astype(raw), b.astype(raw)


def rows_ok(rep, expect, isa):
    rows = {r["name"]: r for r in rep["rows"]}
    for name, (dt, a, b) in expect.items():
        r, x = rows[name], expected_row(dt, a, b)
        tag = "%s at %s" % (name, isa)
        for k in ("elements", "differing", "nonfinite_mismatch", "max_ulp", "sign_changes",
                  "ulp_hist"):
            check(r[k] == x[k], "%s %s: %r, numpy %r" % (tag, k, r[k], x[k]))
        check(close(r["mean_ulp"], x["mean_ulp"]), "%s mean_ulp %r, numpy %r" % (
            tag, r["mean_ulp"], x["mean_ulp"]))
        check(r["max_abs_diff"] == x["max_abs_diff"], "%s max_abs_diff %r, numpy %r" % (
            tag, r["max_abs_diff"], x["max_abs_diff"]))
        check(r["max_abs"] == x["max_abs"], "%s max_abs %r, numpy %r" % (
            tag, r["max_abs"], x["max_abs"]))
        check(r["worst_index"] == [x["worst_flat"]], "%s worst_index %r, numpy %r" % (
            tag, r["worst_index"], x["worst_flat"]))
        check(r["max_abs_diff_index"] == [x["max_abs_diff_flat"]],
              "%s max_abs_diff_index %r, numpy %r" % (tag, r["max_abs_diff_index"],
                                                     x["max_abs_diff_flat"]))


def main():
    p = subprocess.run([ULPPROF, "--version"], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != "ULPPROF_ISA"})
    best = p.stdout.splitlines()[1].split(": ")[1]
    have = LEVELS[:LEVELS.index(best) + 1]
    rng = np.random.default_rng(1033)
    caps_a, caps_b, expect = [], [], {}
    for li, dt in enumerate(["bf16", "f16", "f32", "f8e4m3", "f8e5m2"]):
        a, b = tensor(rng, dt)
        name = "model.layers.%d.%s" % (li, dt)
        caps_a.append(dict(name=name, bits=a, dtype=dt, layer=li))
        caps_b.append(dict(name=name, bits=b, dtype=dt, layer=li))
        expect[name] = (dt, a, b)
        for kind in ("zeros", "nan", "inf", "inf_fin", "nan_fin"):
            a, b = special(rng, dt, kind)
            name = "%s.%s" % (dt, kind)
            caps_a.append(dict(name=name, bits=a, dtype=dt))
            caps_b.append(dict(name=name, bits=b, dtype=dt))
            expect[name] = (dt, a, b)
    with tempfile.TemporaryDirectory(prefix="ulpdiff-blocks-") as tmp:
        pa, pb = os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5")
        ds.write_snapshot(pa, caps_a, label="a")
        ds.write_snapshot(pb, caps_b, label="b")
        ref = None
        for isa in have:
            p = run(["diff", "-f", "json", pa, pb], isa)
            check(p.returncode == 1, "%s: exit %d, %r" % (isa, p.returncode, p.stderr))
            rows_ok(json.loads(p.stdout), expect, isa)
            if ref is None:
                ref = p.stdout
            check(p.stdout == ref, "the JSON report at %s differs from %s's" % (isa, have[0]))
    if FAILS:
        print("%d failures" % len(FAILS))
        sys.exit(1)
    print("ok: every block kind, numpy's numbers, the same report at %s" % ", ".join(have))


if __name__ == "__main__":
    main()
