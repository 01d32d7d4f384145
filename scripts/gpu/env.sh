# Common set-up for the GPU scripts: binaries, output folder, Vulkan loader and NVIDIA's Vulkan
# driver files (the loader and EGL are carried as Debian packages in .gl/: scripts/gpu/fetch-gl.sh).
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${BIN:-$ROOT/build}
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
if [ -d "$ROOT/.gl" ] && ! { ldconfig -p | grep -q libvulkan.so.1 && ldconfig -p | grep -q libcpp-httplib && command -v bwrap >/dev/null; }; then
  for f in "$ROOT"/.gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
# NVIDIA's Vulkan driver needs EGL; without its manifest the loader finds no driver.
nv=/usr/local/nvidia/share
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nv/vulkan/icd.d/nvidia_icd.json" ]; then
  export VK_DRIVER_FILES=$nv/vulkan/icd.d/nvidia_icd.json
fi
if [ -z "${__EGL_VENDOR_LIBRARY_FILENAMES:-}" ] && [ -f "$nv/glvnd/egl_vendor.d/10_nvidia.json" ]; then
  export __EGL_VENDOR_LIBRARY_FILENAMES=$nv/glvnd/egl_vendor.d/10_nvidia.json
fi
# The examples, sequences, transformations and recordings that $BIN reads (another checkout's
# with another build's binaries, to compare two versions).
export PEAK_DATA_DIR=${PEAK_DATA_DIR:-$ROOT}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv | tee "$OUT/nvidia-smi.csv"

# A fresh workspace from a committed store: a folder (peak.db or peak.db.xz, blobs, FORMAT) or its
# archive (DIR/store.tar.xz for DIR/store, members at the top level), HEAD moved to checkpoint REF
# and its files written; prints the workspace's path.
# Usage: ws=$(workspace_from_store STORE_DIR REF)
workspace_from_store() {
  local store=$1 ref=$2 ws
  ws=$(mktemp -d)/ws
  mkdir -p "$ws/.peak"
  if [ ! -e "$store" ] && [ -f "$store.tar.xz" ]; then
    tar -xJf "$store.tar.xz" -C "$ws/.peak" --no-same-owner
  else
    cp -r "$store/FORMAT" "$store/blobs" "$ws/.peak/"
    if [ -f "$store/peak.db" ]; then
      cp "$store/peak.db" "$ws/.peak/peak.db"
    else
      xz -dc "$store/peak.db.xz" > "$ws/.peak/peak.db"
    fi
  fi
  # The store's HEAD moves to the checkpoint; `checkout HEAD` then writes its files (a copied
  # store comes without them).
  (cd "$ws" && "$BIN/peak" -q checkout --force --detach "$ref" >&2 &&
    "$BIN/peak" -q checkout --force HEAD >&2) || return 4
  echo "$ws"
}
