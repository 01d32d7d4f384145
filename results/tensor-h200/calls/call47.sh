#!/usr/bin/env bash
# The cluster (version 2 arrivals) on the final kernel, timed three times: `whole` (checkpoint 17
# as tuned), clcta, clctag8, clsk, clskg8 and wstore (prototypes/square/prepare.py), each process
# 40 flushed rounds at 4096^3, 8192^3 and 4096 x 11008 x 4096 beside cublasGemmEx. Built here first:
#   bash results/tensor-h200/prototypes/square/build.sh build/peak WS 17 /tmp/proto16 whole clcta \
#     clctag8 clsk clskg8 wstore
#   strip -o .dev/proto/bench /tmp/proto16/bench
# (WS: call29-fp16/ws.tar.xz unpacked), then this script, carrying .dev/proto.
cd "$(dirname "$0")/../../.."  # the repository root
O=$OUT/${CALL:-call47}; mkdir -p $O
source results/tensor-h200/prototypes/square/gpu-env.sh
for r in 1 2 3; do
  timeout 150 .dev/proto/bench --rounds 40 4096,4096,4096 8192,8192,8192 4096,11008,4096 \
    > $O/bench-$r.txt 2>&1
  echo "bench $r exit $?" | tee -a $O/times.txt
done
grep -h median $O/bench-*.txt | awk '{print $1, $2, $11}'
