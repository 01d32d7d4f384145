#!/usr/bin/env bash
# Call 15: call 13's workspace (HLSL softmax, checkpoint 10) on the H200 through Vulkan, one
# search per shape class (`peak tune --classes 10 --class C --budget 12,45s`, the whole space),
# then the suite with the dispatch table those searches recorded (`peak bench 10 --full -o`).
cd "$(dirname "$0")/../../.."
R=$PWD; T0=$(date +%s)
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
left() { echo $(( ${1} - ($(date +%s) - T0) )); }
ws=$(mktemp -d)/ws && mkdir -p "$ws" && tar -xzf results/rows-h200/hlsl-call13/ws.tar.gz -C "$ws"
cd "$ws" || exit 4
for c in regular short-rows long-rows decode; do
  [ "$(left 230)" -gt 20 ] || break
  s=$(date +%s)
  timeout "$(left 240)" "$BIN/peak" --json tune --classes 10 --full --budget 12,45s --class $c \
    --device NVIDIA > "$OUT/classes-$c.json" 2> >(python3 "$R/scripts/stamp-lines.py" > "$OUT/classes-$c.txt")
  echo "tune --classes --class $c exit $? after $(( $(date +%s) - s )) s" | tee -a "$OUT/times.txt"
done
s=$(date +%s)
timeout "$(left 470)" "$BIN/peak" --json bench 10 --full --device NVIDIA -o "$OUT/suite.json" \
  2> >(python3 "$R/scripts/stamp-lines.py" > "$OUT/suite.log") >/dev/null
echo "bench 10 exit $? after $(( $(date +%s) - s )) s" | tee -a "$OUT/times.txt"
"$BIN/peak" report --format markdown -o "$OUT/report.md" >/dev/null 2>&1
tar -czf "$OUT/ws.tar.gz" --exclude=./.peak/cache -C "$ws" .
