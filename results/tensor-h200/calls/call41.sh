#!/usr/bin/env bash
# Call 39 again once `peak tune` of a checkpoint no longer evaluates its untimed ancestors (in call
# 39 each tune searched the compile-only parents first and ran out of its 150 s): the cluster step
# at version 2 of its transformation, scripts/gpu/cluster-check.sh, with clusters of two and of one,
# timed against cublasGemmEx at 2048^3 and 4096^3 by peak itself.
# Binaries: bash results/attention-h200/calls/pack.sh; carry .dev/gpubin.tar.xz and .gl.
cd "$(dirname "$0")/../../.."  # the repository root
source scripts/gpu/call-env.sh
O=$OUT/call41; mkdir -p $O
start=$(date +%s)
OUT=$O LIMIT=${LIMIT:-300} bash scripts/gpu/cluster-check.sh
lap cluster-check $?
# Fewer files than a call brings back: everything but the summary in one archive.
(cd $O && tar cJf ../call41-files.tar.xz --exclude=cluster-check.txt . &&
  find . -type f ! -name cluster-check.txt -delete && mv ../call41-files.tar.xz .)
