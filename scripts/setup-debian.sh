#!/usr/bin/env bash
# Installs everything peak needs to build and run, from Debian 12's packages.
# The CUDA toolkit (nvcc, cuBLAS) is not a Debian package: install it separately to get the CUDA
# backend; without it peak builds with the HLSL (Vulkan) backend only.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev
  nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libfmt-dev libdtl-dev libcpp-httplib-dev
  libcurl4-openssl-dev libsqlite3-dev sqlite3
  libvulkan-dev libvulkan1 mesa-vulkan-drivers vulkan-tools
  libshaderc-dev glslang-dev glslang-tools spirv-tools
  binutils ccache
  libseccomp-dev bubblewrap stress-ng
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all Debian packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
