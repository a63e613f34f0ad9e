#!/usr/bin/env bash
# Runs samples/pytorch/tp_sample.py on torch.distributed (gloo, this CPU
# machine) with 1, 2 and 4 ranks, one snapshot per rank, then the ladder:
#   bash samples/pytorch/tp_ladder.sh [OUTDIR] [BUILD_DIR]
# torchrun's --redirects 1 --tee 1: see tp_sample.py (Debian torch 1.13 on
# Python 3.11).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-tp-ladder}"
build="${2:-$here/../../build}"
export ULPPROF_CAPTURE_LIBRARY="${ULPPROF_CAPTURE_LIBRARY:-$build/capture/libulpprof_capture.so}"
launcher=(torchrun)
command -v torchrun >/dev/null || launcher=(python3 -m torch.distributed.run)
mkdir -p "$out/logs"
for n in 1 2 4; do
  rm -rf "$out/runs/tp$n"
  "${launcher[@]}" --redirects 1 --tee 1 --log_dir "$out/logs" --nproc_per_node "$n" \
    "$here/tp_sample.py" --out "$out/runs/tp$n" > "$out/logs/tp$n.txt" 2>&1 ||
    { cat "$out/logs/tp$n.txt" >&2; exit 2; }
done
"$build/programs/ulpprof" ladder --plot "$out/plots" "$out/runs" || [ $? -eq 1 ]
