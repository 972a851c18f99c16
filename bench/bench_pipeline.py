"""Benchmark of the controller's work after SSH: `sweep run`'s own path from the agent's answer on.

A `sweep run` (the real `run_sweep`: inventory, run folder, manifest, sessions) is driven by an engine
that answers from canned agent outputs instead of SSH: each host's answer is the bytes the agent prints
(the recorded H200 health.json made into G GPUs, in the Must-show variants of bench_report.py, one host
in a hundred printing something that is not JSON). So every step after the bytes arrive runs as in a
sweep: judging the answer (parse, schema), writing the record (fsync, digest list, MAC), the tally
and progress callback, the manifest, then what `sweep run` does after the sweep (history index,
report) when asked. Each step's CPU time (the process's, children included) per host, at each fleet
size: a step whose per-host cost grows with the fleet is not linear.

    python3 bench/bench_pipeline.py --hosts 10000 100000 [--gpus 8] [--history] [--report]
    BENCH_TREE=/tmp/base python3 bench/bench_pipeline.py ...   # the same bench over another tree

`--no-fsync`: records are not fsynced (bench only: 100,000 fsyncs on a loaded disk take an hour of wall
time); the CPU shape of every step stays, and the fsync's own cost is what the default run adds.

`--history`: the history index update `sweep run` makes when it reports (`--no-report` runs defer it
to `sweep history`), reading the run's records itself; `--report`: the report of the run. With both,
as `sweep run` does since issue 52: the run's records are read once (`read`), then the index and the
report are made from that fleet. They grow with the fleet by nature (they read every record); they are
timed apart from the sweep's critical path.

    python3 bench/bench_pipeline.py --no-fsync --hosts 10000 --history-against /tmp/base --rounds 2

`--history-against TREE`: the history index of the swept run, this tree's and TREE's (a worktree of
another commit), paired in ABBA order, each in a fresh interpreter (its CPU from just before the call to
just after, workers included) in its own folder of runs: the run added to an empty index ("first"),
then a second run of the same records (hard links, a folder of its own) added to that index ("one
more"): with an index that reads no earlier run, the two cost the same.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = Path(os.environ.get("BENCH_TREE", ROOT))  # the sweep tree measured (another revision's worktree: paired runs)
sys.path[:0] = [str(TREE), str(ROOT / "tests" / "unit")]

from sweep.collect.engines.base import Engine, outcome_of_output  # noqa: E402
from sweep.collect.options import HostSelection  # noqa: E402
from sweep.inventory.groups import InventoryLimits  # noqa: E402

VARIANTS = ("healthy", "driver", "ecc_off", "power_cap", "foreign_process", "hw_thermal", "not_json")
EVERY = {"not_json": 100, "driver": 50, "ecc_off": 200, "power_cap": 200, "foreign_process": 300, "hw_thermal": 1000}


def answers(n_gpus: int) -> dict[str, bytes]:
    """variant -> the agent's stdout (compact JSON, as the agent prints it) with a placeholder hostname."""
    import fleet_variants as fv

    special = {v: k for k, v in fv.SPECIAL.items()}
    out = {}
    for variant in VARIANTS:
        if variant == "not_json":
            out[variant] = b"Welcome to @@HOST@@! Last login: never\n"
            continue
        health = fv.must_show_health(special.get(variant, "gpu01"), n_gpus)
        health["host"]["hostname"] = "@@HOST@@"
        out[variant] = json.dumps(health, separators=(",", ":")).encode()
    return out


def variant_of(i: int) -> str:
    for variant, every in EVERY.items():
        if i % every == every - 1:
            return variant
    return "healthy"


CHUNK = 500


