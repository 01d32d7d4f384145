#!/usr/bin/env bash
# The long-rows class of softmax-cuda and rmsnorm-cuda ($@) on call 23's workspaces (HEAD
# sized-cluster) with clusters of 4 blocks of 512 threads (the same capacity, 131072 elements, as
# call 23's clusters of 8), one configuration each: a cluster of 8 needs 8 free multiprocessors of
# one GPC at once. No suite: the class search's final timing has each long row with cuDNN's.
cd "$(dirname "$0")/../../.."  # the repository root
R=$PWD
tar xJf .dev/gpubin.tar.xz
export PEAK_DATA_DIR=$R BIN=$R/build
source scripts/gpu/env.sh >/dev/null
for c0 in "$@"; do
  d=$OUT/$c0-call24; mkdir -p $d; ws=$(mktemp -d)/ws; mkdir -p $ws
  case $c0 in softmax) sv=8 cv=16 ;; rmsnorm) sv=4 cv=8 ;; esac
  tar xf $R/results/rows-h200/cluster/$c0-call23/ws.tar.xz -C $ws; cd $ws
  ck=$($BIN/peak log 2>/dev/null | head -1 | awk '{print $1}')
  args=(); for t in ITEMS=8 BLOCKS_PER_CU=8 LOOP_VECS=8 SHORT_THREADS=128 SHORT_VECS=$sv \
    SPLIT_MIN_N=1024 BLOCK=512 CLUSTER=4 CLUSTER_VECS=$cv SPLITS=128; do args+=(--tune $t); done
  s=$(date +%s)
  timeout 140 $BIN/peak --json tune --classes $ck --full --budget 1 --class long-rows "${args[@]}" \
    > $d/classes-long-rows.json 2> >(python3 $R/scripts/stamp-lines.py > $d/classes-long-rows.txt)
  echo "$c0: tune --classes --class long-rows exit $? after $(( $(date +%s) - s )) s" | tee -a $OUT/times.txt
  sqlite3 .peak/peak.db "select json_extract(config_json,'$.BLOCK'), json_extract(config_json,'$.CLUSTER'), json_extract(config_json,'$.CLUSTER_VECS'), shape, what, median_ms from measurements where what like 'class:%' order by id" > $d/measurements.txt 2>&1 || python3 -c 'import sqlite3; [print(*r, sep="|") for r in sqlite3.connect(".peak/peak.db").execute("select config_json, shape, what, median_ms from measurements where what like \"class:%\" order by id")]' > $d/measurements.txt
  tail -12 $d/measurements.txt
  cd $R
done
cp $OUT/nvidia-smi.csv $OUT/times.txt $OUT/ 2>/dev/null; true
