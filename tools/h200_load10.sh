#!/bin/bash
# issue 14: `--load 10` (torch bf16 matmul) with the agent of git revision BEFORE (default main) and then
# with this tree's agent, one after the other on one host. The agent before the fix took its full
# read a fixed 5 s after starting the load child, which `import torch` alone can outlast; the fixed
# one waits for the child's "started" line and reads half-way through the load itself.
# Needs an NVIDIA GPU, nvidia-smi, python3 with nvidia-ml-py and a CUDA torch; run in a git checkout.
#   tools/h200_load10.sh OUTDIR [BEFORE]
# Writes OUTDIR/old.json and OUTDIR/new.json (tests/fixtures/h200/load10-fixed-time-read.health.json
# and load10.health.json were recorded so on 2026-11-30).
set -u
OUTDIR=${1:?usage: tools/h200_load10.sh OUTDIR [BEFORE]}
BEFORE=${2:-main}
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd) || exit 2
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
export PYTHONUNBUFFERED=1
git archive "$BEFORE" | tar -x -C "$WORK" || exit 1
(cd "$WORK" && python3 -c "from sweep.collect.bundle import build_bundle; build_bundle('$WORK/old.pyz')") || exit 1
python3 -c "from sweep.collect.bundle import build_bundle; build_bundle('$WORK/new.pyz')" || exit 1
for which in old new; do
  python3 -I -S "$WORK/$which.pyz" --load 10 > "$OUTDIR/$which.json"; echo "$which rc=$?"
done
