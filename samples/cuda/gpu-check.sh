#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds everything, runs the cuBLAS sample
# under `ulpprof record` as a prefix-cache miss and hit (NVTX marks) and once
# through the C API, then `ulpprof diff` and `ulpprof kernels` on the pair,
# and checks what only a GPU can show: device captures arrive, the kernel
# trace is recorded, and each layer's capture is attributed its kernels.
# Then: captures under a CUDA graph (3 replays: occurrences, steps,
# graph_replay, values against the eager run), GEMM attribution (record
# --gemms: the GEMM line at the first divergence of miss/hit, GEMMs beside
# kernels), capture bandwidth against a pinned cudaMemcpy, and the time of a
# step plain, under record, and under record --gemms; the typed cuBLAS calls
# (cublasSgemm_v2 under TF32 math) through the GEMM wrappers, checked
# exactly against the CPU; the contracts of the --gemms miss and hit
# (contract emit, compare, check of a level-2 claim).  Not yet run on a GPU.
#
#   samples/cuda/gpu-check.sh [BUILD_DIR]      (default: build-gpu)
#
# Results go to $OUT (or BUILD_DIR/gpu-check).  Exit 0 when every check
# passed; a differing pair is expected (diff exits 1), not a failure.
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$SRC/build-gpu}
OUTDIR=${OUT:-$BUILD/gpu-check}
mkdir -p "$OUTDIR"
JOBS=$(nproc 2>/dev/null || echo 4)
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
step() { echo; echo "== $*"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || fail "nvidia-smi"

step "build ($BUILD)"
cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DULPPROF_WITH_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" >"$OUTDIR/cmake.log" 2>&1 ||
    { tail -30 "$OUTDIR/cmake.log"; echo "configure failed"; exit 2; }
cmake --build "$BUILD" -j"$JOBS" >"$OUTDIR/build.log" 2>&1 ||
    { grep -E "error|Error" "$OUTDIR/build.log" | head -30; echo "build failed"; exit 2; }
U="$BUILD/programs/ulpprof"
S="$BUILD/samples/cuda/ulpprof_gemm_chain"
[[ -x "$U" && -x "$S" ]] || { echo "ulpprof or the sample was not built"; exit 2; }

step "unit and CLI tests of the collector"
ctest --test-dir "$BUILD" -R "cuda|record|kernels|gemm" --output-on-failure >"$OUTDIR/ctest.log" 2>&1 ||
    fail "ctest (see ctest.log)"
tail -3 "$OUTDIR/ctest.log"

step "record: miss, hit, and the C API"
ARGS=(--tokens "${TOKENS:-384}" --hidden "${HIDDEN:-2048}" --layers "${LAYERS:-8}")
"$U" record -o "$OUTDIR/miss.h5" --label miss --attr cache=miss -- "$S" --mode miss "${ARGS[@]}" \
    >"$OUTDIR/miss.out" 2>"$OUTDIR/miss.err"
rc=$?; cat "$OUTDIR/miss.out" "$OUTDIR/miss.err"; [[ $rc == 0 ]] || fail "miss run exit $rc"
"$U" record -o "$OUTDIR/hit.h5" --label hit --attr cache=hit -- "$S" --mode hit "${ARGS[@]}" \
    >"$OUTDIR/hit.out" 2>"$OUTDIR/hit.err"
rc=$?; cat "$OUTDIR/hit.out" "$OUTDIR/hit.err"; [[ $rc == 0 ]] || fail "hit run exit $rc"
"$U" record -o "$OUTDIR/api.h5" --label api --attr cache=miss -- "$S" --mode miss --api "${ARGS[@]}" \
    >"$OUTDIR/api.out" 2>"$OUTDIR/api.err"
rc=$?; cat "$OUTDIR/api.out" "$OUTDIR/api.err"; [[ $rc == 0 ]] || fail "api run exit $rc"
for e in miss hit api; do
    [[ -s "$OUTDIR/$e.err" ]] && fail "$e run printed warnings (see $e.err)"
done

step "ulpprof ls"
"$U" ls "$OUTDIR/miss.h5" "$OUTDIR/hit.h5" | tee "$OUTDIR/ls.txt" || fail "ls"

step "ulpprof diff miss hit"
"$U" diff "$OUTDIR/miss.h5" "$OUTDIR/hit.h5" | tee "$OUTDIR/diff.txt"
rc=${PIPESTATUS[0]}; [[ $rc == 0 || $rc == 1 ]] || fail "diff exit $rc"
"$U" diff "$OUTDIR/miss.h5" "$OUTDIR/api.h5" >"$OUTDIR/diff-api.txt"
rc=$?; [[ $rc == 0 ]] || fail "NVTX and C API captures of the same miss run differ (exit $rc)"

step "ulpprof kernels miss hit"
"$U" kernels "$OUTDIR/miss.h5" "$OUTDIR/hit.h5" | tee "$OUTDIR/kernels.txt"
rc=${PIPESTATUS[0]}; [[ $rc == 0 || $rc == 1 ]] || fail "kernels exit $rc"

step "trace and attribution"
PY=${ULP_PYTHON:-python3}
if "$PY" -c "import h5py, numpy" 2>/dev/null; then
    "$PY" - "$OUTDIR/miss.h5" "$OUTDIR/hit.h5" "$OUTDIR/api.h5" <<'PY' || fail "trace checks"
import sys, h5py
bad = 0
for path in sys.argv[1:]:
    f = h5py.File(path, "r")
    env = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in f["env"].attrs.items()}
    print(path, {k: env.get(k) for k in ("device_name", "driver_version", "cuda_runtime_version",
                                         "cupti_version", "cublas_version")})
    for k in ("device_name", "driver_version", "cupti_version", "cublas_version"):
        if k not in env:
            print("  missing /env", k); bad += 1
    if "trace" not in f:
        print("  no /trace"); bad += 1; continue
    k = f["trace/kernels"]; names = f["trace/names"]
    print("  %d kernel rows, %d names" % (k.shape[0], names.shape[0]))
    prev = 0
    for name in sorted(f["captures"], key=lambda n: int(f["captures"][n]["0"].attrs["seq"])):
        d = f["captures"][name]["0"]
        if "kernels" not in d.attrs:
            print("  %s: no kernels attribute" % name); bad += 1; continue
        a, b = (int(x) for x in d.attrs["kernels"])
        kn = [names[k[i]["name_id"]] for i in range(a, b)]
        kn = [x.decode() if isinstance(x, bytes) else x for x in kn]
        print("  %-22s kernels [%d, %d): %s" % (name, a, b, ", ".join(n[:40] for n in kn)))
        # Each layer runs rmsnorm, >= 1 GEMM kernel and residual_add (the
        # first also owns the weight fills); the logits rmsnorm and a GEMM.
        need = 2 if name == "logits" else 3
        if b - a < need or a < prev:
            print("    ^ expected >= %d kernels after the previous capture's" % need); bad += 1
        prev = b
