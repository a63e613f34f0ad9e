#!/bin/bash
# Checks that gcc vectorizes the per-dtype comparison kernels of
# analyzer/diff_metrics.c, and the logits row loops of analyzer/logits_row.c,
# at the flags the build uses for those files (-O2 -g plus the per-file -O3),
# in each instruction-set level (analyzer/isa.h).  Prints one line per
# kernel; exits 1 if one is not vectorized.  Usage: check_vec_diff.sh [CC]
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
CC=${1:-gcc}
out=$("$CC" -std=gnu11 -O2 -g -O3 -I"$SRC" -I"$SRC/include" -I"$SRC/analyzer" \
    -c "$SRC/analyzer/diff_metrics.c" -o /dev/null -fopt-info-vec-optimized 2>&1)
rc=0
for k in bf16 f16 f32 e4m3 e5m2; do
    line=$(grep -n "^DEFINE_FORMAT($k," "$SRC/analyzer/diff_metrics.c" | cut -d: -f1)
    widths=$(echo "$out" | grep "diff_metrics.c:$line:.*loop vectorized using" |
        sed 's/.*using \([0-9]*\) byte vectors/\1/' | sort -un | tr '\n' ' ')
    if [ -z "$widths" ]; then
        echo "NOT vectorized: $k kernels (line $line)"
        rc=1
    else
        echo "vectorized: $k kernels, vector bytes: $widths"
    fi
done
# The logits row loop that reads every element (analyzer/logits_row.c; below_top
# runs on the few blocks that reach a row's top and may stay scalar).
out=$("$CC" -std=gnu11 -O2 -g -O3 -I"$SRC" -I"$SRC/include" -I"$SRC/analyzer" \
    -c "$SRC/analyzer/logits_row.c" -o /dev/null -fopt-info-vec-optimized 2>&1)
for f in block_tops; do
    line=$(grep -n "^ULP__ISA_EACH(DEFINE_BLOCK_TOPS, $f)" "$SRC/analyzer/logits_row.c" | cut -d: -f1)
    end=$line
    if echo "$out" | awk -F: -v lo="$line" -v hi="$end" '$2 >= lo && $2 <= hi && /loop vectorized/' | grep -q .; then
        echo "vectorized: logits $f"
    else
        echo "NOT vectorized: logits $f (line $line)"
        rc=1
    fi
done
exit $rc
