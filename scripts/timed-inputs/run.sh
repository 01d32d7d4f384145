#!/usr/bin/env bash
# The host time of the timed checks' inputs of a row context at four large suite shapes, 20
# checked samples each: the whole X generated for every check (what a family without
# Family::reference_reads costs) against the rows of the checked elements written into a buffer
# kept from one check to the next (what Validator::timed_inputs does with it). Builds against
# the libraries of an existing build folder.
# Usage: scripts/timed-inputs/run.sh [BUILD_DIR] [CONTEXT_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
ctx=${2:-$root/examples/softmax-cuda-fp32}
out=$(mktemp -d)
g++ -std=c++20 -O2 -I"$root/src" -I"$build" -I"$build/generated" \
  "$root/scripts/timed-inputs/timed_inputs.cpp" -o "$out/timed-inputs" \
  "$build/libpeak_family.a" "$build/libpeak_context.a" "$build/libpeak_expr.a" \
  "$build/libpeak_util.a" -lfmt -ltomlplusplus
"$out/timed-inputs" "$ctx"
rm -rf "$out"
