#!/usr/bin/env bash
# A fresh Debian 12 machine to `peak demo`: install packages, build, run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
bash scripts/build.sh
exec ./build/peak demo "$@"
