#!/usr/bin/python3
"""The reference workload's GEMM rows on its OpenBLAS path (--gemm blas).

`ulpprof-refmodel --gemm blas` writes one /trace/gemms row per cblas_sgemm
call of a captured pass (docs/contract.md).  For a miss and a hit, each
capture's `gemms` range is checked with h5py against the model's
dimensions (/run model_shape, prompt_len, prefix_len), derived by hand.
A miss is one pass of M = prompt rows attending over T = prompt; a hit two,
occurrence 0 the prefix's (M = T = prefix) and occurrence 1 the suffix's
(M = prompt - prefix, T = prompt).  For occurrence o of

  - model.layers.L.mlp_out: gate and up (M, mlp, hidden), down (M, hidden, mlp);
  - model.layers.L.attn_out: q (M, heads*head_dim, hidden), k and v
    (M, kv_heads*head_dim, hidden), o (M, hidden, heads*head_dim), and per
    query head Q.K^T (M, T, head_dim) and P.V (M, head_dim, T);
  - lm_head.logits (once, the suffix's rows: prompt - prefix, the default):
    (prompt - prefix, vocab, hidden), its M the capture's first axis;

every row's api is cblas_sgemm, its algo the OpenBLAS core type as
OpenBLAS itself says it here (openblas_get_corename through ctypes), its
tile "" and split-K 0 (OpenBLAS's blocking is not known), compute 32F, and
the ranges of the captures cover /trace/gemms once, in order.  Skipped
(77) where OpenBLAS cannot be loaded.
"""
import ctypes
import os
import subprocess
import sys
import tempfile

import h5py

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
REFMODEL = os.path.join(BUILD, "workload", "ulpprof-refmodel")
FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL:", msg)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def openblas_core():
    for name in ("libopenblas.so.0", "libopenblas.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        fn = lib.openblas_get_corename
        fn.restype = ctypes.c_char_p
        return fn().decode()
    return None


def expected(run, mode):
    """(layers, [per pass: (M, mlp shapes, attn shapes)], lm_head shapes)."""
    dims = dict(kv.split("=") for kv in text(run["model_shape"]).split())
    H, F, NH, KH, HD, V = (int(dims[k]) for k in ("hidden", "mlp", "heads", "kv_heads",
                                                  "head_dim", "vocab"))
    P, C = int(text(run["prompt_len"])), int(text(run["prefix_len"]))
    passes = [(P, P)] if mode == "miss" else [(C, C), (P - C, P)]
    out = []
    for M, T in passes:
        mlp = sorted([(M, F, H), (M, F, H), (M, H, F)])
        attn = sorted([(M, NH * HD, H), (M, KH * HD, H), (M, KH * HD, H), (M, H, NH * HD)]
                      + [(M, T, HD), (M, HD, T)] * NH)
        out.append((M, mlp, attn))
    return int(dims["layers"]), out, [(P - C, V, H)]


def main():
    core = openblas_core()
    if core is None:
        print("SKIP: no OpenBLAS here")
        return 77
    tmp = tempfile.mkdtemp(prefix="test_refmodel_blas_rows.")
    env = dict(os.environ)
    env.pop("ULPPROF_BLAS", None)  # OpenBLAS, not another CBLAS
    for mode in ("miss", "hit"):
        path = os.path.join(tmp, mode + ".h5")
        p = subprocess.run([REFMODEL, "--gemm", "blas", "--mode", mode, "--out", path], env=env,
                           capture_output=True, text=True)
        if p.returncode != 0 and "cannot load OpenBLAS" in p.stderr:
            print("SKIP: the workload cannot load OpenBLAS: %s" % p.stderr.strip())
            return 77
        check(p.returncode == 0, "%s: exit %d %s" % (mode, p.returncode, p.stderr))
        if p.returncode != 0:
            continue
        with h5py.File(path, "r") as f:
            run = dict(f["run"].attrs)
            rows = f["trace/gemms"][()]
            ranges = {(n, int(o)): tuple(int(v) for v in d.attrs["gemms"])
                      for n, g in f["captures"].items() for o, d in g.items()
                      if "gemms" in d.attrs}
            lm_rows = f["captures"]["lm_head.logits"]["0"].shape[0]
        check(text(run["gemm"]) == "blas" and text(run["blas"]).startswith("OpenBLAS"),
              "%s: /run gemm %s blas %s" % (mode, run.get("gemm"), run.get("blas")))
        layers, passes, head = expected(run, mode)

        def shapes(name, occ=0):
            lo, hi = ranges.get((name, occ), (0, 0))
            return sorted((int(r["m"]), int(r["n"]), int(r["k"])) for r in rows[lo:hi])
        for o, (M, mlp, attn) in enumerate(passes):
            for L in range(layers):
                for site, want in (("mlp_out", mlp), ("attn_out", attn)):
                    name = "model.layers.%d.%s" % (L, site)
                    check(shapes(name, o) == want, "%s %s occurrence %d: %s, want %s"
                          % (mode, name, o, shapes(name, o), want))
        check(shapes("lm_head.logits") == head and lm_rows == head[0][0],
              "%s lm_head: %s, want %s (capture rows %d)"
              % (mode, shapes("lm_head.logits"), head, lm_rows))
        # The non-empty ranges tile /trace/gemms: every row in one capture's range.
        spans = sorted(r for r in ranges.values() if r[1] > r[0])
        flat = [i for lo, hi in spans for i in range(lo, hi)]
        n_want = sum(layers * (len(mlp) + len(attn)) for _, mlp, attn in passes) + len(head)
        check(flat == list(range(len(rows))) and len(rows) == n_want,
              "%s: ranges %s... do not cover the %d rows once, want %d rows"
              % (mode, spans[:4], len(rows), n_want))
        kinds = {(text(r["api"]), text(r["algo"]), text(r["tile"]), int(r["splitk"]),
                  text(r["compute"]), text(r["a_type"]), text(r["d_type"])) for r in rows}
        check(kinds == {("cblas_sgemm", core, "", 0, "32F", "bf16", "f32")},
              "%s: rows' api/algo/tile/splitk/compute/types %s, want cblas_sgemm with core %s"
              % (mode, kinds, core))
    if FAILS:
        print("%d failures" % len(FAILS))
        return 1
    print("ok: OpenBLAS core %s" % core)
    return 0


if __name__ == "__main__":
    sys.exit(main())
