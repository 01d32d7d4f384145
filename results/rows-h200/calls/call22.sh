#!/usr/bin/env bash
# softmax-cuda, rmsnorm-cuda or layernorm-cuda ($1) after sized-instances: one configuration per
# shape class (`peak tune --classes --class C`, one class per process so that each class's entry
# is kept when a later one runs out of time), then the suite with that dispatch table.
# WS: a committed workspace archive whose HEAD is sized-instances (softmax: call 21's); without
# it the steps from grid-rows on are replayed first as in call21.sh (STRATEGY_BUDGET, default 1).
# SEARCH_LIMIT (default 400) and LIMIT (570): the seconds after which no class search, and no
# suite, starts.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD; T0=$(date +%s); c0=$1
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
d=$OUT/$c0-call22; mkdir -p $d; ws=$(mktemp -d)/ws; mkdir -p $ws
if [ -n "${WS:-}" ]; then
  tar xf $R/$WS -C $ws; cd $ws
else
  case $c0 in layernorm) w=layernorm-ws ;; *) w=$c0-v3-ws ;; esac
  tar xf results/rows-h200/cluster/$w.tar.gz -C $ws; cd $ws
  case $c0 in
    softmax) from=10 ;;
    rmsnorm) from=9 ;;
    layernorm) $BIN/peak -q branch cluster-v3 9; from=8 ;;
  esac
  s=$(date +%s)
  timeout 300 $BIN/peak run $c0-cuda --llm replay:$R/recordings/$c0-cuda --full --from $from \
    --strategy-budget ${STRATEGY_BUDGET:-1} 2>&1 | python3 $R/scripts/stamp-lines.py > $d/run.log
  echo "run --from $from exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
fi
$BIN/peak log > $d/log.txt 2>&1
ck=$($BIN/peak log 2>/dev/null | head -1 | awk '{print $1}')
echo "HEAD $ck" | tee -a $d/times.txt
case $c0 in softmax|layernorm) sv=8 ;; rmsnorm) sv=4 ;; esac
base="BLOCK=256 ITEMS=8 CLUSTER=8 BLOCKS_PER_CU=8 LOOP_VECS=8 SHORT_THREADS=128 SHORT_VECS=$sv SPLIT_MIN_N=1024"
declare -A SP=([decode]=64 [short-rows]=64 [regular]=64 [long-rows]=128)
for c in short-rows regular long-rows decode; do
  [ $(left ${SEARCH_LIMIT:-400}) -gt 20 ] || break
  args=(); for t in $base SPLITS=${SP[$c]}; do args+=(--tune $t); done
  s=$(date +%s)
  timeout $(left ${SEARCH_LIMIT:-400}) $BIN/peak --json tune --classes $ck --full --budget 1 \
    --reuse-measurements --class $c "${args[@]}" > $d/classes-$c.json \
    2> >(python3 $R/scripts/stamp-lines.py > $d/classes-$c.txt)
  echo "tune --classes --class $c exit $? after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
done
s=$(date +%s)
timeout $(left ${LIMIT:-570}) $BIN/peak --json bench $ck --full -o $d/suite-ckpt$ck.json 2>&1 | python3 $R/scripts/stamp-lines.py > $d/suite-ckpt$ck.txt
echo "bench $ck exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
python3 $R/scripts/suite-summary.py $d/suite-ckpt$ck.json > $d/suite-ckpt$ck.md 2>&1
$BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
tar -cJf $d/ws.tar.xz --exclude=./.peak/cache -C $ws .
cp $OUT/nvidia-smi.csv $d/ 2>/dev/null
n=$c0-call22
cd $OUT && tar cJf $n.tar.xz $n && rm -rf $n/*.json $n/ws.tar.xz $n/classes-*.txt
cat $n/times.txt; cat $n/suite-ckpt*.md
