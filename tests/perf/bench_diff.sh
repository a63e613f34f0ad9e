#!/bin/bash
# Benchmark of `ulpprof diff`: every tool timed the same way, in
# one run, on the same warm page cache.
#
#   tests/perf/bench_diff.sh [SIZE_MIB...]      (default: 261 1024)
#
# Cases, each a pair of snapshots generated here (nothing is checked in):
#   real SIZE   make_real_pair.py: 32 layers of bf16 attn/MLP outputs and f32
#               residuals, f32 logits [T/4, 151936], 1% to 9% of the elements
#               moved by 1..4 ULP, an argmax flip in every 8th logits row
#   easy        make_bench_pair.py: 32 x 4 Mi bf16, 1% changed (the old pair)
#   many        capture_loop: 10,000 captures of bf16[256] (100 names x 100),
#               BENCH_MANY=N for N (and N/4); numpy beside ulpprof at N;
#               cat and ulpprof at BENCH_MANY_BIG (default 10 N; 0: none),
#               whose peak RSS beside N/4's and N's shows whether memory
#               grows with the capture count
# Tools, run in interleaved rounds (the order rotates every round):
#   cat         cat A B > /dev/null
#   memread     bench_memread A B: a plain two-thread walk of the mapped files
#               (the memory-read limit: nothing can compare the bytes faster)
#   ulpprof@L   ULPPROF_ISA=L ulpprof diff A B (the table; exit 1 expected: the
#               pairs differ), once per kernel level L this CPU has
#               (x86-64-v4, x86-64-v3, baseline; BENCH_ISA="L ..." to choose);
#               the many cases run the best level only
#   json        ulpprof diff -f json A B (the report CI runs; many only)
#   numpy       diff_numpy.py A B (vectorized numpy + h5py; every case but many/4)
#   torch       diff_torch.py A B (the same numbers with torch tensors loaded
#               through h5py; real and easy only)
#   h5diff      h5diff A B (HDF5's own tool: answers less, the count of
#               differing elements per dataset; pairs of at most
#               BENCH_H5DIFF_MAX_MIB, default 300: it takes ~30 s a GiB)
# Reported per case, under the CPU's model name: median and minimum of each tool (wall time, and CPU
# time as "cpu:TOOL" where perf(1) works), the ratios of the medians, and
# the range of the per-round ratios, each ulpprof figure with its level; peak RSS of ulpprof diff
# (/usr/bin/time -v).  Every output is checked: exit codes, numpy's and
# torch's numbers against ulpprof's JSON report (check_numpy.py), h5diff's
# counts (check_h5diff.py), the many case's rows.  A failed check stops the
# run with exit 1.
#
# Environment: ULPPROF_BUILD_DIR (default build), ULP_PYTHON (default
# /usr/bin/python3), BENCH_ROUNDS (default 5), BENCH_DIR (where the pairs
# go; default a fresh directory under $TMPDIR, removed at the end),
# BENCH_EASY=0 / BENCH_MANY=0 to skip those cases, BENCH_ISA (above), BENCH_TORCH=0 to leave
# torch out, BENCH_H5DIFF_MAX_MIB=0 to leave h5diff out.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${ULPPROF_BUILD_DIR:-$src/build}
ulpprof=$build/programs/ulpprof
memread=$build/tests/bench_memread
loop=$build/tests/reliability/capture_loop
capture_lib=$build/capture/libulpprof_capture.so
py=${ULP_PYTHON:-/usr/bin/python3}
rounds=${BENCH_ROUNDS:-5}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(261 1024)
for x in "$ulpprof" "$memread" "$loop" "$capture_lib" /usr/bin/time; do
    [ -x "$x" ] || { echo "bench_diff: $x is missing (build first)" >&2; exit 2; }
done
h5max=${BENCH_H5DIFF_MAX_MIB:-300}
if [ "$h5max" != 0 ] && ! command -v h5diff >/dev/null; then
    echo "bench_diff: h5diff is missing (hdf5-tools; BENCH_H5DIFF_MAX_MIB=0 leaves it out)" >&2
    exit 2
