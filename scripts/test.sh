#!/usr/bin/env bash
# Installs packages, builds, and runs every test that needs no GPU (CPU Vulkan tests included).
# On a GPU host, `scripts/test.sh -L gpu` runs the GPU-labelled tests instead. With
# PEAK_TEST_UNDER_LOAD=1 they run while every core is busy with other work (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
bash scripts/build.sh
if [ $# -eq 0 ]; then set -- -LE gpu; fi
# PEAK_TEST_UNDER_LOAD=1 (what CI sets): the same tests while stress-ng keeps every core busy.
if [ "${PEAK_TEST_UNDER_LOAD:-0}" = 1 ]; then exec bash scripts/test-under-load.sh "$@"; fi
ctest --test-dir build --output-on-failure --timeout 600 -j2 "$@"
