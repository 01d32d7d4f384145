#!/usr/bin/env bash
# Call 14: the suite of call 13's workspace (checkpoint 10 with the configuration its search kept)
# on the H200 through Vulkan, every shape beside the same-run copy: `peak --json bench --full -o`.
cd "$(dirname "$0")/../../.."
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh
ws=$(mktemp -d)/ws && mkdir -p "$ws" && tar -xzf results/rows-h200/hlsl-call13/ws.tar.gz -C "$ws"
cd "$ws" || exit 4
start=$(date +%s)
timeout 480 "$BIN/peak" --json bench --full --device NVIDIA -o "$OUT/suite.json" \
  2> >(python3 "$R/scripts/stamp-lines.py" > "$OUT/suite.log") >/dev/null
echo "bench exit $? after $(( $(date +%s) - start )) s" | tee "$OUT/times.txt"
