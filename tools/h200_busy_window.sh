#!/bin/bash
# issue 22: a fresh `--load 10` capture with nvidia-smi sampling the same seconds (the oracle for the
# busy window), and CUDA's answers to the device-mask corpus (dashless UUID forms added).
# Read-only: changes no GPU setting; the load ends with the agent.
#   tools/h200_busy_window.sh OUTDIR
# Writes OUTDIR/load10-busy.json (capture), load10-busy.health.json, load10-busy.smi.csv, masks.json.
set -u
OUTDIR=${1:?usage: tools/h200_busy_window.sh OUTDIR}
. "$(dirname "$0")/bundle.sh"  # OUTDIR made absolute; $A runs the agent bundled by this host's python3
nvidia-smi --query-gpu=timestamp,index,utilization.gpu,clocks.sm,power.draw,clocks_event_reasons.active,clocks_event_reasons.sw_power_cap \
    --format=csv -lms 200 > "$OUTDIR/load10-busy.smi.csv" &
SMI=$!
sleep 1
date +%s.%N > "$OUTDIR/load10-busy.start"
$A --load 10 --record "$OUTDIR/load10-busy.json" --note "--load 10, nvidia-smi -lms 200 beside it (tools/h200_busy_window.sh)" \
    > "$OUTDIR/load10-busy.health.json"; echo "load rc=$?"
sleep 1
kill $SMI; wait $SMI 2>/dev/null
python3 tools/mask_corpus.py --record "$OUTDIR/masks.json" --agent "$A"; echo "masks rc=$?"
nvidia-smi --query-compute-apps=pid,name --format=csv
