"""Controller CPU per host of a loopback sweep whose hosts are named through an ssh_config paramiko honours,
two source trees in paired runs (issue 50: reading the config as ssh does must cost no CPU).

    python bench/bench_ssh_config.py --hosts 300 --pairs 3 --before /tmp/before-50 [--after .] [--config star]

One LocalFleet (a real sshd per host). ``--config blocks`` (default): the inventory names hosts h000...,
the config gives each its HostName and, under ``Host h*``, User, IdentityFile, IdentitiesOnly,
ServerAliveInterval, ConnectTimeout and StrictHostKeyChecking yes. ``--config star``: the inventory
gives each host's address, the config is those settings under ``Host *`` alone. Each run is a child process started in its tree (cwd and PYTHONPATH); its CPU
is its user+system time and that of every process it waited for (os.wait4). Runs alternate before/after;
the ratio is after/before of CPU per host, per pair. Not part of the test suite.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sweep.demo.loopback import FleetHost, LocalFleet  # noqa: E402

CHILD = """
import json, sys
from sweep.collect.options import SSHSettings
from sweep.collect.run import run_sweep
inventory, out, known, forks, config = sys.argv[1:6]
result = run_sweep(inventory, out=out, forks=int(forks), report={"no_report": True},
                   ssh=SSHSettings(known_hosts=known, ssh_config=config, allow_agent=False, look_for_keys=False))
print(json.dumps({"ok": result.ok, "failed": result.failed}))
"""


def run_in(tree: Path, argv: list[str], env: dict) -> tuple[float, float, dict, str]:
    """Wall s, CPU s of the child and its reaped descendants, its JSON line, its stderr tail."""
    env = {**env, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", CHILD, *argv], env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err, cwd=tree)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        text = out.read().decode().strip().splitlines()
        return wall, usage.ru_utime + usage.ru_stime, json.loads(text[-1]) if text else {}, err.read().decode()[-800:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--forks", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--before", required=True, help="the tree to compare with (a git worktree of 970fdb3)")
    parser.add_argument("--after", default=str(REPO))
    parser.add_argument("--config", choices=("blocks", "star"), default="blocks")
    args = parser.parse_args()
    trees = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    with tempfile.TemporaryDirectory(prefix="sweep-bench-config-") as tmp:
        tmp = Path(tmp)
        hosts = [FleetHost(f"h{i:03d}") for i in range(args.hosts)]
        with LocalFleet(hosts, tmp / "fleet") as fleet:
            star = args.config == "star"
            config = tmp / "ssh_config"
            config.write_text(("" if star else "".join(f"Host {h.name}\n  HostName {fleet.addresses[h.name]}\n"
                                                      for h in hosts)) +
                              f"Host {'*' if star else 'h*'}\n  User root\n  IdentityFile {fleet.client_key_path}\n"
                              "  IdentitiesOnly yes\n  ServerAliveInterval 30\n  ConnectTimeout 10\n"
                              "  StrictHostKeyChecking yes\n")
            inventory = tmp / "inv.yml"
            inventory.write_text("all:\n  hosts:\n" + "".join(
                f"    {h.name}: {{ansible_host: '{fleet.addresses[h.name]}'}}\n" if star else f"    {h.name}:\n"
                for h in hosts))
            ratios = []
            for pair in range(args.pairs):
                per_host = {}
                for label, tree in trees.items():
                    argv = [str(inventory), str(tmp / f"run-{label}-{pair}"), str(fleet.known_hosts_path),
                            str(args.forks), str(config)]
                    wall, cpu, said, err = run_in(tree, argv, fleet.controller_env())
                    per_host[label] = 1000 * cpu / args.hosts
                    print(f"pair {pair} {label:6s} ok {said.get('ok')}/{args.hosts} wall {wall:5.1f} s "
                          f"controller CPU {cpu:6.2f} s = {per_host[label]:5.2f} ms/host", flush=True)
                    if said.get("ok") != args.hosts:
                        print(err, file=sys.stderr)
                ratios.append(per_host["after"] / per_host["before"])
            print(f"after/before CPU per host, per pair: {', '.join(f'{r:.3f}' for r in ratios)}; "
                  f"median {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
