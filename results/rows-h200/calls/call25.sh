#!/usr/bin/env bash
# softmax-cuda, rmsnorm-cuda or layernorm-cuda ($1): cluster-blocks replayed from the recording on
# call 23's committed workspace (HEAD sized-cluster), then the long-rows and decode classes
# searched over CLUSTER_TARGET (the plan's cluster size per shape) and CLUSTER 8 or 16 (16: a
# non-portable cluster, which the runner allows) with call 23's best BLOCK and CLUSTER_VECS,
# short-rows and regular in one `peak tune --classes` with one configuration, then the suite with
# that dispatch table.
# SEARCH_LIMIT (default 400) and LIMIT (570): the seconds after which no class search, and no
# suite, starts.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD; T0=$(date +%s); c0=$1
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
d=$OUT/$c0-call25; mkdir -p $d; ws=$(mktemp -d)/ws; mkdir -p $ws
case $c0 in
  softmax) from=15; sv=8; lb=256; lv=16; dv=16 ;;
  rmsnorm) from=14; sv=4; lb=512; lv=8; dv=8 ;;
  layernorm) from=14; sv=8; lb=256; lv=16; dv=16 ;;
esac
w=$c0-call23
# The runner's 16-block clusters, where the carried binaries include the CUDA GPU tests (pack.sh
# without SKIP of backend_cuda_gpu_tests).
if [ -x build/backend_cuda_gpu_tests ]; then
  timeout 120 build/backend_cuda_gpu_tests --gtest_filter='CudaGpuTest.AClusterOfSixteenBlocksRunsOnSm90' \
    > $d/cluster16-test.txt 2>&1; echo "cluster-16 GPU test exit $?" | tee -a $d/times.txt
fi
tar xf results/rows-h200/cluster/$w/ws.tar.xz -C $ws; cd $ws
s=$(date +%s)
timeout 200 $BIN/peak run $c0-cuda --llm replay:$R/recordings/$c0-cuda --full --from $from \
  --strategy-budget 1 2>&1 | python3 $R/scripts/stamp-lines.py > $d/run.log
echo "run --from $from exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
$BIN/peak log > $d/log.txt 2>&1
ck=$($BIN/peak log 2>/dev/null | head -1 | awk '{print $1}')
echo "HEAD $ck" | tee -a $d/times.txt
base="ITEMS=8 BLOCKS_PER_CU=8 LOOP_VECS=8 SHORT_THREADS=128 SHORT_VECS=$sv SPLIT_MIN_N=1024"
search() {  # NAME CLASS... -- TUNE...
  local name=$1; shift; local cls=() args=()
  while [ "$1" != -- ]; do cls+=(--class $1); shift; done; shift
  for t in $base "$@"; do args+=(--tune $t); done
  [ $(left ${SEARCH_LIMIT:-400}) -gt 20 ] || return
  local s=$(date +%s)
  timeout $(left ${SEARCH_LIMIT:-400}) $BIN/peak --json tune --classes $ck --full --budget 8 \
    --reuse-measurements "${cls[@]}" "${args[@]}" > $d/classes-$name.json \
    2> >(python3 $R/scripts/stamp-lines.py > $d/classes-$name.txt)
  echo "tune --classes ${cls[*]} exit $? after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
}
search long-rows long-rows -- BLOCK=$lb CLUSTER_VECS=$lv CLUSTER=8,16 CLUSTER_TARGET=2,4 SPLITS=128
search decode decode -- BLOCK=256 CLUSTER_VECS=$dv CLUSTER=8,16 CLUSTER_TARGET=1,2,4 SPLITS=64
search short-regular short-rows regular -- BLOCK=256 CLUSTER_VECS=8 CLUSTER=8 CLUSTER_TARGET=1 SPLITS=64
s=$(date +%s)
timeout $(left ${LIMIT:-570}) $BIN/peak --json bench $ck --full -o $d/suite-ckpt$ck.json 2>&1 | python3 $R/scripts/stamp-lines.py > $d/suite-ckpt$ck.txt
echo "bench $ck exit ${PIPESTATUS[0]} after $(( $(date +%s) - s )) s" | tee -a $d/times.txt
python3 $R/scripts/suite-summary.py $d/suite-ckpt$ck.json > $d/suite-ckpt$ck.md 2>&1
$BIN/peak report --format markdown -o $d/report.md >/dev/null 2>&1
tar -cJf $d/ws.tar.xz --exclude=./.peak/cache -C $ws .
cp $OUT/nvidia-smi.csv $d/ 2>/dev/null
n=$c0-call25
cd $OUT && tar cJf $n.tar.xz $n && rm -rf $n/*.json $n/ws.tar.xz $n/classes-*.txt
cat $n/times.txt; cat $n/suite-ckpt*.md
