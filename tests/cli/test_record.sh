#!/usr/bin/env bash
# `ulpprof record` and the CUDA/NVTX injection library, on a machine without
# a GPU: a CPU program announces tensors living in HOST memory with `ulp1`
# NVTX marks; record sets NVTX_INJECTION64_PATH and CUDA_INJECTION64_PATH to
# libulpprof_cuda.so, the real NVTX injection path delivers the marks, and
# the file is checked with h5py against values recomputed here.  Also: exit
# status propagation, %p names, labels and attributes, malformed-mark
# reporting, and clean degradation without a driver (no libcuda) and with
# the toolkit's stub libcuda (CUPTI cannot subscribe).
set -u
: "${ULPPROF:?}" "${ULPPROF_BUILD_DIR:?}" "${ULP_PYTHON:=/usr/bin/python3}"
DEMO="$ULPPROF_BUILD_DIR/samples/cuda/ulpprof_nvtx_host_marks"
LIB="$ULPPROF_BUILD_DIR/capture/cuda/libulpprof_cuda.so"
if [[ ! -x "$DEMO" || ! -f "$LIB" ]]; then
    echo "SKIPPED: test_record needs the CUDA collector (ULPPROF_WITH_CUDA=ON)"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/ulpprof-record.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect_rc() { # expected actual what
    [[ "$1" == "$2" ]] || fail "$3: exit status $2, expected $1"
}

# 1. Host marks through the real NVTX injection, into a snapshot.
"$ULPPROF" record -o "$T/run.h5" --label miss --attr cache=miss --attr 'note=a,b=c\d' \
    -- "$DEMO" --layers 3 --passes 2 --steps --malformed 2 --exit 5 >"$T/out" 2>"$T/err"
expect_rc 5 $? "record propagates the exit status"
grep -q "ignoring malformed NVTX mark 'ulp1|name=broken" "$T/err" ||
    fail "first malformed mark not reported: $(cat "$T/err")"
grep -q "^ulpprof: 2 malformed NVTX marks ignored" "$T/err" ||
    fail "malformed marks not counted at exit: $(cat "$T/err")"
[[ $(grep -c . "$T/err") == 2 ]] || fail "expected exactly 2 stderr lines: $(cat "$T/err")"
"$ULP_PYTHON" - "$T/run.h5" <<'PY' || fail "snapshot content"
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
assert f.attrs["format"] in ("ulpprof-snapshot", b"ulpprof-snapshot"), f.attrs["format"]
assert int(f.attrs["format_version"]) == 1
s = lambda v: v.decode() if isinstance(v, bytes) else str(v)
assert s(f.attrs["label"]) == "miss"
assert s(f["run"].attrs["cache"]) == "miss"
assert s(f["run"].attrs["note"]) == "a,b=c\\d", s(f["run"].attrs["note"])
caps = f["captures"]
# Independent recomputation of what the program announced.
def value(i, layer):
    return ((i * 7 + layer * 3) % 17 - 8) * 0.25
seqs = []
for step in range(2):
    for l in range(3):
        d = caps["model.layers.%d.out" % l][str(step)]
        assert d.shape == (2, 8) and s(d.attrs["dtype"]) == "f32"
        want = np.array([value(i, l) for i in range(16)], dtype=np.float32).reshape(2, 8)
        got = d[()].view(np.uint32)
        assert np.array_equal(got, want.view(np.uint32)), (l, step, d[()], want)
        assert int(d.attrs["layer"]) == l
        assert int(d.attrs["step"]) == step, (int(d.attrs["step"]), step)
        seqs.append(int(d.attrs["seq"]))
    lg = caps["logits"][str(step)]
    assert lg.shape == (2, 5) and s(lg.attrs["dtype"]) == "bf16"
    assert s(lg.attrs["role"]) == "logits"
    want = np.array([value(i, 100) for i in range(10)], dtype=np.float32)
    bits = (want.view(np.uint32) >> 16).astype(np.uint16)   # exact: <= 8 significant bits
    raw = np.empty(lg.shape, dtype=np.uint16)   # raw bits: memory type = file type
    lg.id.read(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=lg.id.get_type())
    assert np.array_equal(raw.ravel(), bits), (raw, bits)
    seqs.append(int(lg.attrs["seq"]))
