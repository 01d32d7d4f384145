#!/usr/bin/env bash
# Times a checkpoint of a committed store over its context's shape suite (`peak bench`), cuBLAS
# (or hipBLAS) in the same run. The store (a folder with peak.db or peak.db.xz, blobs and FORMAT,
# or its archive: scripts/pack-store.sh) is copied into a fresh workspace, the checkpoint's files
# are checked out, and the example context's kernel.toml (which carries the suite) replaces the
# working one when the checkpoint's has none.
# Writes $OUT/NAME-suite.json (every raw sample), NAME-suite.txt (progress) and NAME-report.md
# (the suite's table and geometric mean with the checkpoint's steps) and NAME-ws.tar.gz (the
# workspace, its store holding the dispatch table and every measurement).
# Usage: scripts/gpu/bench-suite.sh STORE_DIR CHECKPOINT CONTEXT [peak bench options]
#   e.g. scripts/gpu/bench-suite.sh results/h100/cuda-fp32-whole/store 17 matmul-cuda-fp32
#   NAME=label (default: CONTEXT-CHECKPOINT)
#   CLASSES=1: first `peak tune --classes` (one search per shape class, BUDGET configurations per
#   class, default 24; NAME-classes.json and NAME-classes.txt), then the suite with the dispatch
#   table (NAME-suite.*) and with the best configuration alone (NAME-single.*), in one run.
#   ONLY="large-k small-m": search only these classes (`--class`); the others run the best
#   configuration.
#   TUNE="NAME=V1,V2 ...": the value sets the class searches range over (`--tune`), where the
#   checkpoint's space is too large to enumerate or its sequence narrowed it.
#   SINGLE=0: no `--single` suite after the dispatched one.
#   TUNE_<class>="..." (dashes as underscores: TUNE_small_m, TUNE_large_k): with ONLY, each class
#   named is searched by a call of its own (NAME-classes-CLASS.*) with these value sets (else
#   TUNE's), in the order of ONLY; every call keeps the classes searched before it (`kept`).
source "$(dirname "$0")/env.sh"
store=${1:?usage: bench-suite.sh STORE_DIR CHECKPOINT CONTEXT [options]}
ref=${2:?checkpoint}
ctx=${3:?context}
shift 3
name=${NAME:-$ctx-$ref}
ws=$(workspace_from_store "$store" "$ref") || exit 4
cd "$ws" || exit 4
grep -q '^\[suite\]' kernel.toml || cp "$ROOT/examples/$ctx/kernel.toml" kernel.toml
set -o pipefail
# One `peak tune --classes` call: LABEL, then the value sets and class options.
search() {
  local label=$1 start rc
  shift
  start=$(date +%s)
  "$BIN/peak" --json tune --classes "$ref" --full --budget "${BUDGET:-24}" "$@" \
    >"$OUT/$label.json" 2>"$OUT/$label.txt"
  rc=$?
  echo "peak tune --classes exit $rc after $(( $(date +%s) - start )) s" | tee -a "$OUT/$label.txt"
  return $rc
}
if [ "${CLASSES:-0}" = 1 ]; then
  per_class=0
  for c in ${ONLY:-}; do
    v="TUNE_${c//-/_}"
    [ -n "${!v:-}" ] && per_class=1
  done
  if [ $per_class = 1 ]; then
    for c in $ONLY; do
      v="TUNE_${c//-/_}"
      tune=()
      for t in ${!v:-${TUNE:-}}; do tune+=(--tune "$t"); done
      search "$name-classes-$c" --class "$c" "${tune[@]}" || exit $?
    done
  else
    tune=()
    for t in ${TUNE:-}; do tune+=(--tune "$t"); done
    for c in ${ONLY:-}; do tune+=(--class "$c"); done
    search "$name-classes" "${tune[@]}" || exit $?
  fi
fi
start=$(date +%s)
"$BIN/peak" --json bench "$ref" --full "$@" -o "$OUT/$name-suite.json" 2>&1 | tee "$OUT/$name-suite.txt"
rc=$?
echo "peak bench exit $rc after $(( $(date +%s) - start )) s" | tee -a "$OUT/$name-suite.txt"
if [ "${CLASSES:-0}" = 1 ] && [ "${SINGLE:-1}" = 1 ]; then
  "$BIN/peak" --json bench "$ref" --full --single "$@" -o "$OUT/$name-single.json" 2>&1 |
    tee "$OUT/$name-single.txt"
fi
"$BIN/peak" report --format markdown -o "$OUT/$name-report.md" >/dev/null 2>&1
# The workspace with the store that now holds the dispatch table and the suite's measurements.
tar -czf "$OUT/$name-ws.tar.gz" --exclude=./.peak/cache -C "$ws" .
exit $rc
