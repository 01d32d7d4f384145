#!/usr/bin/env bash
# On the GPU host: peak's timing of cuBLAS (CudaGpuTest.CublasRatesAsPeakTimesThem) bracketed by
# two runs of the independent tight-event harness (timer-tight, built here by build.sh), then
# $OUT/agreement.md comparing them (compare.py). README.md says more.
# Usage: BIN=$PWD/.dev/bin OUT=... bash scripts/gpu/timer-check/run.sh
#   $BIN: backend_cuda_gpu_tests (with peak-runner-cuda beside it) and timer-tight
#   (TIGHT=... names another timer-tight; without one in $BIN, .dev/bin/timer-tight is used).
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../env.sh"
set -o pipefail
TIGHT=${TIGHT:-$BIN/timer-tight}
[ -x "$TIGHT" ] || TIGHT=$ROOT/.dev/bin/timer-tight
TESTS=$BIN/backend_cuda_gpu_tests
for f in "$TIGHT" "$TESTS"; do
  [ -x "$f" ] || { echo "run.sh: $f is missing (build.sh here; BIN=...)" >&2; exit 2; }
done
: > "$OUT/commands.txt"
status=0
clocks() {  # the SM clock, temperature and power between the steps
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,temperature.gpu,power.draw \
    --format=csv,noheader | sed "s/^/$1, /" >> "$OUT/clocks.csv"
}
# step LOG COMMAND...: runs COMMAND, its output also in $OUT/LOG, its line in commands.txt.
step() {
  local log=$1; shift
  echo "$*" >> "$OUT/commands.txt"
  echo "== $*"
  local t0=$(date +%s)
  "$@" 2>&1 | tee "$OUT/$log"
  local rc=${PIPESTATUS[0]}
  echo "-> rc=$rc in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/$log"
  [ "$rc" -eq 0 ] || status=$rc
  clocks "after $log"
}
echo "when, timestamp, clocks.sm, clocks.mem, temperature.gpu, power.draw" > "$OUT/clocks.csv"
clocks "start"
step tight.log "$TIGHT" "$OUT/tight.json"
step peak-cublas.log "$TESTS" --gtest_filter=CudaGpuTest.CublasRatesAsPeakTimesThem \
  --gtest_output=json:"$OUT/peak-cublas.json"
step tight2.log "$TIGHT" "$OUT/tight2.json"
python3 "$HERE/compare.py" --peak-log "$OUT/peak-cublas.log" --peak-json "$OUT/peak-cublas.json" \
  --tight "$OUT/tight.json" "$OUT/tight2.json" --commands "$OUT/commands.txt" \
  --clocks "$OUT/clocks.csv" -o "$OUT/agreement.md" || { [ "$status" -ne 0 ] || status=1; }
cat "$OUT/agreement.md" 2>/dev/null
exit "$status"
