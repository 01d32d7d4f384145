#!/usr/bin/env bash
# Call 39 again once `peak tune` of a checkpoint no longer evaluates its untimed ancestors (in call
# 39 each tune searched the compile-only parents first and ran out of its 150 s): the cluster step
# at version 2 of its transformation, scripts/gpu/cluster-check.sh, with clusters of two and of one,
# timed against cublasGemmEx at 2048^3 and 4096^3 by peak itself.
# Binaries: SKIP=peak-runner bash results/attention-h200/calls/pack.sh (no HLSL runs; with it the
# tree and the binaries are over what a call carries); carry .dev/gpubin.tar.xz and .gl.
CALL=call41 LIMIT=${LIMIT:-300} bash "$(dirname "$0")/call39.sh"
# Fewer files than a call brings back: everything but the summary in one archive.
cd "${OUT:-$(dirname "$0")/../../../out}/call41" &&
  tar cJf ../call41-files.tar.xz --exclude=cluster-check.txt . &&
  find . -type f ! -name cluster-check.txt -delete && mv ../call41-files.tar.xz .
