#!/bin/bash
# issue 25: the speed tier on a real GPU host, 5 times, each followed by torch's own figures
# (tools/torch_speed.py), the tier's wall time, nvidia-smi's processes after, and bench_probe for the
# default mode. Read-only: changes no GPU setting (nvidia-smi -q before and after, diffed); no load
# is left running.
#   tools/h200_speed.sh OUTDIR
# Writes OUTDIR/speed-N.json (capture), speed-N.health.json, speed-N.wall, torch-N.json, apps-N.csv,
# busy/forced.json + .health.json (another process holding 11 GiB), before-q.txt, after-q.txt, settings-diff.txt,
# bench_probe-N.md (and bench_probe-main-N.md against MAIN_AGENT, a bundle of the base commit), bare.health.json
# (--speed with no torch interpreter).
set -u
OUTDIR=${1:?usage: tools/h200_speed.sh OUTDIR}
. "$(dirname "$0")/bundle.sh"  # OUTDIR made absolute; $A runs the agent bundled by this host's python3
nvidia-smi -q > "$OUTDIR/before-q.txt"
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.device_count())'
for i in 1 2 3 4 5; do
    t0=$(date +%s.%N)
    $A --speed --record "$OUTDIR/speed-$i.json" --note "--speed, run $i of 5 (tools/h200_speed.sh)" \
        > "$OUTDIR/speed-$i.health.json"; rc=$?
    t1=$(date +%s.%N)
    echo "$t0 $t1 rc=$rc" > "$OUTDIR/speed-$i.wall"
    nvidia-smi --query-compute-apps=pid,name,used_memory --format=csv > "$OUTDIR/apps-$i.csv"
    python3 tools/torch_speed.py > "$OUTDIR/torch-$i.json"; echo "run $i: agent rc=$rc torch rc=$?"
done
# another process on the GPU (11 GiB held, idle): --speed is refused, --speed --force measures and says so
python3 -c 'import torch, sys, time; x = torch.empty(11 * 2**30, dtype=torch.uint8, device="cuda"); torch.cuda.synchronize(); print("held", flush=True); time.sleep(120)' > "$OUTDIR/holder.out" &
HOLDER=$!
for _ in $(seq 100); do grep -q held "$OUTDIR/holder.out" && break; sleep 0.2; done
$A --speed --record "$OUTDIR/busy.json" --note "--speed while another process held 11 GiB (tools/h200_speed.sh)" > "$OUTDIR/busy.health.json"; echo "busy rc=$?"
$A --speed --force --record "$OUTDIR/forced.json" --note "--speed --force while another process held 11 GiB (tools/h200_speed.sh)" > "$OUTDIR/forced.health.json"; echo "forced rc=$?"
kill $HOLDER; wait $HOLDER 2>/dev/null
# bare python3: no torch reachable (an empty PATH dir for the interpreter check), driver-API figures only
$A --speed --interpreter /nonexistent/python3 > "$OUTDIR/bare.health.json"; echo "bare rc=$?"
nvidia-smi --query-compute-apps=pid,name,used_memory --format=csv > "$OUTDIR/apps-after.csv"
# the default probe, this branch's agent against MAIN_AGENT's (a bundle of the base commit), alternated
for r in 1 2 3; do
    python3 bench/bench_probe.py --agent "$BUILD/agent.pyz" --runs 15 --deep-runs 0 > "$OUTDIR/bench_probe-$r.md" 2>&1
    [ -n "${MAIN_AGENT:-}" ] && python3 bench/bench_probe.py --agent "$MAIN_AGENT" --runs 15 --deep-runs 0 > "$OUTDIR/bench_probe-main-$r.md" 2>&1
done
echo "bench rc=$?"
nvidia-smi -q > "$OUTDIR/after-q.txt"
diff <(grep -v -i "timestamp\|temp\|power draw\|fan\|clocks\b\|util\|used\|free\|reserved\|current\|pstate\|performance state\|Graphics \|SM  \|Memory  \|Video  " "$OUTDIR/before-q.txt") \
     <(grep -v -i "timestamp\|temp\|power draw\|fan\|clocks\b\|util\|used\|free\|reserved\|current\|pstate\|performance state\|Graphics \|SM  \|Memory  \|Video  " "$OUTDIR/after-q.txt") \
     > "$OUTDIR/settings-diff.txt"; echo "settings diff lines: $(wc -l < "$OUTDIR/settings-diff.txt")"
cat "$OUTDIR/apps-after.csv"
