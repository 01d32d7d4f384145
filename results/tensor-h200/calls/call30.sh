#!/usr/bin/env bash
# The squares measured outside peak: the exports of checkpoint 17 of call 29's fp16 workspace
# (WS: call29-fp16/ws.tar.xz unpacked), patched into variants (prototypes/square/prepare.py says
# what each is), timed beside cublasGemmEx in one process (prototypes/square/bench.cu), then one
# launch of each under Nsight Compute (NCU=0: none). Call 30 (Stream-K and the epilogue), built
# here first:
#   bash results/tensor-h200/prototypes/square/build.sh build/peak WS 17 /tmp/proto
#   strip -o .dev/proto/bench /tmp/proto/bench
# Call 31: the epilogue's buffering, the same script without the profile:
#   bash results/tensor-h200/prototypes/square/build.sh build/peak WS 17 /tmp/proto2 whole s3e2 \
#     s3e4 s3e5 s2e8 gstore notma noepi
#   strip -o .dev/proto/bench /tmp/proto2/bench; CALL=call31 NCU=0 bash results/tensor-h200/calls/call30.sh
# Call 32: TMA stores issued per warp (no warpgroup barrier in the epilogue), with and without Stream-K:
#   bash results/tensor-h200/prototypes/square/build.sh build/peak WS 17 /tmp/proto3 whole wstore \
#     wstoresk sk notma noepi
#   strip -o .dev/proto/bench /tmp/proto3/bench; CALL=call32 NCU=0 bash results/tensor-h200/calls/call30.sh
# Call 33: ping-pong consumers (64 x 256 tiles, units alternating between the consumers):
#   bash results/tensor-h200/prototypes/square/build.sh build/peak WS 17 /tmp/proto4 whole pingpong \
#     notma noepi
#   strip -o .dev/proto/bench /tmp/proto4/bench; CALL=call33 bash results/tensor-h200/calls/call30.sh
# Call 34: clusters of two blocks sharing B by multicast (the cluster step on this kernel):
#   bash results/tensor-h200/prototypes/square/build.sh build/peak WS 17 /tmp/proto5 whole cluster2 \
#     pingpong notma noepi
#   strip -o .dev/proto/bench /tmp/proto5/bench; CALL=call34 bash results/tensor-h200/calls/call30.sh
# Call 35: where the cluster's time goes (multicast, remote releases, the cluster launch):
#   bash results/tensor-h200/prototypes/square/build.sh build/peak WS 17 /tmp/proto6 whole cluster2 \
#     clownb cllocal notma noepi
#   strip -o .dev/proto/bench /tmp/proto6/bench; CALL=call35 bash results/tensor-h200/calls/call30.sh
# Call 36: the remote releases at the default semantics (release, CTA scope):
#   bash results/tensor-h200/prototypes/square/build.sh build/peak WS 17 /tmp/proto7 whole clcta \
#     clctaownb cllocal notma noepi
#   strip -o .dev/proto/bench /tmp/proto7/bench; CALL=call36 bash results/tensor-h200/calls/call30.sh
# Call 37: the cluster with CTA-scope releases, its tile groups, and with the Stream-K tail:
#   bash results/tensor-h200/prototypes/square/build.sh build/peak WS 17 /tmp/proto8 whole clcta \
#     clctag8 clsk clskg8 sk noepi
#   strip -o .dev/proto/bench /tmp/proto8/bench; CALL=call37 NCU=0 bash results/tensor-h200/calls/call30.sh
# Call 38: ping-pong consumers in clusters of two (B shared by multicast):
#   bash results/tensor-h200/prototypes/square/build.sh build/peak WS 17 /tmp/proto9 whole clctag8 \
#     ppcl ppcls5e1 pingpong noepi
#   strip -o .dev/proto/bench /tmp/proto9/bench; CALL=call38 bash results/tensor-h200/calls/call30.sh
# Call 43: ping-pong consumers with other pipeline depths (S stages, E staging buffers each):
#   bash results/tensor-h200/prototypes/square/build.sh build/peak WS 17 /tmp/proto11 whole pingpong \
#     pps3e2 pps4e1 pps5e1
#   strip -o .dev/proto/bench /tmp/proto11/bench; CALL=call43 NCU=0 bash results/tensor-h200/calls/call30.sh
# Call 45: ping-pong consumers with 128 x 128 units (then call 46, their profile, in the same run:
# CALL=call46 bash results/tensor-h200/calls/call42.sh):
#   bash results/tensor-h200/prototypes/square/build.sh build/peak WS 17 /tmp/proto12 whole pingpong \
#     pp128 pp128s5e2 pp128s6e2
#   strip -o .dev/proto/bench /tmp/proto12/bench; CALL=call45 NCU=0 bash results/tensor-h200/calls/call30.sh
cd "$(dirname "$0")/../../.."  # the repository root
O=$OUT/${CALL:-call30}; mkdir -p $O
source results/tensor-h200/prototypes/square/gpu-env.sh
start=$(date +%s)
timeout 240 .dev/proto/bench --rounds 40 4096,4096,4096 8192,8192,8192 2048,2048,2048 \
  4096,11008,4096 > $O/bench.txt 2>&1
echo "bench exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
[ "${NCU:-1}" = 1 ] || { grep -v samples $O/bench.txt; exit 0; }
start=$(date +%s)
timeout 200 $ncu --clock-control none --kernel-name-base demangled \
  --kernel-name regex:'matmul|gemm|sm90' --section SpeedOfLight --section LaunchStats \
  --section Occupancy --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
  .dev/proto/bench --profile 4096,4096,4096 > $O/ncu.txt 2>&1
echo "ncu exit $? after $(( $(date +%s) - start )) s" | tee -a $O/times.txt
grep -v "samples" $O/bench.txt | head -60
grep -E "^  [a-z_]|Duration|SM Frequency|Throughput|Registers|Grid Size|Block Size|cublas|matmul" $O/ncu.txt | head -80
