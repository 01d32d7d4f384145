#!/usr/bin/env bash
# Split-K for the WGMMA persistent kernel as a scratch context, against the persistent kernel
# itself, both validated on the hidden shapes, tuned over 2 configurations and benched over the
# fp16 suite beside cublasGemmEx.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh
for v in split base; do
  ws=$(mktemp -d)/ws
  "$BIN/peak" init results/tensor-h200/scratch/$v "$ws" > /dev/null
  cd "$ws" || exit 4
  start=$(date +%s)
  timeout 200 "$BIN/peak" --json validate --full > "$OUT/$v-validate.json" 2> "$OUT/$v-validate.log"
  echo "$v validate exit $? after $(( $(date +%s) - start )) s" | tee -a "$OUT/times.txt"
  start=$(date +%s)
  timeout 200 "$BIN/peak" --json bench --full -o "$OUT/$v-suite.json" > "$OUT/$v-bench.json" 2> "$OUT/$v-bench.log"
  echo "$v bench exit $? after $(( $(date +%s) - start )) s" | tee -a "$OUT/times.txt"
  python3 "$R/scripts/suite-summary.py" "$OUT/$v-suite.json" > "$OUT/$v-suite.md" 2>&1
  cat "$OUT/$v-suite.md"
  cd "$R"
done
