#!/usr/bin/env bash
# Compiles every configuration of ${LIST:-configs.txt} into cubins/NAME.cubin with peak's pinned nvcc flags.
set -u
cd "$(dirname "$0")"
SRC=${SRC:-kernel.cu}
mkdir -p cubins logs
one() {
  name=$1; shift
  defs=(); for kv in "$@"; do defs+=("-D$kv"); done
  nvcc -O3 -std=c++17 -cubin -lineinfo -Xptxas -v -gencode=arch=compute_90a,code=sm_90a \
    -ftz=false -prec-div=true -prec-sqrt=true "${defs[@]}" "$SRC" -o "cubins/$name.cubin" >"logs/$name.log" 2>&1
}
export -f one; export SRC
xargs -P "${JOBS:-16}" -L 1 bash -c 'one "$@"' _ < "${LIST:-configs.txt}"
