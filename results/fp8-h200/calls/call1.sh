#!/usr/bin/env bash
# The fp8 context on the GPU host: the backend's fp8 GPU test (the seed validated, cublasLt's fp8
# GEMM timed beside it), then a workspace of examples/matmul-cuda-fp8 validated, tuned and timed
# at its bench shapes against cublasLt, and its suite (cut by its limit; each shape is written as
# it is timed).
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh
stamp() { python3 "$R/scripts/stamp-lines.py"; }
O=$OUT/call1; mkdir -p $O
start=$(date +%s)
timeout 120 "$BIN/backend_cuda_gpu_tests" --gtest_filter='*Fp8*:*BaselineRatesArePhysical*' \
  > $O/gpu-tests.log 2>&1
echo "gpu tests exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
ws=$(mktemp -d)
"$BIN/peak" init "$R/examples/matmul-cuda-fp8" "$ws/fp8" > $O/init.log 2>&1
cd "$ws/fp8" || exit 4
start=$(date +%s)
timeout 200 "$BIN/peak" --json validate --full > $O/validate.json 2> >(stamp > $O/validate.log)
echo "validate exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
"$BIN/peak" report --format markdown > $O/report.md 2>&1
start=$(date +%s)
timeout 200 "$BIN/peak" --json bench --full -o $O/suite.json > $O/bench.json 2> >(stamp > $O/bench.log)
echo "bench exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
python3 "$R/scripts/suite-summary.py" $O/suite.json > $O/suite.md 2>&1; cat $O/suite.md
tar -czf $O/ws.tar.gz --exclude=./.peak/cache -C "$ws/fp8" .
cat $O/times.txt; tail -5 $O/gpu-tests.log; grep "measured" $O/gpu-tests.log
