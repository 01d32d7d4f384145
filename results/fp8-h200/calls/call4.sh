#!/usr/bin/env bash
# The recorded cuda-fp8 campaign (refactor, tb-tiling, fp8-tensor-core, fp8-pipelining) replayed
# on the GPU host with a real tuning budget, then the last checkpoint's suite against cublasLt.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh
O=$OUT/call4; mkdir -p $O
start=$(date +%s)
OUT=$O NAME=cuda-fp8 LIMIT=400 BENCH=0 bash scripts/gpu/campaign.sh matmul-cuda-fp8 cuda-fp8 \
  cuda-fp8 --strategy-budget 32 > $O/campaign.txt 2>&1
echo "campaign exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
ws=$(mktemp -d)/ws; mkdir -p $ws; tar xzf $O/cuda-fp8-ws.tar.gz -C $ws; cd $ws
start=$(date +%s)
timeout 150 "$BIN/peak" --json bench --full -o $O/suite.json > $O/bench.json 2> $O/bench.log
echo "bench exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
python3 "$R/scripts/suite-summary.py" $O/suite.json > $O/suite.md 2>&1
cd $OUT && tar czf call4.tar.gz call4 && rm -rf call4/*.json call4/*ws.tar.gz
cat call4/times.txt; cat call4/suite.md; grep -E "GFLOP|fp8-|tb-tiling|refactor" call4/cuda-fp8-report.md | head -20
