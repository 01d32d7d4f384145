#!/usr/bin/env bash
# The Hopper steps' second round on one H200. The wgmma-e4m3 and tma-store helpers' GPU tests;
# fp8: tma-store-epilogue applied to call 6's workspace (results/fp8-h200) and the suite against
# cublasLt; then PRECISIONS (default fp16) of the cuda-fp16 campaign replayed from the seed (six
# configurations a step, as in call 15) with wgmma-overlap as its last step, that step searched
# exhaustively at the bench shapes, then the suite (square-8192 included) against cublasGemmEx.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh
stamp() { python3 "$R/scripts/stamp-lines.py"; }
O=$OUT/${CALL:-call20}; mkdir -p $O
lap() { echo "$1 exit $2 after $(( $(date +%s) - start )) s" | tee -a $O/times.txt; }
if [ "${FP8:-1}" = 1 ]; then
  start=$(date +%s)
  timeout 60 "$BIN/backend_cuda_gpu_tests" --gtest_filter='*WgmmaE4m3*:*TmaStore*' \
    > $O/gpu-tests.log 2>&1
  lap "gpu tests" $?
  mkdir -p $O/fp8; start=$(date +%s)
  OUT=$O/fp8 NAME=cuda-fp8 LIMIT=100 WS_TAR=$R/results/fp8-h200/call6/cuda-fp8-ws.tar.gz \
    bash scripts/gpu/campaign.sh matmul-cuda-fp8 cuda-fp8 cuda-fp8 --from 8 > $O/fp8/campaign.txt 2>&1
  lap "fp8 campaign" $?
  ws=$(mktemp -d)/ws; mkdir -p $ws; tar xf $O/fp8/cuda-fp8-ws.tar.gz -C $ws
  start=$(date +%s)
  (cd $ws && timeout 70 "$BIN/peak" --json bench --full -o $O/fp8/suite.json > $O/fp8/bench.json \
    2> >(stamp > $O/fp8/bench.log))
  lap "fp8 bench" $?
  python3 "$R/scripts/suite-summary.py" $O/fp8/suite.json > $O/fp8/suite.md 2>&1
fi
for v in ${PRECISIONS:-fp16}; do
  mkdir -p $O/$v; start=$(date +%s)
  OUT=$O/$v NAME=cuda-$v LIMIT=150 bash scripts/gpu/campaign.sh matmul-cuda-$v cuda-fp16 \
    cuda-$v-full --strategy-budget 6 > $O/$v/campaign.txt 2>&1
  lap "$v campaign" $?
  ws=$(mktemp -d)/ws; mkdir -p $ws; tar xf $O/$v/cuda-$v-ws.tar.gz -C $ws; cd $ws
  start=$(date +%s)
  timeout 60 "$BIN/peak" --json tune --full --strategy exhaustive > $O/$v/tune.json \
    2> >(stamp > $O/$v/tune.log)
  lap "$v tune" $?
  start=$(date +%s)
  timeout ${BENCH_LIMIT:-110} "$BIN/peak" --json bench --full -o $O/$v/suite.json \
    > $O/$v/bench.json 2> >(stamp > $O/$v/bench.log)
  lap "$v bench" $?
  python3 "$R/scripts/suite-summary.py" $O/$v/suite.json > $O/$v/suite.md 2>&1
  "$BIN/peak" report --format markdown -o $O/$v/report.md > /dev/null 2>&1
  tar -cJf $O/$v/ws.tar.xz --exclude=./.peak/cache -C $ws . ; rm -f $O/$v/cuda-$v-ws.tar.gz
  cd $R
done
cd $OUT && tar czf ${CALL:-call20}.tar.gz ${CALL:-call20}
cat ${CALL:-call20}/times.txt; grep -hE "OK \]|FAILED \]" ${CALL:-call20}/gpu-tests.log 2>/dev/null | tail -6
for f in ${CALL:-call20}/*/suite.md; do echo "== $f"; cat $f; done
grep -hE "overlap|tma-store|padded" ${CALL:-call20}/*/*report.md | head -12
