#!/usr/bin/env bash
# The row-kernel campaigns on the GPU: each recorded campaign replayed at the bench shapes, then
# its newest checkpoint (the last step that passed) timed over the context's shape suite with
# the same-traffic copy and cuDNN in the same runner tasks (`peak bench`). Writes, per context,
# $OUT/NAME-run.log, NAME-suite.json (every raw sample), NAME-suite.txt, NAME-report.md and
# NAME-ws.tar.gz (the workspace and its store, build cache left out).
# Usage: scripts/gpu/rows.sh CONTEXT:SEQUENCE:RECORDING ...
#   e.g. scripts/gpu/rows.sh softmax-cuda-fp32:softmax-cuda:softmax-cuda
#   LIMIT=seconds per replay (default 300); SEED=1 benches the seed alone (no replay).
source "$(dirname "$0")/env.sh"
set -o pipefail
status=0
for spec in "$@"; do
  IFS=: read -r ctx seq rec <<<"$spec"
  name=${rec:-$ctx}
  ws=$(mktemp -d)/ws
  "$BIN/peak" init "$ROOT/examples/$ctx" "$ws" >/dev/null || { status=4; continue; }
  cd "$ws" || exit 4
  log=$OUT/$name-run.log
  "$BIN/peak" doctor >"$log" 2>&1
  start=$(date +%s)
  if [ "${SEED:-0}" = 1 ]; then
    "$BIN/peak" tune --budget 4 >>"$log" 2>&1
  else
    timeout "${LIMIT:-300}" "$BIN/peak" run "$seq" --llm "replay:$ROOT/recordings/$rec" --full \
      >>"$log" 2>&1
  fi
  rc=$?
  echo "$name: replay exit $rc after $(( $(date +%s) - start )) s" | tee -a "$OUT/times.txt"
  [ $rc -eq 0 ] || status=$rc
  start=$(date +%s)
  "$BIN/peak" --json bench --full -o "$OUT/$name-suite.json" >"$OUT/$name-suite.txt" 2>&1
  echo "$name: bench exit $? after $(( $(date +%s) - start )) s" | tee -a "$OUT/times.txt"
  "$BIN/peak" report --format markdown -o "$OUT/$name-report.md" >/dev/null 2>&1
  tar -czf "$OUT/$name-ws.tar.gz" --exclude=./.peak/cache -C "$ws" .
  cd "$ROOT" || exit 4
done
exit $status