sys.exit(1 if bad else 0)
PY
else
    echo "no h5py for $PY: attribution not checked; h5dump of one capture:"
    h5dump -a /captures/model.layers.0.out/0/kernels "$OUTDIR/miss.h5" || true
fi

step "captures under a CUDA graph (3 replays)"
"$U" record -o "$OUTDIR/graph.h5" --label graph -- "$S" --mode miss --graph 3 "${ARGS[@]}" \
    >"$OUTDIR/graph.out" 2>"$OUTDIR/graph.err"
rc=$?; cat "$OUTDIR/graph.out" "$OUTDIR/graph.err"; [[ $rc == 0 ]] || fail "graph run exit $rc"
[[ -s "$OUTDIR/graph.err" ]] && fail "graph run printed warnings (see graph.err)"
if "$PY" -c "import h5py, numpy" 2>/dev/null; then
    "$PY" - "$OUTDIR/graph.h5" "$OUTDIR/miss.h5" "${LAYERS:-8}" <<'PY' || fail "graph captures"
import sys, h5py, numpy as np
g, e, layers = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r"), int(sys.argv[3])
bad = 0
names = ["model.layers.%d.out" % l for l in range(layers)] + ["logits"]
seqs = []
for n in names:
    occ = sorted(g["captures"][n], key=int)
    if occ != ["0", "1", "2"]:
        print("  %s: occurrences %s, expected 0 1 2" % (n, occ)); bad += 1; continue
    for r in range(3):
        d = g["captures"][n][str(r)]
        step, rep = int(d.attrs.get("step", -1)), [int(x) for x in d.attrs.get("graph_replay", [-1, -1])]
        same = np.array_equal(d[()].view(np.uint16), g["captures"][n]["0"][()].view(np.uint16))
        eager = np.array_equal(d[()].view(np.uint16), e["captures"][n]["0"][()].view(np.uint16))
        seqs.append((r, names.index(n), int(d.attrs["seq"])))
        if step != r or rep[1] != r or not same:
            print("  %s/%d: step %d replay %s same-as-replay-0 %s" % (n, r, step, rep, same)); bad += 1
        if r == 0:
            print("  %-22s replay 0 %s the eager miss run" % (n, "equals" if eager else "DIFFERS from"))
