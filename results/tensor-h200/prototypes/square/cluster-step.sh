#!/usr/bin/env bash
# The set-aside cluster step (checkpoint 11 of the cuda-fp16 campaign) with its version 1 helper
# (remote arrivals at cluster scope) and version 2 (at CTA scope), and the persistent checkpoint
# (10) it starts from, built for bench.cu: each recorded campaign replayed compile-only (one
# configuration a step, so each export holds the first configuration of its space:
# WG_N=128 NUM_STAGES=2 GROUP_M=8, CLUSTER_M=2), exported and linked into OUTDIR/bench.
#   cluster-step.sh PEAK V1_COMMIT OUTDIR
# V1_COMMIT: a commit whose transformations/matmul/cluster.md is version 1 (f9c5a15~1).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../../../.." && pwd)
peak=$(realpath "$1") v1=$2 out=$(realpath -m "$3")
mkdir -p "$out"; rm -rf "$out/v1tree"
git -C "$root" worktree add -q --detach "$out/v1tree" "$v1"
export_ckpt() {  # DATA_DIR WS CKPT NAME
  local rec=$1/recordings/cuda-fp16-full
  if [ ! -d "$2" ]; then
    PEAK_DATA_DIR=$1 "$peak" -q init "$1/examples/matmul-cuda-fp16" "$2" >/dev/null
    PEAK_DATA_DIR=$1 "$peak" -q -C "$2" run cuda-fp16 --llm "replay:$rec" --compile-only \
      --prompt-device "$rec/device.json" --strategy-budget 1 >"$2.log" 2>&1
  fi
  PEAK_DATA_DIR=$1 "$peak" -q -C "$2" export "$3" --name "$4" -o "$out/$4" --force >/dev/null
  cmake -S "$out/$4" -B "$out/$4/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$out/$4/build" >/dev/null
}
export_ckpt "$root" "$out/ws" 10 persist
export_ckpt "$root" "$out/ws" 11 clusterv2
export_ckpt "$out/v1tree" "$out/ws1" 11 clusterv1
git -C "$root" worktree remove --force "$out/v1tree"
{
  for n in persist clusterv1 clusterv2; do echo "#include \"$n/peak_$n.h\""; done
  echo '#define PROTO_VARIANTS {{"persist", peak_persist, peak_persist_workspace_size, true}, {"clusterv1", peak_clusterv1, peak_clusterv1_workspace_size, true}, {"clusterv2", peak_clusterv2, peak_clusterv2_workspace_size, true}}'
} >"$out/variants.h"
nvcc -O2 -std=c++20 -arch=sm_90a -I"$out" -o "$out/bench" "$here/bench.cu" \
  "$out"/{persist,clusterv1,clusterv2}/build/libpeak_*.a -lcublas -lcuda
echo "built $out/bench"