class CannedEngine(Engine):
    """An engine whose hosts answer with canned agent output, judged as the SSH engine judges it."""

    name = "ssh"  # what the run's checks and manifest treat it as; nothing is contacted

    def __init__(self, canned: dict[str, bytes]):
        self.canned = canned
        self.judge_cpu = 0.0

    def bind(self, job):
        return self

    def check(self, hosts, options, inventory_path):
        pass

    def run(self, hosts):
        """Judge a chunk of hosts (timed as a block: a CPU clock read per host would cost more than
        some steps), then hand its outcomes over one by one, as hosts finish."""
        hosts = list(hosts)
        for first in range(0, len(hosts), CHUNK):
            chunk = hosts[first:first + CHUNK]
            answers = [self.canned[variant_of(first + i)].replace(b"@@HOST@@", host.name.encode())
                       for i, host in enumerate(chunk)]
            start = cpu()
            outcomes = [outcome_of_output(host, time.time(), out, 0, "") for host, out in zip(chunk, answers)]
            self.judge_cpu += cpu() - start
            yield from zip(chunk, outcomes)

    def stop(self):
        pass

    def drain(self, timeout=10.0):
        return []


def cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def kernel() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def one_size(n_hosts: int, n_gpus: int, work: Path, history: bool, report: bool, against=None) -> dict:
    from sweep.collect.run import run_sweep

    inventory = work / "fleet.yml"
    width = len(str(n_hosts))
    with inventory.open("w") as f:
        f.write("all:\n  hosts:\n")
        for i in range(1, n_hosts + 1):
            f.write(f"    gpu{i:0{width}d}: {{ansible_host: 127.0.0.1}}\n")
    engine = CannedEngine(answers(n_gpus))
    marks = {}
    calls = [0]

    def progress(state):
        calls[0] += 1
        if state.last is None:
            marks["collect"] = cpu()

    start, start_kernel = cpu(), kernel()
    limits = InventoryLimits(yaml_values=10 * n_hosts, range_hosts=n_hosts, hosts=2 * n_hosts)
    result = run_sweep(inventory, engine=engine, out=work / "run", progress=progress,
                       hosts=HostSelection(inventory_limits=limits), report={"no_report": True})
    end = cpu()
    sweep_kernel = kernel() - start_kernel
    row = {"hosts": n_hosts, "gpus": n_gpus, "ok": result.ok, "failed": result.failed, "progress_calls": calls[0],
           "before_sweep_s": marks["collect"] - start, "judge_s": engine.judge_cpu,
           "record_tally_s": end - marks["collect"] - engine.judge_cpu, "sweep_kernel_s": sweep_kernel}
    fleet = None
    if history and report and reads_once():  # as `sweep run` does: the records read once, for both
        from sweep.analysis.fleet import load_fleet

        t = cpu()
        fleet = load_fleet([result.run_dir])
        row["read_s"] = cpu() - t
    shared = {"fleet": fleet} if fleet is not None else {}
    if history:
        from sweep.history.hook import keep_index_current

        t = cpu()
        warning = keep_index_current(result.run_dir, **shared)
        row["history_s"] = cpu() - t
        row["history_warning"] = warning
    if report:
        from sweep.report.build import build_report

        t = cpu()
        build_report([result.run_dir], work / "report", **shared)
        row["report_s"] = cpu() - t
    row["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if against is not None:
        row["history_pairs"] = history_pairs(Path(result.run_dir), work, against[0], against[1])
    return row


def reads_once() -> bool:
    """Whether the tree measured reads a run once for its index and its report (issue 52 on)."""
    import inspect

    from sweep.history.hook import keep_index_current

    return "fleet" in inspect.signature(keep_index_current).parameters


ADD_RUN = """
import json, resource, sys, time
from sweep.history.hook import keep_index_current
def cpu():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
t = cpu()
warning = keep_index_current(sys.argv[1])
print(json.dumps({"cpu_s": cpu() - t, "warning": warning}))
"""


def history_pairs(run_dir: Path, work: Path, against: Path, rounds: int) -> list[dict]:
    """The run added to an empty index, then one more run to that index, by this tree and `against`, ABBA."""
    import subprocess

    out = []
    for r in range(rounds):
        order = [("this", TREE), ("base", against)]
        for label, tree in (order if r % 2 == 0 else order[::-1]):
            root = work / f"history-{label}-{r}"
            for step, name in (("first", "run-a"), ("one more", "run-b")):
                shutil.copytree(run_dir, root / name, copy_function=os.link)
                load = os.getloadavg()[0]
                done = subprocess.run([sys.executable, "-c", ADD_RUN, str(root / name)], cwd=tree, check=True,
                                      env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True)
                row = {"round": r, "tree": label, "step": step, **json.loads(done.stdout.splitlines()[-1]),
                       "load": load}
                out.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
            shutil.rmtree(root, ignore_errors=True)
    return out


def history_table(rows: list[dict], hosts: int, gpus: int) -> list[str]:
    import statistics

    lines = [f"| round | tree | step | CPU s ({hosts:,} x {gpus}) | ms per host | load |",
             "|---:|---|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['round']} | {r['tree']} | {r['step']} | {r['cpu_s']:.2f} | "
                     f"{1000 * r['cpu_s'] / hosts:.3f} | {r['load']:.1f} |")
    ratios = []
    for r in sorted({x["round"] for x in rows}):
        for step in ("first", "one more"):
            this, base = (next(x["cpu_s"] for x in rows if (x["round"], x["tree"], x["step"]) == (r, t, step))
                          for t in ("this", "base"))
            ratios.append(this / base)
    lines += ["", "This tree's CPU / the other's, per round and step: " + ", ".join(f"{q:.2f}" for q in ratios)
              + f" (median {statistics.median(ratios):.2f})."]
    return lines


STEPS = ("before_sweep_s", "judge_s", "record_tally_s", "read_s", "history_s", "report_s")


def table(rows: list[dict]) -> list[str]:
    steps = [s for s in STEPS if s in rows[0]]
    lines = ["| hosts x GPUs | " + " | ".join(f"{s[:-2]} s (ms/host)" for s in steps)
             + " | judge + record + tally s (of it in the kernel) | peak RSS MiB |",
             "|---|" + "---:|" * (len(steps) + 2)]
    for r in rows:
        cells = [f"{r[s]:.2f} ({1000 * r[s] / r['hosts']:.3f})" for s in steps]
        path = r["judge_s"] + r["record_tally_s"]
        lines.append(f"| {r['hosts']:,} x {r['gpus']} | " + " | ".join(cells)
                     + f" | {path:.2f} ({r['sweep_kernel_s']:.2f}) | {r['peak_rss_mib']:.0f} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[10_000])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--history", action="store_true", help="also the history index update")
    parser.add_argument("--report", action="store_true", help="also the run's report")
    parser.add_argument("--history-against", type=Path, default=None, metavar="TREE",
                        help="the history index of the run, this tree's and TREE's, paired (ABBA)")
    parser.add_argument("--rounds", type=int, default=2, help="with --history-against: pairs of runs")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--json", type=Path, default=None, help="write the rows as JSON here")
    parser.add_argument("--no-fsync", action="store_true",
                        help="a bench-only shortcut: records are not fsynced (on a loaded disk 100,000 fsyncs take an "
                             "hour of wall time); the CPU a sweep spends, fsync's included, is what the default gives")
    args = parser.parse_args(argv)
    if args.no_fsync:
        os.fsync = lambda fd: None
    rows = []
    for n in args.hosts:
        work = Path(tempfile.mkdtemp(prefix="sweep-pipeline-", dir=args.work))
        try:
            against = (args.history_against, args.rounds) if args.history_against else None
            rows.append(one_size(n, args.gpus, work, args.history, args.report, against))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    load = os.getloadavg()
    print(f"{platform.node()}: {os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print("\n".join(table(rows)))
    for row in rows:
        if "history_pairs" in row:
            print(f"\nThe history index of {row['hosts']:,} x {row['gpus']} against {args.history_against}:\n")
            print("\n".join(history_table(row["history_pairs"], row["hosts"], row["gpus"])))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
