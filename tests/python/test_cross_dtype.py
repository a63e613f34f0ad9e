"""`ulpprof diff` of two float dtypes (FORMAT.md "Different dtypes") against numpy.

Snapshots are written with h5py (diffsnap.py).  The independent side:
- bf16: round to nearest even written here on the float32 bits (integer
  arithmetic, NaN kept quiet with its sign);
- f8e4m3 / f8e5m2 / f16: by value, from a table of every finite value of
  the format decoded with diffsnap.decode, the nearest one with ties to the
  even pattern, and the format's next value past the largest (an overflow:
  inf, or NaN for e4m3fn) as one more candidate;
- f64 -> f16: numpy's own float64 -> float16 cast (rounds once, from the
  double), with a value that rounding through f32 gets wrong;
- ULPs in the coarse format: the difference of the values' ranks among the
  format's sorted non-negative finite values (minus for negative ones).
"""
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffsnap as ds  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.environ.get("ULPPROF") or os.path.join(BUILD, "programs", "ulpprof")
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def rne_bf16(u32):
    u = np.asarray(u32, dtype=np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    q = ((u >> 16) | 0x40) & 0xFFFF
    return np.where(nan, q, r & 0xFFFF).astype(np.uint16)


def table(dtype):
    n = 1 << (8 * ds.STORAGE[dtype][1])
    bits = np.arange(n, dtype=np.uint64)
    vals = ds.decode(dtype, bits)
    keep = np.isfinite(vals) & (bits < n // 2)  # the non-negative finite patterns
    return bits[keep], vals[keep]


def round_by_table(dtype, x):
    """x (float64 array) to dtype's bits: nearest finite value, ties to the even pattern."""
    e_bits, m_bits, bias, has_inf = ds.FLOATS[dtype]
    width = 1 + e_bits + m_bits
    tb, tv = table(dtype)
    order = np.argsort(tv)
    tb, tv = tb[order], tv[order]
    top = tv[-1] + (tv[-1] - tv[-2])  # the value one step past the largest
    top_odd = not has_inf  # e4m3fn's would-be 480 is S.1111.111; e5m2's 65536 has mantissa 0
    out = []
    for v in x:
        sign = (1 << (width - 1)) if np.signbit(v) else 0
        if np.isnan(v):
            out.append(sign | ((((1 << e_bits) - 1) << m_bits) |
                               ((1 << (m_bits - 1)) if has_inf else (1 << m_bits) - 1)))
            continue
        a = abs(v)
        over = (sign | (((1 << e_bits) - 1) << m_bits)) if has_inf else (
            sign | (1 << (width - 1)) - 1)
        if np.isinf(a) or a > top:
            out.append(over)
            continue
        i = int(np.searchsorted(tv, a))
        if i < len(tv) and tv[i] == a:
            out.append(sign | int(tb[i]))
            continue
        lo_b, lo_v = int(tb[i - 1]), tv[i - 1]
        if i == len(tv):
            hi_b, hi_v, hi_over = None, top, True
        else:
            hi_b, hi_v, hi_over = int(tb[i]), tv[i], False
        if a - lo_v < hi_v - a:
            out.append(sign | lo_b)
        elif a - lo_v > hi_v - a:
            out.append(over if hi_over else sign | hi_b)
        else:
            hi_even = (not top_odd) if hi_over else hi_b % 2 == 0
            out.append((over if hi_over else sign | hi_b) if hi_even else sign | lo_b)
    return np.array(out, dtype=np.uint64)


def rank(dtype, vals):
    _, tv = table(dtype)
    tv = np.sort(tv)
    return np.where(vals < 0, -np.searchsorted(tv, -vals), np.searchsorted(tv, vals))


def expect(fine_dt, fine_bits, coarse_dt, coarse_bits, rounded):
    """The report's numbers for a row: `rounded` is the finer side's bits rounded."""
    va = ds.decode(coarse_dt, rounded.astype(np.uint64))
    vb = ds.decode(coarse_dt, coarse_bits.astype(np.uint64))
    differ = rounded.astype(np.uint64) != coarse_bits.astype(np.uint64)
    fin = np.isfinite(va) & np.isfinite(vb)
    ulp = np.abs(rank(coarse_dt, np.where(fin, va, 0)) - rank(coarse_dt, np.where(fin, vb, 0)))
    ulp = np.where(fin, ulp, 0)
    wf = ds.decode(fine_dt, fine_bits)
    wc = ds.decode(coarse_dt, coarse_bits.astype(np.uint64))
    ff = np.isfinite(wf) & np.isfinite(wc)
    fine = np.abs(np.where(ff, wf, 0) - np.where(ff, wc, 0))
    return dict(differing=int(differ.sum()), max_ulp=int(ulp.max()),
                nonfinite=int((differ & ~fin).sum()), equal=int((~differ).sum()),
                fine=float(fine.max()), fine_at=int(np.argmax(fine)) if fine.max() > 0 else None)


def run(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([ULPPROF, "diff", *args], capture_output=True, text=True, timeout=120, env=e)
    return r.returncode, r.stdout, r.stderr


def main():
    rng = np.random.default_rng(7)
    tmp = tempfile.mkdtemp(prefix="ulpcross.")
    # --- f32 (A) against bf16 (B) ---------------------------------------------------------
    f32 = rng.standard_normal(4000).astype(np.float32).view(np.uint32)
    special = np.array([0x3F808000,  # 1 + 2^-8: a tie, rounds to even (down)
                        0x3F818000,  # 1 + 3*2^-8: a tie, rounds up
                        0x3F808001, 0x80000000, 0x00000001, 0x00400000,  # -0, subnormals
                        0x7F800000, 0xFF800000, 0x7FC00001, 0xFFA00000,  # inf, NaNs
                        0x7F7FFFFF,  # FLT_MAX: overflows bf16 to inf
                        0x7F7F7FFF, 0x007FFFFF], dtype=np.uint32)
    f32 = np.concatenate([special, f32])
    ref = rne_bf16(f32)
    bf = ref.copy()
    pert = rng.choice(np.arange(20, len(bf)), 300, replace=False)
    step = rng.choice([-3, -1, 1, 2, 40], len(pert)).astype(np.int64)
    bf[pert] = (bf[pert].astype(np.int64) + step).astype(np.uint16)
    bf[3] = 0x0000  # +0 against A's -0
    bf[6] = 0x7F7F  # finite against A's inf
    shape = (80, len(f32) // 80)
    f32 = f32[:shape[0] * shape[1]].reshape(shape)
    bf = bf[:f32.size].reshape(shape)
    ref = ref[:f32.size].reshape(shape)
    exact = rng.standard_normal(64).astype(np.float32).view(np.uint32).reshape(8, 8)
    caps_a = [dict(name="embed", bits=exact, dtype="f32"),
              dict(name="model.layers.0.out", bits=f32, dtype="f32", layer=0)]
    caps_b = [dict(name="embed", bits=rne_bf16(exact), dtype="bf16"),
              dict(name="model.layers.0.out", bits=bf, dtype="bf16", layer=0)]
    # --- f16 (B, finer) against f8e5m2 (A); f32 (A) against f8e4m3 (B) -----------------
    f16v = np.concatenate([np.array([57344, 61440, 61441, 65504, -61440, 1.5 * 2 ** -16,
                                     2 ** -17, 3 * 2 ** -17, 0.375, 0.4375]),
                           rng.standard_normal(500) * 100])
    f16 = f16v.astype(np.float16).view(np.uint16)
    e5 = round_by_table("f8e5m2", ds.decode("f16", f16)).astype(np.uint8)
    e5p = e5.copy()
    e5p[10:60] = (e5p[10:60].astype(np.int64) + 1).astype(np.uint8)
    caps_a.append(dict(name="model.layers.1.out", bits=e5p, dtype="f8e5m2", layer=1))
    caps_b.append(dict(name="model.layers.1.out", bits=f16, dtype="f16", layer=1))
    e4v = np.concatenate([np.array([448, 464, 464.0001, 480, -470, 2 ** -9, 2 ** -10,
                                    1.5 * 2 ** -10, 0.0625 + 2 ** -8, 1e30]),
                          rng.standard_normal(500) * 30]).astype(np.float32)
    e4f = e4v.view(np.uint32)
    e4 = round_by_table("f8e4m3", e4v.astype(np.float64)).astype(np.uint8)
    e4p = e4.copy()
    e4p[20:30] ^= 1
    caps_a.append(dict(name="model.layers.2.out", bits=e4f, dtype="f32", layer=2))
    caps_b.append(dict(name="model.layers.2.out", bits=e4p, dtype="f8e4m3", layer=2))
    # --- f64 (A) against f16 (B): one rounding, not two -----------------------------------
    f64v = np.concatenate([np.array([1 + 2 ** -11 + 2 ** -40, 1 + 2 ** -11, 65520.0, 7e4]),
                           rng.standard_normal(300)])
    f16r = f64v.astype(np.float16).view(np.uint16)
    check(f16r[0] == 0x3C01, "numpy rounds 1 + 2^-11 + 2^-40 up to 1 + 2^-10 (test premise)")
    f16b = f16r.copy()
    f16b[100] ^= 1
    caps_a.append(dict(name="model.layers.3.out", bits=f64v.view(np.uint64), dtype="f64", layer=3))
    caps_b.append(dict(name="model.layers.3.out", bits=f16b, dtype="f16", layer=3))
    # --- bf16 against f16: neither holds the other --------------------------------------
    caps_a.append(dict(name="odd", bits=np.zeros(4, np.uint16), dtype="bf16"))
    caps_b.append(dict(name="odd", bits=np.zeros(4, np.uint16), dtype="f16"))
    pa, pb = os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5")
    ds.write_snapshot(pa, caps_a, label="f32")
    ds.write_snapshot(pb, caps_b, label="bf16")

    want = {
        "embed": ("f32", exact.ravel(), "bf16", rne_bf16(exact).ravel(),
                  rne_bf16(exact).ravel(), "a"),
        "model.layers.0.out": ("f32", f32.ravel(), "bf16", bf.ravel(), ref.ravel(), "a"),
        "model.layers.1.out": ("f16", f16, "f8e5m2", e5p, e5, "b"),
        "model.layers.2.out": ("f32", e4f, "f8e4m3", e4p, e4, "a"),
        "model.layers.3.out": ("f64", f64v.view(np.uint64), "f16", f16b, f16r, "a"),
    }
    for env in ({}, {"ULPPROF_DIFF_BATCH": "1"}):
        rc, out, err = run("--format", "json", pa, pb, env=env)
        check(rc == 1, "exit %d (%s)" % (rc, err))
        rep = json.loads(out)
        rows = {r["name"]: r for r in rep["rows"]}
        for name, (fdt, fbits, cdt, cbits, rounded, side) in want.items():
            r = rows[name]
            e = expect(fdt, fbits, cdt, cbits, rounded)
            tag = "%s %s" % (name, env)
            check(r["status"] == "differs", "%s: status %s" % (tag, r["status"]))
            check(r.get("compared_in") == cdt, "%s: compared_in %r" % (tag, r.get("compared_in")))
            check(r.get("rounded_side") == side, "%s: rounded_side" % tag)
            check(r.get("rounding") == "nearest_even", "%s: rounding" % tag)
            check(r["differing"] == e["differing"],
                  "%s: differing %s want %s" % (tag, r["differing"], e["differing"]))
            check(r["max_ulp"] == e["max_ulp"],
                  "%s: max_ulp %s want %s" % (tag, r["max_ulp"], e["max_ulp"]))
            check(r["nonfinite_mismatch"] == e["nonfinite"],
                  "%s: nonfinite %s want %s" % (tag, r["nonfinite_mismatch"], e["nonfinite"]))
            check(r["rounded_equal"] == e["equal"],
                  "%s: rounded_equal %s want %s" % (tag, r["rounded_equal"], e["equal"]))
            check(r["rounded_equal_fraction"] == e["equal"] / len(fbits), "%s: fraction" % tag)
            check(r["max_abs_diff_fine"] == e["fine"],
                  "%s: max_abs_diff_fine %r want %r" % (tag, r["max_abs_diff_fine"], e["fine"]))
        check(rows["odd"]["status"] == "dtype_mismatch", "bf16 vs f16 stays a dtype mismatch")
        check("compared_in" not in rows["odd"], "no compared_in on a mismatch")
        # The first divergence is the first row whose rounded values differ.
        check(rep["first_divergence"]["name"] == "model.layers.0.out",
              "first divergence %r" % rep["first_divergence"])
    # The worst element of layer 0: where ULP is largest, in bf16 bits.
    r0 = {r["name"]: r for r in json.loads(run("--format", "json", pa, pb)[1])["rows"]}
    r0 = r0["model.layers.0.out"]
    wa, wb = int(r0["worst_bits_a"], 16), int(r0["worst_bits_b"], 16)
    idx = tuple(r0["worst_index"])
    check(wa == int(ref[idx]) and wb == int(bf[idx]), "worst bits are the bf16 patterns")
    # Every report says how the rows were compared.
    rc, table, _ = run(pa, pb)
    check("compared in bf16: A's f32 rounded to nearest even" in table,
          "first divergence states the rounding")
    check("rounded to nearest even" in table, "table states the rounding: %s" % table)
    check("rounds=" in table, "table marks the row that rounds equal")
    rc, md, _ = run("--format", "markdown", pa, pb)
    check("rounded to nearest even" in md and "f32 / bf16 (in bf16)" in md,
          "markdown states the rounding")
    rc, out, _ = run("--format", "csv", pa, pb)
    recs = {x["name"]: x for x in csv.DictReader(io.StringIO(out))}
    for name, (fdt, fbits, cdt, cbits, rounded, side) in want.items():
        e = expect(fdt, fbits, cdt, cbits, rounded)
        x = recs[name]
        check(x["compared_in"] == cdt and x["rounded_side"] == side, "csv %s compared_in" % name)
        check(float(x["rounded_equal_fraction"]) == e["equal"] / len(fbits), "csv %s frac" % name)
        check(float(x["max_abs_diff_fine"]) == e["fine"], "csv %s fine" % name)
    check(recs["odd"]["compared_in"] == "", "csv: no compared_in on a mismatch")
    if FAILS:
        print("%d failures" % len(FAILS))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
