#!/usr/bin/env bash
# Call 10: the bf16 attention seed validated on the hidden shapes and timed at the bench shapes
# beside cuDNN's bf16 fused attention; the CUDA GPU tests.
cd "$(dirname "$0")/.."
R=$PWD; T0=$(date +%s)
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
d=$OUT/attention10; mkdir -p $d
ws=$(mktemp -d)/ws; $BIN/peak init $R/examples/attention-cuda-bf16 $ws > /dev/null; cd $ws
s=$(date +%s)
timeout $(left 200) $BIN/peak validate --full 2>&1 | python3 $R/scripts/stamp-lines.py > $d/validate-bf16.txt
echo "validate bf16 exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
tail -12 $d/validate-bf16.txt
$BIN/peak report --format markdown -o $d/report-bf16.md >/dev/null 2>&1
cd $R
s=$(date +%s)
timeout $(left 560) $BIN/backend_cuda_gpu_tests > $d/backend-cuda-gpu-tests.log 2>&1
echo "backend_cuda_gpu_tests exit $? after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
grep -E "^\[  (PASSED|FAILED) |tests ran" $d/backend-cuda-gpu-tests.log | tail -8
cp $OUT/nvidia-smi.csv $d/ 2>/dev/null
cd $OUT && tar czf attention10.tar.gz attention10 && rm -rf attention10
