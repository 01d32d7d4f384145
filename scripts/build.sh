#!/usr/bin/env bash
# Configures and builds peak into build/ (Release with debug info, warnings as errors).
# Uses ccache when it is installed (scripts/setup-debian.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Builds of the same sources from other folders (clones, worktrees) share cache entries.
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(cd .. && pwd)}"
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPEAK_WERROR=ON "${launcher[@]}" >/dev/null
ninja -C build "$@"
