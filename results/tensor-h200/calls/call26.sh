#!/usr/bin/env bash
# fp16, call 24's workspace (checkpoint 15, tma-store-epilogue, with its dispatch table):
# 1. the context's hidden shapes gain the two of examples/matmul-cuda-fp16 that have a partial
#    last wave of tiles (the Stream-K tail's path), committed (`peak commit --budget 1`: the
#    checkpoint validated on them, one configuration timed);
# 2. tensor-stream-k replayed from the recording (`peak run cuda-fp16 --from 14`: its 24
#    configurations searched exhaustively at the bench shapes);
# 3. a configuration per class for CLASSES (default: square, wide, irregular, small-m), each
#    `peak tune --classes --class C --budget B`: B is 24,60s for square and CLASS_BUDGET (default
#    24,60s) for the others; the classes not searched keep the checkpoint's configuration;
# 4. the suite with the dispatch table against cublasGemmEx.
# Calls: 27 `CALL=call27 bash calls/call26.sh` (fp16; it gave each search 85 s) and 28 (bf16, in call 25's workspace)
# `CALL=call28 V=bf16 WS=call25-bf16 CLASS_BUDGET=16,40s bash calls/call26.sh`. Call 26 (fp16) was
# the same with `CLASSES="square wide"` and 90 s for each search, and the transformation's first
# text, whose `valid` key narrowed the supported shapes (results/tensor-h200/README.md).
cd "$(dirname "$0")/../../.."  # the repository root
source scripts/gpu/call-env.sh
CALL=${CALL:-call27}
V=${V:-fp16}
O=$OUT/$CALL; mkdir -p $O
ws=$(mktemp -d)/ws; mkdir -p $ws
tar xf $R/results/tensor-h200/${WS:-call24-fp16}/ws.tar.xz -C $ws; cd $ws
python3 - <<'PY'
p = 'kernel.toml'
s = open(p).read()
old = '  { M = 64, N = 704, K = 96 },\n]'
assert old in s
s = s.replace(old, '  { M = 64, N = 704, K = 96 },\n  { M = 1100, N = 2056, K = 136 },\n'
              '  { M = 700, N = 3001, K = 72 },\n]')
open(p, 'w').write(s)
PY
start=$(date +%s)
timeout 60 "$BIN/peak" commit -m "hidden shapes with a partial last wave of tiles" --full \
  --budget 1 > $O/commit.log 2>&1
lap "commit" $?
start=$(date +%s)
timeout 170 "$BIN/peak" run cuda-fp16 --from 14 --llm "replay:$R/recordings/cuda-$V-full" \
  --full 2> >(stamp > $O/step.log) > $O/step.out
lap "tensor-stream-k step" $?
for c in ${CLASSES:-square wide irregular small-m}; do
  b=${CLASS_BUDGET:-24,60s}; [ $c = square ] && b=24,60s
  start=$(date +%s)
  timeout 100 "$BIN/peak" --json tune --classes --full --class $c --budget $b \
    > $O/classes-$c.json 2> >(stamp > $O/classes-$c.log)
  lap "tune --classes --class $c --budget $b" $?
done
start=$(date +%s)
timeout 120 "$BIN/peak" --json bench --full -o $O/suite.json > $O/bench.json 2> >(stamp > $O/bench.log)
lap bench $?
python3 "$R/scripts/suite-summary.py" $O/suite.json > $O/suite.md 2>&1
"$BIN/peak" report --format markdown -o $O/report.md > /dev/null 2>&1
"$BIN/peak" log > $O/log.txt 2>&1
tar -cJf $O/ws.tar.xz --exclude=./.peak/cache -C $ws .
cd $OUT && tar czf $CALL.tar.gz $CALL && cat $CALL/times.txt && tail -3 $CALL/commit.log 2>/dev/null
tail -4 $CALL/step.log 2>/dev/null; cat $CALL/suite.md
