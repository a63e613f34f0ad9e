"""`ulpprof diff --format json` against numpy, for every dtype.

Snapshots are written with h5py (tests/python/diffsnap.py) from raw bit
patterns that include +0/-0, NaN payloads, +-inf, subnormals, zero
crossings, e4m3's NaN and lack of inf; every number of the report is then
recomputed here independently:

- values by decoding the format's fields (diffsnap.decode), never through
  ulpprof;
- ULP distance as the difference of N(v), the count of representable
  values between 0 and v, computed from the VALUE with frexp arithmetic
  (not from the bit pattern);
- the sampling probability by splitting [0, 1) at every CDF boundary of
  both distributions and asking, for each piece, which token each side
  draws.
"""
import json
import math
import os
import shutil
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


def close(x, y, rel=1e-12, abs_=0.0):
    if x is None or y is None:
        return x is None and y is None
    return abs(x - y) <= max(rel * max(abs(x), abs(y)), abs_)


# --- ULP distance from values -------------------------------------------------------

def n_of(dtype, v):
    """Signed count of representable values between 0 and v (+0 and -0 are 0)."""
    e_bits, m_bits, bias, has_inf = ds.FLOATS[dtype]
    emin = 1 - bias
    a = abs(float(v))
    if a == 0:
        return 0
    if a < 2.0 ** emin:
        k = int(a / 2.0 ** (emin - m_bits))
    else:
        f, e2 = math.frexp(a)            # a = f * 2^e2, f in [0.5, 1)
        e = e2 - 1                       # a in [2^e, 2^(e+1))
        frac = a / 2.0 ** e - 1.0        # in [0, 1), exact
        k = (e - emin + 1) * 2 ** m_bits + int(frac * 2 ** m_bits)
    return -k if v < 0 else k


def bin_of(d):
    if d == 0:
        return 0
    k, hi = 1, 1
    while d > hi:
        hi *= 2
        k += 1
    return k


def expected_row(dtype, a_bits, b_bits):
    a_bits = np.asarray(a_bits).ravel()
    b_bits = np.asarray(b_bits).ravel()
    va = ds.decode(dtype, a_bits)
    vb = ds.decode(dtype, b_bits)
    if dtype in ds.FLOATS:
        fa, fb = np.isfinite(va), np.isfinite(vb)
    else:
        fa = fb = np.ones(va.shape, bool)
    diff = a_bits != b_bits
    fin = fa & fb
    nonfinite = int(np.sum(diff & ~fin))
    hist = {}
    max_ulp, sum_ulp, signs = 0, 0, 0
    worst, first_dfin, first_nf = -1, -1, -1
    for i in np.nonzero(diff)[0]:
        if not fin[i]:
            if first_nf < 0:
                first_nf = int(i)
            continue
        if first_dfin < 0:
            first_dfin = int(i)
        if dtype in ds.FLOATS:
            d = abs(n_of(dtype, va[i]) - n_of(dtype, vb[i]))
        else:
            d = abs(int(a_bits[i]) - int(b_bits[i]))
        hist[bin_of(d)] = hist.get(bin_of(d), 0) + 1
        sum_ulp += d
        if d > max_ulp:
            max_ulp, worst = d, int(i)
        if d and (np.signbit(va[i]) != np.signbit(vb[i])):
            signs += 1
    n = a_bits.size
    hist[0] = hist.get(0, 0) + int(np.sum(~diff))
    ndfin = int(np.sum(diff)) - nonfinite
    with np.errstate(invalid="ignore", over="ignore"):
        ad = np.abs(va - vb)
    ad = np.where(fin & diff, ad, 0.0)
    mad = float(ad.max()) if n else 0.0
    mad_idx = int(np.argmax(ad)) if mad > 0 else -1
    mags = np.concatenate([np.abs(va[fa]), np.abs(vb[fb])])
    max_abs = float(mags.max()) if mags.size else 0.0
    if worst < 0:
        worst = first_dfin if first_dfin >= 0 else first_nf
    top = max(hist) if hist else 0
    return {
        "elements": n, "differing": int(np.sum(diff)), "nonfinite_mismatch": nonfinite,
        "max_ulp": max_ulp, "mean_ulp": sum_ulp / ndfin if ndfin else 0.0,
        "ulp_hist": [hist.get(k, 0) for k in range(top + 1)], "sign_changes": signs,
        "max_abs_diff": mad, "max_abs_diff_flat": mad_idx, "max_abs": max_abs,
        "ulps_at_max": mad / ds.ulp_spacing(dtype, max_abs) if dtype in ds.FLOATS else mad,
        "worst_flat": worst, "va": va, "vb": vb,
    }


