#!/usr/bin/env bash
# Configures and builds peak into build/ (Release with debug info, warnings as errors).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPEAK_WERROR=ON >/dev/null
ninja -C build "$@"
