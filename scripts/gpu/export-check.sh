#!/usr/bin/env bash
# An exported library (peak export, built as a shared library) beside `peak bench` in one run:
# the checkpoint of a committed store timed over its suite by peak (`--single`: its best
# configuration, the vendor library in the same task), then the export at the same shapes by
# peak-export-check (outputs against the runner's byte for byte, its own events), and the table of
# both (scripts/export-table.py). Writes $OUT/NAME-bench.json, NAME-export.json, NAME-table.md.
# Usage: scripts/gpu/export-check.sh STORE CHECKPOINT CONTEXT NAME LIBRARY ENTRY
#   DISPATCH_LIB=lib.so DISPATCH_ENTRY=peak_x: also check an export with a dispatch table (outputs
#   of every configuration against the runner's; NAME-dispatch.json).
#   NOBASE=1: `peak bench` a second time with --no-baseline (the kernel timed without the vendor
#   library interleaved, as the export is timed), and a second table (NAME-table-nobaseline.md).
#   CHECK_OPTS="...": peak-export-check's options (--samples N; --threads N; --queued-flush: a
#   flush of 512 MiB queued before each timed call, no gate, where the default is the runner's
#   protocol; --queued-flush --flush-l2-only: that flush twice the L2).
# Everything is packed into $OUT/NAME.tar.gz at the end.
source "$(dirname "$0")/env.sh"
store=$1 ref=$2 ctx=$3 name=$4 lib=$5 entry=$6
ws=$(workspace_from_store "$store" "$ref") || exit 4
cd "$ws" || exit 4
grep -q '^\[suite\]' kernel.toml || cp "$ROOT/examples/$ctx/kernel.toml" kernel.toml
"$BIN/peak" --json bench "$ref" --single >"$OUT/$name-bench.json" 2>"$OUT/$name-bench.txt"
echo "peak bench exit $?" | tee -a "$OUT/$name-bench.txt"
"$BIN/peak-export-check" "$ws" "$ref" "$lib" "$entry" ${CHECK_OPTS:-} -o "$OUT/$name-export.json" \
  2>&1 | tee "$OUT/$name-export.txt"
if [ -n "${DISPATCH_LIB:-}" ]; then
  "$BIN/peak-export-check" "$ws" "$ref" "$DISPATCH_LIB" "$DISPATCH_ENTRY" --samples 5 \
    -o "$OUT/$name-dispatch.json" 2>&1 | tee "$OUT/$name-dispatch.txt"
fi
if [ "${NOBASE:-0}" = 1 ]; then
  "$BIN/peak" --json bench "$ref" --single --no-baseline >"$OUT/$name-bench-nobaseline.json" \
    2>"$OUT/$name-bench-nobaseline.txt"
  echo "peak bench --no-baseline exit $?" | tee -a "$OUT/$name-bench-nobaseline.txt"
  python3 "$ROOT/scripts/export-table.py" "$OUT/$name-bench-nobaseline.json" \
    "$OUT/$name-export.json" "$name (peak bench --no-baseline)" | tee "$OUT/$name-table-nobaseline.md"
fi
python3 "$ROOT/scripts/export-table.py" "$OUT/$name-bench.json" "$OUT/$name-export.json" "$name" \
  | tee "$OUT/$name-table.md"
cp "$OUT/nvidia-smi.csv" "$OUT/$name-nvidia-smi.csv"
(cd "$OUT" && tar czf "$name.tar.gz" "$name"-* && rm -f "$name"-*)
