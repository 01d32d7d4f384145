#!/usr/bin/env bash
# softmax-cuda, rmsnorm-cuda or layernorm-cuda ($1): the steps after cluster-rows (grid-rows,
# cluster-arrive, vectors-in-flight, sized-instances) replayed from the recording on the committed
# workspace of cluster-rows version 3 (as call19.sh), then one `peak tune --classes` over every
# shape class with a small space (TUNE), then the suite with the resulting dispatch table.
# SEARCH_LIMIT (default 380) and LIMIT (560): the seconds after which no class search, and no
# suite, starts.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD; T0=$(date +%s); c0=$1
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
d=$OUT/$c0-call21; mkdir -p $d; ws=$(mktemp -d)/ws; mkdir -p $ws
case $c0 in layernorm) w=layernorm-ws ;; *) w=$c0-v3-ws ;; esac
tar xzf results/rows-h200/cluster/$w.tar.gz -C $ws; cd $ws
case $c0 in
  softmax) from=10 ;;
  rmsnorm) from=9 ;;
  layernorm) $BIN/peak -q branch cluster-v3 9; from=8 ;;
esac
s=$(date +%s)
timeout 300 $BIN/peak run $c0-cuda --llm replay:$R/recordings/$c0-cuda --full --from $from \
  --strategy-budget ${STRATEGY_BUDGET:-2} 2>&1 | python3 $R/scripts/stamp-lines.py > $d/run.log
echo "run --from $from exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
$BIN/peak log > $d/log-after-run.txt 2>&1
ck=$($BIN/peak log 2>/dev/null | head -1 | awk '{print $1}')
echo "HEAD $ck" | tee -a $d/times.txt
# One space for every class: the instances size the registers to each shape's rows, so a class no
# longer needs its own ITEMS or SHORT_VECS; SPLITS is searched for the few-row shapes.
case $c0 in softmax|layernorm) sv=8 ;; rmsnorm) sv=4 ;; esac
TUNE=${TUNE:-"BLOCK=256 ITEMS=8 CLUSTER=8 BLOCKS_PER_CU=8 LOOP_VECS=8 SHORT_THREADS=128 SHORT_VECS=$sv SPLITS=64,128 SPLIT_MIN_N=1024"}
args=(); for t in $TUNE; do args+=(--tune $t); done
s=$(date +%s)
timeout $(left ${SEARCH_LIMIT:-380}) $BIN/peak --json tune --classes $ck --full --budget 2,60s "${args[@]}" \
  > $d/classes.json 2> >(python3 $R/scripts/stamp-lines.py > $d/classes.txt)
echo "tune --classes exit $? after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
s=$(date +%s)
timeout $(left ${LIMIT:-560}) $BIN/peak --json bench $ck --full -o $d/suite-ckpt$ck.json 2>&1 | python3 $R/scripts/stamp-lines.py > $d/suite-ckpt$ck.txt
echo "bench $ck exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
python3 $R/scripts/suite-summary.py $d/suite-ckpt$ck.json > $d/suite-ckpt$ck.md 2>&1
$BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
tar -czf $d/ws.tar.gz --exclude=./.peak/cache -C $ws .
cp $OUT/nvidia-smi.csv $d/ 2>/dev/null
n=$c0-call21
cd $OUT && tar czf $n.tar.gz $n && rm -rf $n/*.json $n/ws.tar.gz
cat $n/times.txt; cat $n/suite-ckpt*.md