# seq follows announcement order: layers 0..2 then logits, twice.
assert seqs == sorted(seqs) and len(set(seqs)) == 8, seqs
assert "broken" not in caps
assert "trace" not in f     # no GPU: no kernel trace
PY

# 2. The reader agrees (ulpprof ls) and sees 8 captures.
"$ULPPROF" ls "$T/run.h5" >"$T/ls" 2>&1 || fail "ls: $(cat "$T/ls")"
grep -q "total: 8 captures" "$T/ls" || fail "ls total: $(cat "$T/ls")"

# 3. Exit status: signals as 128+N, a missing program as 127.
"$ULPPROF" record -o "$T/k.h5" -- sh -c 'kill -9 $$' 2>"$T/err"
expect_rc 137 $? "killed child"
grep -q "killed by signal 9" "$T/err" || fail "signal not reported: $(cat "$T/err")"
"$ULPPROF" record -o "$T/n.h5" -- "$T/does-not-exist" 2>"$T/err"
expect_rc 127 $? "missing program"
# A child that exits 0 but writes no snapshot: exit 2, one line; --allow-empty
# keeps its 0 (and still says it); a failing child keeps its own status.
"$ULPPROF" record -o "$T/z.h5" -- true 2>"$T/err"
expect_rc 2 $? "true, nothing written"
grep -q "^ulpprof: record: 'true' exited 0 but no snapshot was written to '$T/z.h5'" "$T/err" ||
    fail "empty run not refused: $(cat "$T/err")"
[[ $(grep -c . "$T/err") == 1 ]] || fail "empty run: one line expected: $(cat "$T/err")"
"$ULPPROF" record --allow-empty -o "$T/z.h5" -- true 2>"$T/err"
expect_rc 0 $? "--allow-empty"
grep -q "no snapshot was written" "$T/err" || fail "allowed empty run not noted: $(cat "$T/err")"
"$ULPPROF" record -o "$T/z.h5" -- false 2>"$T/err"
expect_rc 1 $? "false, nothing written"
# A file left by an earlier run does not count as written by this one.
cp "$T/run.h5" "$T/old.h5"
"$ULPPROF" record -o "$T/old.h5" -- true 2>"$T/err"
expect_rc 2 $? "stale file"
"$ULPPROF" record -o "$T/old-%p.h5" -- true 2>"$T/err"
expect_rc 2 $? "pattern, nothing written"
# The child is told where the host capture library is.
"$ULPPROF" record --allow-empty -o "$T/e.h5" -- sh -c 'echo "$ULPPROF_CAPTURE_LIBRARY"' \
    >"$T/out" 2>/dev/null
[[ "$(cat "$T/out")" == "$(realpath "$ULPPROF_BUILD_DIR/capture/libulpprof_capture.so")" ]] ||
    fail "ULPPROF_CAPTURE_LIBRARY: '$(cat "$T/out")'"
ULPPROF_CAPTURE_LIBRARY="$T/nope.so" "$ULPPROF" record -o "$T/e.h5" -- true 2>"$T/err"
expect_rc 2 $? "bad ULPPROF_CAPTURE_LIBRARY"
grep -q "ULPPROF_CAPTURE_LIBRARY '$T/nope.so' does not exist" "$T/err" || fail "$(cat "$T/err")"

