#!/usr/bin/env bash
# Builds the decode bench and one cubin per line of configs.txt, with peak's nvcc flags.
# Output in ${DIR:-.dev/decode} of the repository (bench, cubins/, logs/), which run.sh uses.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
DIR=${DIR:-$here/../../../.dev/decode}
mkdir -p "$DIR/cubins" "$DIR/logs"
source "$here/cfg.sh"
python3 "$here/extract.py" "$DIR/kernel.cu"
cat "$DIR/kernel.cu" "$here/variants.cu" > "$DIR/all.cu"
cp "$here/configs.txt" "$DIR/"
nvcc -O2 -std=c++17 -arch=sm_90a "$here/bench.cu" -o "$DIR/bench" -lcuda -lcublas
cd "$DIR"
one() {
  name=$1; rows=$3; warps=$4; splits=$5; unroll=$6
  defs=(); for kv in $BASE SMALL_M_ROWS=$rows SMALL_M_WARPS=$warps SMALL_M_SPLITS=$splits SMALL_M_UNROLL=$unroll; do defs+=("-D$kv"); done
  nvcc -O3 -std=c++17 -cubin -lineinfo -Xptxas -v -gencode=arch=compute_90a,code=sm_90a \
    -ftz=false -prec-div=true -prec-sqrt=true "${defs[@]}" all.cu -o "cubins/$name.cubin" >"logs/$name.log" 2>&1
}
export -f one; export BASE
grep -v '^#' "$here/configs.txt" | xargs -P "${JOBS:-2}" -L 1 bash -c 'one "$@"' _
