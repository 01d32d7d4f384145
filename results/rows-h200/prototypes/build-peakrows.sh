#!/usr/bin/env bash
# Builds peakrows.cu for a checkpoint's kernel.cu (softmax) at several configurations into DIR.
# Usage: build-peakrows.sh KERNEL.cu DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); k=$1; out=$2; mkdir -p "$out"
awk '/peak:begin macros/{f=1;next}/peak:end macros/{f=0}f' "$k" > "$out/region.inc"
awk '/peak:begin device/{f=1;next}/peak:end device/{f=0}f' "$k" \
  | grep -v '^#include <cooperative_groups.h>' >> "$out/region.inc"  # rows.cu has it
for c in "256 4 128 1" "256 8 128 8" "128 8 128 2" "512 4 256 4"; do set -- $c
  /usr/local/cuda/bin/nvcc -O3 -std=c++20 -gencode arch=compute_90a,code=sm_90a -I"$here" \
    -DPEAK_REGION="\"$out/region.inc\"" -DP_BLOCK=$1 -DP_ITEMS=$2 -DP_SHORT_THREADS=$3 \
    -DP_SHORT_VECS=$4 \
    -o "$out/peakrows_$1_$2_$3_$4" "$here/peakrows.cu"
done
