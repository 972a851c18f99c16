#!/bin/bash
# Final H200 session: re-record idle/load with process entries read, a foreign-process capture,
# the probe's wall time with a bundle built by the host's own python (byte code used), the wrap
# overhead, and two wrapped runs (the second with an extra process holding memory) for sweep diff.
set -u
export PYTHONUNBUFFERED=1
C=$OUT/c; mkdir -p $C
python3 -c "import sys; sys.path.insert(0, '.'); from sweep.collect.bundle import build_bundle; build_bundle('build/agent-here.pyz')"
A="python3 -I -S build/agent-here.pyz"
python3 bench/bench_probe.py --agent build/agent-here.pyz --runs 15 --deep-runs 3 | tee $C/bench_probe.md
$A --record $C/h200-idle.json --note "H200 idle, sweep agent live --record" > /dev/null; echo idle rc=$?
$A --load 20 --record $C/h200-load.json --note "H200 under the agent's own --load 20 (torch bf16 matmul)" > $C/load.health.json; echo load rc=$?
HOLD='import torch, time; x = torch.empty(11 * 2**30, dtype=torch.uint8, device="cuda"); torch.cuda.synchronize(); print("holding", flush=True); time.sleep(60)'
python3 -c "$HOLD" & HP=$!; sleep 6
$A --record $C/h200-foreign.json --note "H200 idle with another process holding 11 GiB" > $C/foreign.health.json; echo foreign rc=$?
$A --wrap --interval 0.2 --out $C/wrap-b -- python3 bench/matmul_bench.py --seconds 8 > $C/wrap-b.log 2>&1; echo wrap-b rc=$?
kill $HP; wait $HP 2>/dev/null
sleep 2
$A --wrap --interval 0.2 --out $C/wrap-a --record $C/h200-wrap-matmul.json --note "H200 under sweep wrap of bench/matmul_bench.py" -- python3 bench/matmul_bench.py --seconds 8 > $C/wrap-a.log 2>&1; echo wrap-a rc=$?
python3 bench/bench_wrap.py --agent build/agent-here.pyz --runs 3 --interval 0.2 -- python3 bench/matmul_bench.py --seconds 8 | tee $C/bench_wrap.md
nvidia-smi --query-compute-apps=pid,name --format=csv
cp $C/wrap-a/provenance.json $C/wrap-a.provenance.json; cp $C/wrap-b/provenance.json $C/wrap-b.provenance.json
tar czf $OUT/final.tgz -C $OUT c
