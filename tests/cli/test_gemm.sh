#!/usr/bin/env bash
# GEMM attribution end to end, without a GPU.
#
# 1. `ulpprof record --gemms` preloads the collector into a CPU program that
#    calls the real libcublasLt / libcublas (samples/cuda/lt_calls.c: the calls
#    fail for want of a GPU, after the interposed entry points saw them) and
#    announces host tensors with NVTX marks.  /trace/gemms and each capture's
#    `gemms` range are checked with h5py against the parameters that program
#    passes (its header comment is the contract, restated here), and
#    `ulpprof diff` of the miss/hit pair names both GEMM configurations at the
#    first divergence, in text and JSON.  Without --gemms nothing is recorded.
# 2. Files written here with h5py (as another writer would): `ulpprof kernels`
#    shows the GEMM parameters beside the kernels a call launched (matched by
#    correlation id); a malformed /trace/gemms or `gemms` range is refused with
#    exit 2 and one line naming the file.
set -u
: "${ULPPROF:?}" "${ULPPROF_BUILD_DIR:?}" "${ULP_PYTHON:=/usr/bin/python3}"
T=$(mktemp -d "${TMPDIR:-/tmp}/ulpprof-gemm.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

PROG="$ULPPROF_BUILD_DIR/samples/cuda/ulpprof_lt_calls"
LIB="$ULPPROF_BUILD_DIR/capture/cuda/libulpprof_cuda.so"
if [[ -x "$PROG" && -f "$LIB" ]]; then
    export ULPPROF_CUDA_LIBRARY="$LIB"
    for mode in miss hit; do
        "$ULPPROF" record --gemms -o "$T/$mode.h5" --label "$mode" -- "$PROG" --mode "$mode" \
            >"$T/$mode.out" 2>"$T/$mode.err" || fail "record $mode: $(cat "$T/$mode.err")"
        [[ -s "$T/$mode.err" ]] && fail "record $mode printed: $(cat "$T/$mode.err")"
    done
    "$ULPPROF" record -o "$T/plain.h5" -- "$PROG" --mode miss >/dev/null 2>&1 ||
        fail "record without --gemms"
    # cuBLAS calling cuBLASLt inside (a stand-in libcublas does it as the
    # real one does): one row, the outer call's, with the inner algorithm.
    "$ULPPROF" record --gemms -o "$T/nested.h5" -- "$PROG"_fake --mode hit >/dev/null 2>&1 ||
        fail "record of the nested calls"
    # The typed calls (lt_calls.c --typed), through the real libcublas and
    # through the stand-in (TF32 math mode, cublasSgemm_v2 nesting).
    "$ULPPROF" record --gemms -o "$T/typed.h5" -- "$PROG" --mode miss --typed >/dev/null 2>&1 ||
        fail "record of the typed calls"
    "$ULPPROF" record --gemms -o "$T/typed_nested.h5" -- "$PROG"_fake --mode hit --typed \
        >/dev/null 2>&1 || fail "record of the typed calls, nested"
    "$ULPPROF" diff "$T/miss.h5" "$T/hit.h5" >"$T/diff.txt" 2>&1
    rc=$?
    [[ $rc == 1 ]] || fail "diff exit $rc, expected 1: $(cat "$T/diff.txt")"
    "$ULPPROF" diff -f json "$T/miss.h5" "$T/hit.h5" >"$T/diff.json" 2>&1
    "$ULP_PYTHON" - "$T" <<'PY' || fail "GEMM rows, ranges or report"
import json, re, sys
import h5py, numpy as np
t = sys.argv[1]
s = lambda v: v.decode() if isinstance(v, bytes) else str(v)

def expected(mode):
    """The calls of lt_calls.c, per its header: per layer one cublasLtMatmul,
    then one cublasGemmEx; the last layer's matmul without an algorithm."""
    hit = mode == "hit"
    m = 15 if hit else 127
    lt = dict(api="cublasLtMatmul", m=m, n=64, k=96, batch=1, transa="T", transb="N",
              a_type="bf16", b_type="bf16", c_type="bf16", d_type="bf16", compute="32F",
              workspace=1 << 20)
    given = dict(lt, algo="given", tile="64x64" if hit else "128x128",
                 stages="64x4" if hit else "64x3", splitk=4 if hit else 1,
                 reduction="inplace" if hit else "none", cluster="1x1x1")
    heur = dict(lt, algo="heuristic", tile="", stages="", splitk=0, reduction="", cluster="",
                algo_id=-1)
    ex = dict(api="cublasGemmEx", m=m, n=32, k=16, batch=1, transa="N", transb="N",
              a_type="f16", b_type="f16", c_type="f32", d_type="f32", compute="32F_FAST_TF32",
              algo="cublas", algo_id=-1, tile="", splitk=0)
    return [dict(given, stream=0x1000), ex, dict(heur, stream=0x1001), ex]

rows = {}
for mode in ("miss", "hit"):
    f = h5py.File(f"{t}/{mode}.h5", "r")
    g = f["trace/gemms"][()]
    want = expected(mode)
    assert len(g) == len(want), (mode, len(g))
    for i, (r, w) in enumerate(zip(g, want)):
        assert int(r["seq"]) == i
        for key, val in w.items():
            got = r[key]
            got = s(got) if isinstance(val, str) else int(got)
            assert got == val, (mode, i, key, got, val)
        assert int(r["status"]) != 0, "no GPU here: every call must have failed"
    rows[mode] = g
    # Each layer's capture follows its two calls.
    for layer in range(2):
        a = f[f"captures/model.layers.{layer}.out/0"].attrs
        assert list(a["gemms"]) == [2 * layer, 2 * layer + 2], (mode, layer, a["gemms"])
    f.close()
f = h5py.File(f"{t}/nested.h5", "r")
g = f["trace/gemms"][()]
assert len(g) == 4, len(g)   # the inner cublasLtMatmul calls are not rows of their own
for i in (1, 3):
    r = g[i]
    got = {k: s(r[k]) if r.dtype[k].kind == "S" else int(r[k]) for k in r.dtype.names}
    want = dict(api="cublasGemmEx", m=15, n=32, k=16, algo="cublas", tile="256x64",
                stages="64x5", splitk=2, reduction="compute", stream=0x5150)
    assert all(got[k] == v for k, v in want.items()), (i, got)
f.close()
# The typed calls, per lt_calls.c's header: after each layer's two calls,
# Sgemm (T N, M x 24 x 8), Dgemm (N T, M x 12 x 4), SgemmStridedBatched (N N,
# M x 16 x 8, batch 3), DgemmStridedBatched (T T, M x 6 x 2, batch 2).
def typed(m, f32_compute):
    f32 = dict(a_type="f32", b_type="f32", c_type="f32", d_type="f32", compute=f32_compute,
               algo="cublas", algo_id=-1)
    f64 = dict(a_type="f64", b_type="f64", c_type="f64", d_type="f64", compute="64F",
               algo="cublas", algo_id=-1)
    return [dict(f32, api="cublasSgemm_v2", m=m, n=24, k=8, batch=1, transa="T", transb="N"),
            dict(f64, api="cublasDgemm_v2", m=m, n=12, k=4, batch=1, transa="N", transb="T"),
            dict(f32, api="cublasSgemmStridedBatched", m=m, n=16, k=8, batch=3, transa="N",
                 transb="N"),
            dict(f64, api="cublasDgemmStridedBatched", m=m, n=6, k=2, batch=2, transa="T",
                 transb="T")]

for name, m, compute, nested in (("typed", 127, "32F", False),
                                 ("typed_nested", 15, "32F_FAST_TF32", True)):
    f = h5py.File(f"{t}/{name}.h5", "r")
    g = f["trace/gemms"][()]
    assert len(g) == 12, (name, len(g))   # 2 layers x (Lt, GemmEx, 4 typed)
    for layer in range(2):
        for j, w in enumerate(typed(m, compute)):
            if nested and j == 0:
                w["algo_id"] = 0   # the inner cublasLtMatmul's algorithm, the stand-in's id 0
            r = g[6 * layer + 2 + j]
            for key, val in w.items():
                got = s(r[key]) if isinstance(val, str) else int(r[key])
                assert got == val, (name, layer, j, key, got, val)
            assert int(r["status"]) != 0, (name, "no GPU here: every call must have failed")
        a = f[f"captures/model.layers.{layer}.out/0"].attrs
        assert list(a["gemms"]) == [6 * layer, 6 * layer + 6], (name, layer, a["gemms"])
    if nested:
        # The stand-in's cublasSgemm_v2 goes through cublasGemmEx to cublasLtMatmul:
        # one row, the outermost call's, with the inner algorithm and the stream.
        r = g[2]
        got = {k: s(r[k]) if r.dtype[k].kind == "S" else int(r[k]) for k in r.dtype.names}
        want = dict(api="cublasSgemm_v2", tile="256x64", stages="64x5", splitk=2,
                    reduction="compute", stream=0x5150, compute="32F_FAST_TF32")
        assert all(got[k] == v for k, v in want.items()), got
    f.close()

f = h5py.File(f"{t}/plain.h5", "r")
assert "trace" not in f or "gemms" not in f["trace"], "recorded without --gemms"
assert "gemms" not in f["captures/model.layers.0.out/0"].attrs
f.close()

text = open(f"{t}/diff.txt").read().replace("\n    ", " ")
line = [l for l in text.splitlines() if l.startswith("gemms at layer 0:")]
assert line, text
want_a = "A ran M=127 N=64 K=96 split-K 1 tile 128x128 stages 64x3 [cublasLtMatmul TN bf16 bf16->bf16, 32F]"
want_b = ("B ran M=15 N=64 K=96 split-K 4 tile 64x64 stages 64x4 "
          "[cublasLtMatmul TN bf16 bf16->bf16, 32F, reduction inplace]")
assert want_a in line[0] and want_b in line[0], line[0]
assert "(GEMM 1 of 2 in A, 2 in B)" in line[0], line[0]
# The first divergence is layer 0 (element 4 of the hit run is one ULP up).
fdl = [l for l in text.splitlines() if l.startswith("first divergence:")]
assert fdl and "model.layers.0.out" in fdl[0] and "1 of 8" in fdl[0], text

rep = json.load(open(f"{t}/diff.json"))
fd = rep["first_divergence"]
for side, mode in (("gemms_a", "miss"), ("gemms_b", "hit")):
    assert len(fd[side]) == 2, fd[side]
    for j, r in enumerate(fd[side]):
        h = rows[mode][j]
        for key in ("m", "n", "k", "splitk", "algo_id", "workspace"):
            assert r[key] == int(h[key]), (side, key, r[key], h[key])
        for key in ("api", "transa", "transb", "a_type", "d_type", "compute", "algo", "tile",
                    "stages", "reduction"):
            assert r[key] == s(h[key]), (side, key, r[key], h[key])
PY
else
    echo "SKIPPED part 1: needs the CUDA collector and cuBLASLt (ULPPROF_WITH_CUDA=ON)"
fi

# 2. Files written with h5py: kernels beside their GEMM calls, and refusals.
"$ULP_PYTHON" - "$ULPPROF" "$T" <<'PY' || fail "kernels with GEMM parameters, refusals"
import subprocess, sys
import h5py, numpy as np
ulpprof, t = sys.argv[1], sys.argv[2]

KROW = np.dtype([("seq", "<u8"), ("correlation_id", "<u4"), ("name_id", "<u4"),
                 ("grid", "<i4", (3,)), ("block", "<i4", (3,))])
GROW = np.dtype([("seq", "<u8"), ("api", "S24"), ("m", "<i8"), ("n", "<i8"), ("k", "<i8"),
                 ("transa", "S4"), ("transb", "S4"), ("a_type", "S12"), ("b_type", "S12"),
                 ("d_type", "S12"), ("compute", "S24"), ("algo", "S12"), ("tile", "S16"),
                 ("stages", "S16"), ("splitk", "<i4"), ("corr_first", "<u4"),
                 ("corr_last", "<u4")])

def write(path, m, splitk, tile, gemm_dtype=GROW, gemms_attr=(0, 1), grid=4):
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "ulpprof-snapshot"
        f.attrs["format_version"] = np.int32(1)
        f.create_group("run"); f.create_group("env")
        d = f.create_group("captures").create_group("x").create_dataset(
            "0", data=np.zeros(2, dtype=np.float32))
        d.attrs["dtype"] = "f32"; d.attrs["seq"] = np.int64(0); d.attrs["layer"] = np.int32(0)
        d.attrs["kernels"] = np.array([0, 3], dtype=np.int64)
        d.attrs["gemms"] = np.array(gemms_attr, dtype=np.int64)
        tr = f.create_group("trace")
        names = ["gemm_main", "splitKreduce", "other"]
        tr.create_dataset("names", data=names, dtype=h5py.string_dtype("utf-8"))
        k = np.zeros(3, dtype=KROW)
        for i in range(3):
            k[i]["seq"] = i; k[i]["correlation_id"] = 10 + i; k[i]["name_id"] = i
            k[i]["grid"] = (grid if i == 0 else 1, 1, 1)
        tr.create_dataset("kernels", data=k)
        if gemm_dtype is GROW:
            g = np.zeros(1, dtype=GROW)
            g[0] = (0, b"cublasLtMatmul", m, 64, 96, b"T", b"N", b"bf16", b"bf16", b"bf16",
                    b"32F", b"given", tile, b"64x3", splitk, 10, 11)
            tr.create_dataset("gemms", data=g)
        else:
            g = np.array([(0, "x")], dtype=[("seq", "<u8"), ("tile", h5py.string_dtype())])
            tr.create_dataset("gemms", data=g)

write(f"{t}/ka.h5", 127, 1, b"128x128")
write(f"{t}/kb.h5", 15, 4, b"64x64", grid=8)
out = subprocess.run([ulpprof, "kernels", f"{t}/ka.h5", f"{t}/kb.h5"], capture_output=True,
                     text=True)
assert out.returncode in (0, 1), out
# The first launch differs (grid); both are the GEMM call's kernels
# (correlation 10 within [10, 11]): each side shows its own call.
lines = out.stdout.splitlines()
la = [l for l in lines if l.startswith("- A #0 ")]
lb = [l for l in lines if l.startswith("+ B #0 ")]
assert la and lb, out.stdout
assert ("GEMM M=127 N=64 K=96 split-K 1 tile 128x128 stages 64x3 [cublasLtMatmul TN bf16 "
        "bf16->bf16, 32F]") in la[0], la[0]
assert "GEMM M=15 N=64 K=96 split-K 4 tile 64x64 stages 64x3" in lb[0], lb[0]
# Kernel 2 (correlation 12) is outside the call: no GEMM beside it.
assert all("GEMM" not in l for l in lines if " #2 " in l), out.stdout
js = subprocess.run([ulpprof, "kernels", "--json", f"{t}/ka.h5", f"{t}/kb.h5"],
                    capture_output=True, text=True)
import json
fd = json.loads(js.stdout)["first_divergence"]
assert fd["a"]["gemm"].startswith("M=127 N=64 K=96 split-K 1 tile 128x128"), fd
assert fd["b"]["gemm"].startswith("M=15 N=64 K=96 split-K 4 tile 64x64"), fd
print(out.stdout)

write(f"{t}/bad1.h5", 1, 1, b"", gemm_dtype="vlen")
write(f"{t}/bad2.h5", 1, 1, b"8x8", gemms_attr=(5, 3))
for bad, why in (("bad1", "/trace/gemms' field 'tile'"), ("bad2", "attribute 'gemms'")):
    r = subprocess.run([ulpprof, "diff", f"{t}/ka.h5", f"{t}/{bad}.h5"], capture_output=True,
                       text=True)
    assert r.returncode == 2, (bad, r)
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and f"{bad}.h5" in err[0] and why in err[0], (bad, r.stderr)
PY

[[ $fails == 0 ]] || exit 1
echo "test_gemm: ok"
