"""The random search the suite does not do: every generated (@given) test, under random seeds.

    python bench/bench_hypothesis.py [--rounds 20] [--seed N] [paths ...]

The suite's own runs are deterministic (tests/conftest.py loads the hypothesis profile
"deterministic": derandomize, no database, nothing timed), so a counterexample never turns a build
red on some day for whoever runs it then. This script is where new counterexamples are found, on
purpose: it runs the tests that hypothesis marks (`-m hypothesis`) `--rounds` times under the profile
"explore", each round with its own seed (`--hypothesis-seed`), so each round draws other examples
than the suite and than the other rounds (20 rounds: 20 times the suite's examples).

Each failure is listed with its seed and the falsifying example hypothesis printed. Pin it as an
`@example(...)` of the test (that is how the suite keeps it for ever), fix the code, run again.
Writes bench/results/hypothesis.md. Not part of the test suite.
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "hypothesis.md"
FAILED = re.compile(r"^FAILED (\S+)", re.M)
FALSIFYING = re.compile(r"^(Falsifying (?:explicit )?example: .*?)(?=^\S|\Z)", re.M | re.S)


def one_round(seed: int, paths: list[str]) -> tuple[float, str, list[str], list[str]]:
    env = {**os.environ, "SWEEP_HYPOTHESIS_PROFILE": "explore", "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "hypothesis",
                           f"--hypothesis-seed={seed}", "-o", "addopts=", "-rf", *paths],
                          cwd=REPO, env=env, capture_output=True, text=True)
    summary = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    examples = [" ".join(m.split()) for m in FALSIFYING.findall(done.stdout)]
    return time.monotonic() - started, summary, FAILED.findall(done.stdout), examples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None, help="the first round's seed (default: random)")
    parser.add_argument("paths", nargs="*", default=["tests"])
    args = parser.parse_args()
    first = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    rows, found = [], []
    for n in range(args.rounds):
        seed = first + n
        seconds, summary, failed, examples = one_round(seed, args.paths)
        rows.append(f"| {n + 1} | {seed} | {seconds:.0f} | {summary} |")
        found += [f"- seed {seed}: `{test}`" for test in failed] + [f"  - {e}" for e in examples]
        print(rows[-1], flush=True)
    lines = ["# Generated tests under random seeds (bench/bench_hypothesis.py)", "",
             f"`python bench/bench_hypothesis.py --rounds {args.rounds} --seed {first} {' '.join(args.paths)}` "
             f"on {platform.node()} ({os.cpu_count()} CPUs), load before: {open('/proc/loadavg').read().split()[:3]}",
             "", "| round | seed | seconds | pytest's summary |", "| --- | --- | --- | --- |", *rows, "",
             "## Counterexamples found", "", *(found or ["none"]), ""]
    RESULTS.write_text("\n".join(lines))
    print(f"wrote {RESULTS}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
