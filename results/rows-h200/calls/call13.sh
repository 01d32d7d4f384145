#!/usr/bin/env bash
# Call 13: the last checkpoint of call 12's HLSL softmax workspace (aligned-rows, checkpoint 10)
# tuned on the H200 through Vulkan with a real budget (call 12 gave each step one
# configuration): `peak tune --budget 48,6m --full`, the search and the final timing beside the
# same-run copy, then the report.
cd "$(dirname "$0")/../../.."
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh
ws=$(mktemp -d)/ws && mkdir -p "$ws" && tar -xzf results/rows-h200/hlsl-call12/softmax-hlsl-ws.tar.gz -C "$ws"
cd "$ws" || exit 4
start=$(date +%s)
timeout 450 "$BIN/peak" --json tune --budget 48,6m --full --device NVIDIA \
  > "$OUT/tune.json" 2> >(python3 "$R/scripts/stamp-lines.py" > "$OUT/tune.log")
echo "tune exit $? after $(( $(date +%s) - start )) s" | tee "$OUT/times.txt"
"$BIN/peak" report --format markdown -o "$OUT/report.md" >/dev/null 2>&1
tar -czf "$OUT/ws.tar.gz" --exclude=./.peak/cache -C "$ws" .
