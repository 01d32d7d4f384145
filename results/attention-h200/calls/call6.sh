#!/usr/bin/env bash
# Call 6: the wgmma attention prototype (prototypes/wgmma: two consumer warpgroups, a cp.async
# producer warpgroup) against the mma.sync kernel of checkpoint 4.
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,driver_version --format=csv | tee $OUT/smi.txt
for b in .dev/proto-wgmma/attn .dev/proto-wgmma/attn64; do echo "== $b"; timeout 90 $b; echo "rc=$?"; done 2>&1 | tee $OUT/wgmma.txt
