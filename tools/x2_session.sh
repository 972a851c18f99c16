#!/bin/bash
# Topology and the device mask's renumbering on a host with two NVIDIA GPUs (recorded on two
# H200s joined by NV18). The agent's mapping (mask.selected) is checked later against torch's
# own view (--deep records each CUDA device's UUID as torch sees it).
# Needs 2+ NVIDIA GPUs, nvidia-smi, python3 with nvidia-ml-py and a CUDA torch.
#   tools/x2_session.sh OUTDIR
set -u
OUTDIR=${1:?usage: tools/x2_session.sh OUTDIR}
. "$(dirname "$0")/bundle.sh"  # OUTDIR made absolute; $A runs the agent bundled by this host's python3
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | sed "s/^NVIDIA //"); N=$(nvidia-smi -L | grep -c "^GPU ")  # for the capture notes
nvidia-smi -L; nvidia-smi topo -m | tee $OUTDIR/topo.txt
U0=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0); U1=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 1)
$A --deep --record $OUTDIR/x2-idle.json --note "${N}x $GPU idle, --deep, mask unset" > /dev/null; echo idle rc=$?
rec() { local name=$1 mask=$2; CUDA_VISIBLE_DEVICES="$mask" $A --deep --record $OUTDIR/x2-$name.json --note "${N}x $GPU, --deep, CUDA_VISIBLE_DEVICES=$mask" > $OUTDIR/x2-$name.health.json; echo "$name rc=$? $(python3 -c "import json,sys; h=json.load(open('$OUTDIR/x2-$name.health.json')); print([(s['cuda_index'], s['physical_index'], s['uuid']) for s in h['mask']['selected']], [d.get('uuid') for f in h['frameworks'] for d in f.get('devices') or []], h['topology']['worst_link_selected'])")"; }
rec mask-1 "1"
rec mask-1-0 "1,0"
rec mask-uuid-rev "$U1,$U0"
rec mask-bad "1,7,0"
python3 bench/bench_probe.py --agent $BUILD/agent.pyz --runs 10 --deep-runs 0 | tee $OUTDIR/bench_probe_x2.md
