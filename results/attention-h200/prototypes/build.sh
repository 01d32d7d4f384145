#!/usr/bin/env bash
# Builds the standalone attention prototypes that calls 5, 6, 8 and 11 ran (not part of peak: each is
# one .cu file with its kernels, a copy of the tensor-core kernel of checkpoint 4 as the reference,
# and a harness that checks and times them) into .dev/proto-* of the repository.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); dev=$(cd "$here/../../.." && pwd)/.dev
nv() { nvcc -O3 -std=c++17 "$@"; }
# The variants of the wgmma prototype are patches of wgmma/attn.cu (ping-pong consumers, a producer
# warp, 96-key tiles), applied into a temporary copy.
var=$(mktemp -d); trap 'rm -rf "$var"' EXIT
cp "$here/wgmma/attn.cu" "$here/wgmma/wgmma_ops.inc" "$var/"
for v in attn_pp attn_pw attn96; do patch -s -o "$var/$v.cu" "$var/attn.cu" "$here/wgmma/$v.patch"; done
mkdir -p "$dev/proto-pipelined" "$dev/proto-wgmma" "$dev/proto-pingpong" "$dev/proto-96"
# call 5: the cp.async-pipelined mma.sync kernel against checkpoint 4's, NUM_WARPS x BLOCK_KV
for c in "4 64" "4 128" "8 64" "8 128"; do set -- $c
  nv -arch=sm_90a -DNUM_WARPS=$1 -DBLOCK_KV=$2 -o "$dev/proto-pipelined/attn_$1_$2" \
    "$here/pipelined/main.cu"; done
# call 6: the wgmma kernel (OVERLAP = 1 and its simple variant), BLOCK_KV 128 and 64
nv -gencode arch=compute_90a,code=sm_90a -o "$dev/proto-wgmma/attn" "$here/wgmma/attn.cu"
nv -gencode arch=compute_90a,code=sm_90a -DBLOCK_KV=64 -o "$dev/proto-wgmma/attn64" \
  "$here/wgmma/attn.cu"
# call 8: ping-pong consumers (PINGPONG 1) against none (0), BLOCK_KV x NUM_STAGES
for c in "1 128 2" "0 128 2" "1 64 2" "1 128 3"; do set -- $c
  nv -gencode arch=compute_90a,code=sm_90a -DOVERLAP=0 -DPINGPONG=$1 -DBLOCK_KV=$2 \
    -DNUM_STAGES=$3 -o "$dev/proto-pingpong/pp_$1_$2_$3" "$var/attn_pp.cu"; done
# call 11: 96-key tiles (a wgmma of N = 96 for S = Q K^T), with the overlap, two and three stages
nv -gencode arch=compute_90a,code=sm_90a -DBLOCK_KV=96 -o "$dev/proto-96/attn96" \
  "$var/attn96.cu"
nv -gencode arch=compute_90a,code=sm_90a -DBLOCK_KV=96 -DNUM_STAGES=3 -o "$dev/proto-96/attn96_s3" \
  "$var/attn96.cu"
