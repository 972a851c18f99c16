#!/bin/bash
# Re-record the idle and --load captures on one host, the full read taken mid-load.
# Needs an NVIDIA GPU, nvidia-smi, python3 with nvidia-ml-py and a CUDA torch (for the load).
#   tools/h200_load.sh OUTDIR
set -u
OUTDIR=${1:?usage: tools/h200_load.sh OUTDIR}
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd) || exit 2
BUILD=$(mktemp -d); trap 'rm -rf "$BUILD"' EXIT
export PYTHONUNBUFFERED=1
# The agent, bundled by this host's python3 (it then carries that python's byte code); needs nvidia-ml-py.
python3 -c "import sys; sys.path.insert(0, '.'); from sweep.collect.bundle import build_bundle; build_bundle('$BUILD/agent.pyz')" || exit 1
A="python3 -I -S $BUILD/agent.pyz"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | sed "s/^NVIDIA //"); N=$(nvidia-smi -L | grep -c "^GPU ")  # for the capture notes
$A --record $OUTDIR/h200-idle.json --note "$GPU idle, sweep agent live --record" > $OUTDIR/idle.health.json; echo idle rc=$?
$A --load 20 --record $OUTDIR/h200-load.json --note "$GPU under the agent's own --load 20 (torch bf16 matmul)" > $OUTDIR/load.health.json; echo load rc=$?
python3 -c "import json; h=json.load(open('$OUTDIR/load.health.json')); g=h['gpus'][0]; print(g['clocks']['sm_mhz'], g['power']['draw_w'], g['clock_event_reasons']['active'], h['load']['summary'])"
nvidia-smi --query-compute-apps=pid,name --format=csv