# 4. Usage: --help on stdout with 0; errors on one stderr line with 2.
"$ULPPROF" record --help >"$T/out" 2>"$T/err"
expect_rc 0 $? "record --help"
grep -q "^usage: ulpprof record" "$T/out" || fail "help text"
[[ -s "$T/err" ]] && fail "help wrote to stderr"
for args in "" "-o $T/x.h5" "--attr novalue -o $T/x.h5 -- true" "--bogus -- true"; do
    # shellcheck disable=SC2086
    "$ULPPROF" record $args >"$T/out" 2>"$T/err"
    expect_rc 2 $? "record $args"
    grep -q "^ulpprof" "$T/err" || fail "record $args: no error line"
    [[ -s "$T/out" ]] && fail "record $args: wrote to stdout"
done

# 5. %p: one file per process, named by the pid recorded in /env.
"$ULPPROF" record -o "$T/p-%p.h5" -- "$DEMO" --layers 1 2>"$T/err"
expect_rc 0 $? "record %p"
files=("$T"/p-*.h5)
[[ ${#files[@]} == 1 && -f "${files[0]}" ]] || fail "%p: files ${files[*]}"
"$ULP_PYTHON" - "${files[0]}" <<'PY' || fail "%p file names its pid"
import sys, h5py, os
f = h5py.File(sys.argv[1], "r")
pid = f["env"].attrs["pid"]
pid = pid.decode() if isinstance(pid, bytes) else str(pid)
assert os.path.basename(sys.argv[1]) == "p-%s.h5" % pid, (sys.argv[1], pid)
PY

# 6. No driver at all: device marks are dropped with one warning, host
#    marks still recorded, the program's status kept.
"$ULPPROF" record -o "$T/nodrv.h5" -- "$DEMO" --layers 2 --device-marks --exit 3 2>"$T/err"
expect_rc 3 $? "no driver"
grep -q "no CUDA driver (libcuda.so.1) in this process; device captures are dropped" "$T/err" ||
    fail "no-driver warning: $(cat "$T/err")"
grep -q "^ulpprof: 2 captures failed and were dropped" "$T/err" || fail "drop count: $(cat "$T/err")"
[[ $(grep -c "no CUDA driver" "$T/err") == 1 ]] || fail "warned more than once"

# 7. The toolkit's stub libcuda: cuInit fails, the injection is initialized
#    by hand as the driver would, CUPTI cannot subscribe -> one warning, NVTX
#    capture still works.
STUB=""
for d in /usr/local/cuda/lib/stubs /usr/local/cuda/lib64/stubs /usr/local/cuda/targets/x86_64-linux/lib/stubs; do
    [[ -f "$d/libcuda.so" ]] && STUB="$d/libcuda.so" && break
done
if [[ -n "$STUB" ]] && ! ldconfig -p | grep -q 'libcuda.so.1 '; then
    mkdir -p "$T/stub" && ln -s "$STUB" "$T/stub/libcuda.so.1"
    LD_LIBRARY_PATH="$T/stub" "$ULPPROF" record -o "$T/stub.h5" -- \
        "$DEMO" --driver-init --layers 2 --device-marks 2>"$T/err"
    expect_rc 0 $? "stub driver"
    grep -q "recording captures without the kernel trace" "$T/err" ||
        fail "CUPTI failure not reported: $(cat "$T/err")"
    grep -q "InitializeInjection -> 1" "$T/err" || fail "injection must report success"
    "$ULP_PYTHON" -c "
import h5py, sys
f = h5py.File('$T/stub.h5', 'r')
assert sorted(f['captures']) == ['logits', 'model.layers.0.out', 'model.layers.1.out'], list(f['captures'])
" || fail "stub run: host captures"
else
    echo "note: no CUDA stub library (or a real driver is installed): stub case skipped"
fi

# 8. Without ULPPROF_OUTPUT the library is inert: NVTX unloads it.
NVTX_INJECTION64_PATH="$LIB" CUDA_INJECTION64_PATH="$LIB" "$DEMO" --malformed 1 >"$T/out" 2>"$T/err"
expect_rc 0 $? "inert"
[[ -s "$T/err" ]] && fail "inert library printed: $(cat "$T/err")"

if ((fails)); then
    echo "$fails failure(s)"
    exit 1
fi
echo "test_record: all passed"
