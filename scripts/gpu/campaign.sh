#!/usr/bin/env bash
# A recorded campaign replayed at the bench shapes in a workspace that can span several calls of
# a time-limited machine: after the run (also when LIMIT cuts it) the workspace is packed into
# $OUT/NAME-ws.tar.gz (its build cache left out), beside NAME-run.log and NAME-report.md.
# Usage: scripts/gpu/campaign.sh CONTEXT SEQUENCE RECORDING [peak run options]
#   NAME=label (default: SEQUENCE), LIMIT=seconds for the run (default 540),
#   WS_TAR=a packed workspace to unpack and continue in (CONTEXT is then not used; pass --resume
#   or --from N among the options), BENCH=1 to time the final checkpoint over the context's shape
#   suite too (`peak bench`, NAME-suite.txt) before the report.
source "$(dirname "$0")/env.sh"
ctx=${1:?usage: campaign.sh CONTEXT SEQUENCE RECORDING [options]}
seq=${2:?sequence}
rec=${3:?recording}
shift 3
name=${NAME:-$seq}
ws=$(mktemp -d)/ws
if [ -n "${WS_TAR:-}" ]; then
  mkdir -p "$ws" && tar -xzf "$WS_TAR" -C "$ws"
else
  "$BIN/peak" init "$ROOT/examples/$ctx" "$ws" >/dev/null
fi
cd "$ws" || exit 4
log=$OUT/$name-run.log
"$BIN/peak" doctor >>"$log" 2>&1
set -o pipefail
start=$(date +%s)
timeout "${LIMIT:-540}" "$BIN/peak" run "$seq" --llm "replay:$ROOT/recordings/$rec" --full "$@" \
  2>&1 | tee -a "$log" | grep -E "^step|passed|failed|rejected|error" | tail -40
rc=$?
echo "peak run exit $rc after $(( $(date +%s) - start )) s" | tee -a "$log"
if [ "${BENCH:-0}" = 1 ] && [ $rc -eq 0 ]; then
  "$BIN/peak" bench 2>&1 | tee "$OUT/$name-suite.txt" | tail -14
fi
"$BIN/peak" report --format markdown -o "$OUT/$name-report.md" >/dev/null 2>&1
tar -czf "$OUT/$name-ws.tar.gz" --exclude=./.peak/cache -C "$ws" .
exit $rc
