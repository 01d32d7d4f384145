#!/usr/bin/env bash
# The recorded campaign of BACKEND (cuda or hlsl) replayed at full size.
# Usage: scripts/gpu/demo.sh BACKEND [peak demo options]
source "$(dirname "$0")/env.sh"
backend=${1:?usage: demo.sh cuda|hlsl [options]}
shift
ws=$(mktemp -d)/demo-$backend
set -o pipefail
"$BIN/peak" demo --backend "$backend" --full --dir "$ws" "$@" 2>&1 | tee "$OUT/demo-$backend.log" | tail -40
cp "$ws/report.md" "$OUT/demo-$backend-report.md"
cp "$ws/report.json" "$OUT/demo-$backend-report.json"
cp "$ws/.peak/peak.db" "$OUT/demo-$backend-peak.db"
