#!/usr/bin/env bash
# Registers per thread of the row kernels before and after sized-instances and sized-cluster, from
# the recorded replies (macros region of cluster-rows and of sized-cluster, device region of
# vectors-in-flight, sized-instances and sized-cluster), built with nvcc for sm_90a as peak builds them (-O3 -std=c++17 -cubin) with
# -Xptxas -v. Writes registers.txt beside this script. Usage: bash run.sh (needs nvcc).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); rec=$here/../../../recordings; tmp=$(mktemp -d)
reply() { python3 -c 'import json,re,sys; print(re.search(r"```\w*\n(.*?)```", json.load(open(sys.argv[1]))["reply"], re.S).group(1), end="")' "$1"; }
build() {  # NAME MACROS DEVICE DEFINES...
  local name=$1 macros=$2 device=$3; shift 3
  { echo '#include <cuda_runtime.h>'; echo '#include <cuda_bf16.h>'; reply "$macros"; reply "$device"; } > "$tmp/$name.cu"
  echo "## $name: $*"
  nvcc -arch=sm_90a -O3 -std=c++17 -cubin -Xptxas -v "$@" "$tmp/$name.cu" -o "$tmp/$name.cubin" 2>&1 |
    awk '/Compiling entry function/ {split($0, a, "'"'"'"); k = a[2]} /Used [0-9]+ registers/ {match($0, /Used [0-9]+ registers/); print k ": " substr($0, RSTART + 5, RLENGTH - 15) " registers"}'
}
sm=(-DBLOCK=256 -DITEMS=8 -DSHORT_THREADS=128 -DSHORT_VECS=8 -DSPLITS=64 -DSPLIT_MIN_N=1024 -DBLOCKS_PER_CU=8 -DCLUSTER=8 -DLOOP_VECS=8)
{
  build softmax-vectors-in-flight "$rec/softmax-cuda/0021-4223d584d44a7886.json" "$rec/softmax-cuda/0027-05b35060bdcc954c.json" "${sm[@]}"
  build softmax-sized-instances "$rec/softmax-cuda/0021-4223d584d44a7886.json" "$rec/softmax-cuda/0028-ae1a782bbf1f276e.json" "${sm[@]}"
  for items in 8 4; do
    build rmsnorm-sized-instances-items$items "$rec/rmsnorm-cuda/0020-c261860dfcc2c8fc.json" "$rec/rmsnorm-cuda/0027-b72eff73c7df5ba3.json" \
      -DBLOCK=256 -DITEMS=$items -DSHORT_THREADS=128 -DSHORT_VECS=4 -DSPLITS=128 -DSPLIT_MIN_N=1024 -DBLOCKS_PER_CU=8 -DCLUSTER=8 -DLOOP_VECS=8
  done
  # sized-cluster: the cluster kernel's instances (CLUSTER_VECS 16 compiles every one of them).
  build softmax-sized-cluster "$rec/softmax-cuda/0030-1033f861e0c6eeb9.json" "$rec/softmax-cuda/0031-315254935e584037.json" "${sm[@]}" -DCLUSTER_VECS=16
  build rmsnorm-sized-cluster "$rec/rmsnorm-cuda/0029-4775dfc3e61827e4.json" "$rec/rmsnorm-cuda/0030-eaa22eeff913aac7.json" \
    -DBLOCK=256 -DITEMS=8 -DSHORT_THREADS=128 -DSHORT_VECS=4 -DSPLITS=128 -DSPLIT_MIN_N=1024 -DBLOCKS_PER_CU=8 -DCLUSTER=8 -DLOOP_VECS=8 -DCLUSTER_VECS=16
  build layernorm-sized-cluster "$rec/layernorm-cuda/0029-21be84fc66368aa3.json" "$rec/layernorm-cuda/0030-6e7bc82a5665af0b.json" "${sm[@]}" -DCLUSTER_VECS=16
  nvcc --version | tail -2
} > "$here/registers.txt"
rm -rf "$tmp"
cat "$here/registers.txt"