fi
if [ "${BENCH_TORCH:-1}" != 0 ] && ! "$py" -c "import torch" 2>/dev/null; then
    echo "bench_diff: $py cannot import torch (BENCH_TORCH=0 leaves it out)" >&2
    exit 2
fi
# The kernel levels: the best this CPU has (ulpprof --version) and those below it.
best=$("$ulpprof" --version | sed -n 's/^comparison kernels: //p')
case $best in
x86-64-v4) have="x86-64-v4 x86-64-v3 baseline" ;;
x86-64-v3) have="x86-64-v3 baseline" ;;
*) have=baseline ;;
esac
levels=${BENCH_ISA:-$have}
for l in $levels; do
    ULPPROF_ISA=$l "$ulpprof" --version >/dev/null || exit 2 # says why
done
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs || true)
[ -n "$cpu_model" ] || cpu_model=$(uname -m)
dir=${BENCH_DIR:-}
if [ -z "$dir" ]; then
    dir=$(mktemp -d "${TMPDIR:-/tmp}/ulpdiff-bench.XXXXXX")
    trap 'rm -rf "$dir"' EXIT
fi
mkdir -p "$dir"
times=$dir/times.txt
: >"$times"

fail() {
    echo "bench_diff: FAIL: $*" >&2
    exit 1
}

# timed CASE ROUND TOOL WANT_RC CMD...: runs CMD, stdout to $dir/out.TOOL (cat's to /dev/null),
# checks its exit code, appends "CASE ROUND TOOL SECONDS" to $times.
# With perf(1) (BENCH_CPU=0 to skip) also the CPU time of every run, which a
# machine shared with other jobs inflates less than the wall time.
cpu=0
if [ "${BENCH_CPU:-1}" != 0 ] && perf stat -x, -e task-clock -o /dev/null -- true 2>/dev/null; then
    cpu=1
fi
timed() {
    local case=$1 round=$2 tool=$3 want=$4 rc=0 t0 t1 out=$dir/out.$3
    shift 4
    [ "$tool" != cat ] || out=/dev/null # cat A B > /dev/null, as docs/performance.md says
    t0=$EPOCHREALTIME
    "$@" >"$out" 2>"$dir/err.$tool" || rc=$?
    t1=$EPOCHREALTIME
    [ "$rc" = "$want" ] || fail "$case: $tool exited $rc, not $want: $(head -c 400 "$dir/err.$tool")"
    echo "$case $round $tool $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')" >>"$times"
    # The CPU time from a second run under perf, so that perf's own start
    # is not in the wall time above.  perf 6.1 itself now and then exits 0
    # where its command exited 1 (18 of 1,000 runs of `perf stat -- sh -c
    # 'exit 1'`): an exit code perf changed is checked again without perf.
    if [ "$cpu" = 1 ]; then
        rc=0
        perf stat -x, -e task-clock -o "$dir/cpu.txt" -- "$@" >/dev/null 2>&1 || rc=$?
        if [ "$rc" != "$want" ]; then
            rc=0
            "$@" >/dev/null 2>&1 || rc=$?
            [ "$rc" = "$want" ] || fail "$case: $tool exited $rc, not $want (run after perf)"
        fi
        echo "$case $round cpu:$tool $(awk -F, '/task-clock/ { printf "%.4f", $1 / 1000 }' "$dir/cpu.txt")" >>"$times"
    fi
}

