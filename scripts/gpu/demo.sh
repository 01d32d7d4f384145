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
# The store with its blobs (sources, prompts, replies, compiler logs): reports show the diffs.
mkdir -p "$OUT/demo-$backend-store"
cp -r "$ws/.peak/FORMAT" "$ws/.peak/peak.db" "$ws/.peak/blobs" "$OUT/demo-$backend-store/"
"$BIN/peak" -q report --store "$OUT/demo-$backend-store" --html "$OUT/demo-$backend-report.html"
