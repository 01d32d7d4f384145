#!/usr/bin/env bash
# The irregular class (1024 x 2048 x 4096 and 8205 x 5921 x 2949) searched exhaustively in the
# fp16 and bf16 workspaces of calls 16 and 17, then each suite again with the new dispatch table.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh
stamp() { python3 "$R/scripts/stamp-lines.py"; }
for v in fp16:call16 bf16:call17; do
  n=${v%%:*}; O=$OUT/c5-$n; mkdir -p $O
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
  cd $OUT && tar czf c5-$n.tar.gz c5-$n && rm -rf c5-$n
  cd "$R"
done
