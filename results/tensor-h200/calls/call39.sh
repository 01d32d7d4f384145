#!/usr/bin/env bash
# The cluster step (sequences/cuda-fp16.toml, set aside) at version 2 of its transformation: the
# helper's remote arrival at CTA scope. scripts/gpu/cluster-check.sh as it ran on the H100
# (results/h100/cluster/check/): the cluster helper's GPU tests, then per precision the kernel of
# the cluster step from the recorded campaign (replayed compile-only), validated, tuned with
# clusters of two and of one, and timed against cublasGemmEx at 2048^3 and 4096^3 by peak itself.
# Binaries: bash results/attention-h200/calls/pack.sh; carry .dev/gpubin.tar.xz and .gl.
cd "$(dirname "$0")/../../.."  # the repository root
source scripts/gpu/call-env.sh
O=$OUT/${CALL:-call39}; mkdir -p $O
start=$(date +%s)
OUT=$O LIMIT=${LIMIT:-150} bash scripts/gpu/cluster-check.sh
lap cluster-check $?
