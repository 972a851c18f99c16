"""What `sweep wrap` costs a benchmark: the same command unwrapped and wrapped, alternately, N times.

On the GPU host, from the repository root, with the agent zipapp (`sweep bundle -o build/agent.pyz`:
it carries pynvml) or, without --agent, this checkout's probe_agent (needs pynvml installed):
    python3 bench/bench_wrap.py --agent build/agent.pyz --runs 6 --interval 0.2 -- python3 bench/matmul_bench.py
Anywhere (no GPU: replayed GPU answers, a CPU matmul):
    python3 bench/bench_wrap.py --runs 2 --replay sweep/demo/captures/h200-load.json -- \\
        python3 bench/matmul_bench.py --device cpu --dtype float32 --size 512 --seconds 1 --warmup 0.2

Pairs alternate their order (plain, wrapped / wrapped, plain / ...) so that a slow drift of the
machine (temperature, clocks) falls on both sides. The throughput is the number the benchmark
prints (--metric, default `TFLOP/s: X`), or 1 / wall time with --metric wall. Prints one Markdown
table per run and the summary: median throughput of each side, their ratio, the median of the
pairwise ratios, the plain runs' own spread (the noise floor the ratio is read against), and
what the sampler reported it cost.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AGENT = [sys.executable, "-c", "import sys; sys.path.insert(0, %r); from probe_agent.main import main; "
                               "sys.exit(main())" % ROOT]


def run_once(command, metric, wrap_args=None, agent=AGENT):
    """(throughput, wall_s, provenance or None) of one run."""
    out_dir = tempfile.mkdtemp(prefix="bench-wrap-") if wrap_args is not None else None
    argv = command if wrap_args is None else agent + ["--wrap", "--out", out_dir] + wrap_args + ["--"] + command
    t = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t
    text = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        sys.exit("failed (exit %d): %s\n%s%s" % (proc.returncode, " ".join(argv), text[-2000:],
                                                  proc.stderr.decode("utf-8", "replace")[-2000:]))
    prov = None
    if out_dir is not None:
        with open(os.path.join(out_dir, "provenance.json")) as fh:
            prov = json.load(fh)
        wall = prov["command"]["wall_s"]  # the command alone, as the plain run's wall is
    if metric == "wall":
        return 1.0 / wall, wall, prov
    found = re.findall(metric, text)
    if not found:
        sys.exit("no match for --metric %r in the output of %s:\n%s" % (metric, " ".join(command), text[-2000:]))
    return float(found[-1]), wall, prov


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                usage="%(prog)s [--runs N] [--interval S] [--metric RE|wall] -- COMMAND ...")
    p.add_argument("--runs", type=int, default=6, help="pairs of runs (default 6)")
    p.add_argument("--warmup", type=int, default=1, help="plain runs first, not counted (default 1)")
    p.add_argument("--interval", type=float, default=0.2, help="the wrapped runs' sampling interval")
    p.add_argument("--metric", default=r"TFLOP/s:\s*([0-9.]+)",
                   help="regex whose last match in stdout is the throughput, or 'wall' for 1/wall time")
    p.add_argument("--replay", help="wrapped runs answer GPU queries from this capture")
    p.add_argument("--agent", metavar="PYZ",
                   help="the agent zipapp (sweep bundle) instead of this checkout's probe_agent")
    argv = sys.argv[1:]
    if "--" not in argv or not argv[argv.index("--") + 1:]:
        p.error("give the benchmark command after --")
    i = argv.index("--")
    a, command = p.parse_args(argv[:i]), argv[i + 1:]
    agent = [sys.executable, a.agent] if a.agent else AGENT
    wrap_args = ["--interval", str(a.interval)] + (["--replay", a.replay] if a.replay else [])

    for _ in range(a.warmup):
        run_once(command, a.metric)
    rows = []
    for n in range(a.runs):
        order = ("plain", "wrapped") if n % 2 == 0 else ("wrapped", "plain")
        pair = {}
        for mode in order:
            pair[mode] = run_once(command, a.metric, wrap_args if mode == "wrapped" else None, agent)
            rows.append((n, mode) + pair[mode])
    plain = [r[2] for r in rows if r[1] == "plain"]
    wrapped = [r[2] for r in rows if r[1] == "wrapped"]
    pairwise = [w[2] / pl[2] for pl, w in zip([r for r in rows if r[1] == "plain"],
                                                [r for r in rows if r[1] == "wrapped"])]
    print("| pair | mode | throughput | wall s | samples | sampler cpu s | sampler busy | read ms (median/max) |")
    print("|---|---|---|---|---|---|---|---|")
    for n, mode, value, wall, prov in rows:
        s = (prov or {}).get("sampler") or {}
        print("| %d | %s | %.3f | %.2f | %s | %s | %s | %s |" % (
            n, mode, value, wall, s.get("samples", ""), s.get("cpu_s", ""),
            "%.4f%%" % (100 * s["busy_fraction"]) if s.get("busy_fraction") is not None else "",
            "%s / %s" % (s.get("read_ms_median"), s.get("read_ms_max")) if s else ""))
    mp, mw = statistics.median(plain), statistics.median(wrapped)
    spread = (max(plain) - min(plain)) / mp if mp else float("nan")
    print("\nplain median %.3f, wrapped median %.3f: wrapped / plain = %.4f (pairwise median %.4f)"
          % (mp, mw, mw / mp, statistics.median(pairwise)))
    print("noise floor: the plain runs spread %.2f%% (max-min over median); a ratio within it is no measurable cost"
          % (100 * spread))
    last = next((r[4] for r in reversed(rows) if r[4]), None)
    if last:
        print("last wrapped run's verdict: %s" % last["verdict"]["summary"])


if __name__ == "__main__":
    main()
