#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz for a bounded time, one after the
# other, on a scratch copy of its seed corpus (corpus/<target>/, not changed).
#
#   tests/fuzz/run.sh [BUILD_DIR] [SECONDS_PER_TARGET]
#       BUILD_DIR  a build configured with CC=clang -DULPPROF_FUZZ=ON
#                  (default build-fuzz, configured if missing); the targets
#                  are (re)built first
#       SECONDS    default $FUZZ_SECONDS or 20 (CI); 300 for the long run
#   FUZZ_OUT=dir   keep the grown corpora, logs and artifacts there
#                  (default: a temporary directory, removed when clean)
#
# Prints one line per target: executions, coverage (libFuzzer's cov: edges
# and ft: features), corpus size, and what it found.  Exit 1 when a target
# found a crash, a sanitizer report or a broken check (artifacts are kept).
#
# fuzz_snapshot runs in fork mode, going on after timeouts, out-of-memory and
# crashes: HDF5 1.10.8 itself loops forever or dies with SIGSEGV on some
# damaged files (in its global heap code, reading a variable-length string:
# tests/fuzz/known/).  Each crash found is run again and classified: one whose
# first frame outside the sanitizer runtime is in libhdf5 is counted as
# hdf5_crashes (reported, not a failure of this script); any other fails it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build-fuzz}
secs=${2:-${FUZZ_SECONDS:-20}}
# FUZZ_TARGETS="fuzz_snapshot ..." runs only those.
read -r -a targets <<<"${FUZZ_TARGETS:-fuzz_mark fuzz_attr fuzz_output fuzz_index fuzz_hdr fuzz_snapshot}"

if [ ! -f "$build/CMakeCache.txt" ]; then
    CC=${CC:-clang} cmake -S "$src" -B "$build" -DULPPROF_FUZZ=ON -DULPPROF_WITH_CUDA=OFF \
        >/dev/null || exit 2
fi
# Always: the targets compile the sources under test themselves.
cmake --build "$build" -j "${JOBS:-2}" --target fuzz >/dev/null || exit 2

keep=${FUZZ_OUT:-}
out=${FUZZ_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/ulpfuzz.XXXXXX")}
mkdir -p "$out"
export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# As in a real run, a huge allocation HDF5 asks for fails (NULL) instead of
# stopping the fuzzer: HDF5 then reports an error.  Added to the caller's
# options (.ci/sanitize exports its own), not only used when there are none.
asan_opts="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1"
# fuzz_snapshot writes each input to a file there (one per process).
fuzzdir=$(mktemp -d /dev/shm/ulpfuzz.XXXXXX 2>/dev/null || mktemp -d "$out/files.XXXXXX")
trap 'rm -rf "$fuzzdir"' EXIT
export ULP_FUZZ_DIR=$fuzzdir
status=0
printf '%-14s %10s %7s %7s %8s  %s\n' target execs cov ft corpus found
for t in "${targets[@]}"; do
    name=${t#fuzz_}
    work=$out/$t
    rm -rf "$work"
    mkdir -p "$work/corpus" "$work/artifacts"
    cp "$here/corpus/$name/"* "$work/corpus/" 2>/dev/null
    args=(-max_total_time="$secs" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1
          -artifact_prefix="$work/artifacts/" -max_len=65536)
    [ -f "$here/$name.dict" ] && args+=(-dict="$here/$name.dict")
    if [ "$t" = fuzz_snapshot ]; then
        args+=(-fork=1 -ignore_timeouts=1 -ignore_ooms=1 -ignore_crashes=1)
    fi
    ASAN_OPTIONS=$asan_opts "$build/tests/fuzz/$t" "${args[@]}" "$work/corpus" >"$work/log" 2>&1
    rc=$?
    # The last status line: "#<execs> ... cov: <n> ft: <n> corp: <n>/..." (fork
    # mode: "#<execs>: cov: ...").
    last=$(grep -E '^#[0-9]+:?[[:space:]]' "$work/log" | grep 'cov:' | tail -1)
    execs=$(sed -E 's/^#([0-9]+).*/\1/' <<<"$last")
    cov=$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"$last")
    ft=$(sed -nE 's/.*ft: ([0-9]+).*/\1/p' <<<"$last")
    corp=$(ls "$work/corpus" | wc -l)
    crashes=0
    hdf5=0
    unrepro=0
    for a in "$work/artifacts"/crash-* "$work/artifacts"/leak-*; do
        [ -e "$a" ] || continue
        # Run it again alone.  A rerun that hangs is HDF5 looping on a damaged
        # file (tests/fuzz/known/); one that does not fail at all depended on
        # the state an earlier input left in the fork job's HDF5 (a heap it
        # had corrupted): neither is a reproducible fault of ours, so both are
        # reported and kept, not failed on.
        rerun=$(ASAN_OPTIONS=$asan_opts timeout 20 "$build/tests/fuzz/$t" "$a" 2>&1)
        rrc=$?
        # The first stack frame that is not the sanitizer's own (nor a libc
        # function it intercepts, which it reports inside our binary).
        frame=$(grep -E '^ +#[0-9]+ ' <<<"$rerun" |
                grep -vE 'libasan|libubsan|compiler-rt|sanitizer_common|__interceptor_|__asan_|__(asan|lsan|ubsan|sanitizer)::| in (malloc|calloc|realloc|free|strdup|strndup|strlen|strnlen|strcpy|strncpy|strcmp|strncmp|memcpy|memmove|memset|memcmp) |string/\.\./sysdeps|libc\.so' |
                head -1)
        if [ "$rrc" -eq 124 ] || { [ -z "$frame" ] && [ "$rrc" -eq 0 ]; }; then
            unrepro=$((unrepro + 1))
            echo "$t: $a: not reproduced alone (rerun exit $rrc)" >>"$out/unreproduced.txt"
        elif [[ "$frame" == *libhdf5* ]]; then
            hdf5=$((hdf5 + 1))
        else
            crashes=$((crashes + 1))
            echo "$t: $a: ${frame:-(rerun exit $rrc, no stack)}" >>"$out/crashes.txt"
        fi
    done
    timeouts=$(ls "$work/artifacts" | grep -cE '^(timeout|slow-unit)-')
    ooms=$(ls "$work/artifacts" | grep -cE '^oom-')
    found="crashes=$crashes timeouts=$timeouts ooms=$ooms"
    [ "$t" = fuzz_snapshot ] && found="$found hdf5_crashes=$hdf5 unreproduced=$unrepro"
    # In fork mode libFuzzer exits 70 (timeout) or 71 (oom) when the last job
    # met one, even when told to ignore them, and 1 when it met a crash: that
    # one is ours only if a crash artifact was classified as ours above.
    [ "$t" = fuzz_snapshot ] && { [ "$rc" -eq 70 ] || [ "$rc" -eq 71 ]; } && rc=0
    [ "$t" = fuzz_snapshot ] && [ "$rc" -eq 1 ] && [ "$crashes" -eq 0 ] &&
        [ $((hdf5 + unrepro)) -gt 0 ] && rc=0
    if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ] ||
       { [ "$t" != fuzz_snapshot ] && [ $((timeouts + ooms)) -ne 0 ]; }; then
        found="$found FAILED (exit $rc; see $work/log)"
        status=1
    fi
    printf '%-14s %10s %7s %7s %8s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$corp" "$found"
done
if [ "$status" -eq 0 ] && [ -z "$keep" ]; then
    rm -rf "$out"
else
    echo "fuzz: logs, corpora and artifacts in $out"
fi
exit "$status"
