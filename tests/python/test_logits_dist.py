"""`ulpprof diff --dist` (FORMAT.md "Logits distributions") against numpy.

Logits written with h5py (diffsnap.py), f32 and bf16, with flipped rows,
near-identical rows, a NaN logit and a -inf logit.  numpy recomputes every
per-row measure (log-softmax in float64 with the maximum subtracted, KL
both ways, |delta log p| at A's argmax, top-k sets by a stable sort, mean
|a-b|, rel_diff) and their summaries; the table, Markdown and JSON carry
them.  Sums are compared to a relative 1e-9 plus an absolute 3e-14: numpy
sums pairwise, the tool in order, and a float64 log-probability of size
up to ~15 carries ~2e-15 of rounding, so a KL of near-identical rows
(~1e-13) is only that well defined in float64 at all.  Counts, rows and
overlaps are compared exactly.
"""
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


def close(a, b, what, rel=1e-9, abs_=3e-14):
    ok = (a is None and b is None) or (a is not None and b is not None and
                                       abs(a - b) <= abs_ + rel * abs(b))
    check(ok, "%s: %r want %r" % (what, a, b))


def log_softmax(z):
    m = np.max(np.where(np.isnan(z), -np.inf, z), axis=1, keepdims=True)
    e = np.where(np.isnan(z), 0.0, np.exp(np.where(np.isnan(z), 0.0, z - m)))
    ls = np.log(e.sum(axis=1, keepdims=True))
    return np.where(np.isnan(z), -np.inf, (z - m) - ls)


def kl(lp, lq):
    with np.errstate(invalid="ignore"):
        t = np.where(np.isneginf(lp), 0.0, np.exp(lp) * (lp - lq))
    return t.sum(axis=1)


def topk(z, k):
    idx = np.arange(len(z))
    keep = ~np.isnan(z)
    order = np.lexsort((idx[keep], -z[keep]))  # by value down, then index up
    return set(idx[keep][order][:k].tolist())


def expected(za, zb, ks):
    la, lb = log_softmax(za), log_softmax(zb)
    am = np.where(np.isnan(za), -np.inf, za).argmax(axis=1)
    ambo = np.where(np.isnan(zb), -np.inf, zb).argmax(axis=1)
    fin = np.isfinite(za) & np.isfinite(zb)
    x, y = np.where(fin, za, 0.0), np.where(fin, zb, 0.0)
    sq = (x * x + y * y).sum(axis=1)
    per = dict(kl_ab=kl(la, lb), kl_ba=kl(lb, la),
               dlogp_top=np.abs(la[np.arange(len(za)), am] - lb[np.arange(len(za)), am]),
               mean_abs_diff=np.abs(x - y).sum(axis=1) / fin.sum(axis=1),
               rel_diff=np.where(sq > 0, 1 - 2 * (x * y).sum(axis=1) / np.where(sq > 0, sq, 1), 0))
    for k in ks:
        kk = min(k, za.shape[1])
        per["topk_overlap_%d" % k] = np.array(
            [len(topk(za[r], kk) & topk(zb[r], kk)) / kk for r in range(len(za))])
    return per, float(np.mean(am == ambo))


