# The cases of scripts/cli-cases.sh, one function each (sourced by it: uses its helpers).

case_1() {
  heading 1 "init into a folder that holds the user's files" \
    "exit 2, the user's files untouched; with --force they are kept where \`peak status\` says"
  mkdir -p "$TMP/mine"
  echo "// my own kernel" >"$TMP/mine/kernel.hlsl"
  echo "# mine" >"$TMP/mine/kernel.toml"
  run "$TMP" "$PEAK" init matmul-hlsl-fp32 mine
  note "kernel.hlsl now begins: \`$(head -1 "$TMP/mine/kernel.hlsl")\`"
  run "$TMP" "$PEAK" init matmul-hlsl-fp32 mine --force
  run "$TMP/mine" "$PEAK" status
}

case_2() {
  heading 2 "an emptied store read by a read-only command" \
    "exit 4 with the integrity hint; the emptied file stays empty"
  local ws
  ws=$(workspace emptied) || return
  : >"$ws/.peak/peak.db"
  run "$ws" "$PEAK" log
  note "peak.db: $(stat -c %s "$ws/.peak/peak.db") bytes after \`peak log\`"
  run "$ws" "$PEAK" status
  note "peak.db: $(stat -c %s "$ws/.peak/peak.db") bytes after \`peak status\`"
}

case_3() {
  heading 3 "stash pop of a stash made on an older checkpoint" \
    "the stash's change applied on HEAD's files (HEAD's own change kept); a clash gives conflict markers and exit 2, the stash kept"
  local ws
  ws=$(workspace stash) || return
  edit_region "$ws/kernel.hlsl" device "// the stashed edit"
  run "$ws" "$PEAK" -q stash -m "device note"
  edit_region "$ws/kernel.hlsl" macros "// HEAD's own edit"
  run "$ws" "$PEAK" -q commit -m "a note in the macros" --budget 1
  run "$ws" "$PEAK" stash pop
  note "after pop: HEAD's edit $(grep -c "HEAD's own edit" "$ws/kernel.hlsl") time(s), the stashed edit $(grep -c 'the stashed edit' "$ws/kernel.hlsl") time(s) in kernel.hlsl"
  # A clash: the stash and HEAD change the same line.
  run "$ws" "$PEAK" -q commit -m "the stashed note" --budget 1
  sed -i 's|// the stashed edit|// the stash says this|' "$ws/kernel.hlsl"
  run "$ws" "$PEAK" -q stash -m "clashing"
  sed -i 's|// the stashed edit|// HEAD says that|' "$ws/kernel.hlsl"
  run "$ws" "$PEAK" -q commit -m "HEAD's wording" --budget 1
  run "$ws" "$PEAK" stash pop
  note "conflict markers in kernel.hlsl: $(grep -c '^<<<<<<<\|^>>>>>>>' "$ws/kernel.hlsl"); stashes left: $("$PEAK" -C "$ws" stash list 2>/dev/null | grep -c .)"
}

case_4() {
  heading 4 "-o through a symbolic link, and onto a device node" \
    "the link stays a link (its target written) or is refused; a device node is never replaced"
  local ws
  ws=$(workspace space) || return
  run "$ws" "$PEAK" -q tune --budget 1
  echo "old" >"$TMP/target.json"
  ln -sfn "$TMP/target.json" "$TMP/link.json"
  run "$ws" "$PEAK" export-space -o "$TMP/link.json"
  note "link.json: $(stat -c %F "$TMP/link.json"); target.json: $(stat -c %s "$TMP/target.json") bytes"
  if [ "$(id -u)" -eq 0 ] && mknod "$TMP/full" c 1 7 2>/dev/null; then
    run "$ws" "$PEAK" export-space -o "$TMP/full"
    note "\$TMP/full (a copy of /dev/full's node): $(stat -c %F "$TMP/full")"
  else
    note "not root: the device-node case needs mknod"
  fi
}

case_5() {
  heading 5 "-o onto files whose last write fails" "exit 4, no \"wrote\""
  local ws
  ws=$(workspace report) || return
  run "$ws" "$PEAK" report -o /dev/full
  run "$ws" "$PEAK" report --format json -o /proc/version
}

# two_servers NAME CMD...: starts CMD (with PORT in it) twice on one port, the second after the
# first said it listens; prints both.
two_servers() {
  local name=$1
  shift
  "$@" >"$TMP/$name-1.out" 2>"$TMP/$name-1.err" &
  local first=$!
  BG_PIDS+=("$first")
  wait_for_line "$SERVE_READY" "$first" "$TMP/$name-1.out" "$TMP/$name-1.err" || true
  # A second server that starts serves until it is stopped: 30 s shows that it did.
  CASE_TIMEOUT=30 run "$TMP" "$@"
  note "the first is $(kill -0 "$first" 2>/dev/null && echo still serving || echo gone)"
  kill "$first" 2>/dev/null
  wait "$first" 2>/dev/null
}

