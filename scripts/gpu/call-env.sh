# Set-up shared by the GPU call scripts (results/*/calls/*.sh), sourced from the repository root:
# the stripped binaries of .dev/gpubin.tar.xz unpacked into build/, PEAK_DATA_DIR and BIN pointed at
# this tree, env.sh, and two helpers:
#   stamp     prefixes each line of its input with the seconds since it started (stamp-lines.py);
#   lap L RC  appends "L exit RC after N s" to $O/times.txt, N counted from $start.
R=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tar xJf "$R/.dev/gpubin.tar.xz" -C "$R"
export PEAK_DATA_DIR=$R BIN=$R/build
source "$R/scripts/gpu/env.sh"
stamp() { python3 "$R/scripts/stamp-lines.py"; }
lap() { echo "$1 exit $2 after $(( $(date +%s) - start )) s" | tee -a "$O/times.txt"; }
