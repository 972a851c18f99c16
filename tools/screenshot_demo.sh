#!/bin/bash
# Regenerate docs/report.png: sweep the demo fleet with this checkout's sweep, then screenshot its
# report in headless Chromium. `sweep demo` exits 0 when the demo fleet behaved as designed.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd); work=$(mktemp -d)
cd "$work"
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" python3 -m sweep.cli demo >/dev/null 2>&1
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$work/ud" --hide-scrollbars --window-size=1400,1880 \
  --screenshot="$root/docs/report.png" "file://$(ls -d "$work"/reports/demo/*-demo)/report/report.html"
# The top box and the keys (the reference card and the keys side by side), as README links them (issue 41)
report="$(ls -d "$work"/reports/demo/*-demo)/report/report.html"
PYTHONPATH="$root/tests${PYTHONPATH:+:$PYTHONPATH}" python3 - "$report" "$root/docs/screenshots" <<'PY'
import sys
from pathlib import Path
from browser_page import Page
with Page(Path(sys.argv[1]).as_uri(), width=1400, height=1000) as page:
    page.screenshot(f"{sys.argv[2]}/topbox-demo.png", "#verdict", height=1000)
    page.screenshot(f"{sys.argv[2]}/keys-demo.png", "#classes", height=1000)
PY
rm -rf "$work"
# The health findings section (its first folded entry opened by a mouse click) and the chart, as in
# docs/screenshots/: PYTHONPATH=. python3 tools/screenshot_findings.py REPORT.html OUT.png
