#!/usr/bin/env bash
# `ulpprof ladder` over a few hundred runs: time and peak RSS, beside numpy.
#
#   tests/perf/bench_ladder.sh [BUILD_DIR] [COPIES]   (default COPIES 25: 8 x 25 = 200 runs)
#   BENCH_DIR=dir   where the files go (default $BUILD_DIR/bench-ladder)
#
# `ulpprof demo --ladder` writes its 8 runs (miss, repeat, batch4, hit,
# split, chunk64, tp2, tp4); each is copied COPIES times, so the ladder has
# 8*COPIES runs in 6 groups of bitwise-identical runs.  Then, in one run:
#   ulpprof ladder               every pair (19,900 for 200 runs), full report
#   ulpprof ladder --jobs 1      the same on one worker
#   ladder_numpy.py              numpy + h5py: every file read into memory once,
#                                the identical/differs matrix of every pair (no
#                                first divergence, no flips: less than ulpprof does)
# The files are deleted at the end.  A benchmark, not a test: run by hand.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
copies=${2:-25}
ulpprof=$build/programs/ulpprof
[ -x "$ulpprof" ] || { echo "bench_ladder: build ulpprof first" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench_ladder: /usr/bin/time is missing" >&2; exit 2; }
dir=${BENCH_DIR:-$build/bench-ladder}
rm -rf "$dir"
mkdir -p "$dir/runs"
trap 'rm -rf "$dir"' EXIT
"$ulpprof" demo --ladder --no-plots --dir "$dir/demo" >/dev/null || exit 2
for f in "$dir"/demo/*.h5; do
    b=$(basename "$f" .h5)
    for i in $(seq -w 1 "$copies"); do cp "$f" "$dir/runs/${b}_$i.h5"; done
done
n=$(ls "$dir/runs" | wc -l)
echo "bench_ladder: $n runs, $((n * (n - 1) / 2)) pairs, $(du -sh "$dir/runs" | cut -f1)"

run() {
    local name=$1
    shift
    /usr/bin/time -f "%e %M" -o "$dir/time.txt" "$@" >/dev/null 2>"$dir/err.txt"
    local rc=$?
    [ $rc -le 1 ] || { echo "$name: failed ($rc)"; cat "$dir/err.txt"; return 1; }
    read -r wall rss < <(tail -n 1 "$dir/time.txt")
    printf "%-28s %8.2f s   peak RSS %7.1f MiB\n" "$name" "$wall" "$(echo "$rss / 1024" | bc -l)"
}
run "ulpprof ladder" "$ulpprof" ladder --ignore suffix_gemm "$dir/runs"
run "ulpprof ladder -f json" "$ulpprof" ladder --ignore suffix_gemm -f json "$dir/runs"
run "ulpprof ladder --jobs 1" "$ulpprof" ladder --ignore suffix_gemm --jobs 1 "$dir/runs"
run "numpy+h5py (matrix only)" /usr/bin/python3 "$src/tests/perf/ladder_numpy.py" "$dir/runs"
