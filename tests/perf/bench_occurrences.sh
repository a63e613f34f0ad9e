#!/usr/bin/env bash
# Many occurrences of one name: is the writer and is
# `ulpprof ls` linear in the number of captures of one name?
#
#   tests/perf/bench_occurrences.sh [BUILD_DIR] [N...]   (default N: 10000 100000 1000000)
#   BENCH_DIR=dir   where the files go (default $BUILD_DIR/bench-occ)
#   NAMES=K ELEMENTS=E   K names, bf16[E] captures (default 1 and 16)
#
# For each N: capture_loop writes N captures of bf16[16] under one name (so
# /captures/t.0 holds N occurrences; with NAMES=K, N/K under each of K
# names), then `ulpprof ls` lists the file.
# Prints wall time, captures per second and peak RSS of both, and the
# per-capture wall and CPU time, so superlinear growth shows as a rising
# us/capture.
# The files are deleted at the end.  A benchmark, not a test: run by hand.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-}
[ $# -gt 0 ] && shift
if [ -z "$build" ]; then
    for b in "$src/build-rel" "$src/build"; do [ -x "$b/tests/reliability/capture_loop" ] && build=$b && break; done
fi
loop=$build/tests/reliability/capture_loop
ulpprof=$build/programs/ulpprof
[ -x "$loop" ] && [ -x "$ulpprof" ] || { echo "bench_occurrences: build capture_loop and ulpprof first" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench_occurrences: /usr/bin/time is missing" >&2; exit 2; }
dir=${BENCH_DIR:-$build/bench-occ}
mkdir -p "$dir"
trap 'rm -f "$dir"/occ_*.h5 "$dir"/time.txt' EXIT
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(10000 100000 1000000)

# run NAME N CMD...: wall seconds, CPU seconds (user + sys, every thread)
# and peak RSS of CMD, per capture.  CPU time is what a busy machine does
# not inflate.
run() {
    local name=$1 n=$2
    shift 2
    /usr/bin/time -f "%e %M %U %S" -o "$dir/time.txt" "$@" >/dev/null 2>&1 || { echo "$name: failed" >&2; return 1; }
    read -r wall rss user sys <"$dir/time.txt"
    awk -v name="$name" -v n="$n" -v w="$wall" -v r="$rss" -v c="$user + $sys" 'BEGIN {
        split(c, p, " + "); cpu = p[1] + p[2]
        printf "%-6s %9d captures  %8.2f s  %9.0f captures/s  %7.1f us/capture  CPU %7.1f us/capture  peak RSS %6.1f MiB\n",
               name, n, w, (w > 0 ? n / w : 0), 1e6 * w / n, 1e6 * cpu / n, r / 1024 }'
}

for n in "${counts[@]}"; do
    f=$dir/occ_$n.h5
    rm -f "$f"
    run write "$n" "$loop" --out "$f" --count "$n" --elements "${ELEMENTS:-16}" --names "${NAMES:-1}" \
        --queue-mb 64 || continue
    run ls "$n" "$ulpprof" ls "$f"
    rm -f "$f"
done
