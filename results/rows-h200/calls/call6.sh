#!/usr/bin/env bash
# RMSNorm: the suite of the replayed campaign's newest checkpoint; LayerNorm: the rest of its
# campaign (resumed), then its suite. cuDNN and the copy in the same runner tasks.
cd "$(dirname "$0")/.."
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
for spec in rmsnorm-cuda:rms-ws layernorm-cuda:ln-ws; do
  IFS=: read -r seq tarname <<<"$spec"
  ws=$(mktemp -d)/ws; d=$OUT/$seq; mkdir -p $ws $d
  tar xzf $R/.dev/$tarname.tar.gz -C $ws; cd $ws
  if [ $seq = layernorm-cuda ]; then
    s=$(date +%s)
    timeout 120 $BIN/peak run $seq --resume --llm replay:$R/recordings/$seq --full --strategy-budget 4 2>&1 | python3 $R/scripts/stamp-lines.py > $d/run-resume.log
    echo "$seq: resumed replay exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $OUT/times.txt
  fi
  s=$(date +%s)
  timeout 175 $BIN/peak --json bench --full -o $d/suite.json 2>&1 | python3 $R/scripts/stamp-lines.py > $d/suite.txt
  echo "$seq: bench exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $OUT/times.txt
  $BIN/peak log > $d/log.txt 2>&1
  $BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
  tar -czf $d/ws.tar.gz --exclude=./.peak/cache -C $ws .
  cd $OUT && tar czf $seq.tar.gz $seq && rm -rf $seq; cd $R
done
ls -la $OUT
