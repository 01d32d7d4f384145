#!/usr/bin/env bash
# The fp16 tensor-core campaign replayed on the GPU from the seed (six configurations a step),
# split-K and padded operands included, then the suite of its last checkpoint beside
# cublasGemmEx. Everything lands under $OUT/c2 as one tarball.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh
O=$OUT/c2; mkdir -p $O
ws=$(mktemp -d)/ws
"$BIN/peak" init examples/matmul-cuda-fp16 "$ws" > /dev/null
cd "$ws" || exit 4
start=$(date +%s)
timeout 330 "$BIN/peak" --json run cuda-fp16 --llm replay:cuda-fp16-full --full \
  --strategy-budget 6 > $O/run.json 2> >(python3 "$R/scripts/stamp-lines.py" > $O/run.log)
echo "run exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
"$BIN/peak" log > $O/log.txt 2>&1
head=$("$BIN/peak" --json log 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["checkpoints"][0]["id"])' 2>/dev/null)
echo "head $head" >> $O/times.txt
start=$(date +%s)
timeout 200 "$BIN/peak" --json bench --full -o $O/suite-head.json > $O/bench-head.json 2> $O/bench-head.log
echo "bench head exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
python3 "$R/scripts/suite-summary.py" $O/suite-head.json > $O/suite-head.md 2>&1; cat $O/suite-head.md
"$BIN/peak" report --format markdown -o $O/report.md > /dev/null 2>&1
tar -cJf $O/ws.tar.xz --exclude=./.peak/cache -C "$ws" .
cd $OUT && tar czf c2.tar.gz c2 && rm -rf c2
