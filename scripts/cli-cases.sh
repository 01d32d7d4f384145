#!/usr/bin/env bash
# The command-line cases that must not lose a user's work, misreport a failure or let a hostile
# candidate through, each run for real against the built peak, with what it printed and its exit
# code. The workspaces are made with `peak init matmul-hlsl-fp32` (HLSL on Vulkan: lavapipe on a
# machine without a GPU); the CUDA cases compile only (nvcc, no GPU needed).
#
#   bash scripts/cli-cases.sh OUT.md [CASE ...]
#
# Writes a markdown page: per case, what it checks, each command with its exit code and the first
# lines it printed, and what the case expects. CASE numbers pick some (default all). PEAK=path
# overrides build/peak. Run as root it also shows that a device node named by -o is written
# through, never replaced (on a node of its own, made with mknod, never /dev/full itself).
set -u

if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  echo "usage: bash scripts/cli-cases.sh OUT.md [CASE ...]" >&2
  exit 2
fi
OUT=$(realpath -m "$1")
shift
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PEAK=${PEAK:-$REPO/build/peak}
export PEAK_DATA_DIR=$REPO
[ -x "$PEAK" ] || { echo "cli-cases: $PEAK is not built" >&2; exit 4; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/cli-cases.XXXXXX")
chmod 755 "$TMP"
BG_PIDS=()
cleanup() {
  for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  chmod -R u+rwx "$TMP" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
WANT=("$@")
: >"$OUT"
say() { printf '%s\n' "$*" >>"$OUT"; }

# wanted N: whether case N was asked for.
wanted() {
  [ ${#WANT[@]} -eq 0 ] && return 0
  local w
  for w in "${WANT[@]}"; do [ "$w" = "$1" ] && return 0; done
  return 1
}

# heading N TITLE EXPECTED: a case's heading and what it expects.
heading() {
  say ""
  say "## $1. $2"
  say ""
  say "Expected: $3"
  say ""
  echo "cli-cases: case $1" >&2
}

# run DIR CMD...: runs CMD in DIR (stdin from /dev/null), records the command, its exit code, its
# wall time and the first 12 lines of its stdout and stderr; the exit code is left in RC.
run() {
  local dir=$1
  shift
  local start end
  start=$(date +%s.%N)
  (cd "$dir" && timeout "${CASE_TIMEOUT:-600}" "$@" </dev/null >"$TMP/out" 2>"$TMP/err")
  RC=$?
  end=$(date +%s.%N)
  show_result "$*" "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')"
}

# show_result COMMAND SECONDS: the record of the last command (RC, $TMP/out, $TMP/err).
show_result() {
  local cmd=${1//$TMP/\$TMP}
  cmd=${cmd//$PEAK/peak}
  say "\`\`\`"
  say "\$ $cmd"
  say "# exit $RC in $2 s"
  if [ -s "$TMP/out" ]; then head -n 12 "$TMP/out" | sed "s#$TMP#\$TMP#g" >>"$OUT"; fi
  if [ -s "$TMP/err" ]; then head -n 12 "$TMP/err" | sed "s#$TMP#\$TMP#g; s/^/stderr: /" >>"$OUT"; fi
  say "\`\`\`"
}

# note TEXT: a line of observation (a file's size, a count) after a command.
note() { say "- $*"; }

# workspace NAME: a fresh HLSL workspace at $TMP/NAME.
workspace() {
  (cd "$TMP" && "$PEAK" -q init matmul-hlsl-fp32 "$1" >/dev/null 2>&1) ||
    { echo "cli-cases: peak init failed" >&2; exit 4; }
  echo "$TMP/$1"
}

# edit_region FILE REGION LINE: appends LINE at the end of REGION of FILE.
edit_region() {
  python3 - "$@" <<'EOF'
import sys
path, region, line = sys.argv[1:4]
text = open(path).read()
end = f"// peak:end {region}"
assert end in text, end
open(path, "w").write(text.replace(end, line + "\n" + end, 1))
EOF
}

# free_port: a port nothing listens on (bound once by the kernel's choice, then closed).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# wait_for_line PATTERN PID FILE...: waits until one of the FILEs holds PATTERN or PID has ended.
wait_for_line() {
  local pattern=$1 pid=$2
  shift 2
  while ! cat "$@" 2>/dev/null | grep -q "$pattern"; do
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
}

source "$REPO/scripts/cli-cases/cases.sh"

say "# peak command-line cases"
say ""
say "$("$PEAK" --version 2>&1 | head -1), $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -srm), user $(id -un)."
say "Reproduce: \`bash scripts/cli-cases.sh OUT.md\`."
for n in $(seq 1 17); do
  if wanted "$n"; then "case_$n"; fi
done
echo "cli-cases: wrote $OUT" >&2
