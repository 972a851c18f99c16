"""Controller CPU to judge a hostile host's answer: N hosts each printing M MiB of ``[0,0,...]``.

    python3 bench/bench_hostile_answer.py [--hosts 16] [--mib 15]

Each answer goes through `read_agent_output`, as every engine judges a host's stdout; prints the class it
gets and the CPU time per answer (the largest) and in all. With BENCH_TREE set, another tree's sweep.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, os.environ.get("BENCH_TREE", str(Path(__file__).resolve().parents[1])))

from sweep.collect.outcome import read_agent_output  # noqa: E402
from sweep.failures import HostFailure  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--mib", type=float, default=15)
    args = parser.parse_args()
    out = b"[" + b"0," * (int(args.mib * 2**20) // 2 - 1) + b"0]"
    cpu, classes = [], set()
    for i in range(args.hosts):
        started = time.process_time()
        try:
            read_agent_output(SimpleNamespace(name=f"gpu{i:02d}", python="python3", become=False), out, 0, "")
            classes.add("ok")
        except HostFailure as failure:
            classes.add(failure.failure_class)
        cpu.append(time.process_time() - started)
    print(f"{args.hosts} answers of {len(out) / 2**20:.0f} MiB: {', '.join(sorted(classes))}; controller CPU per "
          f"answer at most {max(cpu):.2f} s, {sum(cpu):.2f} s in all")


if __name__ == "__main__":
    main()
