#!/usr/bin/env bash
# Runs the device region of a row-campaign kernel (kernel.cu of a softmax-cuda-fp32,
# rmsnorm-cuda-bf16 or layernorm-cuda-fp32 workspace) in the CPU emulation of README.md, for
# four configurations. Usage: scripts/row-emulation/run.sh softmax|rmsnorm|layernorm KERNEL.cu
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
family=${1:?usage: run.sh softmax|rmsnorm|layernorm KERNEL.cu}
kernel=${2:?kernel.cu}
case $family in softmax) f=1 ;; rmsnorm) f=2 ;; layernorm) f=3 ;; *) echo "unknown family $family" >&2; exit 2 ;; esac
dir=$(mktemp -d)
awk '/peak:begin macros/{f=1;next}/peak:end macros/{f=0}f' "$kernel" > "$dir/macros.h"
awk '/peak:begin device/{f=1;next}/peak:end device/{f=0}f' "$kernel" > "$dir/device.inc"
status=0
# BLOCK ITEMS SHORT_THREADS SHORT_VECS SPLITS SPLIT_MIN_N BLOCKS_PER_CU
for cfg in "256 1 64 1 8 1024 4" "128 4 128 4 32 4096 1" "64 8 256 2 128 1024 2" "32 2 32 8 16 1024 8"; do
  set -- $cfg
  g++ -std=c++20 -O1 -w -DFAMILY=$f -DBLOCK=$1 -DITEMS=$2 -DSHORT_THREADS=$3 -DSHORT_VECS=$4 \
    -DSPLITS=$5 -DSPLIT_MIN_N=$6 -DBLOCKS_PER_CU=$7 -I"$here" -I"$dir" "$here/harness.cpp" \
    -o "$dir/h" -lpthread
  rc=0
  out=$("$dir/h") || rc=$?
  [ $rc -eq 0 ] || status=1
  echo "BLOCK=$1 ITEMS=$2 SHORT_THREADS=$3 SHORT_VECS=$4 SPLITS=$5 SPLIT_MIN_N=$6 BLOCKS_PER_CU=$7:"
  echo "$out" | sed 's/^/  /' 
done
rm -rf "$dir"
exit $status