# bench CASE A B TOOL...: warm the cache, interleaved rounds, peak RSS.
bench() {
    local case=$1 a=$2 b=$3
    shift 3
    local tools=("$@") n=$# r i
    # The files just written are flushed first: the kernel writing back
    # hundreds of MB of them (the pairs, the many files) during the rounds
    # took CPU from whichever tool ran then (10,000 captures: ulpprof's CPU
    # time 10 -> 14 ms at the median, one round 10x cat).  sync keeps
    # them in the page cache; the cat below warms it.
    sync
    cat "$a" "$b" >/dev/null
    for ((r = 0; r < rounds; r++)); do
        for ((i = 0; i < n; i++)); do
            local t=${tools[$(((i + r) % n))]}
            case $t in
            cat) timed "$case" $r cat 0 cat "$a" "$b" ;;
            memread) timed "$case" $r memread 0 "$memread" "$a" "$b" ;;
            ulpprof@*) timed "$case" $r "$t" 1 env ULPPROF_ISA="${t#ulpprof@}" "$ulpprof" diff "$a" "$b" ;;
            json) timed "$case" $r json 1 "$ulpprof" diff -f json "$a" "$b" ;;
            numpy) timed "$case" $r numpy 0 "$py" "$src/tests/perf/diff_numpy.py" "$a" "$b" ;;
            torch) timed "$case" $r torch 0 "$py" "$src/tests/perf/diff_torch.py" "$a" "$b" ;;
            h5diff) timed "$case" $r h5diff 1 h5diff "$a" "$b" ;;
            esac
        done
    done
    /usr/bin/time -v -o "$dir/time.txt" "$ulpprof" diff "$a" "$b" >/dev/null || [ $? = 1 ] ||
        fail "$case: ulpprof diff under /usr/bin/time"
    local rss
    rss=$(sed -nE 's/.*Maximum resident set size \(kbytes\): ([0-9]+)/\1/p' "$dir/time.txt")
    echo "$case rss ulpprof $rss" >>"$times"
}

# tools SIZE_MIB: the tools of a real or easy case.
tools() {
    echo cat memread numpy
    for l in $levels; do echo "ulpprof@$l"; done
    [ "${BENCH_TORCH:-1}" = 0 ] || echo torch
    [ "$h5max" = 0 ] || [ "$1" -gt "$h5max" ] || echo h5diff
}

# check CASE A B TOOL...: each tool's answer (from its last timed run) against ulpprof's JSON.
check() {
    local case=$1 a=$2 b=$3 rc=0 t
    shift 3
    "$ulpprof" diff -f json -o "$dir/report.json" "$a" "$b" || rc=$?
    [ "$rc" = 1 ] || fail "$case: ulpprof diff -f json exited $rc"
    for t in "$@"; do
        case $t in
        numpy | torch) "$py" "$src/tests/perf/check_numpy.py" "$dir/out.$t" "$dir/report.json" "$t" ||
            fail "$case: $t's numbers differ" ;;
        h5diff) "$py" "$src/tests/perf/check_h5diff.py" "$dir/out.h5diff" "$dir/report.json" ||
            fail "$case: h5diff's counts differ" ;;
        esac
    done
}

echo "bench_diff: $(nproc) CPUs ($cpu_model), kernel levels: $levels (best here: $best), $rounds interleaved rounds, files in $dir"
if [ "${BENCH_EASY:-1}" != 0 ]; then
    mkdir -p "$dir/easy"
    [ -s "$dir/easy/b.h5" ] || "$py" "$src/tests/perf/make_bench_pair.py" "$dir/easy" 32 4194304
    read -ra tl <<<"$(tools 256 | xargs)"
    bench easy "$dir/easy/a.h5" "$dir/easy/b.h5" "${tl[@]}"
    check easy "$dir/easy/a.h5" "$dir/easy/b.h5" "${tl[@]}"
fi
for size in "${sizes[@]}"; do
    d=$dir/real$size
    mkdir -p "$d"
    # Written by ulpprof's own writer, as users' snapshots are (with the capture index).
    [ -s "$d/b.h5" ] || ULPPROF_CAPTURE_LIBRARY=$capture_lib "$py" "$src/tests/perf/make_real_pair.py" "$d" "$size"
    read -ra tl <<<"$(tools "$size" | xargs)"
    bench "real$size" "$d/a.h5" "$d/b.h5" "${tl[@]}"
    check "real$size" "$d/a.h5" "$d/b.h5" "${tl[@]}"
    [ -n "${BENCH_DIR:-}" ] || rm -rf "$d"