case_6() {
  heading 6 "two servers on one port" "the second fails to listen, exit 4"
  local ws port
  ws=$(workspace serve) || return
  port=$(free_port)
  SERVE_READY="serving" two_servers serve "$PEAK" -C "$ws" serve --port "$port"
  port=$(free_port)
  SERVE_READY="listening" two_servers mcp "$PEAK" mcp --root "$TMP" --http "127.0.0.1:$port"
}

case_7() {
  heading 7 "pipelined MCP requests with a bad call among them" \
    "every request gets exactly one response, the bad call an error"
  local ws
  ws=$(workspace mcp) || return
  {
    echo '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cases","version":"1"}}}'
    echo '{"jsonrpc":"2.0","method":"notifications/initialized"}'
    echo '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"apply","arguments":{"workspace":"mcp","transformation":"no-such-step","llm":"replay:hlsl-fp32"}}}'
    echo '{"jsonrpc":"2.0","id":3,"method":"ping"}'
    echo '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"log","arguments":{"workspace":"mcp"}}}'
  } >"$TMP/requests.jsonl"
  (cd "$TMP" && timeout 120 "$PEAK" mcp --root "$TMP" <"$TMP/requests.jsonl" >"$TMP/out" 2>"$TMP/err")
  RC=$?
  show_result "peak mcp --root \$TMP < requests.jsonl (initialize, apply of an unknown transformation, ping, log)" "-"
  local id
  for id in 1 2 3 4; do
    note "responses to id $id: $(python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1]):
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("id") == int(sys.argv[2]): n += 1
print(n)' "$TMP/out" "$id")"
  done
}

case_8() {
  heading 8 "run --from past the sequence's end" "exit 2, nothing recorded as passed"
  local ws
  ws=$(workspace from) || return
  run "$ws" "$PEAK" run hlsl-fp32 --from 99 --llm replay:hlsl-fp32 --budget 1
  run "$ws" "$PEAK" status
}

case_9() {
  heading 9 "apply with an unknown --tune parameter" \
    "exit 2 before any device work; no evaluation recorded"
  local ws
  ws=$(workspace tune) || return
  run "$ws" "$PEAK" apply refactor --llm replay:hlsl-fp32 --tune BLOCK_Z=1,2
  run "$ws" "$PEAK" apply refactor --llm replay:hlsl-fp32 --tune BLOCK_X=1,,x
  note "evaluations of the seed: $("$PEAK" -C "$ws" --json show 1 --all 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("evaluations", [])))' 2>/dev/null || echo '?')"
}

case_10() {
  heading 10 "exit codes against docs/cli.md" \
    "replay of a missing folder 2; unknown --tune 2; report/show of a missing checkpoint 2 (JSON under --json); damaged FORMAT 4; unreadable .peak 4"
  local ws
  ws=$(workspace codes) || return
  run "$ws" "$PEAK" apply refactor --llm replay:/missing
  run "$ws" "$PEAK" tune --tune UNKNOWN=1,2
  run "$ws" "$PEAK" report 99
  run "$ws" "$PEAK" show 99
  run "$ws" "$PEAK" --json show 99
  run "$ws" "$PEAK" --json report 99
  cp "$ws/.peak/FORMAT" "$TMP/FORMAT.kept"
  echo "garbage" >"$ws/.peak/FORMAT"
  run "$ws" "$PEAK" log
  rm -f "$ws/.peak/FORMAT"
  run "$ws" "$PEAK" log
  cp "$TMP/FORMAT.kept" "$ws/.peak/FORMAT"
  if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    chmod -R a+rX "$ws" && chmod 000 "$ws/.peak"
    run "$ws" setpriv --reuid=65534 --regid=65534 --clear-groups "$PEAK" log
    chmod 755 "$ws/.peak"
  else
    chmod 000 "$ws/.peak"
    run "$ws" "$PEAK" log
    chmod 755 "$ws/.peak"
  fi
}

case_11() {
  heading 11 "summaries for people, hints that keep the run's options" \
    "no raw JSON in the summaries; the hints repeat --budget"
  local ws
  ws=$(workspace human) || return
  run "$ws" "$PEAK" tune --budget 2
  run "$ws" "$PEAK" validate --budget 2
  run "$ws" "$PEAK" apply no-such-step --llm replay:hlsl-fp32 --budget 2
  run "$ws" "$PEAK" run hlsl-fp32-short --llm manual --budget 2
}

