#!/usr/bin/env bash
# Call 9: a search of the decode class of checkpoint 6 over the split-kv kernels' chunk and
# block size (call 8's workspace, its regular class searched), and the suite with the table.
cd "$(dirname "$0")/.."
R=$PWD; T0=$(date +%s)
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
d=$OUT/attention9; mkdir -p $d
ws=$(mktemp -d)/ws; mkdir -p $ws; tar xzf .dev/attn-ws8.tar.gz -C $ws; cd $ws
s=$(date +%s)
timeout $(left 440) $BIN/peak --json tune --classes 6 --full --budget 5,330s --class decode \
  --tune KV_CHUNK=128,256,512 --tune KV_THREADS=128,256 \
  > $d/tune-decode.json 2> >(python3 $R/scripts/stamp-lines.py > $d/tune-decode.txt)
echo "tune --classes --class decode exit $? after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
tail -12 $d/tune-decode.txt
s=$(date +%s)
timeout $(left 585) $BIN/peak --json bench 6 --full -o $d/suite-ckpt6.json 2>&1 | \
  python3 $R/scripts/stamp-lines.py > $d/suite-ckpt6.txt
echo "bench 6 exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
tail -8 $d/suite-ckpt6.txt
$BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
tar -czf $d/ws.tar.gz --exclude=./.peak/cache -C $ws .
cp $OUT/nvidia-smi.csv $d/ 2>/dev/null
cd $OUT && tar czf attention9.tar.gz attention9 && rm -rf attention9
