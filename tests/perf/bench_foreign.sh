#!/bin/bash
# Benchmark of `ulpprof diff` on files ulpprof did not write: a pair of
# N captures (default 10,000) of bf16[16384] written by h5py
# (make_h5py_many.py: no capture index, no journal, no open map), the
# same pair after `ulpprof repair` (which adds the index and the open map),
# and the same pair rewritten by `h5repack` (HDF5's own tool), when it is
# installed.
# Interleaved rounds of cat A B > /dev/null and ulpprof diff A B on each
# pair; reported: medians, the ratios to cat (goal <= 3), user+sys CPU of
# each tool (from /usr/bin/time), peak RSS of ulpprof diff (goal <= 32 MiB),
# and the CPU model.  Checks the diff's exit code and that every pair gives
# the same JSON rows.  Nothing passes or fails on timing.
#
# BENCH_TOKENS=T (e.g. 32) writes captures shaped [T, 16384 / T] that carry
# `positions`, as an engine's or a user's captures do (make_h5py_many.py).
#
#   tests/perf/bench_foreign.sh [N]   (ULPPROF_BUILD_DIR, ULP_PYTHON, BENCH_ROUNDS,
#                                      BENCH_DIR as bench_diff.sh; BENCH_TOKENS)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${ULPPROF_BUILD_DIR:-$src/build}
ulpprof=$build/programs/ulpprof
py=${ULP_PYTHON:-/usr/bin/python3}
rounds=${BENCH_ROUNDS:-5}
n=${1:-10000}
tokens=${BENCH_TOKENS:-0}
[ -x "$ulpprof" ] || { echo "bench_foreign: $ulpprof is missing (build first)" >&2; exit 2; }
dir=${BENCH_DIR:-}
if [ -z "$dir" ]; then
    dir=$(mktemp -d "${TMPDIR:-/tmp}/ulpforeign.XXXXXX")
    trap 'rm -rf "$dir"' EXIT
fi
mkdir -p "$dir/h5py" "$dir/repaired"
[ -s "$dir/h5py/b.h5" ] || "$py" "$src/tests/perf/make_h5py_many.py" "$dir/h5py" "$n" 16384 100 10 "$tokens"
for x in a b; do
    [ -s "$dir/repaired/$x.h5" ] || "$ulpprof" repair "$dir/h5py/$x.h5" "$dir/repaired/$x.h5" >/dev/null
done
# The same files rewritten by HDF5's own h5repack (another writer's layout:
# its own object headers and heaps, no index), where h5repack is installed.
pairs=(h5py repaired)
if command -v h5repack >/dev/null; then
    mkdir -p "$dir/h5repack"
    for x in a b; do
        [ -s "$dir/h5repack/$x.h5" ] || h5repack "$dir/h5py/$x.h5" "$dir/h5repack/$x.h5"
    done
    pairs+=(h5repack)
fi
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs || true)
times=$dir/times.txt
: >"$times"
# timed PAIR TOOL WANT CMD...: wall, user+sys and peak RSS of one run.
timed() {
    local pair=$1 tool=$2 want=$3 rc=0
    shift 3
    /usr/bin/time -f "%e %U %S %M" -o "$dir/t.txt" "$@" >/dev/null 2>"$dir/err.txt" || rc=$?
    [ "$rc" = "$want" ] || { echo "bench_foreign: $pair $tool exited $rc: $(head -c 300 "$dir/err.txt")" >&2; exit 1; }
    echo "$pair $tool $(tail -1 "$dir/t.txt")" >>"$times"
}
sync
for p in "${pairs[@]}"; do cat "$dir/$p/a.h5" "$dir/$p/b.h5" >/dev/null; done
for ((r = 0; r < rounds; r++)); do
    for p in "${pairs[@]}"; do
        timed $p cat 0 cat "$dir/$p/a.h5" "$dir/$p/b.h5"
        timed $p ulpprof 1 "$ulpprof" diff "$dir/$p/a.h5" "$dir/$p/b.h5"
    done
done
"$ulpprof" diff -f json -o "$dir/h5py.json" "$dir/h5py/a.h5" "$dir/h5py/b.h5" || [ $? = 1 ]
"$ulpprof" diff -f json -o "$dir/rep.json" "$dir/repaired/a.h5" "$dir/repaired/b.h5" || [ $? = 1 ]
jsons=("$dir/h5py.json" "$dir/rep.json")
if [ -d "$dir/h5repack" ]; then
    "$ulpprof" diff -f json -o "$dir/repack.json" "$dir/h5repack/a.h5" "$dir/h5repack/b.h5" || [ $? = 1 ]
    jsons+=("$dir/repack.json")
fi
"$py" - "$times" "$cpu_model" "$n" "$(uptime)" "$tokens" "${jsons[@]}" <<'PY'
import json, statistics, sys
t = {}
for line in open(sys.argv[1]):
    pair, tool, wall, user, sys_, rss = line.split()
    t.setdefault((pair, tool), []).append((float(wall), float(user) + float(sys_), int(rss) / 1024))
rows = [json.load(open(p))["rows"] for p in sys.argv[6:]]
assert all(r == rows[0] for r in rows), "the h5py pair and its rewritten copies give different rows"
tok = int(sys.argv[5])
shape = "[%d, %d] with positions" % (tok, 16384 // tok) if tok else "[16384]"
print("bench_foreign: %s captures of bf16%s, on %s (%s)" % (sys.argv[3], shape, sys.argv[2],
                                                           sys.argv[4].strip()))
for pair in ("h5py", "repaired", "h5repack"):
    if (pair, "cat") not in t:
        continue
    cat, ulp = t[(pair, "cat")], t[(pair, "ulpprof")]
    med = lambda v, k: statistics.median(x[k] for x in v)
    # /usr/bin/time gives 10 ms steps: a pair that small is timed at that floor.
    per = [max(u[0], 0.01) / max(c[0], 0.01) for u, c in zip(ulp, cat)]
    print("  %-9s cat %.3f s  ulpprof diff %.3f s  ulpprof / cat %.2f (per round %.2f-%.2f; "
          "goal <= 3)  CPU %.3f s vs cat %.3f s  peak RSS %.1f MiB (goal <= 32)" % (
              pair, med(cat, 0), med(ulp, 0), max(med(ulp, 0), 0.01) / max(med(cat, 0), 0.01),
              min(per), max(per),
              med(ulp, 1), med(cat, 1), max(x[2] for x in ulp)))
print("check: all %d pairs give the same %d rows" % (len(rows), len(rows[0])))
PY
