#!/usr/bin/env bash
# Call 7: the attention campaign's pipelined-kv and wgmma-attention steps replayed on the GPU
# workspace of checkpoint 4 (every configuration validated and timed), then the final
# checkpoint's suite beside cuDNN's fused attention.
cd "$(dirname "$0")/.."
R=$PWD; T0=$(date +%s)
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
d=$OUT/attention7; mkdir -p $d
ws=$(mktemp -d)/ws; mkdir -p $ws; tar xzf .dev/attn-ws.tar.gz -C $ws; cd $ws
s=$(date +%s)
timeout $(left 300) $BIN/peak run attention-cuda --llm replay:$R/recordings/attention-cuda --full \
  --from 3 2>&1 | python3 $R/scripts/stamp-lines.py > $d/replay.log
echo "replay exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
$BIN/peak log > $d/log.txt 2>&1; cat $d/log.txt
tail -30 $d/replay.log
ck=$($BIN/peak log 2>/dev/null | head -1 | awk '{print $1}')
s=$(date +%s)
timeout $(left 570) $BIN/peak --json bench $ck --full -o $d/suite-ckpt$ck.json 2>&1 | \
  python3 $R/scripts/stamp-lines.py > $d/suite-ckpt$ck.txt
echo "bench $ck exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
cat $d/suite-ckpt$ck.txt
$BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
tar -czf $d/ws.tar.gz --exclude=./.peak/cache -C $ws .
cp $OUT/nvidia-smi.csv $d/ 2>/dev/null
cd $OUT && tar czf attention7.tar.gz attention7 && rm -rf attention7
ls -la $OUT