# --- Data -----------------------------------------------------------------------------

rng = np.random.default_rng(20240611)


def neighbours(dtype, n):
    """Random patterns and partners at small ULP steps, specials mixed in."""
    raw, size = ds.STORAGE[dtype]
    width = 8 * size
    top = (1 << width) - 1
    a = rng.integers(0, top + 1, size=n, dtype=np.uint64)
    step = rng.integers(-3, 4, size=n).astype(np.int64)
    b = (a.astype(np.int64) + step).astype(np.uint64) & np.uint64(top)
    flip = rng.random(n) < 0.05
    b[flip] = a[flip] ^ np.uint64(1 << (width - 1))      # same magnitude, other sign
    same = rng.random(n) < 0.3
    b[same] = a[same]
    return a, b


def specials(dtype):
    raw, size = ds.STORAGE[dtype]
    width = 8 * size
    e_bits, m_bits, bias, has_inf = ds.FLOATS[dtype]
    sign = 1 << (width - 1)
    exp_all = ((1 << e_bits) - 1) << m_bits
    one = bias << m_bits
    pairs = [
        (0, sign),                          # +0 vs -0
        (sign, 0),
        (1, sign | 1),                      # zero crossing, smallest subnormals
        (1, 2), (3, 1),                     # subnormals
        (one, one + 1), (one, one - 1),     # around 1.0
        (one, sign | one),                  # 1 vs -1
        (exp_all - 1, sign | (exp_all - 1)) if has_inf else (exp_all | ((1 << m_bits) - 2),
                                                            sign | exp_all | ((1 << m_bits) - 2)),
        (one, one),
    ]
    if has_inf:
        qnan = exp_all | (1 << (m_bits - 1))
        pairs += [(exp_all, exp_all), (exp_all, sign | exp_all), (exp_all, one),
                  (qnan, qnan | 1), (qnan, qnan), (qnan | sign, one), (exp_all - 1, exp_all)]
    else:  # e4m3fn: S.1111.111 is NaN, S.1111.110 is 448
        nan = exp_all | ((1 << m_bits) - 1)
        pairs += [(nan, nan), (nan, sign | nan), (nan - 1, nan), (nan - 1, nan - 2),
                  (sign | (nan - 1), nan - 1)]
    a = np.array([p[0] for p in pairs], dtype=np.uint64)
    b = np.array([p[1] for p in pairs], dtype=np.uint64)
    return a, b


def make_pair(dtype):
    raw, size = ds.STORAGE[dtype]
    if size == 1 and dtype in ds.FLOATS:   # every fp8 pair
        g = np.arange(65536, dtype=np.uint64)
        a, b = g >> np.uint64(8), g & np.uint64(255)
    else:
        a, b = neighbours(dtype, 2000)
        sa, sb = specials(dtype)
        a = np.concatenate([sa, a])
        b = np.concatenate([sb, b])
    if dtype == "f64":  # a few values far apart, computed in double
        a[-1] = np.float64(1e300).view(np.uint64)
        b[-1] = np.float64(-1e300).view(np.uint64)
    n = a.size
    shape = (n // 8, 8) if n % 8 == 0 else (n,)
    return (a.astype(raw).reshape(shape), b.astype(raw).reshape(shape))


def bf16_of(x):
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)


# --- Logits ---------------------------------------------------------------------------

def logits_case():
    """f32 logits, 6 rows x 12: constructed flips, ties, a NaN, an at-risk row."""
    za = rng.standard_normal((6, 12)).astype(np.float32)
    zb = za.copy()
    za[0, 3], za[0, 7] = 5.0, 4.99          # row 0 flips: B raises 7 above 3
    zb[0, 3], zb[0, 7] = 5.0, 5.01
    za[1, 2] = za[1, 9] = 6.0               # tie: argmax is the lowest index, margin 0
    zb[1, 2] = zb[1, 9] = 6.0
    zb[1, 0] += np.float32(1e-3)
    za[2, 4] = np.nan                       # NaN is never a candidate
    za[2, 5], zb[2, 5] = 9.0, 9.0
    za[3, 1], za[3, 6] = 3.0, 2.9999        # at risk: small margin, a larger perturbation elsewhere
    zb[3, 1], zb[3, 6] = 3.0, 2.9999
    zb[3, 11] = za[3, 11] + np.float32(0.5)
    za[4, 0], zb[4, 0] = 7.0, 7.0           # row 4 flips by a 1-ULP move
    za[4, 5] = np.nextafter(np.float32(7.0), np.float32(0))
    zb[4, 5] = np.float32(7.0)
    zb[4, 0] = np.nextafter(np.float32(7.0), np.float32(0))
    zb[5] = za[5] + rng.standard_normal(12).astype(np.float32) * np.float32(0.3)
    return za.view(np.uint32), zb.view(np.uint32)


