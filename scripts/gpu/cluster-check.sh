#!/usr/bin/env bash
# The cluster step of sequences/cuda-fp16.toml checked on the GPU in one call: its whole kernel
# (the checkpoint that replaying recordings/cuda-{fp16,bf16}-full compile-only gives;
# transformations/matmul/cluster.md) is validated (visible, hidden and
# sampled shapes, two seeds), tuned and timed at the bench shapes against cuBLAS by peak itself,
# in FP16 and BF16, once with CLUSTER_M = 2 (WG_N = 128, 256) and once with CLUSTER_M = 1
# (WG_N = 256), each over GROUP_M = 1, 8 (WG_M = 2, NUM_STAGES = 4). Before that, the cluster helper's
# GPU tests (Cluster2Fp16, ClusterOfOneFp16, ... of backend_cuda_gpu_tests) run when $BIN has
# them. Then the SASS of every configuration of the cluster step built (HGMMA, UTMALDG with
# MULTICAST, the cluster barrier) where cuobjdump is found.
# Writes $OUT/cluster-check.txt (the summary, also printed), CTX-clusterN.json (peak tune --json),
# CTX-clusterN.log (its progress), CTX-report.md, CTX-sass.txt and cluster-snippets.log.
# Usage: BIN=<dir with peak binaries> bash scripts/gpu/cluster-check.sh
#   LIMIT=seconds per peak tune (default 150: a kernel that hangs costs its configurations'
#   deadlines); when a CLUSTER_M = 2 run hits it, the other type's CLUSTER_M = 2 run is skipped.
# Exit status 0 when everything that ran passed.
source "$(dirname "$0")/env.sh"
set -o pipefail
summary=$OUT/cluster-check.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
status=0
start_all=$(date +%s)

# 1. The helper snippet on its own (about 20 s).
# (ClusterSnippetGpuTest.* from cluster_snippets_gpu_test.cpp, or HelperSnippetGpuTest.Cluster*
# where its cases moved into helper_snippets_testing.h.)
if [ -x "$BIN/backend_cuda_gpu_tests" ] &&
  "$BIN/backend_cuda_gpu_tests" --gtest_list_tests 2>/dev/null | grep -q '^  Cluster2Fp16'; then
  timeout 300 "$BIN/backend_cuda_gpu_tests" \
    --gtest_filter='ClusterSnippetGpuTest.*:ClusterSnippetGpuCases.*:HelperSnippetGpuTest.Cluster*' \
    >"$OUT/cluster-snippets.log" 2>&1
  rc=$?
  grep -E '^\[ observed \]' "$OUT/cluster-snippets.log" | tee -a "$summary"
  if [ $rc -eq 0 ]; then say "PASS cluster helper GPU tests"; else say "FAIL cluster helper GPU tests (rc $rc; cluster-snippets.log)"; status=1; fi
else
  say "SKIP cluster helper GPU tests: $BIN/backend_cuda_gpu_tests has no Cluster2Fp16 test (a build from before them)"
fi