case_12() {
  heading 12 "a killed run resumed while another peak holds the device lock" \
    "the test passes: it waits for the checkpoint, not for a clock"
  local ws tests
  tests=$(dirname "$PEAK")/cli_tests
  ws=$(workspace holder) || return
  # Another peak holds the device (lavapipe) for as long as its tuning takes.
  (cd "$ws" && "$PEAK" -q tune --budget 9 >/dev/null 2>&1) &
  local holder=$!
  BG_PIDS+=("$holder")
  if [ -x "$tests" ]; then
    run "$TMP" "$tests" --gtest_filter=Cli.KilledRunResumesWhereItStopped
  else
    note "$tests is not built"
  fi
  note "the other peak was $(kill -0 "$holder" 2>/dev/null && echo still running || echo done) when the test ended"
  kill "$holder" 2>/dev/null
  wait "$holder" 2>/dev/null
}

case_13() {
  heading 13 "a candidate that includes host files" \
    "the build fails; no line of /etc/passwd or /etc/group in the store, the logs or a prompt"
  local ws marker
  ws=$(workspace include) || return
  edit_region "$ws/kernel.hlsl" device '#include "/etc/passwd"'
  edit_region "$ws/kernel.hlsl" device '#include </etc/group>'
  edit_region "$ws/kernel.hlsl" device '#include "../../../../../../etc/hostname"'
  run "$ws" "$PEAK" commit -m "includes" --budget 1
  marker=$(head -1 /etc/passwd)
  note "the first line of /etc/passwd (\`${marker%%:*}:...\`) in the workspace's files: $(grep -rlF "$marker" "$ws/.peak" 2>/dev/null | wc -l) file(s)"
  marker=$(head -1 /etc/group)
  note "the first line of /etc/group in the workspace's files: $(grep -rlF "$marker" "$ws/.peak" 2>/dev/null | wc -l) file(s)"
  # nvcc quotes the lines of what it includes in its errors: only the sandbox keeps them out.
  ws=$(cuda_workspace include-cuda) || return
  edit_region "$ws/kernel.cu" device '#include "/etc/passwd"'
  edit_region "$ws/kernel.cu" device '#include </etc/group>'
  run "$ws" "$PEAK" commit -m "includes" "${CUDA_COMPILE_ONLY[@]}"
  note "lines of /etc/passwd or /etc/group in peak's output or the workspace's files: $(host_lines "$TMP/out" "$TMP/err" "$ws")"
}

# host_lines PATH...: how many of the files under PATH hold a line of /etc/passwd or /etc/group.
host_lines() {
  grep -rlF -f <(grep -h : /etc/passwd /etc/group) "$@" 2>/dev/null | wc -l
}

# cuda_workspace NAME: a fresh CUDA workspace, compiled only (no GPU needed) by the
# commands given CUDA_COMPILE_ONLY.
CUDA_COMPILE_ONLY=(--compile-only --budget 1)
cuda_workspace() {
  command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { note "nvcc is not installed"; return 1; }
  (cd "$TMP" && "$PEAK" -q init matmul-cuda-fp32 "$1" >/dev/null 2>&1) || return 1
  echo "$TMP/$1"
}

# set_region FILE REGION TEXT: REGION of FILE becomes TEXT.
set_region() {
  python3 - "$@" <<'PY'
import re, sys
path, region, body = sys.argv[1:4]
text = open(path).read()
begin, end = f"// peak:begin {region}\n", f"// peak:end {region}"
i, j = text.index(begin) + len(begin), text.index(end)
open(path, "w").write(text[:i] + body + "\n" + text[j:])
PY
}

