#!/usr/bin/env bash
# On the GPU host: the decode bench over every built configuration (flushed, warm and fresh
# inputs), then Nsight Compute on cuBLAS and the configurations of configs-ncu.txt.
# Usage: OUT=... scripts/gpu/decode/run.sh  (after build.sh here; .dev/decode carried)
set -u
here=$(cd "$(dirname "$0")" && pwd)
DIR=${DIR:-$here/../../../.dev/decode}
OUT=${OUT:-$DIR/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/nvidia-smi.csv"
cd "$DIR"
./bench configs.txt cubins 2>&1 | tee "$OUT/decode.log"
# SHAPES="M N K;M N K": more shapes after the default 16 x 4096 x 4096.
IFS=';' read -ra shapes <<< "${SHAPES:-}"
for shape in "${shapes[@]}"; do ./bench configs.txt cubins $shape 2>&1 | tee -a "$OUT/decode.log"; done
if command -v ncu >/dev/null && [ -f "$here/configs-ncu.txt" ]; then
  SAMPLES=1 timeout 300 ncu --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers,launch__grid_size,launch__block_size,smsp__average_warp_latency_issue_stalled_long_scoreboard \
    ./bench "$here/configs-ncu.txt" cubins >"$OUT/ncu.txt" 2>&1
fi
