"""Wall time of one probe run: default mode and --deep, against a bare python3 start.

Run on a GPU host (or with --replay CAPTURE anywhere):
    python3 bench/bench_probe.py --agent build/agent.pyz --runs 10 --deep-runs 3
Prints one table; the figures in the README come from this script on the H200.
"""
import argparse
import statistics
import subprocess
import sys
import time

TARGET_S = 0.2  # the default probe on one H200 (issue 15: the new checks must keep it there)


def timed(argv, runs):
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        out.append(time.perf_counter() - t)
        if proc.returncode != 0:
            sys.exit("failed: %s\n%s" % (" ".join(argv), proc.stderr.decode()[-2000:]))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--agent", default="build/agent.pyz")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--deep-runs", type=int, default=3)
    p.add_argument("--replay")
    a = p.parse_args()
    base = [sys.executable, "-I", "-S", a.agent] + (["--replay", a.replay] if a.replay else [])
    rows = [("python3 -c pass", timed([sys.executable, "-I", "-S", "-c", "pass"], a.runs)),
            ("probe (default)", timed(base, a.runs))]
    if a.deep_runs:
        rows.append(("probe --deep", timed(base + ["--deep"], a.deep_runs)))
    start = statistics.median(rows[0][1])
    print("| run | n | median s | min s | max s | x python3 start |")
    print("|---|---|---|---|---|---|")
    for name, t in rows:
        print("| %s | %d | %.3f | %.3f | %.3f | %.1f |" % (name, len(t), statistics.median(t), min(t), max(t),
                                                         statistics.median(t) / start))
    print("\ntarget: default probe <= %.3f s; measured %.3f s (%.2f of target)"
          % (TARGET_S, statistics.median(rows[1][1]), statistics.median(rows[1][1]) / TARGET_S))


if __name__ == "__main__":
    main()
