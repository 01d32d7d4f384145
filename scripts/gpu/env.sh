# Common set-up for the GPU scripts: binaries, output folder, Vulkan loader (if carried as .debs).
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${BIN:-$ROOT/build}
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
if [ -d "$ROOT/.gl" ] && ! ldconfig -p | grep -q libvulkan.so.1; then
  for f in "$ROOT"/.gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
export PEAK_DATA_DIR=$ROOT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv | tee "$OUT/nvidia-smi.csv"
