#!/bin/bash
# Regenerate docs/report.png: sweep the demo fleet with this checkout's sweep, then screenshot its
# report in headless Chromium. `sweep demo` exits 0 when the demo fleet behaved as designed.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd); work=$(mktemp -d)
cd "$work"
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" python3 -m sweep.cli demo >/dev/null 2>&1
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$work/ud" --hide-scrollbars --window-size=1400,1880 \
  --screenshot="$root/docs/report.png" "file://$(ls -d "$work"/reports/*-demo)/report/report.html"
rm -rf "$work"
# The health findings section (its first folded entry opened by a mouse click) and the chart, as in
# docs/screenshots/: PYTHONPATH=. python3 tools/screenshot_findings.py REPORT.html OUT.png
