#!/usr/bin/env bash
# Call 13: the CLI's GPU tests and HIP's on NVIDIA, with the binaries of this tree.
cd "$(dirname "$0")/.."
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$PWD BIN=$PWD/build
TESTS="cli_gpu_tests backend_hip_gpu_tests" timeout 330 bash scripts/gpu/gpu-tests.sh all
echo "exit $?"
cat $OUT/times.txt
