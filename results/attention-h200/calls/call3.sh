#!/usr/bin/env bash
# Call 3: which attention graph cuDNN's heuristics take (diagnostic); the attention campaign's
# split-kv and tensor-core steps replayed with validation on call 1's workspace (checkpoints 1-2),
# and the final checkpoint timed over the suite.
cd "$(dirname "$0")/.."
R=$PWD; T0=$(date +%s)
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
d=$OUT/attention3; mkdir -p $d
timeout 60 .dev/diag/diag > $d/cudnn-diag.txt 2>&1; echo "diag exit $?" >> $d/cudnn-diag.txt
cat $d/cudnn-diag.txt
ws=$(mktemp -d)/ws; mkdir -p $ws; tar xzf .dev/attn-ws.tar.gz -C $ws; cd $ws
s=$(date +%s)
timeout $(left 300) $BIN/peak run attention-cuda --llm replay:$R/recordings/attention-cuda --full \
  --from 1 2>&1 | python3 $R/scripts/stamp-lines.py > $d/replay.log
echo "replay exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
$BIN/peak log > $d/log.txt 2>&1; cat $d/log.txt
tail -40 $d/replay.log
ck=$($BIN/peak log 2>/dev/null | head -1 | awk '{print $1}')
for c in $ck $((ck - 1)); do
  [ $(left 540) -gt 40 ] || break
  s=$(date +%s)
  timeout $(left 550) $BIN/peak --json bench $c --full -o $d/suite-ckpt$c.json 2>&1 | \
    python3 $R/scripts/stamp-lines.py > $d/suite-ckpt$c.txt
  echo "bench $c exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
done
$BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
tar -czf $d/ws.tar.gz --exclude=./.peak/cache -C $ws .
cp $OUT/nvidia-smi.csv $d/
cd $OUT && tar czf attention3.tar.gz attention3 && rm -rf attention3
ls -la $OUT
