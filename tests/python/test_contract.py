"""The numeric contract (docs/contract.md) on hand-built runs.

Runs are written with h5py (test_ladder_numpy.write_run), with /trace/gemms
rows and /observed keys added here.  Every verdict below is derived by hand
from the rules of docs/contract.md and written out, never taken from
ulpprof:

- a claim of level L is kept when every pair of in-scope runs that varies
  only keys of rung L is bitwise identical, broken when one is not, and
  untested (exit 1, never 0) when no such pair exists;
- a declared tile-invariance is broken when one site ran two schemes
  across the observed M of its domain, untested with one M there;
- numerical_policy is SHA-256 (hashlib) of the sorted-key compact JSON of
  the bit-relevant fields' values, recomputed here from the emitted file;
- compare's level is the lowest rung a differing field breaks, minus one;
- a bad contract file is one stderr line naming the file, and exit 2.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_ladder_numpy as tl  # noqa: E402

check = tl.check
BASE = {"batch_size": "1", "cache": "miss", "split": "none", "tp": "1", "block_size": "16",
        "model": "m1"}

GEMM_DT = np.dtype([("seq", "<u8"), ("api", "S32"), ("m", "<i8"), ("n", "<i8"), ("k", "<i8"),
                    ("batch", "<i8"), ("a_type", "S12"), ("b_type", "S12"), ("d_type", "S12"),
                    ("compute", "S24"), ("algo", "S12"), ("algo_id", "<i4"), ("tile", "S16"),
                    ("splitk", "<i4"), ("reduction", "S12")])


def add_gemms(path, rows):
    """rows: (m, tile, splitk) of one site, n=64 k=256, bf16 in, 32F compute."""
    a = np.zeros(len(rows), dtype=GEMM_DT)
    for i, (m, tile, splitk) in enumerate(rows):
        a[i] = (i, b"cublasLtMatmul", m, 64, 256, 1, b"bf16", b"bf16", b"bf16", b"32F",
                b"heuristic", -1, tile.encode(), splitk, b"none")
    with h5py.File(path, "a") as f:
        t = f.require_group("trace")
        t.create_dataset("gemms", data=a)


def ulpprof(*args):
    p = subprocess.run([tl.ULPPROF] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)
    return path


def line_of(out, word):
    return [ln for ln in out.splitlines() if word in ln]


def main():
    tmp = tempfile.mkdtemp(prefix="test_contract.")
    P = lambda n: os.path.join(tmp, n)  # noqa: E731

    # --- Claims over four runs ---------------------------------------------------
    # miss and repeat: the same bits, no key differs (rung 0); hit: cache=hit,
    # perturbed from layer 1 (rung 2 against both); batch4: batch_size=4, the
    # same bits as the miss (rung 1 against miss and repeat).
    tl.write_run(P("miss.h5"), BASE, "miss")
    tl.write_run(P("repeat.h5"), BASE, "repeat")
    tl.write_run(P("hit.h5"), dict(BASE, cache="hit"), "hit", perturb=(1, 2))
    tl.write_run(P("batch4.h5"), dict(BASE, batch_size="4"), "batch4")
    runs = [P("miss.h5"), P("repeat.h5"), P("hit.h5"), P("batch4.h5")]

    def claim(level, **kw):
        return {"ulpprof_contract": 1, "claims": [dict({"level": level}, **kw)]}

    cases = [
        # (name, claim, exit, verdict word of the claim, pairs phrase)
        ("level 0", claim(0), 0, "kept", "1 pair on the rung"),       # miss-repeat only
        ("level 1", claim(1), 0, "kept", "2 pairs on the rung"),      # batch4 vs miss, repeat
        ("level 2", claim(2), 1, "BROKEN", "2 of 2 pairs"),           # hit vs miss, repeat
        ("level 3", claim(3), 1, "untested", "no pair"),              # no block_size varies
        # Domain cache=[hit]: only the hit is in scope, no pair: untested.
        ("level 2 hit only", claim(2, domain={"cache": ["hit"]}), 1, "untested", "no pair"),
        # Scope model m2: no run in scope: untested.
        ("scope m2", claim(0, scope={"model": "m2"}), 1, "untested", "0 of 4 runs"),
    ]
    for name, c, want_rc, word, phrase in cases:
        rc, out, err = ulpprof("contract", "check", write_json(P("c.json"), c), *runs)
        check(rc == want_rc, "%s: exit %d, want %d (%s%s)" % (name, rc, want_rc, out, err))
        ln = line_of(out, "claim 1")
        check(len(ln) == 1 and ln[0].split()[0] == word and phrase in ln[0],
              "%s: claim line %r, want %s with %r" % (name, ln, word, phrase))
    # One run: every claim untested, exit 1.
    rc, out, _ = ulpprof("contract", "check", write_json(P("c.json"), claim(0)), P("miss.h5"))
    check(rc == 1 and "untested" in out, "one run: exit %d, %s" % (rc, out))

    # --- Fields: declared against observed ------------------------------------------
    decl = {"ulpprof_contract": 1, "scheduler": {"block_size": 16},
            "sampling": {"argmax_tie_rule": "lowest_index"}}
    rc, out, _ = ulpprof("contract", "check", write_json(P("f.json"), decl), *runs)
    check(rc == 0, "fields kept: exit %d: %s" % (rc, out))
    check(line_of(out, "scheduler.block_size")[0].split()[0] == "kept", out)
    check(line_of(out, "sampling.argmax_tie_rule")[0].split()[0] == "unobservable", out)
    decl["scheduler"]["block_size"] = 32
    rc, out, _ = ulpprof("contract", "check", write_json(P("f.json"), decl), *runs)
    ln = line_of(out, "scheduler.block_size")
    check(rc == 1 and ln[0].split()[0] == "BROKEN" and "declared 32 / observed 16" in ln[0],
          "block_size 32: exit %d, %s" % (rc, ln))
    # batch_size is a /run key of no field; tp is collective.tp: declared 1, batch4 shows 1.
    rc, out, _ = ulpprof("contract", "check",
                         write_json(P("f.json"), {"ulpprof_contract": 1, "collective": {"tp": 2}}),
                         *runs)
    check(rc == 1 and "declared 2 / observed 1 (run miss)" in out, "tp 2: %s" % out)

    # --- GEMM policy: tile-invariance over M ---------------------------------------
    # g1 ran M=128 at 128x128 split-K 1, g2 M=16 at 16x64 split-K 4, g3 M=32 at
    # 128x128 split-K 1 (the scheme of g1).
    tl.write_run(P("g1.h5"), BASE, "g1")
    tl.write_run(P("g2.h5"), BASE, "g2")
    tl.write_run(P("g3.h5"), BASE, "g3")
    add_gemms(P("g1.h5"), [(128, "128x128", 1)])
    add_gemms(P("g2.h5"), [(16, "16x64", 4)])
    add_gemms(P("g3.h5"), [(32, "128x128", 1)])
    site = "gemm n=64 k=256"
    pol = lambda dom=None: {"ulpprof_contract": 1, "gemm": {site: dict(  # noqa: E731
        {"policy": "tile-invariant"}, **({"m_domain": dom} if dom else {}))}}
    for name, files, dom, want_rc, word in [
            ("two schemes", ["g1.h5", "g2.h5"], None, 1, "BROKEN"),
            ("one scheme at two M", ["g1.h5", "g3.h5"], None, 0, "kept"),
            ("domain 20..256 leaves g1, g3", ["g1.h5", "g2.h5", "g3.h5"], [20, 256], 0, "kept"),
            ("domain 64..256: one M", ["g1.h5", "g2.h5"], [64, 256], 0, "untested")]:
        rc, out, _ = ulpprof("contract", "check", write_json(P("p.json"), pol(dom)),
                             *[P(f) for f in files])
        ln = line_of(out, ".policy:")
        check(rc == want_rc and ln and ln[0].split()[0] == word,
              "%s: exit %d want %d, %r want %s" % (name, rc, want_rc, ln, word))

    # --- emit: fields observed, numerical_policy recomputed -------------------------
    rc, _, err = ulpprof("contract", "emit", P("g1.h5"), P("g2.h5"), "-o", P("e.json"))
    check(rc == 0, "emit: exit %d %s" % (rc, err))
    e = json.load(open(P("e.json")))
    s = e["gemm"][site]
    check(s["compute"] == {"source": "observed", "value": "32F"}, "compute %r" % s["compute"])
    want_cfg = [{"algo": "heuristic", "api": "cublasLtMatmul", "k": 256, "m": 16, "n": 64,
                 "reduction": "none", "splitk": 4, "tile": "16x64"},
                {"algo": "heuristic", "api": "cublasLtMatmul", "k": 256, "m": 128, "n": 64,
                 "reduction": "none", "splitk": 1, "tile": "128x128"}]
    check(s["configs"]["value"] == want_cfg, "configs %r" % s["configs"])
    check(s["policy"] == {"source": "observed", "value": "m-dependent"}, "policy %r" % s["policy"])
    check(s["m_domain"]["value"] == [16, 128], "m_domain %r" % s["m_domain"])
    check(e["scheduler"]["block_size"] == {"source": "observed", "value": 16}, "block_size")
    check(e["sampling"]["argmax_tie_rule"] == {"source": "unobservable"}, "tie rule")
    check(e["identity"]["capture_dtypes"]["value"] == "activation=bf16 logits=f32", "dtypes")
    digest_fields = {
        "identity": ["dtype", "capture_dtypes"], "reduction": ["norm", "softmax",
                                                               "attention_split", "kernels"],
        "collective": ["algorithm", "protocol", "order", "tp"],
        "quant": ["scheme", "scale_granularity", "scale_dtype", "placement"],
        "scheduler": ["prefill_chunk", "split_at_block_boundary", "block_size", "graph_buckets"],
        "kv": ["dtype", "layout", "page_size", "producer"], "sampling": ["argmax_tie_rule"]}
    pol_obj = {}
    for g, names in digest_fields.items():
        for n in names:
            f = e[g][n]
            if "value" in f:
                pol_obj.setdefault(g, {})[n] = f["value"]
    pol_obj["gemm"] = {st: {k: v["value"] for k, v in sv.items() if "value" in v}
                       for st, sv in e["gemm"].items()}
    text = json.dumps(pol_obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    want = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    check(e["numerical_policy"] == want, "digest %s, want %s" % (e["numerical_policy"], want))
    # Declared merged beside observed; the file reads back.
    rc, _, err = ulpprof("contract", "emit", P("g1.h5"), "--declare",
                         write_json(P("d.json"), {"ulpprof_contract": 1,
                                                  "scheduler": {"block_size": 32},
                                                  "kv": {"layout": "paged"}}), "-o", P("e2.json"))
    e2 = json.load(open(P("e2.json")))
    check(rc == 0 and e2["scheduler"]["block_size"] == {"source": "observed", "value": 16,
                                                         "declared": 32}, "merge %r" % e2)
    check(e2["kv"]["layout"] == {"source": "declared", "value": "paged"}, "declared only")
    rc, out, _ = ulpprof("contract", "check", P("e2.json"), P("g1.h5"))
    check(rc == 1 and "declared 32 / observed 16" in out, "emitted check: %d %s" % (rc, out))
    # An edited file: its digest no longer matches.
    e["gemm"][site]["compute"]["value"] = "16F"
    rc, _, err = ulpprof("contract", "check", write_json(P("x.json"), e), P("g1.h5"))
    check(rc == 2 and "numerical_policy" in err and err.count("\n") == 1, "edited: %s" % err)

    # --- compare: levels derived from the rung table ------------------------------
    def ctr(**groups):
        return dict({"ulpprof_contract": 1}, **groups)
    for name, a, b, level in [
            ("same", ctr(collective={"tp": 1}), ctr(collective={"tp": 1}), "level: 7"),
            ("tp differs: rung 4", ctr(collective={"tp": 1}), ctr(collective={"tp": 2}),
             "level: at most 3"),
            ("compute differs: rung 0", ctr(gemm={"s": {"compute": "32F"}}),
             ctr(gemm={"s": {"compute": "16F"}}), "level: none"),
            ("M-dependent split-K: rung 1",
             ctr(gemm={"s": {"configs": [{"m": 127, "splitk": 1}]}}),
             ctr(gemm={"s": {"configs": [{"m": 15, "splitk": 4}]}}), "level: at most 0"),
            ("engine 6, kv layout 2: the lower", ctr(identity={"engine": "a"}, kv={"layout": "x"}),
             ctr(identity={"engine": "b"}, kv={"layout": "y"}), "level: at most 1")]:
        rc, out, _ = ulpprof("contract", "compare", write_json(P("a.json"), a),
                             write_json(P("b.json"), b))
        check(rc == 0 and line_of(out, "level:") and line_of(out, "level:")[0].startswith(level),
              "compare %s: %r" % (name, out))
    rc, out, _ = ulpprof("contract", "compare", write_json(P("a.json"), ctr(gemm={"s": {
        "configs": [{"m": 127, "splitk": 1}]}})), write_json(P("b.json"), ctr(gemm={"s": {
            "configs": [{"m": 15, "splitk": 4}]}})))
    check("split-K policy" in line_of(out, "level:")[0], "split-K named: %s" % out)

    # --- compare: one line per difference found alike at many sites ---------------
    # Layers 0-2 of site kind "mlp" and layer 0 of "attn": split-K 1 at M=127
    # against split-K 4 at M=15 at mlp 0, 1 and attn 0; mlp 2 has its tile
    # apart instead.  By the rule (docs/contract.md), the split-K finding
    # holds 3 sites and names them one by one: model.layers.*.mlp stands for
    # three sites, one of which (layer 2) is not in it, and the attn pattern
    # matches only one site.  Every layer's compute differs alike: one line,
    # named by the pattern, which then covers all three mlp sites.
    def site(m, sk, tile="t", compute="32F"):
        return {"compute": compute, "configs": [{"m": m, "splitk": sk, "tile": tile}]}
    ga = {"model.layers.%d.mlp" % i: site(127, 1) for i in range(3)}
    gb = {"model.layers.%d.mlp" % i: site(15, 4, compute="16F") for i in range(2)}
    gb["model.layers.2.mlp"] = site(15, 1, tile="u", compute="16F")
    ga["model.layers.0.attn"], gb["model.layers.0.attn"] = site(127, 1), site(15, 4)
    rc, out, _ = ulpprof("contract", "compare", write_json(P("a.json"), ctr(gemm=ga)),
                         write_json(P("b.json"), ctr(gemm=gb)))
    want = ["  rung 0  compute differs at 3 gemm sites (model.layers.*.mlp): 32F (A) / 16F (B)",
            "  rung 1  split-K policy depends on M at 3 gemm sites (model.layers.0.attn, "
            "model.layers.0.mlp, model.layers.1.mlp): M=127 t split-K 1 (A), M=15 t split-K 4 "
            "(B); a batch or a cache hit changes M, and with it the reduction order",
            "  rung 1  tile policy depends on M at gemm site model.layers.2.mlp: M=127 t "
            "split-K 1 (A), M=15 u split-K 1 (B); a batch or a cache hit changes M, and with "
            "it the reduction order"]
    got = [ln for ln in out.splitlines() if ln.startswith("  rung ")]
    check(rc == 0 and got == want, "compare grouped: %r, want %r" % (got, want))
    check(line_of(out, "level:") == ["level: none: " + want[0][len("  rung 0  "):]],
          "compare grouped level: %r" % line_of(out, "level:"))
    rc, out, _ = ulpprof("contract", "compare", "--format", "json", P("a.json"), P("b.json"))
    js = json.loads(out) if rc == 0 else {}
    got = sorted((d["rung"], d.get("kind"), tuple(d["sites"]), d["count"], d["a"], d["b"])
                 for d in js.get("differences", []))
    mlp = tuple("model.layers.%d.mlp" % i for i in range(3))
    want_js = [(0, "compute differs", mlp, 3, "32F", "16F"),
               (1, "split-K policy depends on M",
                ("model.layers.0.attn",) + mlp[:2], 3, "M=127 t split-K 1", "M=15 t split-K 4"),
               (1, "tile policy depends on M", mlp[2:], 1, "M=127 t split-K 1",
                "M=15 u split-K 1")]
    check(got == want_js and js["level"] == -1 and js["level_name"] is None,
          "compare --format json: %r, want %r (%s)" % (got, want_js, out[:300]))
    # Twelve sites, one of a pattern each: six named, "and 6 more".
    ga = {"s%d.x" % i: site(127, 1) for i in range(12)}
    gb = {"s%d.x" % i: site(15, 4) for i in range(12)}
    rc, out, _ = ulpprof("contract", "compare", write_json(P("a.json"), ctr(gemm=ga)),
                         write_json(P("b.json"), ctr(gemm=gb)))
    named = ", ".join("s%d.x" % i for i in range(6))  # in natural order
    check(("split-K policy depends on M at 12 gemm sites (%s and 6 more): " % named)
          in line_of(out, "level:")[0], "twelve sites: %r" % out)

    # --- Bad files: one line, exit 2 -----------------------------------------------
    bad = {"notjson": "{", "noversion": "{}", "v2": '{"ulpprof_contract": 2}',
           "unknown field": '{"ulpprof_contract": 1, "kv": {"colour": 1}}',
           "level 9": '{"ulpprof_contract": 1, "claims": [{"level": 9}]}',
           "bad source": '{"ulpprof_contract": 1, "kv": {"dtype": {"source": "guessed"}}}',
           "requires": '{"ulpprof_contract": 1, "claims": [{"level": 1, '
                       '"requires": {"kv.nothing": 1}}]}',
           "top key": '{"ulpprof_contract": 1, "claim": []}'}
    for name, text in bad.items():
        with open(P("bad.json"), "w") as f:
            f.write(text)
        rc, out, err = ulpprof("contract", "check", P("bad.json"), P("miss.h5"))
        check(rc == 2 and err.count("\n") == 1 and P("bad.json") in err and out == "",
              "bad %s: exit %d, stderr %r" % (name, rc, err))
    rc, _, err = ulpprof("contract", "check", P("f.json"), P("nope.h5"))
    check(rc == 2 and "nope.h5" in err, "missing run: %d %s" % (rc, err))

    if tl.FAILS:
        print("%d failures" % len(tl.FAILS))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
