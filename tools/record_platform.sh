#!/bin/bash
# Record issue 15's platform checks on this GPU host: the agent live with --record, idle and under a
# short --load (PTX engine, ends by itself), beside what nvidia-smi says of the same facts, and the
# default probe's wall time. Read-only: changes no GPU setting.
#
#   tools/record_platform.sh OUTDIR
#
# Writes OUTDIR/idle.json (+ .health.json), load.json (+ .health.json), smi-q.xml (nvidia-smi -q -x),
# nvlink-s.txt, nvlink-e.txt, topo.txt, smi-L.txt, after-load.csv (the load had ended), bench_probe.md
# (bench/bench_probe.py, default mode, 10 runs) and raw.txt (ls of the paths the agent reads).
# Needs: python3 with nvidia-ml-py (to bundle the agent), nvidia-smi.
set -u
OUTDIR=${1:?usage: tools/record_platform.sh OUTDIR}
. "$(dirname "$0")/bundle.sh"  # OUTDIR made absolute; $A runs the agent bundled by this host's python3
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi -L > "$OUTDIR/smi-L.txt"
nvidia-smi -q -x > "$OUTDIR/smi-q.xml"
nvidia-smi nvlink -s > "$OUTDIR/nvlink-s.txt" 2>&1
nvidia-smi nvlink -e > "$OUTDIR/nvlink-e.txt" 2>&1
nvidia-smi topo -m > "$OUTDIR/topo.txt" 2>&1
$A --record "$OUTDIR/idle.json" --note "$GPU idle, platform checks" > "$OUTDIR/idle.health.json"; echo "idle rc=$?"
$A --load 6 --load-engine ptx --record "$OUTDIR/load.json" --note "$GPU under --load 6 (ptx), platform checks" \
    > "$OUTDIR/load.health.json"; echo "load rc=$?"
nvidia-smi --query-gpu=index,clocks.sm,power.draw --format=csv > "$OUTDIR/after-load.csv"
python3 bench/bench_probe.py --agent "$BUILD/agent.pyz" --runs 10 --deep-runs 0 > "$OUTDIR/bench_probe.md" 2>&1
{ for p in /sys/bus/pci/devices /sys/class/infiniband /sys/devices/system/cpu/cpufreq /proc/driver/nvidia/gpus \
           /dev/kmsg /var/log/kern.log; do
    echo "== $p"; ls -la "$p" 2>&1 | head -12; done
  echo "== journalctl"; command -v journalctl; echo "== dmesg"; dmesg 2>&1 | tail -3; uname -a; python3 --version
} > "$OUTDIR/raw.txt" 2>&1
cat "$OUTDIR/bench_probe.md"
