#!/bin/bash
# Device session for issue 15: the new checks read live, beside nvidia-smi's own answers.
# Usage (device machine, repository root): tools/a15_device.sh NAME   (h200 or x2); writes $OUT/NAME.tgz
set -u
export PYTHONUNBUFFERED=1
N=$1; C=$OUT/$N; mkdir -p $C
python3 -c "import sys; sys.path.insert(0, '.'); from sweep.bundle import build_bundle; build_bundle('build/agent-here.pyz')"
A="python3 -I -S build/agent-here.pyz"
nvidia-smi -L > $C/smi-L.txt
nvidia-smi -q -x > $C/smi-q.xml
nvidia-smi nvlink -s > $C/nvlink-s.txt 2>&1
nvidia-smi nvlink -e > $C/nvlink-e.txt 2>&1
nvidia-smi topo -m > $C/topo.txt 2>&1
$A --record $C/$N-idle.json --note "$N idle, issue 15 checks, live --record" > $C/$N-idle.health.json; echo "idle rc=$?"
$A --load 6 --load-engine ptx --record $C/$N-load.json --note "$N under --load 6 (ptx), issue 15 checks" > $C/$N-load.health.json; echo "load rc=$?"
nvidia-smi --query-gpu=index,clocks.sm,power.draw --format=csv > $C/after-load.csv  # the load has ended
python3 bench/bench_probe.py --agent build/agent-here.pyz --runs 10 --deep-runs 0 > $C/bench_probe.md 2>&1
python3 bench/bench_probe.py --agent build/agent.pyz --runs 10 --deep-runs 0 > $C/bench_probe_carried.md 2>&1
{ for p in /sys/bus/pci/devices /sys/class/infiniband /sys/devices/system/cpu/cpufreq /proc/driver/nvidia/gpus /dev/kmsg /var/log/kern.log; do
    echo "== $p"; ls -la $p 2>&1 | head -12; done
  echo "== journalctl"; command -v journalctl; echo "== dmesg"; dmesg 2>&1 | tail -3; uname -a; python3 --version
} > $C/raw.txt 2>&1
cat $C/bench_probe.md
tar czf $OUT/$N.tgz -C $OUT $N && rm -rf $C
