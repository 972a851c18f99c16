"""One `sweep run` with 1, 2, 4, 8 ... worker processes over one loopback fleet: wall, controller CPU per host.

    python bench/bench_workers.py --hosts 300 --workers 1,2 --rounds 2            # the 2-core machine
    python bench/bench_workers.py --hosts 1000,5000 --sshds 500 --workers 1,2,4,8 --forks 256   # 16 cores

One LocalFleet of `--sshds` real sshds on loopback; the inventory names each of them hosts/sshds times
(FleetHost aliases), so 5,000 hosts need not be 5,000 sshds. Each host answers with a canned health.json of 8
GPUs (the agent's own output for the pipeline bench's healthy variant, its hostname set) from a shell script
that reads the agent bundle sweep sends and discards it: the hosts' side costs sshd and a `cat`, not the
agent's 110 ms, so the controller is what the machine's cores are spent on. The controller does all its
work: SSH handshake, the 478 KiB bundle, the answer read, parsed, checked, the record written and fsynced.

Each run is `run_sweep(workers=W, forks=F)` in a child process (the CLI's start is not in it); its CPU is
the child's and its reaped descendants' (the workers) user+system time (os.wait4). Runs are ordered ABBA
over the worker counts, `--rounds` times. Writes bench/results/workers-<label>.md. Needs root and sshd.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from sweep.collect.workers import usable_cpus  # noqa: E402
from sweep.demo.loopback import FleetHost, LocalFleet  # noqa: E402

SWEEP = """
import json, sys, time
from sweep.collect.options import HostSelection, SSHSettings
from sweep.collect.run import run_sweep
inventory, out, known, forks, workers, limit = sys.argv[1:7]
t = time.monotonic()
result = run_sweep(inventory, out=out, forks=int(forks), workers=int(workers),
                   hosts=HostSelection(limit=limit or None),
                   ssh=SSHSettings(known_hosts=known, ssh_config=None, allow_agent=False, look_for_keys=False,
                                   transport="paramiko", connect_timeout=60, host_deadline=600, retries=1))
print(json.dumps({"ok": result.ok, "failed": result.failed, "by_class": result.by_class,
                  "sweep_s": time.monotonic() - t}))
"""


def canned_answer(path: Path) -> None:
    from bench_pipeline import answers

    path.write_bytes(answers(8)["healthy"])


def fleet_hosts(sshds: int, hosts: int, answer: Path) -> list[FleetHost]:
    script = f'cat >/dev/null\nexec sed "s/@@HOST@@/$SWEEP_REPLAY_HOSTNAME/" {answer}\n'
    per = -(-hosts // sshds)
    out, made = [], 0
    for i in range(sshds):
        names = [f"n{i:04d}a{k:02d}" for k in range(min(per, hosts - made))]
        if not names:
            break
        made += len(names)
        out.append(FleetHost(names[0], script=script, aliases=tuple(names[1:]),
                             sshd_options=("MaxStartups 2000:30:4000", "MaxSessions 100")))
    return out


def one_run(fleet: LocalFleet, names: list[str], workers: int, forks: int, tmp: Path, tag: str) -> dict:
    out = tmp / f"run-{tag}"
    listed = tmp / f"hosts-{tag}.txt"  # --limit @FILE: the first `hosts` names (a bare "" would sweep them all)
    listed.write_text("\n".join(names) + "\n")
    argv = [sys.executable, "-c", SWEEP, str(fleet.inventory_path), str(out), str(fleet.known_hosts_path),
            str(forks), str(workers), f"@{listed}"]
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))  # the wheels' folder too
    env = {**fleet.controller_env(), "PYTHONPATH": path}
    with tempfile.TemporaryFile() as so, tempfile.TemporaryFile() as se:
        started = time.monotonic()
        proc = subprocess.Popen(argv, env=env, stdout=so, stderr=se, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        so.seek(0), se.seek(0)
        text, err = so.read().decode(errors="replace"), se.read().decode(errors="replace")
    subprocess.run(["rm", "-rf", str(out)], check=False)
    try:
        got = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SystemExit(f"run {tag} failed (exit {status}): {err[-2000:]}")
    if got["ok"] + got["failed"] != len(names):  # the run swept other hosts than asked: its figures mean nothing
        raise SystemExit(f"run {tag} swept {got['ok'] + got['failed']} hosts, not {len(names)}")
    return {"workers": workers, "hosts": len(names), "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "ok": got["ok"], "failed": got["failed"], "by_class": got["by_class"], "sweep_s": got["sweep_s"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", default="300", help="host counts, comma-separated")
    parser.add_argument("--sshds", type=int, default=0, help="real sshds (default: one per host of the largest count)")
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("--forks", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--label", default=platform.node() or "here")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    sizes = [int(n) for n in args.hosts.split(",")]
    counts = [int(n) for n in args.workers.split(",")]
    sshds = args.sshds or max(sizes)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmpdir:
        tmp = Path(tmpdir)
        answer = tmp / "answer.json"
        canned_answer(answer)
        t0 = time.monotonic()
        with LocalFleet(fleet_hosts(sshds, max(sizes), answer), tmp / "fleet", ready_timeout=300) as fleet:
            up = time.monotonic() - t0
            names = [n for h in fleet.hosts for n in (h.name, *h.aliases)]
            for r in range(args.rounds):
                for size in sizes:
                    order = counts if r % 2 == 0 else counts[::-1]
                    for w in order:
                        base = one_run(fleet, names[:1], 1, 1, tmp, f"one-{size}-{w}-{r}")
                        row = one_run(fleet, names[:size], w, args.forks, tmp, f"{size}-{w}-{r}")
                        row.update(round=r + 1, one_cpu=base["cpu"], one_wall=base["wall"])
                        rows.append(row)
                        print(json.dumps(row), flush=True)
    write(rows, args, up, sshds)
    return 0


def write(rows: list[dict], args, up: float, sshds: int) -> None:
    out = Path(args.out or REPO / "bench" / "results" / f"workers-{args.label}.md")
    cmd = " ".join(["python bench/bench_workers.py", *sys.argv[1:]])
    lines = [f"# `sweep run` with worker processes ({args.label})", "",
             f"`{cmd}` on {platform.node()}, {os.cpu_count()} CPUs ({usable_cpus()} usable), Python "
             f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')}. {sshds} real sshds on loopback "
             f"(started in {up:.0f} s), each host answering a canned 8-GPU health.json; forks {args.forks} "
             "in all, shared out among the workers. CPU: the run_sweep child and its workers (os.wait4); per "
             "further host: (CPU - the 1-host run's CPU) / (hosts - 1). The hosts' side (sshd, sh, sed) is on "
             "the same cores, so wall is an upper bound of the controller's.", "",
             "| round | hosts | workers | wall s | hosts/s | controller CPU s | CPU ms per further host | ok | failed |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        per = (row["cpu"] - row["one_cpu"]) / max(1, row["hosts"] - 1) * 1000
        lines.append(f"| {row['round']} | {row['hosts']} | {row['workers']} | {row['wall']:.2f} | "
                     f"{row['hosts'] / row['wall']:.0f} | {row['cpu']:.2f} | {per:.2f} | {row['ok']} | "
                     f"{row['failed']}{' ' + json.dumps(row['by_class']) if row['by_class'] else ''} |")
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
