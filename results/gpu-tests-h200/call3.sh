#!/usr/bin/env bash
# The CLI's GPU tests and the CUDA backend's, with the binaries of this tree (the tuner's hold
# from a missed deadline to the verdict, abandoned runners counted apart, the queued count, the
# stores read from their archives), the whole working tree carried (results/ included).
cd "$(dirname "$0")/../.."
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$PWD BIN=$PWD/build
ls -la results/h100/cuda-fp32-small-m-loads/suite/ | grep store
TESTS="cli_gpu_tests backend_cuda_gpu_tests" timeout 560 bash scripts/gpu/gpu-tests.sh all
echo "exit $?"
cat $OUT/times.txt
