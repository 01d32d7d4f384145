#!/usr/bin/env bash
# Regenerates the HTML reports of every store committed under results/ (a peak.db file, a store
# archive of scripts/pack-store.sh or a workspace's .peak folder: the report is written beside
# it), the stats over all of them (results/stats.html, .csv and .txt), and the README's
# screenshots (docs/images/) taken by headless Chromium. Usage: scripts/render-results.sh   (BIN=build by default)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build}
stores=()
while IFS= read -r -d '' f; do stores+=("$f"); done < <(
  find results \( \( -name "*.db" -o -name "*.db.xz" -o -name "store.tar.xz" -o -name "*-store.tar.xz" \) \
    -not -path "*/.peak/*" \) -print0 -o \( -type d -name .peak -prune -print0 \) | sort -z)
if [ ${#stores[@]} -eq 0 ]; then
  echo "render-results: no store under results/" >&2
  exit 1
fi
for s in "${stores[@]}"; do
  if [ -d "$s" ]; then
    out="$(dirname "$s")/report.html"
  elif [ "$(basename "$s")" = store.tar.xz ]; then  # DIR/store.tar.xz (scripts/pack-store.sh)
    out="$(dirname "$s")/report.html"
  elif [ "${s%-store.tar.xz}" != "$s" ]; then      # NAME-store.tar.xz: NAME-report.html
    out="${s%-store.tar.xz}-report.html"
  elif [ "${s%.db.xz}" != "$s" ]; then             # X-peak.db.xz: X-report.html
    base=${s%.db.xz}
    out="${base%-peak}-report.html"
  elif [ "$(basename "$s")" = peak.db ]; then  # a store folder (peak.db + blobs)
    d=$(dirname "$s")
    case "$d" in
      *-store) out="${d%-store}-report.html" ;;     # NAME-store/ (demo.sh): NAME-report.html
      */store) out="$(dirname "$d")/report.html" ;;  # DIR/store/: DIR/report.html
      *) out="$d/report.html" ;;
    esac
  else
    base=${s%.db}
    out="${base%-peak}-report.html"
  fi
  "$BIN/peak" -q report --store "$s" --html "$out"
  echo "render-results: $s -> $out"
done
"$BIN/peak" -q stats results --format html -o results/stats.html
"$BIN/peak" -q stats results --format csv -o results/stats.csv
"$BIN/peak" -q stats results --format text -o results/stats.txt
echo "render-results: results/stats.{html,csv,txt}"

# Screenshots at 1280x800 (the check fails on console errors, blank charts or overflow).
mkdir -p docs/images
cuda=$(ls results/*/cuda-campaign/*-report.html 2>/dev/null | head -1 || true)
if [ -n "$cuda" ]; then
  node web/test/check-page.js "$cuda" --screenshot docs/images/report-cuda.png >/dev/null
  echo "render-results: docs/images/report-cuda.png"
fi
node web/test/check-page.js results/stats.html --screenshot docs/images/stats.png >/dev/null
echo "render-results: docs/images/stats.png"

# The pages are kept compressed (`xz -dk FILE.html.xz` gives the page back): results/ travels to the
# GPU host with every call, within the size limit of what a call carries.
find results -name "*.html" -print0 | xargs -0 -r xz -9 -f
echo "render-results: every results/**/*.html compressed to .html.xz"
