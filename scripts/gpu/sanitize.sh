#!/usr/bin/env bash
# compute-sanitizer (memcheck + racecheck) through `peak tune --sanitize` on the CUDA fp32 seed,
# and through `peak commit --sanitize` on the racy kernel of the integrity corpus.
source "$(dirname "$0")/env.sh"
base=$(mktemp -d)
"$BIN/peak" -q init "$ROOT/examples/matmul-cuda-fp32" "$base/seed" >/dev/null
"$BIN/peak" -q -C "$base/seed" tune --sanitize --budget 2 2>&1 | tee "$OUT/sanitize-seed.txt"
"$BIN/peak" -q init "$ROOT/examples/matmul-cuda-fp32" "$base/race" >/dev/null
cp "$ROOT/tests/integrity/cuda/race_missing_syncthreads.cu" "$base/race/kernel.cu"
"$BIN/peak" -q -C "$base/race" --json commit --sanitize --budget 1 -m "racy tiled kernel" 2>&1 | \
  tee "$OUT/sanitize-race.json" | head -c 1500
