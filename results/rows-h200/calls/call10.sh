#!/usr/bin/env bash
# rmsnorm-cuda or layernorm-cuda ($1): aligned-rows and cluster-rows (steps 9 and 10) timed on the
# committed workspace (checkpoint 8), one search per shape class of checkpoint 10, then its suite.
cd "$(dirname "$0")/.."
R=$PWD; T0=$(date +%s); c=$1
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
d=$OUT/$c; mkdir -p $d; ws=$(mktemp -d)/ws; mkdir -p $ws
tar xzf .dev/$c-ws.tar.gz -C $ws; cd $ws
s=$(date +%s)
timeout 150 $BIN/peak run $c-cuda --llm replay:$R/recordings/$c-cuda --full --from 7 \
  --strategy-budget 4 2>&1 | python3 $R/scripts/stamp-lines.py > $d/run.log
echo "$c aligned-rows, cluster-rows run exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
$BIN/peak log > $d/log-after-run.txt 2>&1
ck=$($BIN/peak log 2>/dev/null | head -1 | awk '{print $1}')
echo "HEAD $ck" | tee -a $d/times.txt
F="SPLITS=32 SPLIT_MIN_N=1024"
declare -A TS
TS[long-rows]="BLOCK=256,512 ITEMS=4,8 CLUSTER=8 BLOCKS_PER_CU=8 SHORT_THREADS=128 SHORT_VECS=4 $F"
TS[decode]="BLOCK=256,512 ITEMS=4,8 CLUSTER=4,8 BLOCKS_PER_CU=8 SHORT_THREADS=128 SHORT_VECS=4 $F"
TS[regular]="BLOCK=256,512 ITEMS=4,8 CLUSTER=8 BLOCKS_PER_CU=8,16 SHORT_THREADS=128 SHORT_VECS=4 $F"
TS[short-rows]="BLOCK=256 ITEMS=4 CLUSTER=8 BLOCKS_PER_CU=8,16 SHORT_THREADS=128,256 SHORT_VECS=4,8 $F"
if [ "$ck" = 10 ]; then
  for cl in long-rows decode regular short-rows; do
    [ $(left 300) -gt 25 ] || break
    args=(); for t in ${TS[$cl]}; do args+=(--tune $t); done
    s=$(date +%s)
    timeout $(left 300) $BIN/peak --json tune --classes 10 --full --budget 12,50s --class $cl "${args[@]}" \
      > $d/classes-$cl.json 2> >(python3 $R/scripts/stamp-lines.py > $d/classes-$cl.txt)
    echo "tune --classes --class $cl exit $? after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
  done
fi
s=$(date +%s)
timeout $(left ${LIMIT:-440}) $BIN/peak --json bench $ck --full -o $d/suite-ckpt$ck.json 2>&1 | python3 $R/scripts/stamp-lines.py > $d/suite-ckpt$ck.txt
echo "bench $ck exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
$BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
tar -czf $d/ws.tar.gz --exclude=./.peak/cache -C $ws .
cp $OUT/nvidia-smi.csv $d/
cd $OUT && tar czf $c.tar.gz $c && rm -rf $c
ls -la $OUT
