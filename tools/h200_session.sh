#!/bin/bash
# Record idle / deep / load / fault captures with the real agent, time the probe, and check
# that probing changed no GPU setting (nvidia-smi -q before and after).
# Needs an NVIDIA GPU, nvidia-smi, python3 with nvidia-ml-py and a CUDA torch.
#   tools/h200_session.sh OUTDIR
set -u
OUTDIR=${1:?usage: tools/h200_session.sh OUTDIR}
. "$(dirname "$0")/bundle.sh"  # OUTDIR made absolute; $A runs the agent bundled by this host's python3
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | sed "s/^NVIDIA //"); N=$(nvidia-smi -L | grep -c "^GPU ")  # for the capture notes
nvidia-smi -L; python3 -c "import pynvml, torch; print(pynvml.__file__, torch.__version__)"
nvidia-smi -q > $OUTDIR/before-q.txt
$A --record $OUTDIR/h200-idle.json --note "$GPU idle, sweep agent live --record" --out $OUTDIR/idle > /dev/null; echo idle rc=$?
$A --deep --record $OUTDIR/h200-idle-deep.json --note "$GPU idle, --deep" --out $OUTDIR/idle-deep > /dev/null; echo deep rc=$?
python3 bench/bench_probe.py --agent $BUILD/agent.pyz --runs 10 --deep-runs 3 | tee $OUTDIR/bench_probe.md
$A --load 20 --record $OUTDIR/h200-load.json --note "$GPU under the agent's own --load 20 (torch bf16 matmul)" --out $OUTDIR/load > /dev/null; echo load rc=$?
$A --load 8 --load-engine ptx --out $OUTDIR/load-ptx > /dev/null; echo ptx rc=$?
CUDA_VISIBLE_DEVICES="" $A --deep --record $OUTDIR/h200-fault.json --note "$GPU idle, CUDA_VISIBLE_DEVICES='' exported, --deep" --out $OUTDIR/fault > /dev/null; echo fault rc=$?
sleep 2
nvidia-smi -q > $OUTDIR/after-q.txt
diff <(grep -E "Power Limit|ECC Mode|Persistence|MIG Mode|Compute Mode|Applications Clocks" -A2 $OUTDIR/before-q.txt) <(grep -E "Power Limit|ECC Mode|Persistence|MIG Mode|Compute Mode|Applications Clocks" -A2 $OUTDIR/after-q.txt) && echo "settings unchanged by the probe"
for d in idle idle-deep load load-ptx fault; do echo "== $d"; head -40 $OUTDIR/$d/health-report.md; done
nvidia-smi --query-compute-apps=pid,name --format=csv
