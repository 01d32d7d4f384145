#!/usr/bin/env bash
# A screening sweep of the launch-bounds kernel on an NVIDIA GPU (see README.md).
# Usage: scripts/gpu/sweep/run.sh CONFIGS   (bench built here beforehand: see README.md)
set -u
cd "$(dirname "$0")"
OUT=${OUT:-./out}; mkdir -p "$OUT"
list=${1:?configs file}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/smi.csv"
[ -f kernel.cu ] || python3 extract.py kernel.cu
t0=$(date +%s)
LIST=$list ./build.sh
echo "compiled in $(( $(date +%s) - t0 )) s: $(ls cubins | wc -l) cubins" | tee "$OUT/sweep.log"
grep -H "spill\|Used" logs/*.log | tr '\n' ' ' | sed 's/logs\//\n/g' > "$OUT/ptxas.txt"
./bench "$list" cubins "${TOP:-16}" 2>"$OUT/bench.err" | tee -a "$OUT/sweep.log"
cp screen.tsv "$OUT/"
