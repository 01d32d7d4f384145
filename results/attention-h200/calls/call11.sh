#!/usr/bin/env bash
# Call 11: the wgmma prototype with 96-key tiles (FlashAttention-3's intra-warpgroup overlap, and
# without it), two and three stages.
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,driver_version --format=csv | tee $OUT/smi.txt
for b in .dev/proto-96/attn96 .dev/proto-96/attn96_s3; do echo "== $b"; timeout 90 $b; echo "rc=$?"; done > $OUT/wgmma96.txt 2>&1
grep -E "==|rc=|RESULT" $OUT/wgmma96.txt
grep -E "SQ=8192|SQ=2048|SQ=512 |SQ=4096" $OUT/wgmma96.txt | grep -v ref_tc | cut -c1-110
