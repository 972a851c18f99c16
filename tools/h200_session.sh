#!/bin/bash
# One device session on the H200: record idle / deep / load / fault captures with the real agent,
# time the probe, and check that probing changed nothing. Usage (device tool): bash tools/h200_session.sh
set -u
export PYTHONUNBUFFERED=1
C=$OUT/cap; mkdir -p $C
A="python3 -I -S build/agent.pyz"
nvidia-smi -L; python3 -c "import pynvml, torch; print(pynvml.__file__, torch.__version__)"
nvidia-smi -q > $C/before-q.txt
$A --record $C/h200-idle.json --note "H200 idle, sweep agent live --record" --out $C/idle > /dev/null; echo idle rc=$?
$A --deep --record $C/h200-idle-deep.json --note "H200 idle, --deep" --out $C/idle-deep > /dev/null; echo deep rc=$?
python3 bench/bench_probe.py --agent build/agent.pyz --runs 10 --deep-runs 3 | tee $C/bench_probe.md
$A --load 20 --record $C/h200-load.json --note "H200 under the agent's own --load 20 (torch bf16 matmul)" --out $C/load > /dev/null; echo load rc=$?
$A --load 8 --load-engine ptx --out $C/load-ptx > /dev/null; echo ptx rc=$?
CUDA_VISIBLE_DEVICES="" $A --deep --record $C/h200-fault.json --note "H200 idle, CUDA_VISIBLE_DEVICES='' exported, --deep" --out $C/fault > /dev/null; echo fault rc=$?
sleep 2
nvidia-smi -q > $C/after-q.txt
diff <(grep -E "Power Limit|ECC Mode|Persistence|MIG Mode|Compute Mode|Applications Clocks" -A2 $C/before-q.txt) <(grep -E "Power Limit|ECC Mode|Persistence|MIG Mode|Compute Mode|Applications Clocks" -A2 $C/after-q.txt) && echo "settings unchanged by the probe"
for d in idle idle-deep load load-ptx fault; do echo "== $d"; head -40 $C/$d/health-report.md; done
nvidia-smi --query-compute-apps=pid,name --format=csv
tar czf $OUT/caps.tgz -C $OUT cap
