#!/usr/bin/env bash
# The irregular class searched exhaustively again, ranked by the geometric mean of its shapes'
# times (call 18 ranked by their sum), in the fp16 and bf16 workspaces of call 18, then each
# suite again with the new dispatch table.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh
stamp() { python3 "$R/scripts/stamp-lines.py"; }
for v in fp16:call18-fp16 bf16:call18-bf16; do
  n=${v%%:*}; O=$OUT/c6-$n; mkdir -p $O
  ws=$(mktemp -d)/ws && mkdir -p "$ws" && tar -xf results/tensor-h200/${v#*:}/ws.tar.xz -C "$ws"
  cd "$ws" || exit 4
  start=$(date +%s)
  timeout 170 "$BIN/peak" --json tune --classes --class irregular --full --strategy exhaustive \
    --budget 80,150s > $O/classes.json 2> >(stamp > $O/classes.log)
  echo "$n irregular exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
  start=$(date +%s)
  timeout 100 "$BIN/peak" --json bench --full -o $O/suite.json > $O/bench.json 2> $O/bench.log
  echo "$n bench exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
  python3 "$R/scripts/suite-summary.py" $O/suite.json > $O/suite.md 2>&1; cat $O/suite.md
  tar -cJf $O/ws.tar.xz --exclude=./.peak/cache -C "$ws" .
  cd $OUT && tar czf c6-$n.tar.gz c6-$n && rm -rf c6-$n
  cd "$R"
done
