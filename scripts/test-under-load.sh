#!/usr/bin/env bash
# Runs the CPU test suite (or the ctest arguments given) while stress-ng keeps every core busy
# with other work, as a loaded CI machine or a user's busy desktop would. Tests must not depend on
# timing: this is how CI checks it. Needs stress-ng (scripts/setup-debian.sh installs it) and a
# build (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v stress-ng >/dev/null 2>&1; then
  echo "test-under-load: stress-ng is not installed (Debian/Ubuntu: apt-get install stress-ng)" >&2
  exit 4
fi
if [ $# -eq 0 ]; then set -- -LE gpu; fi
cores=$(nproc)
# One CPU hog per core, at the same priority as the tests: they share every core with it, as they
# would with another build.
stress-ng --cpu "$cores" --cpu-method matrixprod --timeout 3h --quiet &
load_pid=$!
stop_load() { kill "$load_pid" 2>/dev/null || true; wait "$load_pid" 2>/dev/null || true; }
trap stop_load EXIT
echo "test-under-load: stress-ng (pid $load_pid) keeps $cores core(s) busy"
ctest --test-dir build --output-on-failure --timeout 900 -j2 "$@"
