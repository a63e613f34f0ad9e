#!/bin/bash
# Files that make HDF5 1.10 itself crash or loop while decoding metadata
# (tests/fuzz/known/, found by fuzz_snapshot): `ls` and `diff` must still give
# one stderr line naming the file and exit 2 -- not a core dump, not a hang.
set -u
: "${ULPPROF:?}" "${ULPPROF_SOURCE_DIR:?}"
known=$ULPPROF_SOURCE_DIR/tests/fuzz/known
good=$(mktemp -d)
trap 'rm -rf "$good"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

"${ULP_PYTHON:-/usr/bin/python3}" - "$good/good.h5" <<'PYEOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as h:
    h.attrs["format"] = "ulpprof-snapshot"
    h.attrs["format_version"] = np.int32(1)
    d = h.create_dataset("captures/x/0", data=np.zeros(4, np.float32))
    d.attrs["dtype"] = "f32"
    d.attrs["seq"] = np.int64(0)
PYEOF

files=("$known/hdf5_hang_global_heap.h5" "$known/hdf5_segv_global_heap.h5")
# Under AddressSanitizer the heap overflow is reported by ASan itself.
ldd "$ULPPROF" 2>/dev/null | grep -q libasan || files+=("$known/hdf5_overflow_attr_message.h5")

for f in "${files[@]}"; do
    for args in "ls $f" "diff $f $good/good.h5" "diff $good/good.h5 $f"; do
        out=$(ULPPROF_OPEN_TIMEOUT=2 timeout 30 "$ULPPROF" $args 2>"$good/err")
        rc=$?
        [ "$rc" -eq 2 ] || fail "ulpprof $args: exit $rc, expected 2"
        [ -z "$out" ] || fail "ulpprof $args: printed on stdout"
        [ "$(wc -l <"$good/err")" -eq 1 ] || fail "ulpprof $args: not one stderr line: $(cat "$good/err")"
        grep -q "'$f'" "$good/err" || fail "ulpprof $args: stderr does not name the file"
        # The overflow corrupts HDF5's heap silently or fatally, depending on
        # the heap's state: either message is right, as long as it is one line.
        case $f in *overflow*) ;; *)
            grep -q "HDF5 library" "$good/err" || fail "ulpprof $args: stderr does not say what failed";;
        esac
    done
done
# Found by fuzz_snapshot: /trace/names declaring 2^35 names in an 11 KB file
# was allocated for before being read (out of memory); now refused up front.
reg=$ULPPROF_SOURCE_DIR/tests/fuzz/corpus/snapshot/regress-trace-names-huge
"$ULPPROF" ls "$reg" >/dev/null 2>"$good/err"
rc=$?
[ "$rc" -eq 2 ] || fail "ls regress-trace-names-huge: exit $rc, expected 2"
grep -q "'/trace/names' declares .* absurd" "$good/err" || fail "regress-trace-names-huge: $(cat "$good/err")"
# Found by fuzz_snapshot: an integer type whose bits lie past its bytes
# (offset 16, precision 64, 8 bytes), which HDF5 reads as a different
# number each time: refused, naming the capture and the attribute.
reg=$ULPPROF_SOURCE_DIR/tests/fuzz/corpus/snapshot/regress-int-bits-past-bytes.h5
for headers in 1 0; do
    ULPPROF_HEADERS=$headers "$ULPPROF" ls "$reg" >/dev/null 2>"$good/err"
    rc=$?
    [ "$rc" -eq 2 ] || fail "ls regress-int-bits-past-bytes (headers $headers): exit $rc, expected 2"
    grep -q "capture 't.1/0': attribute 'time_ns' has a damaged integer type" "$good/err" ||
        fail "regress-int-bits-past-bytes: $(cat "$good/err")"
    [ "$(wc -l <"$good/err")" -eq 1 ] || fail "regress-int-bits-past-bytes: not one line"
done

# The same type in a /trace/kernels field: refused by the trace reader, one
# line naming the table and the field; in a /run attribute: shown as damaged.
reg=$ULPPROF_SOURCE_DIR/tests/fuzz/corpus/snapshot/regress-trace-int-bits.h5
mix=$ULPPROF_SOURCE_DIR/tests/fuzz/corpus/snapshot/valid_mix.h5
for args in "ls $reg" "kernels $mix $reg" "kernels $reg $mix"; do
    out=$("$ULPPROF" $args 2>"$good/err")
    rc=$?
    [ "$rc" -eq 2 ] || fail "$args: exit $rc, expected 2"
    [ -z "$out" ] || fail "$args: printed on stdout"
    grep -q "'/trace/kernels' field 'start_ns' has a damaged integer type" "$good/err" ||
        fail "$args: $(cat "$good/err")"
    [ "$(wc -l <"$good/err")" -eq 1 ] || fail "$args: not one line"
done
"$ULPPROF" kernels "$mix" "$mix" >/dev/null || fail "kernels of the seed it was made from"
reg=$ULPPROF_SOURCE_DIR/tests/fuzz/corpus/snapshot/regress-run-int-bits.h5
out=$("$ULPPROF" ls "$reg" 2>"$good/err") || fail "ls regress-run-int-bits: exit $?"
echo "$out" | grep -q "zz_batch = (a damaged integer type)" || fail "regress-run-int-bits: $out"

# The guard is gone after the open: the good file still lists normally.
"$ULPPROF" ls "$good/good.h5" >/dev/null || fail "ls of a good file"
[ "$fails" -eq 0 ] && echo "ok: damaged files that break HDF5 give exit 2 and one line"
exit $((fails > 0))