done
many=${BENCH_MANY:-10000}
if [ "$many" != 0 ]; then
    d=$dir/many
    mkdir -p "$d"
    big=${BENCH_MANY_BIG:-$((many * 10))}
    for n in $((many / 4)) "$many" $big; do
        [ "$n" != 0 ] || continue
        "$loop" --out "$d/a$n.h5" --count "$n" --elements 256 --names 100 >/dev/null
        "$loop" --out "$d/b$n.h5" --count "$n" --elements 256 --names 100 --flip-from $((n - 10)) >/dev/null
    done
    # The small file first: its peak RSS beside the larger ones' shows whether memory grows.
    bench "many$((many / 4))" "$d/a$((many / 4)).h5" "$d/b$((many / 4)).h5" cat "ulpprof@$best"
    bench "many$many" "$d/a$many.h5" "$d/b$many.h5" cat memread "ulpprof@$best" json numpy
    if [ "$big" != 0 ]; then
        bench "many$big" "$d/a$big.h5" "$d/b$big.h5" cat "ulpprof@$best"
        rm -f "$d/a$big.h5" "$d/b$big.h5"
    fi
    check "many$many" "$d/a$many.h5" "$d/b$many.h5" numpy
    # The JSON report of the last timed round.
    "$py" - "$dir/out.json" "$many" <<'PY' || fail "many: wrong rows"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
n = int(sys.argv[2])
bad = [r for r in rows if r["status"] != "identical"]
assert len(rows) == n and len(bad) == 10 and all(r["differing"] == 1 for r in bad), (len(rows), len(bad))
print("check: %d rows, the 10 flipped captures differ in 1 element each" % n)
PY
fi

"$py" - "$times" "$cpu_model" "$best" <<'PY'
import collections, statistics, sys
t = collections.defaultdict(lambda: collections.defaultdict(dict))
rss = {}
for line in open(sys.argv[1]):
    case, rnd, tool, v = line.split()
    if rnd == "rss":
        rss[case] = int(v) / 1024
    else:
        t[case][tool][rnd] = float(v)
cpu, best = sys.argv[2], sys.argv[3]
for case, tools in t.items():
    print("%s (on %s):" % (case, cpu))
    for tool, v in tools.items():
        x = list(v.values())
        print("  %-24s median %8.3f s  min %8.3f s  (%d runs)" % (tool, statistics.median(x), min(x), len(x)))
    ulps = [k for k in tools if k.startswith("ulpprof@")]

    def expand(name):
        # "ulpprof" stands for each level measured, named beside its figure.
        if name in ("ulpprof", "cpu:ulpprof"):
            return [name[:-7] + u for u in ulps]
        return [name]

    def ratio(num, den, goal):
        for n_ in expand(num):
            for d_ in expand(den):
                if n_ not in tools or d_ not in tools:
                    continue
                rounds = [tools[n_][r] / tools[d_][r] for r in tools[n_] if r in tools[d_]]
                med = statistics.median(tools[n_].values()) / statistics.median(tools[d_].values())
                print("  %-40s %6.2f  (per round %.2f-%.2f; medians)  %s" % (
                    "%s / %s" % (n_, d_), med, min(rounds), max(rounds), goal))
    ratio("ulpprof", "cat", "goal <= 3" if case.startswith("many") else "goal <= 1.5")
    ratio("json", "ulpprof", "JSON report / table")
    ratio("cpu:json", "cpu:ulpprof", "CPU time, goal <= 1.5")
    ratio("memread", "cat", "")
    ratio("ulpprof", "memread", "")
    ratio("numpy", "ulpprof", "goal >= 10")
    ratio("torch", "ulpprof", "")
    ratio("h5diff", "ulpprof", "(h5diff answers less: counts only)")
    ratio("cpu:ulpprof", "cpu:cat", "CPU time (ulpprof runs 2 threads, cat 1)")
    ratio("cpu:memread", "cpu:cat", "CPU time")
    ratio("cpu:numpy", "cpu:ulpprof", "CPU time")
    ratio("cpu:torch", "cpu:ulpprof", "CPU time")
    ratio("cpu:h5diff", "cpu:ulpprof", "CPU time")
    if case in rss:
        print("  peak RSS of ulpprof diff (%s): %.1f MiB  (goal <= 32)" % (best, rss[case]))
PY
