#!/usr/bin/env bash
# softmax-cuda, rmsnorm-cuda or layernorm-cuda ($1): the steps after cluster-rows (grid-rows,
# cluster-arrive, vectors-in-flight) replayed from the recording on the committed workspace of
# cluster-rows version 3 (cluster/softmax-v3-ws.tar.gz, cluster/rmsnorm-v3-ws.tar.gz, or for
# layernorm cluster/layernorm-ws.tar.gz, where cluster-rows version 3 is applied again first on a
# branch at aligned-rows), one search per shape class of the last checkpoint, then its suite.
# SEARCH_LIMIT (default 400) and LIMIT (560): the seconds after which no class search, and no
# suite, starts. SPACES=call20 takes call 20's narrowed spaces instead of call 19's.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD; T0=$(date +%s); c0=$1
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
d=$OUT/$c0-${SPACES:-call19}; mkdir -p $d; ws=$(mktemp -d)/ws; mkdir -p $ws
case $c0 in layernorm) w=layernorm-ws ;; *) w=$c0-v3-ws ;; esac
tar xzf results/rows-h200/cluster/$w.tar.gz -C $ws; cd $ws
# The first step to replay: cluster-rows for layernorm (its workspace ends at version 1 on main),
# grid-rows for the others (their workspaces end at cluster-rows version 3 on cluster-v3).
case $c0 in
  softmax) from=10 ;;
  rmsnorm) from=9 ;;
  layernorm) $BIN/peak -q branch cluster-v3 9; from=8 ;;
esac
s=$(date +%s)
timeout 200 $BIN/peak run $c0-cuda --llm replay:$R/recordings/$c0-cuda --full --from $from \
  --strategy-budget 4 2>&1 | python3 $R/scripts/stamp-lines.py > $d/run.log
echo "run --from $from exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
$BIN/peak log > $d/log-after-run.txt 2>&1
ck=$($BIN/peak log 2>/dev/null | head -1 | awk '{print $1}')
echo "HEAD $ck" | tee -a $d/times.txt
# Narrowed spaces per class (the whole space has tens of thousands of configurations): the short
# rows need only the short-row kernel's parameters, the regular rows a register path that holds
# 8192 elements, the long and decode rows the cluster's shape and the looping path's loads.
case $c0 in softmax|layernorm) sv=8 ;; rmsnorm) sv=4 ;; esac
F="SPLITS=32 SPLIT_MIN_N=1024"
declare -A TS
if [ "${SPACES:-call19}" = call19 ]; then
TS[short-rows]="BLOCK=256 ITEMS=8 CLUSTER=8 BLOCKS_PER_CU=8 LOOP_VECS=4 SHORT_THREADS=128,256 SHORT_VECS=$sv $F"
TS[regular]="BLOCK=256,512 ITEMS=8 CLUSTER=8 BLOCKS_PER_CU=8 LOOP_VECS=4 SHORT_THREADS=128 SHORT_VECS=$sv $F"
TS[long-rows]="BLOCK=256,512 ITEMS=4,8 CLUSTER=8 BLOCKS_PER_CU=2,8 LOOP_VECS=4,8 SHORT_THREADS=128 SHORT_VECS=$sv $F"
TS[decode]="BLOCK=256,512 ITEMS=8 CLUSTER=4,8 BLOCKS_PER_CU=8 LOOP_VECS=8 SHORT_THREADS=128 SHORT_VECS=$sv $F"
else  # SPACES=call20: smaller long-rows and decode spaces (call 19's long-rows search ran out of
  # time), and register paths of 4096 to 8192 elements with fewer unused registers per thread
TS[short-rows]="BLOCK=256 ITEMS=8 CLUSTER=8 BLOCKS_PER_CU=8 LOOP_VECS=4 SHORT_THREADS=128 SHORT_VECS=$sv $F"
TS[regular]="BLOCK=512,1024 ITEMS=2,4 CLUSTER=8 BLOCKS_PER_CU=8 LOOP_VECS=4 SHORT_THREADS=128 SHORT_VECS=$sv $F"
TS[long-rows]="BLOCK=256,512 ITEMS=4,8 CLUSTER=8 BLOCKS_PER_CU=8 LOOP_VECS=8 SHORT_THREADS=128 SHORT_VECS=$sv $F"
TS[decode]="BLOCK=256,512 ITEMS=8 CLUSTER=4,8 BLOCKS_PER_CU=8 LOOP_VECS=8 SHORT_THREADS=128 SHORT_VECS=$sv $F"
fi
for c in short-rows regular long-rows decode; do
  [ $(left ${SEARCH_LIMIT:-400}) -gt 25 ] || break
  args=(); for t in ${TS[$c]}; do args+=(--tune $t); done
  s=$(date +%s)
  timeout $(left ${SEARCH_LIMIT:-400}) $BIN/peak --json tune --classes $ck --full --budget 12,50s --class $c "${args[@]}" \
    > $d/classes-$c.json 2> >(python3 $R/scripts/stamp-lines.py > $d/classes-$c.txt)
  echo "tune --classes --class $c exit $? after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
done
s=$(date +%s)
timeout $(left ${LIMIT:-560}) $BIN/peak --json bench $ck --full -o $d/suite-ckpt$ck.json 2>&1 | python3 $R/scripts/stamp-lines.py > $d/suite-ckpt$ck.txt
echo "bench $ck exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
python3 $R/scripts/suite-summary.py $d/suite-ckpt$ck.json > $d/suite-ckpt$ck.md 2>&1
$BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
tar -czf $d/ws.tar.gz --exclude=./.peak/cache -C $ws .
cp $OUT/nvidia-smi.csv $d/
n=$c0-${SPACES:-call19}
cd $OUT && tar czf $n.tar.gz $n && rm -rf $n/*.json $n/ws.tar.gz
cat $n/times.txt; cat $n/suite-ckpt*.md
