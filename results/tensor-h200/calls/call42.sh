#!/usr/bin/env bash
# Where the ping-pong prototype waits (call 33's profile left it open): one launch each of `whole`
# and `pingpong` at 4096^3 under Nsight Compute, (1) the stall reasons in cycles per issued
# instruction, (2) the SASS with its warp-stall samples per instruction. Built here first:
#   bash results/tensor-h200/prototypes/square/build.sh build/peak WS 17 /tmp/proto10 whole pingpong
#   strip -o .dev/proto/bench /tmp/proto10/bench
# (WS: call29-fp16/ws.tar.xz unpacked), then this script, carrying .dev/proto.
# Call 44: the same with call 43's build (whole pingpong pps3e2 pps4e1 pps5e1, /tmp/proto11):
#   CALL=call44 bash results/tensor-h200/calls/call42.sh
# Call 46: the same with call 45's build (whole pingpong pp128 pp128s5e2 pp128s6e2, /tmp/proto12):
#   CALL=call46 bash results/tensor-h200/calls/call42.sh
cd "$(dirname "$0")/../../.."  # the repository root
O=$OUT/${CALL:-call42}; mkdir -p $O
source results/tensor-h200/prototypes/square/gpu-env.sh
timeout 100 .dev/proto/bench --rounds 20 4096,4096,4096 > $O/bench.txt 2>&1
echo "bench exit $?" | tee -a $O/times.txt
timeout 200 $ncu --clock-control none --kernel-name regex:'matmul' --page raw --csv \
  --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,sm__cycles_elapsed.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active' \
  .dev/proto/bench --profile 4096,4096,4096 > $O/stalls.csv 2>&1
echo "ncu stalls exit $?" | tee -a $O/times.txt
timeout 200 $ncu --clock-control none --kernel-name regex:'matmul' --section WarpStateStats \
  --section SourceCounters --page source --print-source sass --csv \
  .dev/proto/bench --profile 4096,4096,4096 > $O/source.csv 2>&1
echo "ncu source exit $?" | tee -a $O/times.txt
xz -9 $O/source.csv
ls -la $O
