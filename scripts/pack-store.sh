#!/usr/bin/env bash
# Packs committed stores for results/: a store folder DIR/store (FORMAT, blobs/, peak.db or
# peak.db.xz) becomes DIR/store.tar.xz, members at the top level, and a lone database X.db becomes
# X.db.xz; the originals are removed. The archives are reproducible (sorted, no owners or times).
# peak reads them where it read the folders (`peak report --store DIR/store`, `peak stats`), and
# scripts/gpu/env.sh's workspace_from_store unpacks them.
# Usage: scripts/pack-store.sh PATH...
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: scripts/pack-store.sh STORE_DIR|FILE.db ..." >&2; exit 2; }
for s in "$@"; do
  s=${s%/}
  if [ -f "$s" ] && [ "${s%.db}" != "$s" ]; then
    xz -9e -T1 -f "$s"
    echo "pack-store: $s -> $s.xz"
    continue
  fi
  [ -f "$s/FORMAT" ] || { echo "pack-store: $s is no store folder (no FORMAT)" >&2; exit 2; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cp -r "$s/FORMAT" "$s/blobs" "$tmp/"
  if [ -f "$s/peak.db" ]; then cp "$s/peak.db" "$tmp/"; else xz -dc "$s/peak.db.xz" >"$tmp/peak.db"; fi
  (cd "$tmp" && find FORMAT blobs peak.db -print0 | LC_ALL=C sort -z |
    tar --null --no-recursion --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - -T - |
    xz -9e -T1) >"$s.tar.xz"
  rm -rf "$tmp" "$s"
  trap - EXIT
  echo "pack-store: $s -> $s.tar.xz"
done
