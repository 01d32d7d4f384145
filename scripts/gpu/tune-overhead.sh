#!/usr/bin/env bash
# Seconds per configuration by phase: the same exhaustive search of a committed store's
# checkpoint on each set of devices (default one GPU, then two: DEVICE_SETS="0 0,1"), each in a
# fresh workspace (scripts/gpu/tune-strategies.sh), then the table of both
# (scripts/tune-overhead-table.py): wall, search, seconds per configuration, final timing, the
# mean compile / validate / time of a configuration, and the speed-up over the first set.
# Usage: scripts/gpu/tune-overhead.sh STORE_DIR CHECKPOINT NAME=V1,V2 ... [-- peak tune options]
# Writes $OUT/overhead-<set>-exhaustive{.json,-space.json,.log} and $OUT/overhead-table.md.
source "$(dirname "$0")/env.sh"
store=${1:?usage: tune-overhead.sh STORE_DIR CHECKPOINT NAME=V1,V2 ... [-- options]}
ref=${2:?checkpoint}
shift 2
args=("$@")
case " $* " in *" -- "*) ;; *) args+=(--) ;; esac
rows=()
for set in ${DEVICE_SETS:-0 0,1}; do
  label=overhead-${set//,/-}
  NAME=$label STRATEGIES=exhaustive bash "$ROOT/scripts/gpu/tune-strategies.sh" "$store" "$ref" \
    "${args[@]}" --devices "$set"
  rows+=("devices-$set=$OUT/$label-exhaustive")
done
python3 "$ROOT/scripts/tune-overhead-table.py" "${rows[@]}" | tee "$OUT/overhead-table.md"