case_14() {
  heading 14 "--compile-only without a device, plans every run would reject" \
    "each one fails with the disposition a run would give; the summary names the checks left to the device"
  local ws plan
  ws=$(cuda_workspace plans) || return
  cp "$ws/kernel.cu" "$TMP/kernel.cu.seed"
  local grid='  grid = (ceil_div(N, BLOCK_X), ceil_div(M, BLOCK_Y))'
  local args='  args = (A, B, C, M, N, K)'
  for plan in \
    "launch matmul|  grid = (0)|  block = (BLOCK_X, BLOCK_Y)|$args" \
    "launch matmul|$grid|  block = (BLOCK_X, BLOCK_Y)|  shared = 1024 * 1024|$args" \
    "scratch huge|  dtype = f32|  count = 1099511627776|launch matmul|$grid|  block = (BLOCK_X, BLOCK_Y)|$args" \
    "launch matmul|$grid|  block = (BLOCK_X, BLOCK_Y)|  args = (A, B, C, M, N)"; do
    cp "$TMP/kernel.cu.seed" "$ws/kernel.cu"
    set_region "$ws/kernel.cu" host "$(tr '|' '\n' <<<"$plan")"
    run "$ws" "$PEAK" commit -m "plan" "${CUDA_COMPILE_ONLY[@]}"
  done
  cp "$TMP/kernel.cu.seed" "$ws/kernel.cu"
  edit_region "$ws/kernel.cu" device "// unchanged kernel"
  run "$ws" "$PEAK" --json commit -m "a good plan" "${CUDA_COMPILE_ONLY[@]}"
  note "checks left to the device: $(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); s=s.get("summary", s); print(s.get("compile_only_unchecked", "?"))' "$TMP/out" 2>/dev/null || echo '?')"
}

case_15() {
  heading 15 "a when path wrong only on the tails its class admits" \
    "rejected (incorrect) on a hidden shape of its own, drawn from a recorded seed"
  local tests
  tests=$(dirname "$PEAK")/engine_tests
  if [ -x "$tests" ]; then
    run "$TMP" "$tests" --gtest_filter='WorkspaceTest.EveryWhenPathIsValidatedOnHiddenShapesWithTails:HiddenValidationShapes.*'
  else
    note "$tests is not built"
  fi
}

case_16() {
  heading 16 "static device data above 64 KiB" "workspace_exceeded at build time, up to several GiB"
  local ws size
  ws=$(cuda_workspace static) || return
  cp "$ws/kernel.cu" "$TMP/static.seed"
  for size in "(64 * 1024 + 4) / 4" "(1 << 28)" "(1ull << 30)" "(3ull << 30)"; do
    cp "$TMP/static.seed" "$ws/kernel.cu"
    python3 - "$ws/kernel.cu" "$size" <<'PY'
import sys
path, size = sys.argv[1:3]
t = open(path).read()
t = t.replace("// One thread per element of C.\n", f"// One thread per element of C.\n__device__ float kept[{size}];\n", 1)
t = t.replace("  C[row * N + col] = acc;", "  kept[row] = acc;\n  C[row * N + col] = acc;", 1)
open(path, "w").write(t)
PY
    note "\`__device__ float kept[$size]\`"
    run "$ws" "$PEAK" commit -m "static data" "${CUDA_COMPILE_ONLY[@]}"
  done
}

case_17() {
  heading 17 "a kernel that never ends" \
    "charged \`timeout\` (CPU device: within 3 minutes), then a correct candidate passes on the same device"
  # llvmpipe ends every loop of an invocation after 65535 iterations in all, so on the CPU device
  # the loop below (endless on a GPU) runs ~4 million dependent sines per invocation: minutes for
  # the larger shapes. Sizes are capped at 128 so the seed's tasks are short and the deadline is
  # the CPU floor.
  local ctx="$TMP/matmul-hlsl-fp32-small" ws
  cp -r "$REPO/examples/matmul-hlsl-fp32" "$ctx"
  sed -i 's/range = \[1, 1024, 1\]/range = [1, 128, 1]/' "$ctx/kernel.toml"
  (cd "$TMP" && "$PEAK" -q init "$ctx" hang >/dev/null 2>&1) || { note "peak init failed"; return; }
  ws="$TMP/hang"
  note "the context: matmul-hlsl-fp32 with every range capped at 128"
  python3 - "$ws/kernel.hlsl" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
last = "  C[row * N + col] = acc;\n}\n// peak:end device"
spin = ("  C[row * N + col] = acc;\n"
        "  float x = acc;\n"
        "  [loop] while (A[0] < 2.0f) {\n"
        "    [unroll] for (int j = 0; j < 64; ++j) x = sin(x) + 0.5f * A[0];\n"
        "    if (x > 4.0f) C[row * N + col] = x;\n"
        "  }\n}\n// peak:end device")
assert last in text
open(path, "w").write(text.replace(last, spin))
PY
  note "the spinning loop: \`$(grep -F -A3 'while (A[0]' "$ws/kernel.hlsl" | sed 's/^ *//' | tr '\n' ' ')\`"
  run "$ws" "$PEAK" commit -m "spins" --budget 1
  run "$ws" "$PEAK" checkout --force HEAD
  edit_region "$ws/kernel.hlsl" device "// a correct candidate"
  run "$ws" "$PEAK" commit -m "correct" --budget 1
}