def run(*args):
    r = subprocess.run([ULPPROF, "diff", *args], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def main():
    rng = np.random.default_rng(11)
    R, V = 24, 300
    za = (rng.standard_normal((R, V)) * 3).astype(np.float32)
    zb = za.copy()
    zb[:8] += (rng.standard_normal((8, V)) * 1e-6).astype(np.float32)  # near-identical
    zb[8:16] += (rng.standard_normal((8, V)) * 0.5).astype(np.float32)
    zb[16] = za[16][::-1]  # a different distribution altogether
    top = int(np.argmax(za[17]))
    zb[17, top] -= 20  # the top token drops
    za[18, 5] = np.nan
    zb[19, 7] = -np.inf
    zb[20, :] = za[20] * 2  # sharper
    a16 = ds.decode("bf16", (za.view(np.uint32) >> 16).astype(np.uint16))  # truncated: exact bf16
    b16 = ds.decode("bf16", (zb.view(np.uint32) >> 16).astype(np.uint16))
    tmp = tempfile.mkdtemp(prefix="ulpdist.")
    pa, pb = os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5")
    ds.write_snapshot(pa, [dict(name="lm_head", bits=za.view(np.uint32), dtype="f32",
                                role="logits"),
                           dict(name="lm_head_bf16", bits=(za.view(np.uint32) >> 16).astype(
                               np.uint16), dtype="bf16", role="logits")])
    ds.write_snapshot(pb, [dict(name="lm_head", bits=zb.view(np.uint32), dtype="f32",
                                role="logits"),
                           dict(name="lm_head_bf16", bits=(zb.view(np.uint32) >> 16).astype(
                               np.uint16), dtype="bf16", role="logits")])
    cases = {"lm_head": (za.astype(np.float64), zb.astype(np.float64)),
             "lm_head_bf16": (a16, b16)}
    for args, ks in ((["--dist"], [1, 5, 10]), (["--topk", "3,400"], [3, 400]),
                     (["--dist", "-t", "1"], [1, 5, 10])):
        rc, out, err = run("--format", "json", *args, pa, pb)
        check(rc == 1, "%s: exit %d %s" % (args, rc, err))
        doc = json.loads(out)
        for lg in doc["logits"]:
            d = lg.get("distributions")
            check(d is not None, "%s %s: distributions" % (args, lg["name"]))
            if d is None:
                continue
            per, same = expected(*cases[lg["name"]], ks)
            tag = "%s %s" % (args, lg["name"])
            check(d["same_top_fraction"] == same, "%s: same_top_fraction" % tag)
            for key in ("kl_ab", "kl_ba", "dlogp_top", "mean_abs_diff", "rel_diff"):
                want = per[key]
                got = d["per_row"][key]
                for r in range(R):
                    w = float(want[r]) if np.isfinite(want[r]) else None
                    close(got[r], w, "%s: %s row %d" % (tag, key, r))
                fin = np.where(np.isnan(want), -np.inf, want)
                check(d[key]["max_row"] == int(np.argmax(fin)), "%s: %s max_row" % (tag, key))
                close(d[key]["max"], float(np.max(fin)) if np.isfinite(np.max(fin)) else None,
                      "%s: %s max" % (tag, key))
                m = np.nanmean(want)
                close(d[key]["mean"], float(m) if np.isfinite(m) else None,
                      "%s: %s mean" % (tag, key))
            check([t["k"] for t in d["topk"]] == ks, "%s: k list" % tag)
            for t in d["topk"]:
                ov = per["topk_overlap_%d" % t["k"]]
                check(d["per_row"]["topk_overlap_%d" % t["k"]] == ov.tolist(),
                      "%s: overlap k=%d" % (tag, t["k"]))
                close(t["mean"], float(ov.mean()), "%s: overlap mean k=%d" % (tag, t["k"]))
                check(t["min"] == float(ov.min()) and t["min_row"] == int(np.argmin(ov)),
                      "%s: overlap min k=%d" % (tag, t["k"]))
    # KL is infinite where B gives a token probability 0 that A does not.
    check(doc["logits"][0]["distributions"]["per_row"]["kl_ab"][19] is None, "row 19 KL(A||B)")
    # Without --dist: no distributions key (the fused pass is kept).
    rc, out, _ = run("--format", "json", pa, pb)
    check(all("distributions" not in lg for lg in json.loads(out)["logits"]), "off by default")
    # The table and Markdown say it in words.
    per, same = expected(*cases["lm_head"], [1, 5, 10])
    for fmt in ("table", "markdown"):
        rc, out, _ = run("--format", fmt, "--dist", pa, pb)
        r16 = int(np.argmax(np.where(np.isnan(per["kl_ab"]), -np.inf,
                                     np.where(np.isinf(per["kl_ab"]), -np.inf, per["kl_ab"]))))
        check("KL(A||B) nats max inf (row 19)" in out, "%s: KL line: %s" % (fmt, out))
        check("KL(B||A)" in out and "top-k overlap k=1 mean" in out, "%s: lines" % fmt)
        check("rel_diff" in out and "same top token in %.4g%% of rows" % (100 * same) in out,
              "%s: same top" % fmt)
        check(r16 >= 0, "")
    # Bad --topk: one line, exit 2.
    for bad in ("0", "a", "1,,x", ",".join(["1"] * 9)):
        rc, out, err = run("--topk", bad, pa, pb)
        check(rc == 2 and err.count("\n") == 1 and "--topk" in err, "bad --topk %r: %s" % (bad, err))
    if FAILS:
        print("%d failures" % len(FAILS))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
