#!/usr/bin/env bash
# Call 1: cuDNN's fused attention checked against float64 and timed; the attention campaign
# replayed with validation and its checkpoints timed over the suite beside cuDNN.
cd "$(dirname "$0")/.."
R=$PWD; T0=$(date +%s)
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
d=$OUT/attention; mkdir -p $d
s=$(date +%s)
timeout 120 $BIN/backend_cuda_gpu_tests --gtest_filter='CudnnGpuTest.*' > $d/cudnn-gpu-tests.log 2>&1
echo "cudnn gpu tests exit $? after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |measured|Failure|expected" $d/cudnn-gpu-tests.log | head -40
if [ -x .dev/tc-attn/run.sh ]; then
  s=$(date +%s)
  (cd .dev/tc-attn && timeout 90 bash run.sh) > $d/tc-attn.log 2>&1
  echo "tc-attn harness exit $? after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
  tail -20 $d/tc-attn.log
fi
# cluster-rows at its current version (the row counters cleared only where a persistent kernel
# runs), replayed from its parent checkpoint in each CUDA row context and validated.
for c in softmax:10:9 rmsnorm:9:8 layernorm:9:8; do
  IFS=: read name parent from <<< "$c"
  rw=$(mktemp -d)/ws; mkdir -p $rw
  tar xzf .dev/rows/$name-ws.tar.gz -C $rw
  s=$(date +%s)
  (cd $rw && $BIN/peak -q branch cluster-v3 $parent && timeout 90 $BIN/peak run $name-cuda \
    --llm replay:$R/recordings/$name-cuda --full --from $from --strategy-budget 4 2>&1 | \
    python3 $R/scripts/stamp-lines.py > $d/$name-cluster-v3.log; \
    $BIN/peak log > $d/$name-cluster-v3-log.txt 2>&1)
  echo "$name cluster-rows v3 exit $? after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
  tail -5 $d/$name-cluster-v3.log
done
ws=$(mktemp -d)/ws
$BIN/peak -q init examples/attention-cuda-fp16 $ws >/dev/null; cd $ws
s=$(date +%s)
timeout $(left 330) $BIN/peak run attention-cuda --llm replay:$R/recordings/attention-cuda --full \
  2>&1 | python3 $R/scripts/stamp-lines.py > $d/replay.log
echo "replay exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
$BIN/peak log > $d/log.txt 2>&1; cat $d/log.txt
for ck in $($BIN/peak log 2>/dev/null | awk '{print $1}' | sort -n | tail -n +2 | sort -rn); do
  [ $(left 540) -gt 40 ] || break
  s=$(date +%s)
  timeout $(left 550) $BIN/peak --json bench $ck --full -o $d/suite-ckpt$ck.json 2>&1 | \
    python3 $R/scripts/stamp-lines.py > $d/suite-ckpt$ck.txt
  echo "bench $ck exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
done
$BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
tar -czf $d/ws.tar.gz --exclude=./.peak/cache -C $ws .
cp $OUT/nvidia-smi.csv $d/
cd $OUT && tar czf attention.tar.gz attention && rm -rf attention
ls -la $OUT
