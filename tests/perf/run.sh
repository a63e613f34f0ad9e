#!/bin/bash
# Runs the benchmarks (programs, not tests: their numbers depend on the
# machine, so nothing here passes or fails on timing).
#   tests/perf/run.sh [BUILD_DIR [SIZE_MIB...]]   (default: $ULPPROF_BUILD_DIR, else ./build)
set -euo pipefail
build=${1:-${ULPPROF_BUILD_DIR:-build}}
[ $# -eq 0 ] || shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Host capture API: 128 MiB passes of 512 B, 1, 8 and 64 MiB
# bf16 tensors through ulp_capture_host, a fresh session and two more passes;
# prints the open's cost and the call/memcpy and write/fwrite ratios.
"$build/tests/bench_capture" "$tmp"

# The PyTorch helper against torch.save of the same tensors: a
# random Qwen2's forward passes bare, under ulpprof.torch, with torch.save hooks.
/usr/bin/python3 "$(dirname "$0")/bench_torch.py" "$build" --dir "$tmp"

# Digest capture against the forward: an HF Llama's passes bare, under
# capture(mode="digest") and under capture(mode="data"); the per-round ratios.
/usr/bin/python3 "$(dirname "$0")/bench_digest_torch.py" "$build" --dir "$tmp"
/usr/bin/python3 "$(dirname "$0")/bench_capture_call.py" "$build"

# The element comparison against the share of differing elements (no
# cliff at any density); CPU ns per element pair for bf16 and f32.
"$build/tests/bench_density"

# ulpprof diff beside cat, a plain walk of the files, and numpy: the realistic
# pairs, the easy one, 10,000 captures (tests/perf/bench_diff.sh says how).
ULPPROF_BUILD_DIR=$build bash "$(dirname "$0")/bench_diff.sh" "$@"

# ulpprof diff on files h5py wrote (no capture index) beside their repaired
# copies: 10,000 captures of 32 KiB (tests/perf/bench_foreign.sh says how).
ULPPROF_BUILD_DIR=$build bash "$(dirname "$0")/bench_foreign.sh"

# Grouping 1,000 generations: ulpprof streams against numpy + h5py (time, peak RSS).
/usr/bin/python3 "$(dirname "$0")/bench_streams.py" "$build" --dir "$tmp"

# ladder over 1,000 runs in 80 classes: wall time, peak RSS, RSS per added run.
BENCH_DIR=$tmp/ladder-many bash "$(dirname "$0")/bench_ladder_many.sh" "$build" 1000 80

# ulpprof.ray.diff on a 3-node local Ray cluster against the local diff of
# the same files gathered in one place (the .ci/pyenv interpreter has Ray).
"$(bash "$(dirname "$0")/../../.ci/pyenv")" "$(dirname "$0")/bench_ray.py" "$build"
