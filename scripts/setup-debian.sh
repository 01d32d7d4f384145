#!/usr/bin/env bash
# Installs everything peak needs to build and run, from Debian 12's packages, and from the npm
# registry the pinned web code its HTML reports inline (web/) and the MCP tests' clients
# (tests/mcp).
# The CUDA toolkit (nvcc, cuBLAS) is not a Debian package: install it separately to get the CUDA
# backend; without it peak builds with the HLSL (Vulkan) backend only. hipcc (ROCm 5.2) is: the HIP
# backend builds every HIP candidate for AMD gfx90a and gfx1030 with it, on any machine.
# slurm-wlm and munge: the campaign test starts its own Slurm on the loopback interface
# (docs/scale-out.md); nothing is configured system-wide.
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
  slurm-wlm munge
  chromium chromium-driver fonts-dejavu-core
  hipcc
)
# Node.js and npm (the web code and the browser tests): Debian's, unless a node is installed.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all Debian packages present"
else
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The web code, exactly as web/package-lock.json pins it (again only when the lock changed).
web="$(cd "$(dirname "$0")/.." && pwd)/web"
if cmp -s "$web/package-lock.json" "$web/node_modules/.peak-installed-lock" 2>/dev/null; then
  echo "setup: web code present"
else
  echo "setup: installing the web code (npm ci in web/)"
  (cd "$web" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$web/package-lock.json" "$web/node_modules/.peak-installed-lock"
fi

# The MCP tests' clients from the npm registry, at the versions in tests/mcp/package-lock.json:
# the official MCP TypeScript SDK and conformance suite (with the Node.js 22 the suite needs).
# Installed again only when the lock file changed.
mcp_tests="$(cd "$(dirname "$0")/.." && pwd)/tests/mcp"
stamp="$mcp_tests/node_modules/.peak-lock-sha256"
want="$(sha256sum "$mcp_tests/package-lock.json" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing the MCP test clients (npm ci in tests/mcp)"
  (cd "$mcp_tests" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" > "$stamp"
else
  echo "setup: MCP test clients present"
fi
