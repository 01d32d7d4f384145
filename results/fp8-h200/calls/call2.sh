#!/usr/bin/env bash
# The e4m3 inputs made on the device: the generator's GPU tests (every dtype, e4m3 included, the
# device's bytes against the host's), the baseline tests again, then call 1's validate and suite
# of the fp8 seed with the fresh inputs of its timed launches made on the device.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh
stamp() { python3 "$R/scripts/stamp-lines.py"; }
O=$OUT/call2; mkdir -p $O
start=$(date +%s)
timeout 150 "$BIN/backend_cuda_gpu_tests" \
  --gtest_filter='*CudaGpuInputs*:*Fp8*:*BaselineRatesArePhysical*' > $O/gpu-tests.log 2>&1
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
cd $OUT && tar czf call2.tar.gz call2 && cat call2/times.txt && grep -E "OK|FAILED|SKIPPED|measured" call2/gpu-tests.log | tail -30
