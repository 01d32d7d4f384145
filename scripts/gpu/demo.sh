#!/usr/bin/env bash
# The recorded campaign of BACKEND (cuda or hlsl) replayed at full size.
# Usage: scripts/gpu/demo.sh BACKEND [peak demo options]
# TAG=NAME names the outputs demo-BACKEND-NAME-* (e.g. for a second build: BIN=... PEAK_DATA_DIR=...).
source "$(dirname "$0")/env.sh"
backend=${1:?usage: demo.sh cuda|hlsl [options]}
shift
name=demo-$backend${TAG:+-$TAG}
ws=$(mktemp -d)/$name
set -o pipefail
"$BIN/peak" demo --backend "$backend" --full --dir "$ws" "$@" 2>&1 | tee "$OUT/$name.log" | tail -40
cp "$ws/report.md" "$OUT/$name-report.md"
cp "$ws/report.json" "$OUT/$name-report.json"
# The store with its blobs (sources, prompts, replies, compiler logs): reports show the diffs.
mkdir -p "$OUT/$name-store"
cp -r "$ws/.peak/FORMAT" "$ws/.peak/peak.db" "$ws/.peak/blobs" "$OUT/$name-store/"
"$BIN/peak" -q report --store "$OUT/$name-store" --html "$OUT/$name-report.html"
