#!/usr/bin/env bash
# Call 12: the recorded HLSL attention campaign (fused-attention, split-kv) replayed on the H200
# through NVIDIA's Vulkan driver, two tuning configurations a step.
cd "$(dirname "$0")/.."
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
LIMIT=450 NAME=attention-hlsl bash scripts/gpu/campaign.sh attention-hlsl-fp32 attention-hlsl \
  attention-hlsl --strategy-budget 2 --device NVIDIA
echo "campaign exit $?"
tail -30 $OUT/attention-hlsl-run.log