# Replays in order, and within one replay the capture order.
if [s for _, _, s in sorted(seqs)] != sorted(s for _, _, s in seqs):
    print("  seq does not follow (replay, capture order)"); bad += 1
sys.exit(1 if bad else 0)
PY
fi

step "GEMM attribution: record --gemms, miss and hit"
for e in miss hit; do
    "$U" record --gemms -o "$OUTDIR/gemm-$e.h5" --label "$e" --attr cache=$e -- "$S" --mode $e \
        "${ARGS[@]}" >"$OUTDIR/gemm-$e.out" 2>"$OUTDIR/gemm-$e.err"
    rc=$?; cat "$OUTDIR/gemm-$e.err"; [[ $rc == 0 ]] || fail "gemm $e run exit $rc"
done
"$U" diff "$OUTDIR/gemm-miss.h5" "$OUTDIR/gemm-hit.h5" | tee "$OUTDIR/gemm-diff.txt"
grep -q "^gemms at " "$OUTDIR/gemm-diff.txt" || fail "no GEMM line at the first divergence"
"$U" kernels "$OUTDIR/gemm-miss.h5" "$OUTDIR/gemm-hit.h5" >"$OUTDIR/gemm-kernels.txt"
grep -m4 "GEMM M=" "$OUTDIR/gemm-kernels.txt" || fail "ulpprof kernels names no GEMM"
if "$PY" -c "import h5py" 2>/dev/null; then
    "$PY" - "$OUTDIR/gemm-miss.h5" <<'PY' || fail "/trace/gemms"
import sys, h5py
f = h5py.File(sys.argv[1], "r")
g = f["trace/gemms"][()]
print("  %d GEMM rows; first: %s" % (len(g), g[0] if len(g) else None))
linked = sum(1 for r in g if r["corr_first"] != 0)
print("  %d of them with the correlation ids of their kernels" % linked)
sys.exit(0 if len(g) and linked else 1)
PY
fi

step "contract of the cuBLAS miss/hit pair (emit, compare, check)"
# Each side's contract from its own --gemms capture: the cuBLASLt rows make
# the GEMM sites observed.  compare names the field that limits the level
# the two can promise together; check holds a plain level-2 claim (a cache
# hit bitwise equal to the miss) against the pair.  The verdicts are the
# hardware's to give: printed, not required.
for e in miss hit; do
    "$U" contract emit "$OUTDIR/gemm-$e.h5" --producer "cublas-$e" -o "$OUTDIR/contract-$e.json" \
        >"$OUTDIR/contract-$e.out" 2>&1 || fail "contract emit $e (see contract-$e.out)"
