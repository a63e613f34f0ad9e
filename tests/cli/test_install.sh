#!/bin/bash
# `cmake --install` gives a prefix from which another project finds ulpprof
# with find_package(ulpprof), links ulpprof::capture and ulpprof::capture_static,
# and writes a snapshot that the installed `ulpprof ls` reads and h5py agrees with;
# a consumer of ulpprof::reports compares it with itself, writes the CSV report
# and aligns its kernel trace (none) with itself.
set -eu
: "${ULPPROF:?}" "${ULPPROF_BUILD_DIR:?}" "${ULPPROF_SOURCE_DIR:?}"
PY=${ULP_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$ULPPROF_BUILD_DIR" --prefix "$tmp/prefix" >/dev/null
# A sanitized build installs sanitized static archives: link the consumer the same way.
if ldd "$ULPPROF" 2>/dev/null | grep -q libasan; then
    export CFLAGS="-fsanitize=address,undefined" LDFLAGS="-fsanitize=address,undefined"
elif ldd "$ULPPROF" 2>/dev/null | grep -q libtsan; then
    export CFLAGS="-fsanitize=thread" LDFLAGS="-fsanitize=thread"
fi
for f in bin/ulpprof include/ulpprof/capture.h include/ulpprof/snapshot.h include/ulpprof/report.h \
         lib/libulpprof_capture.so lib/libulpprof_capture.a lib/libulpprof_reports.a lib/cmake/ulpprof/ulpprofConfig.cmake; do
    [ -e "$tmp/prefix/$f" ] || fail "not installed: $f"
done
# A cross build (cmake/toolchain-aarch64.cmake): the consumer is built with
# the same toolchain (ULPPROF_CONSUMER_CMAKE_ARGS) and run under the emulator
# (ULPPROF_EMULATOR, its words); both are empty in a native build.  The
# toolchain searches packages in its sysroot only: it is told where this one is.
cross=()
if [ -n "${ULPPROF_CONSUMER_CMAKE_ARGS:-}" ]; then
    read -r -a cross <<<"$ULPPROF_CONSUMER_CMAKE_ARGS"
    cross+=("-Dulpprof_DIR=$tmp/prefix/lib/cmake/ulpprof")
fi
cmake -S "$ULPPROF_SOURCE_DIR/tests/cli/install_consumer" -B "$tmp/build" \
    -DCMAKE_PREFIX_PATH="$tmp/prefix" "${cross[@]}" >"$tmp/cfg.log" 2>&1 ||
    { cat "$tmp/cfg.log"; fail "configure"; }
cmake --build "$tmp/build" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "build"; }
emu=${ULPPROF_EMULATOR:-}

files=(static)
if [ -z "$emu" ]; then
    LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/build/c" "$tmp/shared.h5" | grep -qx success || fail "shared"
    files=(shared static)
else
    # The emulator sets the program's library path itself.
    echo "skipped: under ${emu%% *}: the shared consumer (LD_LIBRARY_PATH)" >&2
fi
$emu "$tmp/build/cs" "$tmp/static.h5" | grep -qx success || fail "static"
readelf -d "$tmp/build/cs" | grep -q 'NEEDED.*libulpprof_capture' &&
    fail "static consumer needs the shared library"
$emu "$tmp/build/r" "$tmp/static.h5" >"$tmp/report.csv" || fail "reports consumer"
grep -q '^x,0,' "$tmp/report.csv" || fail "capture x missing in the CSV report"

for f in "${files[@]}"; do
    $emu "$tmp/prefix/bin/ulpprof" ls "$tmp/$f.h5" >"$tmp/$f.ls" || fail "installed ulpprof ls $f"
    grep -q "installed" "$tmp/$f.ls" || fail "label missing in ls $f"
    "$PY" - "$tmp/$f.h5" <<'PYEOF' || fail "h5py $f"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as h:
    assert h.attrs["format"] in (b"ulpprof-snapshot", "ulpprof-snapshot")
    d = h["captures/x/0"]
    assert d.attrs["dtype"] in (b"f32", "f32")
    assert np.array_equal(d[()], np.array([1.0, 2.0, -3.5, 4.25], dtype=np.float32))
PYEOF
done
echo "ok: install + find_package(ulpprof): ${files[*]}"
