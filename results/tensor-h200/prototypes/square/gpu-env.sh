# Sourced by calls/call30.sh and calls/call42.sh from the repository root, with O the call's
# output folder: the card's clocks into $O/nvidia-smi.csv, cuBLAS on the loader's path for
# .dev/proto/bench, and ncu (Nsight Compute) found.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv | tee $O/nvidia-smi.csv
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d $d ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
done
if ! ldd .dev/proto/bench | grep -q "libcublas.so.13 => /"; then
  lib=$(find / -name libcublas.so.13 -not -path '/proc/*' 2>/dev/null | head -1)
  export LD_LIBRARY_PATH=$(dirname "$lib"):${LD_LIBRARY_PATH:-}
fi
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