done
"$U" contract compare "$OUTDIR/contract-miss.json" "$OUTDIR/contract-hit.json" |
    tee "$OUTDIR/contract-compare.txt"
rc=${PIPESTATUS[0]}; [[ $rc == 0 ]] || fail "contract compare exit $rc"
"$U" contract compare --format json "$OUTDIR/contract-miss.json" "$OUTDIR/contract-hit.json" \
    >"$OUTDIR/contract-compare.json" || fail "contract compare --format json"
grep "^level: " "$OUTDIR/contract-compare.txt" | sed 's/^/  verdict of compare: /' ||
    fail "contract compare printed no level"
printf '%s\n' '{"ulpprof_contract": 1, "producer": "cublas", "claims": [{"level": 2,' \
    ' "name": "a hit is bitwise the miss"}]}' >"$OUTDIR/claim-level2.json"
"$U" contract check "$OUTDIR/claim-level2.json" "$OUTDIR/gemm-miss.h5" "$OUTDIR/gemm-hit.h5" \
    >"$OUTDIR/contract-check.txt"
rc=$?; cat "$OUTDIR/contract-check.txt"
[[ $rc == 0 || $rc == 1 ]] || fail "contract check exit $rc"
grep "^verdict: " "$OUTDIR/contract-check.txt" | sed 's/^/  verdict of check: /' ||
    fail "contract check printed no verdict"

step "GEMM attribution of the typed calls (cublasSgemm_v2, TF32 math mode)"
"$U" record --gemms -o "$OUTDIR/typed.h5" -- "$S" --typed tf32 2>&1 | tee "$OUTDIR/typed.txt"
grep -q "^typed: ok" "$OUTDIR/typed.txt" || fail "typed calls through the wrappers: wrong results"
if "$PY" -c "import h5py" 2>/dev/null; then
    "$PY" - "$OUTDIR/typed.h5" <<'PY' || fail "/trace/gemms of the typed calls"
import sys, h5py
s = lambda v: v.decode() if isinstance(v, bytes) else str(v)
g = h5py.File(sys.argv[1], "r")["trace/gemms"][()]
rows = [(s(r["api"]), int(r["m"]), int(r["n"]), int(r["k"]), int(r["batch"]), s(r["compute"]),
         int(r["status"])) for r in g]
for r in rows:
    print("  ", r)
want = [("cublasSgemm_v2", 64, 48, 96, 1, "32F_FAST_TF32", 0),
        ("cublasSgemmStridedBatched", 64, 48, 96, 2, "32F_FAST_TF32", 0),
        ("cublasDgemm_v2", 64, 48, 96, 1, "64F", 0)]
sys.exit(0 if rows == want else 1)
PY
fi

step "capture bandwidth against a pinned cudaMemcpy (256 MiB x 8)"
"$U" record -o "$OUTDIR/bench.h5" -- "$S" --bench-copy "${COPY_MB:-256}" 2>&1 |
    tee "$OUTDIR/bench.txt"
grep -q "^bench-copy:" "$OUTDIR/bench.txt" || fail "bench-copy"
rm -f "$OUTDIR/bench.h5"

step "tracing overhead on a step (20 steps)"
"$S" --mode miss --time-steps 20 "${ARGS[@]}" | grep time-steps | sed 's/^/  plain:          /'
"$U" record -o "$OUTDIR/t1.h5" -- "$S" --mode miss --time-steps 20 "${ARGS[@]}" |
    grep time-steps | sed 's/^/  record:         /'
"$U" record --gemms -o "$OUTDIR/t2.h5" -- "$S" --mode miss --time-steps 20 "${ARGS[@]}" |
    grep time-steps | sed 's/^/  record --gemms: /'
rm -f "$OUTDIR/t1.h5" "$OUTDIR/t2.h5"

echo
if ((fails)); then
    echo "gpu-check: $fails failure(s); logs in $OUTDIR"
    exit 1
fi
echo "gpu-check: all passed; files in $OUTDIR"
