#!/usr/bin/env bash
# Strips the binaries a GPU call needs into .dev/stage/build and packs them: peak, both runners,
# backend_cuda_gpu_tests and the targets named as arguments, less those named in SKIP (a call
# whose tree and binaries would be over what it carries: SKIP=peak-runner when no HLSL runs).
set -euo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
rm -rf .dev/stage; mkdir -p .dev/stage/build
for b in peak peak-runner-cuda peak-runner backend_cuda_gpu_tests "$@"; do
  [[ " ${SKIP:-} " == *" $b "* ]] && continue
  [ -f build/$b ] && strip -o .dev/stage/build/$b build/$b
done
tar cJf .dev/gpubin.tar.xz -C .dev/stage build
ls -la .dev/gpubin.tar.xz
