#!/bin/bash
# Device session on a two-GPU H200 host: topology and the device mask's renumbering, recorded.
# The agent's mapping (mask.selected) is checked later against torch's own view (--deep records
# each CUDA device's UUID as torch sees it).
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
C=$OUT/cap; mkdir -p $C
python3 -c "import sys; sys.path.insert(0, '.'); from sweep.collect.bundle import build_bundle; build_bundle('build/agent-here.pyz')"
A="python3 -I -S build/agent-here.pyz"
nvidia-smi -L; nvidia-smi topo -m | tee $C/topo.txt
U0=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0); U1=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 1)
$A --deep --record $C/x2-idle.json --note "2x H200 idle, --deep, mask unset" > /dev/null; echo idle rc=$?
rec() { local name=$1 mask=$2; CUDA_VISIBLE_DEVICES="$mask" $A --deep --record $C/x2-$name.json --note "2x H200, --deep, CUDA_VISIBLE_DEVICES=$mask" > $C/x2-$name.health.json; echo "$name rc=$? $(python3 -c "import json,sys; h=json.load(open('$C/x2-$name.health.json')); print([(s['cuda_index'], s['physical_index'], s['uuid']) for s in h['mask']['selected']], [d.get('uuid') for f in h['frameworks'] for d in f.get('devices') or []], h['topology']['worst_link_selected'])")"; }
rec mask-1 "1"
rec mask-1-0 "1,0"
rec mask-uuid-rev "$U1,$U0"
rec mask-bad "1,7,0"
python3 bench/bench_probe.py --agent build/agent-here.pyz --runs 10 --deep-runs 0 | tee $C/bench_probe_x2.md
python3 bench/bench_probe.py --agent build/agent.pyz --runs 10 --deep-runs 0 | tee $C/bench_probe_x2_nopyc.md
tar czf $OUT/x2.tgz -C $OUT cap
