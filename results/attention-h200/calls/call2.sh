#!/usr/bin/env bash
# Why cuDNN's heuristics propose no engine for the attention graph: cuDNN's own log, the NVRTC
# its runtime-fusion engines load, the libraries present.
cd "$(dirname "$0")/.."
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
d=$OUT/diag; mkdir -p $d
{ ls -la /usr/lib/x86_64-linux-gnu/libcudnn* ; ldconfig -p | grep -E "nvrtc|cudnn|cublas"; ls /usr/local/cuda*/lib64/ 2>/dev/null | grep -E "nvrtc|cudnn" ; ls -d /usr/local/cuda*; nvidia-smi; } > $d/libs.txt 2>&1
CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG=$d/cudnn-log.txt timeout 60 $BIN/backend_cuda_gpu_tests \
  --gtest_filter='CudnnGpuTest.AttentionMatchesTheCpuAndIsTimed' > $d/test.log 2>&1
echo "exit $?" >> $d/test.log
ls -la $d; xz -9 $d/cudnn-log.txt
grep -iE "nvrtc|not supported|unsupported|fail|error" $d/cudnn-log.txt* 2>/dev/null | head -5
cat $d/libs.txt | head -40
