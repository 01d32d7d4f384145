#!/usr/bin/env bash
# fp16, call 22's workspace (checkpoint 15, tma-store-epilogue): a configuration per shape class
# for the classes whose shapes one configuration serves worst (square: 2048, 4096 and 8192;
# irregular; small-m), each `peak tune --classes --class C --budget 12,40s`, then the suite with
# the dispatch table against cublasGemmEx. Call 25 is the same for bf16 in call 23's workspace:
# `CALL=call25 WS=call23-bf16 bash calls/call24.sh`.
cd "$(dirname "$0")/../../.."  # the repository root
source scripts/gpu/call-env.sh
CALL=${CALL:-call24}
O=$OUT/$CALL; mkdir -p $O
ws=$(mktemp -d)/ws; mkdir -p $ws; tar xf $R/results/tensor-h200/${WS:-call22-fp16}/ws.tar.xz -C $ws; cd $ws
for c in square irregular small-m; do
  start=$(date +%s)
  timeout 75 "$BIN/peak" --json tune --classes --full --class $c --budget 12,40s \
    > $O/classes-$c.json 2> >(stamp > $O/classes-$c.log)
  lap "tune --classes --class $c" $?
done
start=$(date +%s)
timeout 110 "$BIN/peak" --json bench --full -o $O/suite.json > $O/bench.json 2> >(stamp > $O/bench.log)
lap bench $?
python3 "$R/scripts/suite-summary.py" $O/suite.json > $O/suite.md 2>&1
tar -cJf $O/ws.tar.xz --exclude=./.peak/cache -C $ws .
cd $OUT && tar czf $CALL.tar.gz $CALL && cat $CALL/times.txt && cat $CALL/suite.md
