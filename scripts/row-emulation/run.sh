#!/usr/bin/env bash
# Runs the device region of a row-campaign kernel (kernel.cu of a softmax-cuda-fp32,
# rmsnorm-cuda-bf16 or layernorm-cuda-fp32 workspace) in the CPU emulation of README.md, for
# four configurations. Usage: scripts/row-emulation/run.sh softmax|rmsnorm|layernorm KERNEL.cu
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
family=${1:?usage: run.sh softmax|rmsnorm|layernorm KERNEL.cu}
kernel=${2:?kernel.cu}
case $family in softmax) f=1 ;; rmsnorm) f=2 ;; layernorm) f=3 ;; *) echo "unknown family $family" >&2; exit 2 ;; esac
dir=$(mktemp -d)
awk '/peak:begin macros/{f=1;next}/peak:end macros/{f=0}f' "$kernel" > "$dir/macros.h"
# The emulation has no thread-block clusters: the cluster kernel (cluster-rows on; its template and
# instances from sized-cluster on) and its cooperative-groups header are left out, and the
# dispatch never takes the cluster path.
awk '/peak:begin device/{f=1;next}/peak:end device/{f=0}f' "$kernel" | python3 -c '
import re, sys
d = sys.stdin.read()
d = re.sub(r"#include <cooperative_groups.h>\n|namespace cg = cooperative_groups;\n", "", d)
# The cluster kernel, or (sized-cluster) its template NAME_cluster_rows and instances NAME_cluster_K.
pat = r"(?:__global__|__device__)[^;{]*?\s\w+_cluster(?:_rows|_\d+)?\("
while (m := re.search(pat, d)):
    start = d.rfind("\n\n", 0, m.start()) + 2  # with the comment (or template line) above it
    d = d[:start] + d[d.index("\n}\n", m.start()) + 3:]
sys.stdout.write(d)' > "$dir/device.inc"
# grid-rows (a from_grid parameter) changes the dispatch; vectors-in-flight adds LOOP_VECS;
# sized-instances dispatches to the instance that holds the row.
grid=0; grep -q from_grid "$dir/device.inc" && grid=1
loops=0; grep -q LOOP_VECS "$dir/device.inc" && loops=1
# sized-instances compiles the register-path kernels per row length (NAME_1 ... NAME_8).
sized=0; grep -q '_short_rows' "$dir/device.inc" && sized=1
status=0
# BLOCK ITEMS SHORT_THREADS SHORT_VECS SPLITS SPLIT_MIN_N BLOCKS_PER_CU LOOP_VECS
for cfg in "256 1 64 1 8 1024 4 1" "128 4 128 4 32 4096 1 2" "64 8 256 2 128 1024 2 8" \
  "32 2 32 8 16 1024 8 4"; do
  set -- $cfg
  lv=(); [ $loops = 1 ] && lv=(-DLOOP_VECS=$8)
  g++ -std=c++20 -O1 -w -DFAMILY=$f -DBLOCK=$1 -DITEMS=$2 -DSHORT_THREADS=$3 -DSHORT_VECS=$4 \
    -DSPLITS=$5 -DSPLIT_MIN_N=$6 -DBLOCKS_PER_CU=$7 -DGRID_ROWS=$grid -DSIZED=$sized "${lv[@]}" -I"$here" \
    -I"$dir" "$here/harness.cpp" -o "$dir/h" -lpthread
  rc=0
  out=$("$dir/h") || rc=$?
  [ $rc -eq 0 ] || status=1
  echo -n "BLOCK=$1 ITEMS=$2 SHORT_THREADS=$3 SHORT_VECS=$4 SPLITS=$5 SPLIT_MIN_N=$6 BLOCKS_PER_CU=$7"
  if [ $loops = 1 ]; then echo " LOOP_VECS=$8:"; else echo ":"; fi
  echo "$out" | sed 's/^/  /' 
done
rm -rf "$dir"
exit $status
