#!/bin/bash
# Record idle and --load with process entries read, a capture with another process holding
# 11 GiB, the probe's wall time (bundle built by the host's own python: byte code used), the
# wrap overhead, and two wrapped runs (the second with the extra process) for sweep diff.
# Needs an NVIDIA GPU, nvidia-smi, python3 with nvidia-ml-py and a CUDA torch.
#   tools/h200_final.sh OUTDIR
set -u
OUTDIR=${1:?usage: tools/h200_final.sh OUTDIR}
. "$(dirname "$0")/bundle.sh"  # OUTDIR made absolute; $A runs the agent bundled by this host's python3
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | sed "s/^NVIDIA //"); N=$(nvidia-smi -L | grep -c "^GPU ")  # for the capture notes
python3 bench/bench_probe.py --agent $BUILD/agent.pyz --runs 15 --deep-runs 3 | tee $OUTDIR/bench_probe.md
$A --record $OUTDIR/h200-idle.json --note "$GPU idle, sweep agent live --record" > /dev/null; echo idle rc=$?
$A --load 20 --record $OUTDIR/h200-load.json --note "$GPU under the agent's own --load 20 (torch bf16 matmul)" > $OUTDIR/load.health.json; echo load rc=$?
HOLD='import torch, time; x = torch.empty(11 * 2**30, dtype=torch.uint8, device="cuda"); torch.cuda.synchronize(); print("holding", flush=True); time.sleep(60)'
python3 -c "$HOLD" & HP=$!; sleep 6
$A --record $OUTDIR/h200-foreign.json --note "$GPU idle with another process holding 11 GiB" > $OUTDIR/foreign.health.json; echo foreign rc=$?
$A --wrap --interval 0.2 --out $OUTDIR/wrap-b -- python3 bench/matmul_bench.py --seconds 8 > $OUTDIR/wrap-b.log 2>&1; echo wrap-b rc=$?
kill $HP; wait $HP 2>/dev/null
sleep 2
$A --wrap --interval 0.2 --out $OUTDIR/wrap-a --record $OUTDIR/h200-wrap-matmul.json --note "$GPU under sweep wrap of bench/matmul_bench.py" -- python3 bench/matmul_bench.py --seconds 8 > $OUTDIR/wrap-a.log 2>&1; echo wrap-a rc=$?
python3 bench/bench_wrap.py --agent $BUILD/agent.pyz --runs 3 --interval 0.2 -- python3 bench/matmul_bench.py --seconds 8 | tee $OUTDIR/bench_wrap.md
nvidia-smi --query-compute-apps=pid,name --format=csv
cp $OUTDIR/wrap-a/provenance.json $OUTDIR/wrap-a.provenance.json; cp $OUTDIR/wrap-b/provenance.json $OUTDIR/wrap-b.provenance.json
