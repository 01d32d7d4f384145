#!/usr/bin/env bash
# Builds the tight-event cuBLAS harness (tight.cu) into .dev/bin/timer-tight, on a machine with
# nvcc (no GPU needed). .dev/ is ignored by git; carry .dev/bin to the GPU host.
set -euo pipefail
cd "$(dirname "$0")"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
mkdir -p ../../../.dev/bin
"$NVCC" -O2 -std=c++17 -arch=sm_90a tight.cu -o ../../../.dev/bin/timer-tight -lcublas
strip ../../../.dev/bin/timer-tight
ls -l ../../../.dev/bin/timer-tight
