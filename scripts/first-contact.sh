#!/usr/bin/env bash
# First contact with a model: how long peak takes to fail (or succeed) when the --llm spec, the
# key or the endpoint is wrong, flaky or fine. Each case runs on a fresh workspace made with
# `peak init examples/matmul-hlsl-fp32` (HLSL on Vulkan: lavapipe on a machine without a GPU);
# endpoints are loopback servers (scripts/loopback-llm.py) that answer, refuse or misbehave on
# purpose and count the requests they see.
#
#   bash scripts/first-contact.sh OUT.md
#
# Writes a markdown table (case | command | exit code | requests | wall time | peak's message),
# then the requests each server saw with their times, to OUT.md. Wall time is measured around
# the peak command alone (date +%s.%N). Where nothing listens (cases 1-3, 9b), the command is run
# a second time under strace to count its connections and the programs it started; that run is
# not timed. PEAK=path/to/peak overrides build/peak. Needs python3 and, for those counts, strace.
set -u

if [ $# -ne 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  echo "usage: bash scripts/first-contact.sh OUT.md" >&2
  exit 2
fi
OUT=$1
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PEAK=${PEAK:-$REPO/build/peak}
SERVER=$REPO/scripts/loopback-llm.py
export PEAK_DATA_DIR=$REPO
# A loopback server needs no key (peak then sends no Authorization header); the cases set a dummy
# one anyway, to see that it is sent and never printed. It is never written to OUT.
DUMMY_KEY=dummy-key-for-loopback-7f3a9c
[ -x "$PEAK" ] || { echo "first-contact: $PEAK is not built" >&2; exit 4; }
command -v python3 >/dev/null || { echo "first-contact: python3 is needed" >&2; exit 4; }
HAVE_STRACE=0
command -v strace >/dev/null && strace -f -qq -o /dev/null true 2>/dev/null && HAVE_STRACE=1

TMP=$(mktemp -d "${TMPDIR:-/tmp}/first-contact.XXXXXX")
SERVER_PID=
stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
    SERVER_PID=
  fi
}
cleanup() {
  stop_server
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_server NAME ARGS...: a loopback server; sets PORT and LOG.
start_server() {
  local name=$1
  shift
  LOG=$TMP/$name.requests.jsonl
  : >"$LOG"
  rm -f "$TMP/$name.port"
  python3 "$SERVER" --port-file "$TMP/$name.port" --log "$LOG" \
    --recordings "$REPO/recordings/hlsl-fp32" "$@" &
  SERVER_PID=$!
  for _ in $(seq 100); do
    [ -s "$TMP/$name.port" ] && break
    sleep 0.05
  done
  PORT=$(cat "$TMP/$name.port" 2>/dev/null) || { echo "first-contact: server failed" >&2; exit 4; }
}

# A port where nothing listens: bound once by the kernel's choice, then closed.
closed_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

new_workspace() {
  (cd "$REPO" && "$PEAK" init examples/matmul-hlsl-fp32 "$1" >/dev/null 2>&1) ||
    { echo "first-contact: peak init failed" >&2; exit 4; }
}

# The one line that says what happened.
one_line() {
  local out=$1 err=$2 line more
  line=$(grep -m1 -E '^peak( doctor)?: ' "$err")
  if [ -n "$line" ]; then
    more=$(grep -A1000 -m1 -E '^peak( doctor)?: ' "$err" | tail -n +2 | grep -c -v '^[[:space:]]*$')
    [ "$more" -gt 0 ] && line="$line (+$more more lines)"
  fi
  [ -z "$line" ] && line=$(grep -m1 -E '^\[MISS\]' "$out")
  [ -z "$line" ] && line=$(cat "$out" "$err" | grep -m1 -E '^(passed|failed|interrupted|stopped|done)\b')
  [ -z "$line" ] && line=$(grep -m1 -E '^\[ ok \] completion:' "$out")
  [ -z "$line" ] && line=$(grep -v '^[[:space:]]*$' "$err" | tail -n1)
  [ -z "$line" ] && line=$(grep -v '^[[:space:]]*$' "$out" | tail -n1)
  line=${line//$DUMMY_KEY/[the dummy key]}
  [ -n "$PORT" ] && line=${line//$PORT/PORT}
  [ ${#line} -gt 400 ] && line="${line:0:400}..."
  printf '%s' "$line" | sed -e 's/|/\\|/g'
}

ROWS=$TMP/rows.md
DETAILS=$TMP/details.md
: >"$ROWS"
: >"$DETAILS"

# run_case ID KEYMODE SERVERMODE SHOWN_COMMAND -- PEAK_ARGS...
#   KEYMODE: dummy (OPENAI_API_KEY=dummy key) or none (OPENAI_API_KEY and OPENAI_BASE_URL unset)
#   SERVERMODE: none (no endpoint involved), closed (a closed port), or server arguments for
#   loopback-llm.py ("ok" for none). PORT in the arguments is replaced by the port.
run_case() {
  local id=$1 keymode=$2 servermode=$3 shown=$4
  shift 5
  local ws=$TMP/ws-$id out=$TMP/$id.out err=$TMP/$id.err
  new_workspace "$ws"
  PORT= LOG=
  case $servermode in
    none) ;;
    closed) PORT=$(closed_port) ;;
    ok) start_server "$id" ;;
    *) # shellcheck disable=SC2086
       start_server "$id" $servermode ;;
  esac
  local args=() a
  for a in "$@"; do args+=("${a//PORT/$PORT}"); done
  local envs=(env -u OPENAI_BASE_URL -u ANTHROPIC_API_KEY -u ANTHROPIC_BASE_URL)
  if [ "$keymode" = none ]; then envs+=(-u OPENAI_API_KEY); else envs+=("OPENAI_API_KEY=$DUMMY_KEY"); fi

  local t0 t1 rc
  t0=$(date +%s.%N)
  (cd "$ws" && "${envs[@]}" "$PEAK" "${args[@]}" >"$out" 2>"$err" </dev/null)
  rc=$?
  t1=$(date +%s.%N)
  stop_server
  local wall
  wall=$(python3 -c "print(f'{$t1 - $t0:.2f}')")

  local requests detail leaked=no
  if grep -qF -- "$DUMMY_KEY" "$out" "$err" 2>/dev/null || grep -rqF -- "$DUMMY_KEY" "$ws" 2>/dev/null; then
    leaked=YES
  fi
  if [ -n "$LOG" ]; then
    requests=$(wc -l <"$LOG" | tr -d ' ')
    detail=$(python3 - "$LOG" "$t0" <<'EOF'
import json, sys
t0 = float(sys.argv[2])
parts = []
auth = set()
for line in open(sys.argv[1]):
    e = json.loads(line)
    auth.add(e["auth"])
    status = e["status"] or ("never answered" if e.get("fault") == "hang" else "closed, nothing sent")
    what = f'{e["method"]} {e["path"]} -> {status}'
    if e.get("fault") == "cut":
        what += " (body cut half-way)"
    elif e.get("fault") and e.get("fault") not in ("drop", "hang"):
        what += " (injected)"
    if e.get("answered_by"):
        what += f' [{e["answered_by"]}]'
    parts.append(f'{what} at +{e["t"] - t0:.2f} s')
a = "none" if not auth else ("yes" if auth == {True} else ("no" if auth == {False} else "mixed"))
print(f'Authorization header sent: {a}. ' + "; ".join(parts) if parts else "no request")
EOF
)
  else
    requests="-"
    detail="no server"
    if [ "$HAVE_STRACE" = 1 ]; then
      # Untimed second run under strace: connections to the endpoint, programs started.
      local ws2=$TMP/ws-$id-strace tr=$TMP/$id.strace
      new_workspace "$ws2"
      (cd "$ws2" && strace -f -qq -e trace=connect,execve -o "$tr" \
        "${envs[@]}" "$PEAK" "${args[@]}" >/dev/null 2>&1 </dev/null)
      local inet execs
      inet=$(grep -cE 'connect\(.*sa_family=AF_INET6?' "$tr")
      # execve lines: env, then peak itself; anything after that is a program peak started.
      execs=$(grep -E 'execve\(' "$tr" | grep -v 'execve(.*"env"' | grep -vc "execve(\"$PEAK\"")
      requests="- ($inet TCP connect)"
      detail="no server; under strace: $inet TCP connection attempt(s), $execs program(s) started by peak"
    fi
  fi
  local msg
  msg=$(one_line "$out" "$err")
  printf '| %s | `%s` | %s | %s | %s | %s |\n' "$id" "$shown" "$rc" "$requests" "$wall" "$msg" >>"$ROWS"
  printf -- '- **%s** (exit %s, %s s, key printed: %s): %s\n' "$id" "$rc" "$wall" "$leaked" "$detail" >>"$DETAILS"
  echo "first-contact: case $id: exit $rc, $requests request(s), ${wall} s" >&2
}

U='openai:m@http://127.0.0.1:PORT/v1'
B=(--budget 4)

run_case 1 dummy none "peak apply tb-tiling --llm foo:bar" \
  -- apply tb-tiling --llm foo:bar
run_case 2 none none "peak apply tb-tiling --llm openai:gpt-5 (no OPENAI_API_KEY)" \
  -- apply tb-tiling --llm openai:gpt-5
run_case 3 dummy closed "peak apply refactor --llm $U (nothing listening)" \
  -- apply refactor --llm "$U"
run_case 4 dummy "--all-status 401" "peak apply refactor --llm $U (401 to everything)" \
  -- apply refactor --llm "$U"
run_case 5 dummy "--model-missing" "peak apply refactor --llm $U (404 for the model; listing offers other-model)" \
  -- apply refactor --llm "$U"
run_case 6 dummy "--post-faults 429 --retry-after 1" "peak apply refactor --llm $U --budget 4 (first completion 429, Retry-After: 1)" \
  -- apply refactor --llm "$U" "${B[@]}"
run_case 7 dummy "--post-faults 500,500" "peak apply refactor --llm $U --budget 4 (first two completions 500)" \
  -- apply refactor --llm "$U" "${B[@]}"
run_case 8 dummy "--post-faults cut" "peak apply refactor --llm $U --budget 4 (first completion cut half-way)" \
  -- apply refactor --llm "$U" "${B[@]}"
run_case 9a dummy ok "peak doctor --llm $U (working server)" \
  -- doctor --llm "$U"
run_case 9b dummy closed "peak doctor --llm $U (nothing listening)" \
  -- doctor --llm "$U"
run_case 9c none ok "peak doctor --llm $U (working server, no OPENAI_API_KEY)" \
  -- doctor --llm "$U"
run_case 10 dummy "--hang" "peak apply refactor --llm $U (server accepts, never answers)" \
  -- apply refactor --llm "$U"

COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
{
  echo "# First contact with a model: how long peak takes to fail or succeed"
  echo
  echo "- machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')), $(uname -sr); HLSL on lavapipe (the CPU Vulkan device)"
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- peak: $("$PEAK" --version 2>/dev/null), source commit $COMMIT"
  echo "- reproduce: \`bash scripts/first-contact.sh results/cpu/first-contact.md\` (from the source folder, with peak built in build/)"
  echo
  echo "Each case runs on a fresh workspace (\`peak init examples/matmul-hlsl-fp32 WS\`) with"
  echo "PEAK_DATA_DIR set to the source folder. PORT is a loopback server"
  echo "(\`scripts/loopback-llm.py\`) that answers as the case says and counts the requests it sees;"
  echo "its completions carry the recorded replies of \`recordings/hlsl-fp32\` for the same pass"
  echo "(cases 6-8) or one small fenced code block (\`peak doctor\`). The loopback cases run with"
  echo "OPENAI_API_KEY set to a dummy value (never printed; checked absent from every output and"
  echo "workspace) except 9c, which runs with no key: a loopback server needs none. Wall time is the"
  echo "peak command alone; the success cases 6-8 include the seed's baseline evaluation and the"
  echo "candidate's validation and tuning on lavapipe (\`--budget 4\`), so the times of the requests"
  echo "below show the LLM part. Where no server runs, \`requests\` is the TCP connection attempts"
  echo "counted by a second, untimed run under strace."
  echo
  echo "| case | command | exit code | requests | wall time (s) | peak's one-line message |"
  echo "|---|---|---|---|---|---|"
  cat "$ROWS"
  echo
  echo "Requests each case's server saw (times from the start of the peak command):"
  echo
  cat "$DETAILS"
} >"$OUT"
echo "first-contact: wrote $OUT" >&2
