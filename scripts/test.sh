#!/usr/bin/env bash
# Installs packages, builds, and runs every test that needs no GPU (CPU Vulkan tests included).
# On a GPU host, `scripts/test.sh -L gpu` runs the GPU-labelled tests instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
bash scripts/build.sh
if [ $# -eq 0 ]; then set -- -LE gpu; fi
ctest --test-dir build --output-on-failure --timeout 600 -j2 "$@"
