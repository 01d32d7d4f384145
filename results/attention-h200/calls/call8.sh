#!/usr/bin/env bash
# Call 8: ping-pong consumers in the wgmma attention prototype; a search of the regular class of
# checkpoint 6 over the wgmma kernels' parameters, and the suite with its dispatch table.
cd "$(dirname "$0")/.."
R=$PWD; T0=$(date +%s)
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
d=$OUT/attention8; mkdir -p $d
for b in .dev/proto-pingpong/pp_*; do echo "== $b"; timeout 60 $b | grep -E "wgmma_simple|RESULT"; done > $d/pingpong.txt 2>&1
grep -E "8192|2048|4096|512 |RESULT|==" $d/pingpong.txt | grep -v "SQ=77\|SQ=100\|SQ=130\|SQ=300\|SQ=64 \|SQ=256 "
ws=$(mktemp -d)/ws; mkdir -p $ws; tar xzf .dev/attn-ws7.tar.gz -C $ws; cd $ws
s=$(date +%s)
timeout $(left 420) $BIN/peak --json tune --classes 6 --full --budget 8,240s --class regular \
  --tune BLOCK_KV=64,128 --tune NUM_STAGES=2,3 --tune CONSUMER_WGS=1,2 \
  > $d/tune-regular.json 2> >(python3 $R/scripts/stamp-lines.py > $d/tune-regular.txt)
echo "tune --classes --class regular exit $? after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
tail -15 $d/tune-regular.txt
s=$(date +%s)
timeout $(left 575) $BIN/peak --json bench 6 --full -o $d/suite-ckpt6.json 2>&1 | \
  python3 $R/scripts/stamp-lines.py > $d/suite-ckpt6.txt
echo "bench 6 exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
tail -8 $d/suite-ckpt6.txt
$BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
tar -czf $d/ws.tar.gz --exclude=./.peak/cache -C $ws .
cp $OUT/nvidia-smi.csv $d/ 2>/dev/null
cd $OUT && tar czf attention8.tar.gz attention8 && rm -rf attention8
