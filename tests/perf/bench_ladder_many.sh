#!/usr/bin/env bash
# `ulpprof ladder` over many runs that fall into few classes: wall time and
# peak RSS (/usr/bin/time -v), and RSS per run against a ladder of half as many.
#
#   tests/perf/bench_ladder_many.sh [BUILD_DIR] [RUNS] [CLASSES]   (default 1000 80)
#   BENCH_DIR=dir   where the files go (default $BUILD_DIR/bench-ladder-many)
#
# make_ladder_runs.py writes CLASSES distinct snapshots (24 f32 [32, 256]
# layers and a logits capture, ~0.8 MB each) and copies them to RUNS files
# in random order.  The ladder then compares each run with its class's first
# run and the classes' first runs with each other.  A benchmark, not a test.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
runs=${2:-1000}
classes=${3:-80}
ulpprof=$build/programs/ulpprof
[ -x "$ulpprof" ] || { echo "bench_ladder_many: build ulpprof first" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench_ladder_many: /usr/bin/time is missing" >&2; exit 2; }
dir=${BENCH_DIR:-$build/bench-ladder-many}
rm -rf "$dir"
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
half=$((runs / 2))
/usr/bin/python3 "$src/tests/perf/make_ladder_runs.py" "$dir/full" "$runs" "$classes" || exit 2
/usr/bin/python3 "$src/tests/perf/make_ladder_runs.py" "$dir/half" "$half" "$classes" || exit 2
echo "bench_ladder_many: $runs runs in $classes classes, $(du -sh "$dir/full" | cut -f1)"

run() {
    local name=$1
    shift
    /usr/bin/time -v -o "$dir/time.txt" "$@" >/dev/null 2>"$dir/err.txt"
    local rc=$?
    [ $rc -le 1 ] || { echo "$name: failed ($rc)"; cat "$dir/err.txt"; return 1; }
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$dir/time.txt" |
        awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$dir/time.txt")
    printf "%-34s %8.2f s   peak RSS %8.1f MiB\n" "$name" "$wall" "$(echo "$rss / 1024" | bc -l)"
}
run "ladder, $half runs" "$ulpprof" ladder "$dir/half"
rss_half=$rss
run "ladder, $runs runs" "$ulpprof" ladder "$dir/full"
rss_full=$rss
run "ladder -f json, $runs runs" "$ulpprof" ladder -f json "$dir/full"
printf "peak RSS per added run: %.1f KiB\n" "$(echo "($rss_full - $rss_half) / ($runs - $half)" | bc -l)"
