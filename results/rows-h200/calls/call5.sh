#!/usr/bin/env bash
# RMSNorm bf16 and LayerNorm fp32: each recorded campaign replayed (4 configurations a step),
# then its newest checkpoint over the suite with the copy and cuDNN in the same runner tasks.
cd "$(dirname "$0")/.."
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
T0=$(date +%s)
for spec in rmsnorm-cuda-bf16:rmsnorm-cuda layernorm-cuda-fp32:layernorm-cuda; do
  IFS=: read -r ctx seq <<<"$spec"
  ws=$(mktemp -d)/ws; d=$OUT/$seq; mkdir -p $d
  $BIN/peak init $R/examples/$ctx $ws >/dev/null; cd $ws
  $BIN/peak doctor > $d/run.log 2>&1
  s=$(date +%s)
  timeout ${LIMIT:-170} $BIN/peak run $seq --llm replay:$R/recordings/$seq --full --strategy-budget 4 2>&1 | python3 $R/scripts/stamp-lines.py >> $d/run.log
  echo "$seq: replay exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s (at $(( $(date +%s) - T0 )) s)" | tee -a $OUT/times.txt
  s=$(date +%s)
  timeout 110 $BIN/peak --json bench --full -o $d/suite.json > $d/suite.txt 2>&1
  echo "$seq: bench exit $? after $(( $(date +%s) - s )) s" | tee -a $OUT/times.txt
  $BIN/peak log > $d/log.txt 2>&1
  $BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
  tar -czf $d/ws.tar.gz --exclude=./.peak/cache -C $ws .
  cd $OUT && tar czf $seq.tar.gz $seq && rm -rf $seq; cd $R
done
ls -la $OUT
