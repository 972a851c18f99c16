#!/bin/bash
# Regenerate docs/report.png: sweep the demo fleet, then screenshot its report in headless Chromium.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd); work=$(mktemp -d)
cd "$work"
sweep demo >/dev/null 2>&1 || true   # exit 1: the demo fleet has unreachable hosts
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$work/ud" --hide-scrollbars --window-size=1400,1880 \
  --screenshot="$root/docs/report.png" "file://$(ls -d "$work"/reports/*-demo)/report/report.html"
rm -rf "$work"
