#!/usr/bin/env bash
# fp8 on Hopper: the wgmma-e4m3 helper's GPU tests (one warpgroup per 64 x N tile, N = 64, 128,
# 256), then the recorded cuda-fp8 campaign continued from call 4's workspace (checkpoint 5,
# fp8-pipelining) with fp8-wgmma, warp-specialization, persistent and wgmma-overlap, each
# searched over its narrowed space, then the last checkpoint's suite against cublasLt.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh
stamp() { python3 "$R/scripts/stamp-lines.py"; }
O=$OUT/call6; mkdir -p $O
start=$(date +%s)
timeout 90 "$BIN/backend_cuda_gpu_tests" --gtest_filter='*WgmmaE4m3*' > $O/gpu-tests.log 2>&1
echo "gpu tests exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
start=$(date +%s)
OUT=$O NAME=cuda-fp8 LIMIT=${LIMIT:-330} WS_TAR=$R/results/fp8-h200/call4/cuda-fp8-ws.tar.gz \
  bash scripts/gpu/campaign.sh matmul-cuda-fp8 cuda-fp8 cuda-fp8 --from 4 > $O/campaign.txt 2>&1
echo "campaign exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
ws=$(mktemp -d)/ws; mkdir -p $ws; tar xzf $O/cuda-fp8-ws.tar.gz -C $ws; cd $ws
start=$(date +%s)
timeout ${BENCH_LIMIT:-120} "$BIN/peak" --json bench --full -o $O/suite.json > $O/bench.json \
  2> >(stamp > $O/bench.log)
echo "bench exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
python3 "$R/scripts/suite-summary.py" $O/suite.json > $O/suite.md 2>&1
cd $OUT && tar czf call6.tar.gz call6 && rm -rf call6/*.json call6/*ws.tar.gz
cat call6/times.txt; grep -E "OK|FAILED|PASSED" call6/gpu-tests.log | tail -8; cat call6/suite.md
grep -E "fp8-|persistent|warp-spec|overlap" call6/cuda-fp8-report.md | head -24
