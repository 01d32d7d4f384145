#!/usr/bin/env bash
# RMSNorm and LayerNorm: the suite of each campaign's split-row checkpoint (7, the fastest at the
# bench shapes), cuDNN and the copy in the same runner tasks.
cd "$(dirname "$0")/.."
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
for spec in rmsnorm-cuda:rms-ws:230 layernorm-cuda:ln-ws:275; do
  IFS=: read -r seq tarname lim <<<"$spec"
  ws=$(mktemp -d)/ws; d=$OUT/$seq; mkdir -p $ws $d
  tar xzf $R/.dev/$tarname.tar.gz -C $ws; cd $ws
  s=$(date +%s)
  timeout $lim $BIN/peak --json bench 7 --full -o $d/suite-ckpt7.json 2>&1 | python3 $R/scripts/stamp-lines.py > $d/suite-ckpt7.txt
  echo "$seq: bench 7 exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $OUT/times.txt
  $BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
  tar -czf $d/ws.tar.gz --exclude=./.peak/cache -C $ws .
  cd $OUT && tar czf $seq.tar.gz $seq && rm -rf $seq; cd $R
done
ls -la $OUT
