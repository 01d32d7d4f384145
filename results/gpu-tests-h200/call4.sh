#!/usr/bin/env bash
# The CLI's GPU tests and the CUDA backend's with the binaries of this tree (a checkpoint tuned
# or timed is compared with its parent and the seed as they were measured: no untimed ancestor
# is evaluated). Packed by `results/attention-h200/calls/pack.sh cli_gpu_tests peak-export-check
# peak-hostile-runner`, carrying .gl and .dev/gpubin.tar.xz; results/tensor-h200 was moved aside
# for the call (the tree and the binaries are over what a call carries; no test reads it).
cd "$(dirname "$0")/../.."
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$PWD BIN=$PWD/build
export OUT=$OUT/call4
mkdir -p $OUT
TESTS="cli_gpu_tests backend_cuda_gpu_tests" timeout 580 bash scripts/gpu/gpu-tests.sh all
echo "exit $?"
xz -9 $OUT/*.log
cat $OUT/times.txt
