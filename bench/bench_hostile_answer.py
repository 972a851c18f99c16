"""Controller CPU to judge a hostile host's answer: N hosts each printing M MiB of ``[0,0,...]``.

    python3 bench/bench_hostile_answer.py [--hosts 16] [--mib 15]
    python3 bench/bench_hostile_answer.py --sshd [--hosts 16] [--mib 15] [--host-deadline 120]

Each answer goes through `read_agent_output`, as every engine judges a host's stdout; prints the class it
gets and the CPU time per answer (the largest) and in all. With BENCH_TREE set, another tree's sweep.

`--sshd`: the same answers over real loopback sshds (sweep.demo.loopback: each host's python3 a script
that prints the array), collected by one `sweep run INVENTORY --host-deadline D --no-report`, the
command a user types, in a child process: its wall time, CPU (user + system, read with os.wait4) and
peak RSS, beside the same command's run over one healthy host of the same fleet (the CLI's start-up),
and each number-array host's record: its class and duration against the deadline. Needs root and
/usr/sbin/sshd. Prints a Markdown table (`--out FILE`: also written there).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
TREE = Path(os.environ.get("BENCH_TREE", str(REPO)))
sys.path.insert(0, str(TREE))

from sweep.collect.outcome import read_agent_output  # noqa: E402
from sweep.failures import HostFailure  # noqa: E402


def number_array(mib: float) -> bytes:
    return b"[" + b"0," * (int(mib * 2**20) // 2 - 1) + b"0]"


def in_process(args) -> None:
    out = number_array(args.mib)
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


def sweep_cli(fleet, limit: str, run: Path, args) -> dict:
    """`sweep run` over the hosts `limit` in a child process: wall, CPU and peak RSS of it and its children."""
    argv = [sys.executable, "-m", "sweep.cli", "run", str(fleet.inventory_path), "--out", str(run), "--known-hosts",
            str(fleet.known_hosts_path), "--limit", limit, "--forks", str(args.forks), "--host-deadline",
            str(args.host_deadline), "--no-report"]
    env = {**fleet.controller_env(), "PYTHONPATH": str(TREE)}
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, cwd=TREE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    records = [json.loads(p.read_text()) for p in sorted((run / "hosts").glob("*.json"))]
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mib": usage.ru_maxrss / 1024,
            "exit": os.waitstatus_to_exitcode(status), "records": records, "stderr": proc.stderr.read()}


def over_sshd(args) -> None:
    from sweep.demo.loopback import FleetHost, LocalFleet

    with tempfile.TemporaryDirectory(prefix="sweep-hostile-") as tmp:
        tmp = Path(tmp)
        answer = tmp / "numbers.out"
        answer.write_bytes(number_array(args.mib))
        hosts = [FleetHost("healthy", group="healthy")]
        hosts += [FleetHost(f"numbers{i:02d}", group="numbers",
                            script=f"cat >/dev/null\ncat '{answer}'\nexit 0\n") for i in range(1, args.hosts + 1)]
        with LocalFleet(hosts, tmp / "fleet") as fleet:
            one = sweep_cli(fleet, "healthy", tmp / "one", args)
            many = sweep_cli(fleet, "numbers", tmp / "many", args)
    classes = sorted({r["failure"]["class"] if r["failure"] else "ok" for r in many["records"]})
    longest = max((r["duration_s"] for r in many["records"]), default=float("nan"))
    late = [r["host"] for r in many["records"] if r["duration_s"] > args.host_deadline]
    lines = [f"`{' '.join(['python3', 'bench/bench_hostile_answer.py', *sys.argv[1:]])}` on {platform.node()}, "
             f"{os.cpu_count()} CPUs, Python {platform.python_version()}, tree {TREE}, {time.strftime('%Y-%m-%d %H:%M')}, "
             f"load average {os.getloadavg()[0]:.1f} after the runs", "",
             "| run | records | classes | wall (s) | controller CPU (s) | peak RSS (MiB) | exit |",
             "|---|---:|---|---:|---:|---:|---:|",
             f"| 1 healthy host (start-up) | {len(one['records'])} | "
             f"{', '.join(sorted({'ok' if not r['failure'] else r['failure']['class'] for r in one['records']}))} | "
             f"{one['wall_s']:.1f} | {one['cpu_s']:.2f} | {one['peak_rss_mib']:.0f} | {one['exit']} |",
             f"| {args.hosts} hosts x {args.mib:g} MiB of [0,0,...] | {len(many['records'])} | {', '.join(classes)} | "
             f"{many['wall_s']:.1f} | {many['cpu_s']:.2f} | {many['peak_rss_mib']:.0f} | {many['exit']} |", "",
             f"Controller CPU per number-array host beyond start-up: "
             f"{(many['cpu_s'] - one['cpu_s']) / args.hosts:.2f} s; the longest host took {longest:.1f} s "
             f"against its --host-deadline {args.host_deadline:g} s; past it: {', '.join(late) or 'none'}."]
    print("\n".join(lines))
    if many["exit"] not in (0, 1, 3, 4) or len(many["records"]) < args.hosts:
        print(many["stderr"].decode(errors="replace")[-2000:], file=sys.stderr)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--mib", type=float, default=15)
    parser.add_argument("--sshd", action="store_true", help="over real loopback sshds, one `sweep run`")
    parser.add_argument("--host-deadline", type=float, default=120)
    parser.add_argument("--forks", type=int, default=16)
    parser.add_argument("--out", default=None, help="with --sshd: write the table here too")
    args = parser.parse_args()
    over_sshd(args) if args.sshd else in_process(args)


if __name__ == "__main__":
    main()
