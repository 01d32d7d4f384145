#!/usr/bin/env bash
# The classes that calls 27 (fp16) and 28 (bf16) left below 80 % of cublasGemmEx, searched again
# over narrowed spaces in those calls' workspaces (checkpoint 17, tensor-stream-k): small-m with
# one consumer warpgroup (WG_M=1, WG_N 128 or 256) in both, irregular with 128-column tiles
# (WG_N=128, GROUP_M 8 or 16) in bf16, each `peak tune --classes --class C --budget 4,20s`; then
# the suite with the dispatch table against cublasGemmEx.
cd "$(dirname "$0")/../../.."  # the repository root
source scripts/gpu/call-env.sh
O=$OUT/call29; mkdir -p $O
fixed="--tune NUM_STAGES=4 --tune DP_TAIL_IDLE=2"
for run in "bf16 call28-bf16 irregular small-m" "fp16 call27-fp16 small-m"; do
  set -- $run; v=$1; from=$2; shift 2
  mkdir -p $O/$v; ws=$(mktemp -d)/ws; mkdir -p $ws
  tar xf $R/results/tensor-h200/$from/ws.tar.xz -C $ws; cd $ws
  for c in "$@"; do
    if [ $c = small-m ]; then space="--tune WG_M=1 --tune WG_N=128,256 --tune GROUP_M=8"
    else space="--tune WG_M=2 --tune WG_N=128 --tune GROUP_M=8,16"; fi
    start=$(date +%s)
    timeout 45 "$BIN/peak" --json tune --classes --full --class $c --budget 4,20s $space $fixed \
      > $O/$v/classes-$c.json 2> >(stamp > $O/$v/classes-$c.log)
    lap "$v tune --classes --class $c" $?
  done
  start=$(date +%s)
  timeout 115 "$BIN/peak" --json bench --full -o $O/$v/suite.json > $O/$v/bench.json \
    2> >(stamp > $O/$v/bench.log)
  lap "$v bench" $?
  python3 "$R/scripts/suite-summary.py" $O/$v/suite.json > $O/$v/suite.md 2>&1
  tar -cJf $O/$v/ws.tar.xz --exclude=./.peak/cache -C $ws .
  cd $R
done
cd $OUT && tar czf call29.tar.gz call29 && cat call29/times.txt && cat call29/*/suite.md
