#!/usr/bin/env bash
# Builds bench (bench.cu and the exports of prepare.py) into OUTDIR/bench:
#   build.sh PEAK WS CKPT OUTDIR [VARIANT ...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
peak=$1 ws=$2 ckpt=$3 out=$4; shift 4
names=$(python3 "$here/prepare.py" "$peak" "$ws" "$ckpt" "$out" "$@")
libs=()
for n in $names; do
  cmake -S "$out/$n" -B "$out/$n/build" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build "$out/$n/build" > /dev/null
  libs+=("$out/$n/build/libpeak_$n.a")
done
nvcc -O2 -std=c++20 -arch=sm_90a -I"$out" -o "$out/bench" "$here/bench.cu" "${libs[@]}" \
  -lcublas -lcuda
echo "built $out/bench"
