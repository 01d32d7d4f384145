#!/usr/bin/env bash
# Call 4: cuDNN's fused attention (the graph with its softmax statistics) checked against float64
# and timed; the final attention checkpoint timed over the suite beside it.
cd "$(dirname "$0")/.."
R=$PWD; T0=$(date +%s)
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
d=$OUT/attention4; mkdir -p $d
timeout 90 $BIN/backend_cuda_gpu_tests --gtest_filter='CudnnGpuTest.*' > $d/cudnn-gpu-tests.log 2>&1
echo "cudnn gpu tests exit $?" | tee -a $d/times.txt
grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |measured|Failure|not available|refuses" $d/cudnn-gpu-tests.log | head -30
ws=$(mktemp -d)/ws; mkdir -p $ws; tar xzf .dev/attn-ws.tar.gz -C $ws; cd $ws
s=$(date +%s)
timeout $(left 400) $BIN/peak --json bench 4 --full -o $d/suite-ckpt4.json 2>&1 | \
  python3 $R/scripts/stamp-lines.py > $d/suite-ckpt4.txt
echo "bench 4 exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
python3 -c "
import json,sys; d=json.load(open('$d/suite-ckpt4.json'))
for r in d['rows']: print(r['name'], round(r['gflops']/1e3,1), 'TFLOP/s', round(r.get('baseline_gflops',0)/1e3,1), 'cudnn', round(100*r.get('ratio',0),1), '%', r.get('message','')[:120])
print('geomean', d.get('geomean'))" 2>&1 | tee -a $d/times.txt
$BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
tar -czf $d/ws.tar.gz --exclude=./.peak/cache -C $ws .
cp $OUT/nvidia-smi.csv $d/
cd $OUT && tar czf attention4.tar.gz attention4 && rm -rf attention4
