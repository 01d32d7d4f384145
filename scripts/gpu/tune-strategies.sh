#!/usr/bin/env bash
# One checkpoint of a committed store tuned once per strategy over the same region, each search in
# a fresh workspace of its own (nothing measured by one is reused by another), its wall time
# measured around `peak tune`. For each strategy S: $OUT/NAME-S.log (progress and the result),
# NAME-S.json (`peak --json tune`: the best configuration, its timing at the bench shapes, the
# search's counts) and NAME-S-space.json (the search as a tuning cache, for `peak bench tuning`);
# then NAME-summary.txt, a line per strategy: evaluations, wall seconds, best time at the tuning
# shape and GFLOP/s at each bench shape.
# Usage: scripts/gpu/tune-strategies.sh STORE_DIR CHECKPOINT NAME=V1,V2 ... [-- peak tune options]
#   STRATEGIES="auto exhaustive" (default): the strategies, each with its default budget;
#   S:BUDGET (e.g. auto:24) gives one a budget of its own (`--strategy-budget`).
#   NAME=label (default: tune-CHECKPOINT)
source "$(dirname "$0")/env.sh"
store=${1:?usage: tune-strategies.sh STORE_DIR CHECKPOINT NAME=V1,V2 ... [-- options]}
ref=${2:?checkpoint}
shift 2
tune=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  tune+=(--tune "$1")
  shift
done
[ "${1:-}" = "--" ] && shift
name=${NAME:-tune-$ref}
summary=$OUT/$name-summary.txt
: >"$summary"
for spec in ${STRATEGIES:-auto exhaustive}; do
  strategy=${spec%%:*}
  label=$strategy
  budget=()
  if [ "$spec" != "$strategy" ]; then
    budget=(--strategy-budget "${spec#*:}")
    label=$strategy-${spec#*:}
  fi
  ws=$(workspace_from_store "$store" "$ref") || exit 4
  start=$(date +%s.%N)
  # Each progress line gets the seconds since peak started: where a search's time went.
  (cd "$ws" && "$BIN/peak" --json tune "$ref" --strategy "$strategy" "${budget[@]}" "${tune[@]}" \
    --export-space "$OUT/$name-$label-space.json" "$@" >"$OUT/$name-$label.json" \
    2> >(python3 -u "$ROOT/scripts/stamp-lines.py" "$start" >"$OUT/$name-$label.log"))
  rc=$?
  wait  # for the stamped log's last lines
  wall=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" \
    "$start" "$(date +%s.%N)")
  echo "peak tune --strategy $spec exit $rc after $wall s" | tee -a "$OUT/$name-$label.log"
  python3 - "$OUT/$name-$label.json" "$spec" "$wall" "$rc" >>"$summary" <<'PY'
import json, sys
path, spec, wall, rc = sys.argv[1:]
try:
    r = json.load(open(path))
except (OSError, ValueError):
    print(f"{spec}: exit {rc}, {wall} s, no result")
    sys.exit(0)
c = r.get("configs", {})
best = r.get("best", {}).get("config_text", "-")
rates = [f"{m['shape']}: {m['gflops']:.1f} GFLOP/s (median {m['median_ms']:.4f} ms)"
         for m in r.get("bench", []) if m.get("disposition") == "passed"]
print(f"{spec}: exit {rc}, {wall} s wall, {c.get('evaluated')} evaluated of {c.get('space')} "
      f"configurations ({c.get('stop')}); best {best}; " + "; ".join(rates))
PY
done
cat "$summary"
