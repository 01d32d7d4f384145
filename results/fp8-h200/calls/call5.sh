#!/usr/bin/env bash
# fp8-pipelining (checkpoint 5 of call 4's workspace) searched over its whole space (the 127
# configurations its constraint admits), then per shape class for the classes off the squares,
# then the suite with the dispatch table.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh
stamp() { python3 "$R/scripts/stamp-lines.py"; }
O=$OUT/call5; mkdir -p $O
ws=$(mktemp -d)/ws; mkdir -p $ws; tar xzf results/fp8-h200/call4/cuda-fp8-ws.tar.gz -C $ws; cd $ws
start=$(date +%s)
timeout 240 "$BIN/peak" --json tune 5 --full --strategy exhaustive --budget 127,200s \
  > $O/tune.json 2> >(stamp > $O/tune.log)
echo "exhaustive tune exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
"$BIN/peak" report --format markdown -o $O/report.md > /dev/null 2>&1
for c in large-k small-m small-k; do
  start=$(date +%s)
  timeout 60 "$BIN/peak" --json tune --classes 5 --full --class $c --budget 24,40s \
    > $O/classes-$c.json 2> >(stamp > $O/classes-$c.log)
  echo "tune --classes --class $c exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
done
start=$(date +%s)
timeout 120 "$BIN/peak" --json bench 5 --full -o $O/suite.json > $O/bench.json 2> $O/bench.log
echo "bench exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
python3 "$R/scripts/suite-summary.py" $O/suite.json > $O/suite.md 2>&1
tar -czf $O/ws.tar.gz --exclude=./.peak/cache -C $ws .
cd $OUT && tar czf call5.tar.gz call5 && rm -rf call5/*.json call5/ws.tar.gz
cat call5/times.txt; cat call5/suite.md; grep -E "fp8-pipelining" call5/report.md | head -8
