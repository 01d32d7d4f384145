#!/usr/bin/env bash
# rmsnorm-cuda or layernorm-cuda ($1): cluster-rows at its current version (version 3) applied
# again from aligned-rows (checkpoint 9) on a branch of the committed workspace
# (.dev/rows/C-ws.tar.gz = cluster/C-ws.tar.gz), one search per shape class of the new
# checkpoint over call 10's narrowed spaces, then its suite.
# SEARCH_LIMIT (default 330) and LIMIT (470): the seconds after which no class search, and no
# suite, runs on.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD; T0=$(date +%s); c0=$1
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
d=$OUT/$c0-v3; mkdir -p $d; ws=$(mktemp -d)/ws; mkdir -p $ws
tar xzf .dev/rows/$c0-ws.tar.gz -C $ws; cd $ws
s=$(date +%s)
$BIN/peak -q branch cluster-v3 9
timeout 120 $BIN/peak run $c0-cuda --llm replay:$R/recordings/$c0-cuda --full --from 8 \
  --strategy-budget 4 2>&1 | python3 $R/scripts/stamp-lines.py > $d/cluster-run.log
echo "cluster-rows v3 run exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
$BIN/peak log > $d/log-after-run.txt 2>&1
ck=$($BIN/peak log 2>/dev/null | head -1 | awk '{print $1}')
echo "HEAD $ck" | tee -a $d/times.txt
F="SPLITS=32 SPLIT_MIN_N=1024"
declare -A TS
TS[long-rows]="BLOCK=256,512 ITEMS=4,8 CLUSTER=8 BLOCKS_PER_CU=8 SHORT_THREADS=128 SHORT_VECS=4 $F"
TS[decode]="BLOCK=256,512 ITEMS=4,8 CLUSTER=4,8 BLOCKS_PER_CU=8 SHORT_THREADS=128 SHORT_VECS=4 $F"
TS[regular]="BLOCK=256,512 ITEMS=4,8 CLUSTER=8 BLOCKS_PER_CU=8,16 SHORT_THREADS=128 SHORT_VECS=4 $F"
TS[short-rows]="BLOCK=256 ITEMS=4 CLUSTER=8 BLOCKS_PER_CU=8,16 SHORT_THREADS=128,256 SHORT_VECS=4,8 $F"
for c in long-rows decode regular short-rows; do
  [ $(left ${SEARCH_LIMIT:-330}) -gt 25 ] || break
  args=(); for t in ${TS[$c]}; do args+=(--tune $t); done
  s=$(date +%s)
  timeout $(left ${SEARCH_LIMIT:-330}) $BIN/peak --json tune --classes $ck --full --budget 12,50s --class $c "${args[@]}" \
    > $d/classes-$c.json 2> >(python3 $R/scripts/stamp-lines.py > $d/classes-$c.txt)
  echo "tune --classes --class $c exit $? after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
done
s=$(date +%s)
timeout $(left ${LIMIT:-470}) $BIN/peak --json bench $ck --full -o $d/suite-ckpt$ck.json 2>&1 | python3 $R/scripts/stamp-lines.py > $d/suite-ckpt$ck.txt
echo "bench $ck exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
python3 $R/scripts/suite-summary.py $d/suite-ckpt$ck.json > $d/suite-ckpt$ck.md 2>&1
$BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
tar -czf $d/ws.tar.gz --exclude=./.peak/cache -C $ws .
cp $OUT/nvidia-smi.csv $d/
cd $OUT && tar czf $c0-v3.tar.gz $c0-v3 && rm -rf $c0-v3/*.json $c0-v3/ws.tar.gz
cat $c0-v3/times.txt; cat $c0-v3/suite-ckpt*.md
