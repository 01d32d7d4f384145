#!/usr/bin/env bash
# Call 12: the recorded HLSL softmax campaign (recordings/softmax-hlsl) replayed on the H200
# through NVIDIA's Vulkan driver, one tuning configuration a step, every step timed beside the
# same-traffic copy (vkCmdCopyBuffer and the runner's 16-byte vector copy shader, the faster);
# then the suite of the last checkpoint reached, for what is left of the call (`peak bench
# --full -o`, which keeps every shape timed when the limit cuts it).
cd "$(dirname "$0")/../../.."
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
start=$(date +%s)
LIMIT=400 NAME=softmax-hlsl bash scripts/gpu/campaign.sh softmax-hlsl-fp32 softmax-hlsl \
  softmax-hlsl --strategy-budget 1 --device NVIDIA
echo "campaign exit $? after $(( $(date +%s) - start )) s" | tee $OUT/times.txt
ws=$(mktemp -d)/ws && mkdir -p "$ws" && tar -xzf $OUT/softmax-hlsl-ws.tar.gz -C "$ws"
cd "$ws" && timeout 130 "$BIN/peak" --json bench --full --device NVIDIA -o $OUT/suite.json \
  > $OUT/suite.txt 2>&1
echo "suite exit $? after $(( $(date +%s) - start )) s" | tee -a $OUT/times.txt
