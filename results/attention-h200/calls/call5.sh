#!/usr/bin/env bash
# Call 5: the cp.async-pipelined tensor-core attention prototype against the kernel of
# checkpoint 4 (prototypes/pipelined); the cuDNN GPU tests with the fixed variant pack.
cd "$(dirname "$0")/.."
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee $OUT/smi.txt
for b in .dev/proto-pipelined/attn_*; do echo "== $b"; timeout 60 $b; echo "rc=$?"; done 2>&1 | tee $OUT/pipe.txt
timeout 120 $BIN/backend_cuda_gpu_tests --gtest_filter='CudnnGpuTest.*' > $OUT/cudnn-gpu-tests.log 2>&1
echo "cudnn gpu tests exit $?"
grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |measured|Failure|not available|refuses" $OUT/cudnn-gpu-tests.log | head -30
