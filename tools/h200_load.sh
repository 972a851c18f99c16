#!/bin/bash
# Re-record the idle and --load captures on one host, the full read taken mid-load.
# Needs an NVIDIA GPU, nvidia-smi, python3 with nvidia-ml-py and a CUDA torch (for the load).
#   tools/h200_load.sh OUTDIR
set -u
OUTDIR=${1:?usage: tools/h200_load.sh OUTDIR}
. "$(dirname "$0")/bundle.sh"  # OUTDIR made absolute; $A runs the agent bundled by this host's python3
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | sed "s/^NVIDIA //"); N=$(nvidia-smi -L | grep -c "^GPU ")  # for the capture notes
$A --record $OUTDIR/h200-idle.json --note "$GPU idle, sweep agent live --record" > $OUTDIR/idle.health.json; echo idle rc=$?
$A --load 20 --record $OUTDIR/h200-load.json --note "$GPU under the agent's own --load 20 (torch bf16 matmul)" > $OUTDIR/load.health.json; echo load rc=$?
python3 -c "import json; h=json.load(open('$OUTDIR/load.health.json')); g=h['gpus'][0]; print(g['clocks']['sm_mhz'], g['power']['draw_w'], g['clock_event_reasons']['active'], h['load']['summary'])"
nvidia-smi --query-compute-apps=pid,name --format=csv