def argmax_margin(z):
    best, bv, sv, has2 = -1, 0.0, 0.0, False
    for i, v in enumerate(z):
        if math.isnan(v):
            continue
        if best < 0:
            best, bv = i, v
        elif v > bv:
            sv, has2, best, bv = bv, True, i, v
        elif not has2 or v > sv:
            sv, has2 = v, True
    if best < 0:
        return -1, None
    if not has2:
        return best, None
    return best, 0.0 if bv == sv else bv - sv


def softmax(z, t):
    z = np.where(np.isnan(z), -np.inf, z)
    m = z.max()
    p = np.exp((z - m) / t)
    return p / p.sum()


def p_differ(pa, pb):
    """Split [0,1) at every boundary of both CDFs; for each piece, which token does each draw?"""
    ca, cb = np.cumsum(pa), np.cumsum(pb)
    ca[-1] = cb[-1] = 1.0
    cuts = np.unique(np.concatenate([[0.0], ca, cb, [1.0]]))
    total = 0.0
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        if hi <= lo:
            continue
        mid = (lo + hi) / 2
        ta = int(np.searchsorted(ca, mid, side="right"))
        tb = int(np.searchsorted(cb, mid, side="right"))
        if ta != tb:
            total += hi - lo
    return total


def run(args):
    p = subprocess.run([ULPPROF, "diff"] + args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def check_all(tmp):
    dtypes = ["bf16", "f16", "f8e4m3", "f8e5m2", "f32", "f64", "i8", "u8", "i16", "i32", "i64"]
    caps_a, caps_b, expect = [], [], {}
    for li, dt in enumerate(dtypes):
        if dt in ds.FLOATS:
            a, b = make_pair(dt)
        else:
            raw, size = ds.STORAGE[dt]
            info = np.iinfo(raw)
            a = rng.integers(info.min, info.max, size=500, endpoint=True, dtype=raw)
            b = a.copy()
            k = rng.random(500) < 0.5
            b[k] = rng.integers(info.min, info.max, size=int(k.sum()), endpoint=True, dtype=raw)
            a[0], b[0] = info.min, info.max
        name = "model.layers.%d.%s" % (li, dt)
        caps_a.append(dict(name=name, bits=a, dtype=dt, layer=li))
        caps_b.append(dict(name=name, bits=b, dtype=dt, layer=li))
        expect[(name, 0)] = (dt, a, b)
    # Occurrence 1, scalar, empty, identical with NaN, mismatches, one-sided.
    s1 = np.array(np.float32(1.5).view(np.uint32))
    s2 = np.array(np.float32(-1.5).view(np.uint32))
    caps_a.append(dict(name="scalar", bits=s1, dtype="f32"))
    caps_b.append(dict(name="scalar", bits=s2, dtype="f32"))
    expect[("scalar", 0)] = ("f32", s1, s2)
    e = np.zeros((0, 4), np.uint16)
    caps_a.append(dict(name="empty", bits=e, dtype="bf16"))
    caps_b.append(dict(name="empty", bits=e, dtype="bf16"))
    expect[("empty", 0)] = ("bf16", e, e)
    nn = np.array([0x7fc1, 0x3f80, 0x7f80], np.uint16)
    caps_a.append(dict(name="model.layers.0.bf16", occurrence=1, bits=nn, dtype="bf16"))
    caps_b.append(dict(name="model.layers.0.bf16", occurrence=1, bits=nn, dtype="bf16"))
    expect[("model.layers.0.bf16", 1)] = ("bf16", nn, nn)
    caps_a.append(dict(name="shape_mm", bits=np.zeros((2, 3), np.uint16), dtype="bf16"))
    caps_b.append(dict(name="shape_mm", bits=np.zeros((3, 2), np.uint16), dtype="bf16"))
    caps_a.append(dict(name="dtype_mm", bits=np.zeros(4, np.uint16), dtype="bf16"))
    caps_b.append(dict(name="dtype_mm", bits=np.zeros(4, np.uint16), dtype="f16"))
    caps_a.append(dict(name="only_a", bits=np.zeros(2, np.uint8), dtype="u8"))
    caps_b.append(dict(name="only_b", bits=np.zeros(2, np.uint8), dtype="u8"))
    la, lb = logits_case()
    caps_a.append(dict(name="lm_head", bits=la, dtype="f32", role="logits"))
    caps_b.append(dict(name="lm_head", bits=lb, dtype="f32", role="logits"))
    expect[("lm_head", 0)] = ("f32", la, lb)
    # bf16 logits with a 1-ULP flip: the perturbation in ULPs must come out as 2.
    ba = bf16_of(np.array([[1.0, 3.0, 2.984375, 0.0]], np.float32))   # 3 - 1 ULP at [2,4)
    bb = bf16_of(np.array([[1.0, 2.984375, 3.0, 0.0]], np.float32))
    caps_a.append(dict(name="lm_head_bf16", bits=ba, dtype="bf16", role="logits"))
    caps_b.append(dict(name="lm_head_bf16", bits=bb, dtype="bf16", role="logits"))
    expect[("lm_head_bf16", 0)] = ("bf16", ba, bb)

    pa, pb = os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5")
    ds.write_snapshot(pa, caps_a, label="bs1",
                      run={"batch_size": "1", "cache": "miss", "model": "m"})
    ds.write_snapshot(pb, caps_b, label="bs8",
                      run={"batch_size": "8", "cache": "miss", "model": "m", "seed": "3"})

    temps = [0.7, 1.5]
    rc, out, err = run(["--format", "json", "-t", "0.7", "-t", "1.5", pa, pb])
    check(rc == 1, "exit status %d (want 1), stderr %r" % (rc, err))
    rep = json.loads(out)
    check(rep["format"] == "ulpprof-diff" and rep["format_version"] == 1, "header")
    check(rep["a"] == {"path": pa, "label": "bs1"}, "a: %r" % rep["a"])
    check(rep["identical"] is False, "identical")
    rows = {(r["name"], r["occurrence"]): r for r in rep["rows"]}
    order = [(r["name"], r["occurrence"]) for r in rep["rows"]]
    want_order = [(c["name"], c.get("occurrence", 0)) for c in caps_a] + [("only_b", 0)]
    check(order == want_order, "row order %r" % order)

    for key, (dt, a, b) in expect.items():
        r = rows[key]
        x = expected_row(dt, a, b)
        tag = "%s#%d (%s)" % (key[0], key[1], dt)
        check(r["dtype"] == dt, tag + " dtype")
        check(r["shape"] == list(np.asarray(a).shape), tag + " shape %r" % r["shape"])
        check(r["elements"] == x["elements"], tag + " elements")
        want_status = "differs" if x["differing"] else "identical"
        check(r["status"] == want_status, tag + " status %s" % r["status"])
        for k in ("differing", "nonfinite_mismatch", "max_ulp", "sign_changes", "ulp_hist"):
            if k == "max_ulp" and isinstance(r[k], float):
                FAILS.append(tag + " max_ulp written as a float")
            check(r[k] == x[k], "%s %s: %r, numpy %r" % (tag, k, r[k], x[k]))
        check(close(r["mean_ulp"], x["mean_ulp"]), tag + " mean_ulp %r vs %r" % (
            r["mean_ulp"], x["mean_ulp"]))
        # JSON has no inf: a double |a - b| that overflows saturates at DBL_MAX.
        want_mad = min(x["max_abs_diff"], sys.float_info.max)
        check(r["max_abs_diff"] == want_mad, tag + " max_abs_diff %r vs %r" % (
            r["max_abs_diff"], x["max_abs_diff"]))
        check(r["max_abs"] == x["max_abs"], tag + " max_abs %r vs %r" % (r["max_abs"], x["max_abs"]))
        check(close(r["max_abs_diff_ulps_at_max"], min(x["ulps_at_max"], sys.float_info.max)),
              tag + " ulps_at_max %r vs %r" % (r["max_abs_diff_ulps_at_max"], x["ulps_at_max"]))
        check(abs(r["differing_fraction"] * max(x["elements"], 1) - x["differing"]) < 1e-6,
              tag + " differing_fraction")
        shape = np.asarray(a).shape
        if x["worst_flat"] >= 0:
            widx = list(np.unravel_index(x["worst_flat"], shape)) if shape else []
            check(r["worst_index"] == [int(v) for v in widx], tag + " worst_index %r vs %r" % (
                r["worst_index"], widx))
            wa, wb = x["va"][x["worst_flat"]], x["vb"][x["worst_flat"]]
            check((r["worst_a"] is None and not np.isfinite(wa)) or r["worst_a"] == wa,
                  tag + " worst_a")
            check((r["worst_b"] is None and not np.isfinite(wb)) or r["worst_b"] == wb,
                  tag + " worst_b")
        else:
            check(r["worst_index"] is None, tag + " worst_index not null")
        if x["max_abs_diff_flat"] >= 0:
            midx = [int(v) for v in np.unravel_index(x["max_abs_diff_flat"], shape)] \
                if shape else []
            check(r["max_abs_diff_index"] == midx, tag + " max_abs_diff_index")

    check(rows[("shape_mm", 0)]["status"] == "shape_mismatch", "shape_mismatch")
    check(rows[("shape_mm", 0)]["shape_b"] == [3, 2], "shape_b")
    check(rows[("shape_mm", 0)]["differing"] is None, "shape_mismatch differing is null")
    check(rows[("dtype_mm", 0)]["status"] == "dtype_mismatch", "dtype_mismatch")
    check(rows[("dtype_mm", 0)]["dtype_b"] == "f16", "dtype_b")
    check(rows[("only_a", 0)]["status"] == "only_in_a", "only_in_a")
    check(rows[("only_b", 0)]["status"] == "only_in_b", "only_in_b")
    check(rows[("scalar", 0)]["shape"] == [] and rows[("scalar", 0)]["worst_index"] == [],
          "scalar shape and index")
    check(rows[("model.layers.0.bf16", 0)]["layer"] == 0 and rows[("scalar", 0)]["layer"] is None,
          "layer null when absent")
    # First divergence: the first non-identical pair in A's seq order.
    first = next(k for k in order if rows[k]["status"] in
                 ("differs", "shape_mismatch", "dtype_mismatch"))
    fd = rep["first_divergence"]
    check((fd["name"], fd["occurrence"]) == first, "first_divergence %r" % fd)
    # Ladder: batch_size differs (level 1) and seed (no rung).
    lad = rep["ladder"]
    check(lad["differing_keys"] == ["batch_size", "seed"], "ladder keys %r" % lad)
    check(lad["level"] == 1, "ladder level %r" % lad["level"])
    # Amplification: first differing row to the last compared activation row.
    amp = rep["amplification"]
    comp = [k for k in order if rows[k]["status"] in ("differs", "identical")
            and rows[k]["role"] == "activation"]
    check(amp["last"] == comp[-1][0], "amplification last %r" % amp["last"])
    r0 = rows[first]
    check(close(amp["differing_fraction_first"], r0["differing"] / r0["elements"]),
          "amplification first fraction")

    # Logits.
    lg = {(x["name"], x["occurrence"]): x for x in rep["logits"]}
    check(set(lg) == {("lm_head", 0), ("lm_head_bf16", 0)}, "logits captures %r" % list(lg))
    for key in lg:
        dt, a, b = expect[key]
        za = ds.decode(dt, a).reshape(np.asarray(a).shape)
        zb = ds.decode(dt, b).reshape(np.asarray(b).shape)
        L = lg[key]
        R, V = za.shape
        check(L["rows"] == R and L["vocab"] == V, "logits shape")
        flips, risk = [], []
        for r in range(R):
            ta, ma = argmax_margin(za[r])
            tb, mb = argmax_margin(zb[r])
            fin = np.isfinite(za[r]) & np.isfinite(zb[r])
            pert = float(np.max(np.abs(za[r][fin] - zb[r][fin]))) if fin.any() else 0.0
            check(L["per_row"]["argmax_a"][r] == ta and L["per_row"]["argmax_b"][r] == tb,
                  "%s row %d argmax" % (key[0], r))
            check(close(L["per_row"]["margin_a"][r], ma) and close(L["per_row"]["margin_b"][r], mb),
                  "%s row %d margins %r %r vs %r %r" % (key[0], r, L["per_row"]["margin_a"][r],
                                                       L["per_row"]["margin_b"][r], ma, mb))
            check(L["per_row"]["max_perturbation"][r] == pert, "%s row %d max_perturbation" % (
                key[0], r))
            if ta != tb:
                ga = za[r][ta] - za[r][tb]
                gb = zb[r][ta] - zb[r][tb]
                mag = max(abs(za[r][ta]), abs(za[r][tb]), abs(zb[r][ta]), abs(zb[r][tb]))
                flips.append(dict(row=r, argmax_a=ta, argmax_b=tb, margin_a=ma, margin_b=mb,
                                  gap_a=ga, gap_b=gb, gap_perturbation=gb - ga,
                                  gap_perturbation_ulps=abs(gb - ga) / ds.ulp_spacing(dt, mag)))
            elif min(ma if ma is not None else math.inf, mb if mb is not None else math.inf) < pert:
                risk.append(r)
        check(L["argmax_flips"] == len(flips), "%s flips %d vs %d" % (key[0], L["argmax_flips"],
                                                                      len(flips)))
        for got, want in zip(L["flipped"], flips):
            for k, v in want.items():
                check(close(got[k], v), "%s flip row %d %s: %r vs %r" % (key[0], want["row"], k,
                                                                         got[k], v))
        check(L["at_risk"] == risk, "%s at_risk %r vs %r" % (key[0], L["at_risk"], risk))
        check(L["rows_at_risk"] == len(risk), "rows_at_risk")
        for s, t in zip(L["sampling"], temps):
            check(s["temperature"] == t, "temperature")
            tvs, pds = [], []
            for r in range(R):
                p1, p2 = softmax(za[r], t), softmax(zb[r], t)
                tvs.append(0.5 * float(np.abs(p1 - p2).sum()))
                pds.append(p_differ(p1, p2))
            for r in range(R):
                check(close(s["tv"][r], tvs[r], 1e-9, 1e-15), "%s T=%g row %d tv %r vs %r" % (
                    key[0], t, r, s["tv"][r], tvs[r]))
                check(close(s["p_differ"][r], pds[r], 1e-9, 1e-14),
                      "%s T=%g row %d p_differ %r vs %r" % (key[0], t, r, s["p_differ"][r], pds[r]))
                check(s["p_differ"][r] >= s["tv"][r] - 1e-12, "coupling bound")
            check(close(s["tv_mean"], float(np.mean(tvs)), 1e-9, 1e-15), "tv_mean")
            check(close(s["p_differ_max"], float(np.max(pds)), 1e-9, 1e-14), "p_differ_max")
    # Without temperatures the element pass takes the logits rows as it reads
    # them (analyzer/logits_fuse.c): the same numbers as the pass above.
    rc, out, err = run(["--format", "json", pa, pb])
    check(rc == 1, "exit status %d without temperatures, stderr %r" % (rc, err))
    fused = json.loads(out)["logits"]
    for x in fused + rep["logits"]:
        x.pop("sampling")
    check(fused == rep["logits"], "logits without temperatures differ from those with them")
    bfl = lg[("lm_head_bf16", 0)]["flipped"][0]
    check(bfl["gap_perturbation_ulps"] == 2.0, "bf16 1-ULP swap is a 2-ULP gap perturbation")

    # --match / --role select rows; a non-matching selection compares nothing.
    rc, out, _ = run(["--format", "json", "--role", "logits", pa, pb])
    sel = json.loads(out)
    check([r["name"] for r in sel["rows"]] == ["lm_head", "lm_head_bf16"], "--role logits")
    rc, out, _ = run(["--format", "json", "--match", "model.layers.1.*", pa, pb])
    sel = json.loads(out)
    check([r["name"] for r in sel["rows"]] == ["model.layers.1.f16"], "--match %r" % [
        r["name"] for r in sel["rows"]])
    # CSV carries the same numbers as JSON.
    import csv
    import io
    rc, out, _ = run(["--format", "csv", pa, pb])
    recs = list(csv.DictReader(io.StringIO(out)))
    check(len(recs) == len(rep["rows"]), "csv rows")
    for rec, jr in zip(recs, rep["rows"]):
        check(len(rec) == 44 and None not in rec, "csv field count for %s" % jr["name"])
        check(rec["name"] == jr["name"] and rec["status"] == jr["status"], "csv name/status")
        if jr["differing"] is not None:
            check(int(rec["differing"]) == jr["differing"], "csv differing")
            check(int(rec["max_ulp"]) == jr["max_ulp"], "csv max_ulp")
            check(min(float(rec["max_abs_diff"]), sys.float_info.max) == jr["max_abs_diff"],
                  "csv max_abs_diff")
            check([int(v) for v in rec["ulp_hist"].split()] == jr["ulp_hist"], "csv hist")

    if FAILS:
        print("%d failures" % len(FAILS))
        sys.exit(1)
    print("ok: %d rows, %d logits captures checked against numpy" % (len(rows), len(lg)))


def main():
    tmp = tempfile.mkdtemp(prefix="ulpdiff-np-")
    try:
        check_all(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
