#!/usr/bin/env bash
# Strips the binaries a GPU call needs into .dev/stage/build and packs them.
set -euo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
rm -rf .dev/stage; mkdir -p .dev/stage/build
for b in peak peak-runner-cuda peak-runner backend_cuda_gpu_tests "$@"; do
  [ -f build/$b ] && strip -o .dev/stage/build/$b build/$b
done
tar cJf .dev/gpubin.tar.xz -C .dev/stage build
ls -la .dev/gpubin.tar.xz
