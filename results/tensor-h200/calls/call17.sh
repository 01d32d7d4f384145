#!/usr/bin/env bash
# The bf16 tensor-core campaign replayed on the GPU from the seed (six configurations a step),
# split-K and padded operands included; its last checkpoint searched exhaustively at the bench
# shapes and per suite class, then its suite beside cublasGemmEx. Under $OUT/c4 as one tarball.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh
O=$OUT/c4; mkdir -p $O
ws=$(mktemp -d)/ws
"$BIN/peak" init examples/matmul-cuda-bf16 "$ws" > /dev/null
cd "$ws" || exit 4
start=$(date +%s)
timeout 150 "$BIN/peak" --json run cuda-fp16 --llm replay:cuda-bf16-full --full \
  --strategy-budget 6 > $O/run.json 2> >(python3 "$R/scripts/stamp-lines.py" > $O/run.log)
echo "run exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
"$BIN/peak" log > $O/log.txt 2>&1
stamp() { python3 "$R/scripts/stamp-lines.py"; }
start=$(date +%s)
timeout 80 "$BIN/peak" --json tune --full --strategy exhaustive --budget 80 > $O/tune.json 2> >(stamp > $O/tune.log)
echo "tune exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
start=$(date +%s)
timeout 190 "$BIN/peak" --json tune --classes --full --budget 12,30s --class large-k --class small-m --class small-k --class irregular > $O/classes.json 2> >(stamp > $O/classes.log)
echo "classes exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
start=$(date +%s)
timeout 110 "$BIN/peak" --json bench --full -o $O/suite-head.json > $O/bench-head.json 2> $O/bench-head.log
echo "bench head exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
python3 "$R/scripts/suite-summary.py" $O/suite-head.json > $O/suite-head.md 2>&1; cat $O/suite-head.md
"$BIN/peak" report --format markdown -o $O/report.md > /dev/null 2>&1
tar -cJf $O/ws.tar.xz --exclude=./.peak/cache -C "$ws" .
cd $OUT && tar czf c4.tar.gz c4 && rm -rf c4
