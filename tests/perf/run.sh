#!/bin/bash
# Runs the benchmarks (programs, not tests: their numbers depend on the
# machine, so nothing here passes or fails on timing).
#   tests/perf/run.sh [BUILD_DIR]     (default: $ULPPROF_BUILD_DIR, else ./build)
set -euo pipefail
build=${1:-${ULPPROF_BUILD_DIR:-build}}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Host capture API (issue #2): 32 captures of 4 Mi bf16 through ulp_capture_host;
# prints the call/memcpy and write/fwrite ratios.
"$build/tests/bench_capture" "$tmp"
