#!/bin/bash
# Benchmark of `ulpprof diff` (issue #3 item 7): two snapshots of 32 x 4 Mi
# bf16 with ~1% of the elements changed; reports, from one run:
#   ulpprof / cat      time of `ulpprof diff` over `cat A B > /dev/null` (target <= 1.5)
#   numpy / ulpprof    the numpy+h5py raw-read script (diff_numpy.py) over ulpprof (>= 10)
#   h5diff / ulpprof   h5diff over ulpprof
#   peak RSS           of ulpprof diff (/usr/bin/time -v; target < 64 MiB)
# Page cache warm (each file is read once before timing); best of 3 for the
# fast commands.  Usage: bench_diff.sh [NLAYERS NELEM]  (ULPPROF, ULP_PYTHON,
# BENCH_DIR to keep the files between runs, BENCH_NO_H5DIFF=1 to skip h5diff).
set -eu
SRC=$(cd "$(dirname "$0")/../.." && pwd)
ULPPROF=${ULPPROF:-$SRC/build/programs/ulpprof}
PY=${ULP_PYTHON:-/usr/bin/python3}
NL=${1:-32}
NE=${2:-4194304}
DIR=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/ulpdiff-bench.XXXXXX")}
[ -n "${BENCH_DIR:-}" ] || trap 'rm -rf "$DIR"' EXIT
mkdir -p "$DIR"
if [ ! -s "$DIR/b.h5" ]; then
    "$PY" "$SRC/tests/perf/make_bench_pair.py" "$DIR" "$NL" "$NE"
fi
A=$DIR/a.h5
B=$DIR/b.h5
cat "$A" "$B" >/dev/null

now() { date +%s.%N; }
# best TIMES CMD...: the fastest of TIMES runs, in seconds.
best() {
    local n=$1 b=
    shift
    for _ in $(seq "$n"); do
        local t0 t1
        t0=$(now)
        "$@" >/dev/null 2>&1 || true
        t1=$(now)
        b=$(awk -v t0="$t0" -v t1="$t1" -v b="$b" "BEGIN { d = t1 - t0; if (b == \"\" || d < b) print d; else print b }")
    done
    echo "$b"
}
"$SRC/tests/perf/check_vec_diff.sh" "${CC:-gcc}" || true
t_cat=$(best 5 sh -c "cat '$A' '$B' >/dev/null")
t_ulp=$(best 5 "$ULPPROF" diff "$A" "$B")
# A binary that links OpenBLAS starts its thread pool at load time, which
# competes for the cores; show the difference when it does.
if ldd "$ULPPROF" 2>/dev/null | grep -q openblas; then
    t_ob=$(OPENBLAS_NUM_THREADS=1 best 5 "$ULPPROF" diff "$A" "$B")
    echo "note: $ULPPROF links OpenBLAS; with OPENBLAS_NUM_THREADS=1: $t_ob s"
fi
rss_kb=$( { /usr/bin/time -v "$ULPPROF" diff "$A" "$B" >/dev/null; } 2>&1 | awk '/Maximum resident/ { print $6 }')
t_np=$(best 1 "$PY" "$SRC/tests/perf/diff_numpy.py" "$A" "$B")
if [ -z "${BENCH_NO_H5DIFF:-}" ]; then
    t_h5=$(best 1 h5diff "$A" "$B")
else
    t_h5=nan
fi
"$ULPPROF" diff "$A" "$B" | grep -E "^(differs|first divergence)" || true
awk -v c="$t_cat" -v u="$t_ulp" -v n="$t_np" -v h="$t_h5" -v r="$rss_kb" -v nl="$NL" -v ne="$NE" 'BEGIN {
    printf "pair: %d x %d bf16 elements, %.0f MiB per file\n", nl, ne, nl * ne * 2 / 1048576
    printf "cat A B > /dev/null   %8.3f s\n", c
    printf "ulpprof diff          %8.3f s   ulpprof / cat     = %6.2f  (target <= 1.5)\n", u, u / c
    printf "numpy + h5py (raw)    %8.3f s   numpy / ulpprof   = %6.1f  (target >= 10)\n", n, n / u
    if (h != "nan") printf "h5diff                %8.3f s   h5diff / ulpprof  = %6.1f\n", h, h / u
    printf "peak RSS of ulpprof diff: %.1f MiB  (target < 64)\n", r / 1024
}'
