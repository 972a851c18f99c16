#!/bin/bash
# Re-record the H200's idle and --load captures on one host, the full read taken mid-load.
set -u
export PYTHONUNBUFFERED=1
C=$OUT/c; mkdir -p $C
python3 -c "import sys; sys.path.insert(0, '.'); from sweep.collect.bundle import build_bundle; build_bundle('build/agent-here.pyz')"
A="python3 -I -S build/agent-here.pyz"
$A --record $C/h200-idle.json --note "H200 idle, sweep agent live --record" > $C/idle.health.json; echo idle rc=$?
$A --load 20 --record $C/h200-load.json --note "H200 under the agent's own --load 20 (torch bf16 matmul)" > $C/load.health.json; echo load rc=$?
python3 -c "import json; h=json.load(open('$C/load.health.json')); g=h['gpus'][0]; print(g['clocks']['sm_mhz'], g['power']['draw_w'], g['clock_event_reasons']['active'], h['load']['summary'])"
nvidia-smi --query-compute-apps=pid,name --format=csv
