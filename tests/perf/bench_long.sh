#!/usr/bin/env bash
# Long and large sessions: memory stays flat.
#
#   tests/perf/bench_long.sh [BUILD_DIR]        (default build-rel, else build)
#   BENCH_DIR=dir       where the files go (default $BUILD_DIR/bench-long; the
#                       4 GiB case needs about 9 GiB free there)
#   BENCH_SKIP_LARGE=1  only the 10,000-capture case
#
# 1. A session of 10,000 small captures (bf16 [256], 100 names x 100
#    occurrences): wall time, peak RSS, and RSS every 1,000 captures; then
#    `ulpprof ls` and `ulpprof diff` of two such files (peak RSS, time).
# 2. A session of 4 GiB: 128 captures of 16 Mi bf16 elements (32 MiB each)
#    with the default 256 MiB queue, twice (the second differs in one bit of
#    each capture from the 65th on); `ulpprof diff` of the pair, its peak RSS
#    against its bound, and a check of the result (64 rows differ, 1 element
#    each).  The files are deleted at the end.
# Peak RSS is /usr/bin/time -v's "Maximum resident set size".
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-}
if [ -z "$build" ]; then
    for b in "$src/build-rel" "$src/build"; do [ -x "$b/tests/reliability/capture_loop" ] && build=$b && break; done
fi
loop=$build/tests/reliability/capture_loop
ulpprof=$build/programs/ulpprof
[ -x "$loop" ] && [ -x "$ulpprof" ] || { echo "bench_long: build capture_loop and ulpprof first" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench_long: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
dir=${BENCH_DIR:-$build/bench-long}
mkdir -p "$dir"
trap 'rm -f "$dir"/long_*.h5 "$dir"/large_*.h5 "$dir"/out.txt "$dir"/err.txt "$dir"/time.txt' EXIT

# measure NAME CMD...: runs CMD under /usr/bin/time -v, prints wall time and peak RSS.
measure() {
    local name=$1
    shift
    /usr/bin/time -v -o "$dir/time.txt" "$@" >"$dir/out.txt" 2>"$dir/err.txt"
    local rc=$?
    local rss wall
    rss=$(sed -nE 's/.*Maximum resident set size \(kbytes\): ([0-9]+)/\1/p' "$dir/time.txt")
    wall=$(sed -nE 's/.*Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (.*)/\1/p' "$dir/time.txt")
    printf '%-44s exit %d  wall %8s  peak RSS %7.1f MiB\n' "$name" "$rc" "$wall" "$(awk -v k="${rss:-0}" 'BEGIN {print k / 1024}')"
    LAST_RC=$rc
    LAST_RSS_KIB=$rss
}

echo "bench_long: $(nproc) CPUs, files in $dir ($(df -h "$dir" | awk 'NR==2 {print $4}') free)"

# --- 1. 10,000 small captures ------------------------------------------------
measure "capture 10,000 x bf16[256]" "$loop" --out "$dir/long_a.h5" --count 10000 --elements 256 \
    --names 100 --rss-every 1000
grep -q 'done ok=10000 refused=0 close=ULP_OK' "$dir/out.txt" || echo "  FAIL: $(cat "$dir/out.txt")"
echo "  RSS (KiB) after every 1,000 captures: $(awk '/^rss/ {printf "%s ", $3}' "$dir/err.txt")"
echo "  file: $(stat -c %s "$dir/long_a.h5") bytes"
"$loop" --out "$dir/long_b.h5" --count 10000 --elements 256 --names 100 --flip-from 9990 >/dev/null
measure "ulpprof ls (10,000 captures)" "$ulpprof" ls "$dir/long_a.h5"
n=$(grep -cE '^ +[0-9]+  t\.' "$dir/out.txt")
[ "$n" = 10000 ] || echo "  FAIL: ls listed $n captures"
measure "ulpprof diff (10,000 captures, 10 differ)" "$ulpprof" diff --format json "$dir/long_a.h5" "$dir/long_b.h5"
[ "$LAST_RC" = 1 ] || echo "  FAIL: diff exit $LAST_RC"
/usr/bin/python3 - "$dir/out.txt" <<'PY' || echo "  FAIL: diff result"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
bad = [r for r in rows if r["status"] != "identical"]
assert len(rows) == 10000 and len(bad) == 10 and all(r["differing"] == 1 for r in bad), (len(rows), len(bad))
print("  diff: 10,000 rows, the 10 flipped captures differ in 1 element each")
PY
rm -f "$dir"/long_*.h5

# --- 2. 4 GiB ---------------------------------------------------------------------
if [ "${BENCH_SKIP_LARGE:-0}" = 1 ]; then
    echo "4 GiB case skipped (BENCH_SKIP_LARGE=1)"
    exit 0
fi
free_kib=$(df -Pk "$dir" | awk 'NR==2 {print $4}')
if [ "$free_kib" -lt $((9 * 1024 * 1024)) ]; then
    echo "4 GiB case SKIPPED: only $((free_kib / 1024)) MiB free in $dir, 9 GiB needed"
    exit 0
fi
measure "capture 4 GiB (128 x 32 MiB, 256 MiB queue)" "$loop" --out "$dir/large_a.h5" \
    --count 128 --elements $((16 << 20)) --names 32 --rss-every 16
grep -q 'done ok=128 refused=0 close=ULP_OK' "$dir/out.txt" || echo "  FAIL: $(cat "$dir/out.txt")"
echo "  RSS (KiB) after every 16 captures: $(awk '/^rss/ {printf "%s ", $3}' "$dir/err.txt")"
echo "  file: $(stat -c %s "$dir/large_a.h5") bytes"
measure "capture 4 GiB, second file" "$loop" --out "$dir/large_b.h5" \
    --count 128 --elements $((16 << 20)) --names 32 --flip-from 64
measure "ulpprof ls (4 GiB)" "$ulpprof" ls "$dir/large_a.h5"
# diff's memory bound: 2 files x threads x chunk_elements x 8 bytes at most
# (defaults: 2 threads, 1 Mi elements) = 32 MiB of buffers, plus the program.
measure "ulpprof diff (4 GiB pair, 2 threads)" "$ulpprof" diff --format json \
    "$dir/large_a.h5" "$dir/large_b.h5"
[ "$LAST_RC" = 1 ] || echo "  FAIL: diff exit $LAST_RC"
bound_kib=$(( (32 + 64) * 1024 ))
if [ "${LAST_RSS_KIB:-0}" -le "$bound_kib" ]; then
    echo "  diff peak RSS within its bound of 32 MiB buffers + 64 MiB program"
else
    echo "  FAIL: diff peak RSS ${LAST_RSS_KIB} KiB above $bound_kib KiB"
fi
/usr/bin/python3 - "$dir/out.txt" <<'PY' || echo "  FAIL: diff result"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
bad = [r for r in rows if r["status"] != "identical"]
assert len(rows) == 128 and len(bad) == 64 and all(r["differing"] == 1 for r in bad), (len(rows), len(bad))
print("  diff: 128 rows, the 64 flipped captures differ in exactly 1 element each")
PY
