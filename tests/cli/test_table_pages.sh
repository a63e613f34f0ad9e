#!/bin/bash
# A capture table made in pages (ULPPROF_TABLE=lazy, with pages of 1 and 3
# captures) prints every command's output byte for byte as the table read
# whole (ULPPROF_TABLE=eager): ls, diff in every format, kernels.  Files:
# the demo's runs (positions, requests, gemm ranges) and capture_loop's
# (a kernel trace, several dtypes and name counts, one capture), and a
# `repair` copy (its records contiguous, not chunked).  That the pages are
# used at all on these files (the stamp holds on this filesystem) is
# checked by tests/unit/test_snapshot_pages.c on files of the same writer.
set -u
: "${ULPPROF:?path of the ulpprof binary}"
: "${ULPPROF_BUILD_DIR:?build tree}"
LOOP=$ULPPROF_BUILD_DIR/tests/reliability/capture_loop
# A cross build runs its programs under the emulator (tests/CMakeLists.txt).
EMU=${ULPPROF_EMULATOR:-}
TMP=$(mktemp -d "${ULPPROF_BUILD_DIR}/test_table_pages.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# same NAME ARGS...: `ulpprof ARGS` with each table; stdout, stderr and exit status alike.
same() {
    local name=$1
    shift
    ULPPROF_TABLE=eager "$ULPPROF" "$@" >"$TMP/want" 2>&1
    echo "exit $?" >>"$TMP/want"
    for page in 1 3; do
        ULPPROF_TABLE=lazy ULPPROF_TABLE_PAGE=$page "$ULPPROF" "$@" >"$TMP/got" 2>&1
        echo "exit $?" >>"$TMP/got"
        cmp -s "$TMP/want" "$TMP/got" || fail "$name (pages of $page): $(diff "$TMP/want" "$TMP/got" | head -5)"
    done
}

"$ULPPROF" demo --dir "$TMP/demo" --no-plots >/dev/null 2>&1 || fail "ulpprof demo"
$EMU "$LOOP" --out "$TMP/a.h5" --count 300 --elements 33 --names 13 --kernels 2 --dtype f16 >/dev/null || fail "capture_loop a"
$EMU "$LOOP" --out "$TMP/b.h5" --count 300 --elements 33 --names 13 --kernels 2 --dtype f16 --flip-from 150 >/dev/null || fail "capture_loop b"
$EMU "$LOOP" --out "$TMP/c.h5" --count 200 --elements 5 --names 1 --dtype f64 >/dev/null || fail "capture_loop c"
$EMU "$LOOP" --out "$TMP/d.h5" --count 200 --elements 5 --names 1 --dtype f64 --flip-from 0 >/dev/null || fail "capture_loop d"
$EMU "$LOOP" --out "$TMP/one.h5" --count 1 --elements 4 >/dev/null || fail "capture_loop one"
"$ULPPROF" repair "$TMP/a.h5" "$TMP/a_copy.h5" >/dev/null 2>&1 || fail "repair"
# A copy made from a table in pages is the copy made from the table read whole.
ULPPROF_TABLE=lazy ULPPROF_TABLE_PAGE=3 "$ULPPROF" repair "$TMP/a.h5" "$TMP/a_copy2.h5" >/dev/null 2>&1 ||
    fail "repair from pages"
for f in a_copy a_copy2; do
    ULPPROF_TABLE=eager "$ULPPROF" ls "$TMP/$f.h5" | tail -n +2 >"$TMP/$f.ls"
    ULPPROF_TABLE=eager "$ULPPROF" diff --format csv "$TMP/$f.h5" "$TMP/b.h5" >"$TMP/$f.csv"
done
cmp -s "$TMP/a_copy.ls" "$TMP/a_copy2.ls" || fail "repair from pages: ls differs"
cmp -s "$TMP/a_copy.csv" "$TMP/a_copy2.csv" || fail "repair from pages: diff differs"

same "ls" ls "$TMP/demo/miss.h5" "$TMP/demo/hit.h5" "$TMP/a.h5" "$TMP/c.h5" "$TMP/one.h5" "$TMP/a_copy.h5"
for fmt in table markdown csv json; do
    same "diff miss hit $fmt" diff --format "$fmt" "$TMP/demo/miss.h5" "$TMP/demo/hit.h5"
    same "diff split hit $fmt" diff --format "$fmt" "$TMP/demo/split.h5" "$TMP/demo/hit.h5"
    same "diff a b $fmt" diff --format "$fmt" "$TMP/a.h5" "$TMP/b.h5"
    same "diff copy b $fmt" diff --format "$fmt" "$TMP/a_copy.h5" "$TMP/b.h5"
    same "diff c d $fmt" diff --format "$fmt" "$TMP/c.h5" "$TMP/d.h5"
    same "diff one one $fmt" diff --format "$fmt" "$TMP/one.h5" "$TMP/one.h5"
done
same "diff --match" diff --match 't.1*' "$TMP/a.h5" "$TMP/b.h5"
same "kernels a b" kernels "$TMP/a.h5" "$TMP/b.h5"
same "kernels miss hit" kernels "$TMP/demo/miss.h5" "$TMP/demo/hit.h5"

if [ "$fails" -ne 0 ]; then
    echo "$fails check(s) failed"
    exit 1
fi
echo "all table-in-pages checks passed"
