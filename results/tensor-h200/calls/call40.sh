#!/usr/bin/env bash
# The set-aside cluster step at versions 1 and 2 of its helper beside the persistent checkpoint it
# starts from and cublasGemmEx, in one process (prototypes/square/bench.cu). Built here first:
#   bash results/tensor-h200/prototypes/square/cluster-step.sh build/peak f9c5a15~1 /tmp/cstep
#   strip -o .dev/proto/bench /tmp/cstep/bench
# then CALL=call40 NCU=0 bash results/tensor-h200/calls/call30.sh, carrying .dev/proto.
exec env CALL=${CALL:-call40} NCU=${NCU:-0} bash "$(dirname "$0")/call30.sh"