# 2. The whole kernel, validated, tuned and timed against cuBLAS by peak.
skip_cluster2=0
for ctx in matmul-cuda-fp16 matmul-cuda-bf16; do
  ws=$(mktemp -d)/$ctx
  # The kernel of the cluster step, as its recording gives it: the recorded campaign replayed
  # compile-only (one configuration per step), the cluster checkpoint then tuned here.
  rec=$ROOT/recordings/${ctx#matmul-}-full
  "$BIN/peak" -q init "$ROOT/examples/$ctx" "$ws" >/dev/null &&
    "$BIN/peak" -q -C "$ws" run cuda-fp16 --llm "replay:$rec" --compile-only \
      --prompt-device "$rec/device.json" --strategy-budget 1 >"$OUT/$ctx-replay.log" 2>&1 ||
    { say "FAIL $ctx: the compile-only replay of $rec ($ctx-replay.log)"; status=1; continue; }
  ckpt=$("$BIN/peak" -C "$ws" log | awk '$0 ~ /apply cluster/ { print $1; exit }')
  [ -n "$ckpt" ] || { say "FAIL $ctx: no cluster checkpoint after the replay"; status=1; continue; }
  for cm in 2 1; do
    name=$ctx-cluster$cm
    if [ "$cm" = 2 ] && [ $skip_cluster2 = 1 ]; then
      say "SKIP $name: the previous CLUSTER_M = 2 run hung"
      status=1
      continue
    fi
    # Clusters of two over both B chunk counts (WG_N = 128: two 64-column chunks, 256: four);
    # clusters of one (the persistent kernel's path through the cluster helper) at its best tiles.
    if [ "$cm" = 2 ]; then wg_n=128,256; expect=4; else wg_n=256; expect=2; fi
    t0=$(date +%s)
    timeout "${LIMIT:-150}" "$BIN/peak" --json -C "$ws" tune "$ckpt" --full --strategy exhaustive \
      --tune WG_M=2 WG_N=$wg_n NUM_STAGES=4 GROUP_M=1,8 CLUSTER_M=$cm \
      >"$OUT/$name.json" 2>"$OUT/$name.log"
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    if [ $rc -eq 124 ]; then
      say "FAIL $name: peak tune did not finish within ${LIMIT:-150} s (a hang?); $name.log"
      status=1
      [ "$cm" = 2 ] && skip_cluster2=1
      continue
    fi
    # Passed only when every configuration passed validation (visible, hidden and sampled shapes)
    # and the best one was timed at both bench shapes.
    python3 - "$OUT/$name.json" "$name" "$rc" "$secs" "$expect" <<'EOF' | tee -a "$summary"
import json, sys
path, name, rc, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
expect = int(sys.argv[5])
try:
    s = json.load(open(path))
except Exception as e:
    print(f"FAIL {name}: no JSON from peak tune (rc {rc}): {e}")
    sys.exit(1)
disp = s.get("disposition")
counts = s.get("configs", {}).get("dispositions", {})
evaluated = s.get("configs", {}).get("evaluated", 0)
bench = s.get("bench", [])
ok = rc == 0 and disp == "passed" and counts == {"passed": evaluated} and evaluated >= expect \
    and len(bench) == 2 and all(b.get("disposition", "passed") == "passed" for b in bench)
print(f"{'PASS' if ok else 'FAIL'} {name}: {disp} in {secs} s; configurations {counts}; {s.get('message', '')}")
for t in s.get("top", []):
    c = t["config"]
    print(f"    WG_N={c.get('WG_N')} GROUP_M={c.get('GROUP_M')} CLUSTER_M={c.get('CLUSTER_M')}: "
          f"{t.get('score_ms', 0):.4f} ms at the tuning shape")
for b in bench:
    g, v = b.get("gflops", 0.0), b.get("baseline_gflops", 0.0)
    print(f"    {b.get('shape')}: {g / 1000:.1f} TFLOP/s, cuBLAS {v / 1000:.1f} TFLOP/s "
          f"({100 * g / v if v else 0:.1f}% of cuBLAS), best {s.get('best', {}).get('config_text', '')}")
sys.exit(0 if ok else 1)
EOF
    [ $? -eq 0 ] || status=1
  done
  "$BIN/peak" -C "$ws" report "$ckpt" --format markdown -o "$OUT/$ctx-report.md" >/dev/null 2>&1
  # SASS of every configuration built: the multicast copies, the warpgroup MMAs, cluster barriers.
  cuobjdump=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null)
  if [ -n "$cuobjdump" ]; then
    for cubin in "$ws"/.peak/cache/*.cubin; do
      [ -f "$cubin" ] || continue
      # The cluster checkpoint's configurations only (the cache holds every ancestor's too).
      grep -q -- '-DCLUSTER_M=' "${cubin%.cubin}.json" || continue
      defs=$(grep -oE -- '-D(WG_N|GROUP_M|CLUSTER_M)=[0-9]+' "${cubin%.cubin}.json" | sed 's/^-D//' | tr '\n' ' ')
      mix=$("$cuobjdump" -sass "$cubin" | grep -oE '(HGMMA|UTMALDG|UCGABAR|SYNCS)[.A-Z0-9_]*' | sort | uniq -c | tr -s ' ' | tr '\n' ';')
      echo "$defs: $mix" >>"$OUT/$ctx-sass.txt"
    done
    say "  $ctx SASS per configuration ($ctx-sass.txt):"
    sed 's/^/    /' "$OUT/$ctx-sass.txt" | tee -a "$summary"
    if grep -q 'CLUSTER_M=2' "$OUT/$ctx-sass.txt" && ! grep 'CLUSTER_M=2' "$OUT/$ctx-sass.txt" | grep -q 'MULTICAST'; then
      say "  note: no UTMALDG...MULTICAST found in the CLUSTER_M=2 SASS"
    fi
  else
    say "  (no cuobjdump: SASS not inspected)"
  fi
done
say "cluster-check: $([ $status -eq 0 ] && echo PASSED || echo FAILED) in $(( $(date +%s) - start_all )) s"
exit $status
