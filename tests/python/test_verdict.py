"""Verdicts (docs/verdicts.md) on real cases, each checked against numpy.

The reference workload's miss, hit and split, and a hit that serves one
stale KV block holding garbage (ULPPROF_REFMODEL_STALE_KV, like a
torch.empty buffer).  From the files alone (h5py), independently of
ulpprof, this test computes:

- the first diverging capture in A's order, by (request, position) rows,
  its max |a-b| over finite pairs and S = max |value| of both sides;
- K = the largest k of the capture's /trace/gemms rows (its `gemms`
  range; the workload records its GEMMs), else max(hidden, mlp, heads *
  head_dim) from /run model_shape, u = 2^-24 (fp32 accumulation), one bf16 ULP at S
  = 2^(floor(log2 S) - 7), the bound 2 ULP + 2 K u S and the ratio; the
  verdict is rounding when the ratio is at most 16 and no NaN/inf differs;
- the near ties: P = max |z_A - z_B| over the compared logits rows, rows
  whose top-2 margin in A is below 2P, rows with a 0 margin, flips;
- the cache witness: a side's last pass (the non-logits capture holding
  the highest position) starts above position 0.

Expected, by construction: miss/hit and miss/split are rounding with the
witness taken; miss/stale is not rounding; a pair whose "hit" computed
every position in one pass does not test the cache rung, and the ladder
does not count it for rung 2.  With a contract, the miss/hit pair breaks a
level-2 claim (a bug named with it), and a contract claiming only level 1
does not promise it.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capwriter  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
REFMODEL = os.path.join(BUILD, "workload", "ulpprof-refmodel")


def check(cond, msg):
    if not cond:
        print("FAIL:", msg)
        sys.exit(1)


def close(a, b, what, rel=1e-6):
    check(a is not None and abs(a - b) <= rel * max(abs(a), abs(b), 1e-300),
          "%s: ulpprof %r, numpy %r" % (what, a, b))


def rows_by_key(f, name):
    """{(request, position): row values (float64)} over every occurrence of `name`."""
    out = {}
    for occ in f["captures"][name]:
        d = f["captures"][name][occ]
        pos = d.attrs["positions"]
        req = d.attrs["requests"] if "requests" in d.attrs else np.zeros_like(pos)
        vals = d[()].astype(np.float64)
        for i in range(len(pos)):
            out[(int(req[i]), int(pos[i]))] = vals[i]
    return out


def order(f):
    names = list(f["captures"])
    return sorted(names, key=lambda n: min(int(f["captures"][n][o].attrs["seq"])
                                           for o in f["captures"][n]))


def expected(pa, pb):
    fa, fb = h5py.File(pa, "r"), h5py.File(pb, "r")
    exp = {}
    for name in order(fa):
        if name not in fb["captures"]:
            continue
        ra, rb = rows_by_key(fa, name), rows_by_key(fb, name)
        keys = sorted(set(ra) & set(rb))
        a = np.array([ra[k] for k in keys])
        b = np.array([rb[k] for k in keys])
        if name == "lm_head.logits":
            p = np.max(np.abs(a - b), axis=1)
            P = float(p.max())
            top = np.sort(a, axis=1)
            margin_a = top[:, -1] - top[:, -2]
            topb = np.sort(b, axis=1)
            margin_b = topb[:, -1] - topb[:, -2]
            flips = np.argmax(a, axis=1) != np.argmax(b, axis=1)
            near = margin_a < 2 * P
            exp["near"] = dict(rows=len(keys), perturbation=P, near_ties=int(near.sum()),
                               exact_ties=int(((margin_a == 0) | (margin_b == 0)).sum()),
                               flips=int(flips.sum()), flips_near=int((flips & near).sum()))
            continue
        if "site" in exp or np.array_equal(a, b):
            continue
        fin = np.isfinite(a) & np.isfinite(b)
        nonfinite = int(((a != b) & ~fin).sum())
        diff = float(np.max(np.abs(a - b)[fin]))
        S = float(max(np.max(np.abs(a[np.isfinite(a)])), np.max(np.abs(b[np.isfinite(b)]))))
        shape = dict(kv.split("=") for kv in fa["run"].attrs["model_shape"].decode().split())
        K = max(int(shape["hidden"]), int(shape["mlp"]), int(shape["heads"]) * int(shape["head_dim"]))
        k_from = "model_shape"
        if "trace/gemms" in fa:  # A's rows of this capture (every occurrence)
            ks = [int(r["k"]) for d in fa["captures"][name].values() if "gemms" in d.attrs
                  for r in fa["trace/gemms"][int(d.attrs["gemms"][0]):int(d.attrs["gemms"][1])]]
            if ks:
                K, k_from = max(ks), "gemms"
        ulp = 2.0 ** (math.floor(math.log2(S)) - 7)
        bound = 2 * ulp + 2 * K * 2.0 ** -24 * S
        exp.update(site=name, max_abs_diff=diff, scale=S, k=K, k_from=k_from, ulp_out=ulp,
                   bound=bound,
                   ratio=diff / bound, nonfinite=nonfinite)
    exp["kind"] = "rounding" if exp["ratio"] <= 16 and exp["nonfinite"] == 0 else "defect"
    wit = []
    for f in (fa, fb):
        best, lo = -1, None
        for name in f["captures"]:
            for occ in f["captures"][name]:
                best = max(best, int(np.max(f["captures"][name][occ].attrs["positions"])))
        for name in order(f):
            if name == "lm_head.logits":
                continue
            for occ in f["captures"][name]:
                pos = f["captures"][name][occ].attrs["positions"]
                if best in pos and lo is None:
                    lo = int(np.min(pos))
        wit.append(lo)
    exp["witness"] = "taken" if any(w and w > 0 for w in wit) else "none"
    return exp


def diff_json(a, b, *extra):
    p = subprocess.run([ULPPROF, "diff", "-f", "json", *extra, a, b], capture_output=True,
                       text=True)
    check(p.returncode == 1, "diff %s %s: exit %d %s" % (a, b, p.returncode, p.stderr))
    return json.loads(p.stdout)["verdict"]


def check_pair(a, b, want_kind):
    v = diff_json(a, b)
    e = expected(a, b)
    check(e["kind"] == want_kind, "numpy calls %s/%s %s, not %s" % (a, b, e["kind"], want_kind))
    check(v["kind"] == e["kind"], "%s/%s: verdict %s, numpy %s" % (a, b, v["kind"], e["kind"]))
    bd = v["bound"]
    check(bd["site"] == e["site"], "site %s vs %s" % (bd["site"], e["site"]))
    check(bd["k"] == e["k"] and bd["k_from"] == e["k_from"], "K %r" % bd)
    for key in ("max_abs_diff", "scale", "ulp_out", "bound", "ratio"):
        close(bd[key], e[key], "%s/%s %s" % (a, b, key))
    n = v["near_ties"]
    close(n["perturbation"], e["near"]["perturbation"], "perturbation")
    for key in ("rows", "near_ties", "exact_ties", "flips", "flips_near"):
        check(n[key] == e["near"][key], "%s: %r vs numpy %r" % (key, n[key], e["near"][key]))
    check(v["cache_witness"] == e["witness"], "witness %s vs %s" % (v["cache_witness"],
                                                                    e["witness"]))
    if want_kind == "rounding":
        check(v["summary"].startswith("rounding:") and not v["evidence"], v["summary"])
    else:
        check(v["summary"].startswith("not rounding: looks like a defect"), v["summary"])
    return v


def unwitnessed(d):
    """A 'hit' whose last pass computed every position: no cache in it."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((20, 8)).astype(np.float32)
    y = x.copy()
    y[19, 0] = np.nextafter(y[19, 0], np.float32(9))
    paths = []
    for label, cache, data in (("miss", "miss", x), ("hit", "hit", y)):
        p = os.path.join(d, "syn-%s.h5" % label)
        w = capwriter.Writer(p, label, {"cache": cache, "split": "none"})
        check(w.capture("layers.0.out", data, "f32", positions=np.arange(20), layer=0) == 0,
              "capture")
        w.close()
        paths.append(p)
    v = diff_json(*paths)
    check(v["cache_witness"] == "none" and "does not test the cache rung" in
          v["cache_witness_text"], "synthetic hit: %r" % v)
    p = subprocess.run([ULPPROF, "ladder", "-f", "json", *paths], capture_output=True, text=True)
    check(p.returncode in (0, 1), p.stderr)
    lad = json.loads(p.stdout)
    rung = [g for g in lad["rungs"] if g["level"] == 2][0]
    check(rung["verdict"] == "untested" and rung["unwitnessed_pairs"] == 1 and
          rung["deciding_pairs"] == 0, "ladder counts an unwitnessed pair: %r" % rung)
    check(lad["pairs"][0]["cache_witness"] == "none", "pair witness %r" % lad["pairs"][0])


