#!/usr/bin/env bash
# The last checkpoint of call 15's fp16 campaign (padded-operands): an exhaustive search of its
# space at the bench shapes, a search per suite class (the dispatch table), and the suite beside
# cublasGemmEx with that table. Everything lands under $OUT/c3 as one tarball.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh
O=$OUT/c3; mkdir -p $O
ws=$(mktemp -d)/ws && mkdir -p "$ws" && tar -xf results/tensor-h200/call15/ws.tar.xz -C "$ws"
cd "$ws" || exit 4
stamp() { python3 "$R/scripts/stamp-lines.py"; }
start=$(date +%s)
timeout 150 "$BIN/peak" --json tune --full --strategy exhaustive --budget 80 > $O/tune.json 2> >(stamp > $O/tune.log)
echo "tune exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
start=$(date +%s)
timeout 220 "$BIN/peak" --json tune --classes --full --budget 12,40s > $O/classes.json 2> >(stamp > $O/classes.log)
echo "classes exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
start=$(date +%s)
timeout 150 "$BIN/peak" --json bench --full -o $O/suite.json > $O/bench.json 2> $O/bench.log
echo "bench exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
python3 "$R/scripts/suite-summary.py" $O/suite.json > $O/suite.md 2>&1; cat $O/suite.md
"$BIN/peak" report --format markdown -o $O/report.md > /dev/null 2>&1
tar -cJf $O/ws.tar.xz --exclude=./.peak/cache -C "$ws" .
cd $OUT && tar czf c3.tar.gz c3 && rm -rf c3
