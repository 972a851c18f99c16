#!/bin/bash
# Record this GPU host's captures for the tests: the agent live with --record, `nvidia-smi -q -x`
# taken at the same moment beside each (for the nvidia-smi cross-check), and CUDA's answers to the
# device-mask corpus. Read-only: changes no GPU setting, runs no load.
#
#   tools/record_captures.sh OUTDIR
#
# Writes OUTDIR/idle.json (+ .health.json, .smi.xml), idle-deep.*, fault.* (CUDA_VISIBLE_DEVICES=""
# with --deep), on hosts with 2+ GPUs mask-1.*, mask-1-0.*, mask-uuid-rev.*, mask-bad.* (--deep,
# CUDA_VISIBLE_DEVICES 1 / 1,0 / the two UUIDs reversed / 1,7,0), and masks.json (tools/mask_corpus.py).
# Needs: python3 with nvidia-ml-py (to bundle the agent), nvidia-smi; torch for the --deep captures.
set -u
OUTDIR=${1:?usage: tools/record_captures.sh OUTDIR}
. "$(dirname "$0")/bundle.sh"  # OUTDIR made absolute; $A runs the agent bundled by this host's python3
N=$(nvidia-smi -L | grep -c '^GPU ')

# rec NAME MASK|-unset- NOTE [agent options]: the agent and nvidia-smi -q -x, started together
rec() {
    local name=$1 mask=$2 note=$3; shift 3
    if [ "$mask" = "-unset-" ]; then
        (unset CUDA_VISIBLE_DEVICES; $A "$@" --record "$OUTDIR/$name.json" --note "$note" > "$OUTDIR/$name.health.json") &
    else
        CUDA_VISIBLE_DEVICES="$mask" $A "$@" --record "$OUTDIR/$name.json" --note "$note" > "$OUTDIR/$name.health.json" &
    fi
    local agent=$!
    nvidia-smi -q -x > "$OUTDIR/$name.smi.xml"; local smi=$?
    wait $agent; echo "$name: agent rc=$? nvidia-smi rc=$smi"
}
rec idle -unset- "idle, sweep agent live --record (tools/record_captures.sh)"
rec idle-deep -unset- "idle, --deep (tools/record_captures.sh)" --deep
rec fault "" "CUDA_VISIBLE_DEVICES='' exported, --deep (tools/record_captures.sh)" --deep
if [ "$N" -ge 2 ]; then
    U0=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0); U1=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 1)
    rec mask-1 "1" "--deep, CUDA_VISIBLE_DEVICES=1 (tools/record_captures.sh)" --deep
    rec mask-1-0 "1,0" "--deep, CUDA_VISIBLE_DEVICES=1,0 (tools/record_captures.sh)" --deep
    rec mask-uuid-rev "$U1,$U0" "--deep, CUDA_VISIBLE_DEVICES=<uuid 1>,<uuid 0> (tools/record_captures.sh)" --deep
    rec mask-bad "1,7,0" "--deep, CUDA_VISIBLE_DEVICES=1,7,0 (tools/record_captures.sh)" --deep
fi
python3 tools/mask_corpus.py --record "$OUTDIR/masks.json" --agent "$A"