def contracts(d, miss, hit):
    c2 = os.path.join(d, "c2.json")
    with open(c2, "w") as f:
        json.dump({"ulpprof_contract": 1, "producer": "ref",
                   "claims": [{"level": 2, "name": "hits are bitwise"}]}, f)
    v = diff_json(miss, hit, "--contract", c2)
    check(v["contract"] == "bug" and '"hits are bitwise"' in v["contract_text"], repr(v))
    c1 = os.path.join(d, "c1.json")
    with open(c1, "w") as f:
        json.dump({"ulpprof_contract": 1, "producer": "ref",
                   "claims": [{"level": 1, "name": "batch invariant"}]}, f)
    v = diff_json(miss, hit, "--contract", c1)
    check(v["contract"] == "not promised", repr(v))
    p = subprocess.run([ULPPROF, "diff", "--contract", os.path.join(d, "none.json"), miss, hit],
                       capture_output=True, text=True)
    check(p.returncode == 2 and p.stderr.count("\n") == 1 and "none.json" in p.stderr,
          "missing contract: %d %r" % (p.returncode, p.stderr))


def main():
    with tempfile.TemporaryDirectory() as d:
        runs = {}
        for mode, env in (("miss", {}), ("hit", {}), ("split", {}),
                          ("stale", {"ULPPROF_REFMODEL_STALE_KV": "2"})):
            runs[mode] = os.path.join(d, mode + ".h5")
            m = "hit" if mode == "stale" else mode
            subprocess.run([REFMODEL, "--mode", m, "--label", mode, "--out", runs[mode]],
                           check=True, env=dict(os.environ, **env))
        check_pair(runs["miss"], runs["hit"], "rounding")
        check_pair(runs["miss"], runs["split"], "rounding")
        check_pair(runs["miss"], runs["stale"], "defect")
        # The table and Markdown carry the same verdict.
        for fmt in ("table", "markdown"):
            out = subprocess.run([ULPPROF, "diff", "-f", fmt, "--color", "never", runs["miss"],
                                  runs["stale"]], capture_output=True, text=True).stdout
            check("not rounding: looks like a defect" in " ".join(out.split()), fmt)
        unwitnessed(d)
        contracts(d, runs["miss"], runs["hit"])
    print("ok")


if __name__ == "__main__":
    main()
