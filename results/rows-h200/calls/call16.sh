#!/usr/bin/env bash
# softmax-cuda: cluster-rows at its current version (version 3: the persistent kernels' row
# counters cleared only where one runs) applied again from aligned-rows (checkpoint 10) on a
# branch of the committed workspace (.dev/rows/softmax-ws.tar.gz = cluster/softmax-ws.tar.gz),
# one search per shape class of the new checkpoint over call 9's narrowed spaces, then its suite.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD; T0=$(date +%s)
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
d=$OUT/softmax-v3; mkdir -p $d; ws=$(mktemp -d)/ws; mkdir -p $ws
tar xzf .dev/rows/softmax-ws.tar.gz -C $ws; cd $ws
s=$(date +%s)
$BIN/peak -q branch cluster-v3 10
timeout 120 $BIN/peak run softmax-cuda --llm replay:$R/recordings/softmax-cuda --full --from 9 \
  --strategy-budget 4 2>&1 | python3 $R/scripts/stamp-lines.py > $d/cluster-run.log
echo "cluster-rows v3 run exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
$BIN/peak log > $d/log-after-run.txt 2>&1
ck=$($BIN/peak log 2>/dev/null | head -1 | awk '{print $1}')
echo "HEAD $ck" | tee -a $d/times.txt
F="BLOCKS_PER_CU=8 SPLITS=32 SPLIT_MIN_N=1024"
declare -A TS
TS[decode]="BLOCK=512,1024 ITEMS=4,8 CLUSTER=4,8 SHORT_THREADS=128 SHORT_VECS=8 $F"
TS[long-rows]="BLOCK=256,512,1024 ITEMS=4,8 CLUSTER=4,8 SHORT_THREADS=128 SHORT_VECS=8 $F"
TS[short-rows]="BLOCK=256 ITEMS=1 CLUSTER=8 SHORT_THREADS=64,128 SHORT_VECS=1,8 $F"
TS[regular]="BLOCK=256 ITEMS=8 CLUSTER=8 SHORT_THREADS=128 SHORT_VECS=8 $F"
for c in decode long-rows short-rows regular; do
  [ $(left 400) -gt 20 ] || break
  args=(); for t in ${TS[$c]}; do args+=(--tune $t); done
  s=$(date +%s)
  timeout $(left 410) $BIN/peak --json tune --classes $ck --full --budget 12,60s --class $c "${args[@]}" \
    > $d/classes-$c.json 2> >(python3 $R/scripts/stamp-lines.py > $d/classes-$c.txt)
  echo "tune --classes --class $c exit $? after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
done
s=$(date +%s)
timeout $(left 560) $BIN/peak --json bench $ck --full -o $d/suite-ckpt$ck.json 2>&1 | python3 $R/scripts/stamp-lines.py > $d/suite-ckpt$ck.txt
echo "bench $ck exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
python3 $R/scripts/suite-summary.py $d/suite-ckpt$ck.json > $d/suite-ckpt$ck.md 2>&1
$BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
tar -czf $d/ws.tar.gz --exclude=./.peak/cache -C $ws .
cp $OUT/nvidia-smi.csv $d/
cd $OUT && tar czf softmax-v3.tar.gz softmax-v3 && rm -rf softmax-v3/*.json softmax-v3/ws.tar.gz
cat softmax-v3/times.txt; cat softmax-v3/suite-ckpt*.md
