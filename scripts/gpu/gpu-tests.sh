#!/usr/bin/env bash
# GPU-labelled tests and the seeds timed against cuBLAS. Usage: scripts/gpu/gpu-tests.sh [ARGS]
# With ARGS (e.g. --gtest_filter='Corpus/*'), only the CUDA backend's tests run, with ARGS passed
# to them. With `all`, every GPU test binary runs (CUDA, HIP on NVIDIA, the CLI with its sandbox
# and device lock), each with its log and JSON in $OUT; TESTS names the binaries to run instead.
source "$(dirname "$0")/env.sh"
set -o pipefail
if [ "${1:-}" = all ]; then
  status=0
  for t in ${TESTS:-backend_cuda_gpu_tests backend_hip_gpu_tests cli_gpu_tests}; do
    start=$(date +%s)
    "$BIN/$t" --gtest_output=json:"$OUT/$t.json" > "$OUT/$t.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || status=$rc
    echo "$t: rc=$rc in $(( $(date +%s) - start )) s; $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUT/$t.log" | tr '\n' ' ')" | \
      tee -a "$OUT/times.txt"
  done
  exit "$status"
fi
"$BIN/backend_cuda_gpu_tests" "$@" --gtest_output=json:"$OUT/gpu-tests.json" 2>&1 | tee "$OUT/gpu-tests.log" | \
  grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |^\[ (observed|measured) \]|tests? from|Failure|^\s*(expected|got|disposition)" | \
  tail -150
status=${PIPESTATUS[0]}
if [ $# -gt 0 ]; then exit "$status"; fi
for ctx in matmul-cuda-fp32 matmul-cuda-fp16; do
  ws=$(mktemp -d)/$ctx
  "$BIN/peak" -q init "$ROOT/examples/$ctx" "$ws" >/dev/null
  echo "== $ctx: seed validated, tuned and timed against cuBLAS"
  "$BIN/peak" -q -C "$ws" tune --budget 9 2>&1 | tee "$OUT/$ctx-seed.txt"
  "$BIN/peak" -C "$ws" report --format json -o "$OUT/$ctx-seed.json" >/dev/null
done
exit "$status"
