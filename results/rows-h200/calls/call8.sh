#!/usr/bin/env bash
# softmax-cuda: aligned-rows (step 10) timed, one search per shape class of checkpoint 10, then
# its suite with the dispatch table; cuDNN and the copy in the same runner tasks.
cd "$(dirname "$0")/.."
R=$PWD; T0=$(date +%s)
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
d=$OUT/softmax; mkdir -p $d; ws=$(mktemp -d)/ws; mkdir -p $ws
tar xzf .dev/softmax-ws.tar.gz -C $ws; cd $ws
s=$(date +%s)
timeout 150 $BIN/peak run softmax-cuda --llm replay:$R/recordings/softmax-cuda --full --from 8 \
  --strategy-budget 4 2>&1 | python3 $R/scripts/stamp-lines.py > $d/aligned-run.log
echo "aligned-rows run exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
$BIN/peak log > $d/log-after-run.txt 2>&1
declare -A TS
TS[regular]="BLOCK=256,512,1024 ITEMS=2,4,8 BLOCKS_PER_CU=8 SHORT_THREADS=128 SHORT_VECS=8 SPLITS=16 SPLIT_MIN_N=16384"
TS[long-rows]="BLOCK=512,1024 ITEMS=2,8 BLOCKS_PER_CU=8 SHORT_THREADS=128 SHORT_VECS=8 SPLITS=16,32,64 SPLIT_MIN_N=1024"
TS[short-rows]="BLOCK=256 ITEMS=1 BLOCKS_PER_CU=8 SHORT_THREADS=64,128,256 SHORT_VECS=1,2,8 SPLITS=16 SPLIT_MIN_N=16384"
TS[decode]="BLOCK=256,1024 ITEMS=4 BLOCKS_PER_CU=8 SHORT_THREADS=128 SHORT_VECS=8 SPLITS=8,16,32,64,128 SPLIT_MIN_N=1024,16384"
for c in regular long-rows short-rows decode; do
  [ $(left 330) -gt 20 ] || break
  args=(); for t in ${TS[$c]}; do args+=(--tune $t); done
  s=$(date +%s)
  timeout $(left 340) $BIN/peak --json tune --classes 10 --full --budget 12,50s --class $c "${args[@]}" \
    > $d/classes-$c.json 2> >(python3 $R/scripts/stamp-lines.py > $d/classes-$c.txt)
  echo "tune --classes --class $c exit $? after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
done
s=$(date +%s)
timeout $(left 560) $BIN/peak --json bench 10 --full -o $d/suite-ckpt10.json 2>&1 | python3 $R/scripts/stamp-lines.py > $d/suite-ckpt10.txt
echo "bench 10 exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
$BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
tar -czf $d/ws.tar.gz --exclude=./.peak/cache -C $ws .
cp $OUT/nvidia-smi.csv $d/
cd $OUT && tar czf softmax.tar.gz softmax && rm -rf softmax
ls -la $OUT
