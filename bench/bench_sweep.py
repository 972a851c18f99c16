"""Sweep a loopback fleet with sweep, parallel-ssh, ClusterShell's clush and ansible ad-hoc.

    python bench/bench_sweep.py --hosts 200 [--forks 32] [--tools sweep,pssh,clush,ansible]

One LocalFleet (a real sshd per host, each replaying an H200 capture) serves every tool in turn.
Each tool runs in its own child process and must bring back the agent's health.json from every
host (same payload on stdin, same remote command); the table counts the valid ones. "Controller
CPU" is the user+system time of that child and every process it waited for (ssh clients, ansible
workers), read with os.wait4: the sshds and the agents on the hosts are not in it, and neither is
anything of the other tools. The OpenSSH-based tools get curve25519 key exchange forced, as sweep
does (OpenSSH 9.2's default sntrup761 costs them ~100 ms of CPU per host).

Writes bench/results/sweep.md. Needs root, /usr/sbin/sshd, and pip install parallel-ssh
ClusterShell ansible-core. Not part of the test suite.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sweep.bundle import build_bundle, bundle_bytes, remote_command  # noqa: E402
from sweep.demo import FleetHost, LocalFleet  # noqa: E402

KEX = "curve25519-sha256"

SWEEP = """
import json, sys
from sweep.run import run_sweep
inventory, out, known, forks = sys.argv[1:5]
result = run_sweep(inventory, out=out, forks=int(forks), known_hosts=known, ssh_config=None,
                   allow_agent=False, look_for_keys=False)
print(json.dumps({"ok": result.ok, "failed": result.failed}))
"""

PSSH = """
import json, sys
from pssh.clients import ParallelSSHClient
hosts_file, key, forks, payload_file, command = sys.argv[1:6]
hosts = open(hosts_file).read().split()
payload = open(payload_file, "rb").read()
client = ParallelSSHClient(hosts, user="root", pkey=key, pool_size=int(forks), num_retries=1, timeout=60)
output = client.run_command(command, stop_on_errors=False)
for host_out in output:
    if host_out.exception is None:
        host_out.stdin.write(payload)
        host_out.stdin.flush()
client.join(output, timeout=300)
ok = 0
for host_out in output:
    try:
        health = json.loads("\\n".join(host_out.stdout or []))
        ok += isinstance(health, dict) and "schema_version" in health
    except Exception:
        pass
print(json.dumps({"ok": ok, "failed": len(hosts) - ok}))
"""


def run_child(argv: list[str], env: dict, stdin: bytes | None = None) -> tuple[float, float, bytes, bytes]:
    """Wall time, CPU of the child and its reaped descendants, stdout, stderr."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
        if stdin is not None:
            inp.write(stdin)
            inp.seek(0)
        started = time.monotonic()
        proc = subprocess.Popen(argv, env=env, stdin=inp, stdout=out, stderr=err, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        return wall, usage.ru_utime + usage.ru_stime, out.read(), err.read()


def count_json_by_prefix(text: str, hosts: list[str]) -> int:
    """clush -L prints 'host: line' for each output line: rebuild each host's stdout."""
    lines: dict[str, list[str]] = {h: [] for h in hosts}
    for line in text.splitlines():
        host, sep, rest = line.partition(": ")
        if sep and host in lines:
            lines[host].append(rest)
    ok = 0
    for body in lines.values():
        try:
            health = json.loads("\n".join(body))
            ok += isinstance(health, dict) and "schema_version" in health
        except ValueError:
            pass
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--forks", type=int, default=32)
    parser.add_argument("--tools", default="sweep,pssh,clush,ansible")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "sweep.md"))
    args = parser.parse_args()
    tools = args.tools.split(",")

    payload = bundle_bytes()
    command = remote_command("python3", len(payload), [])
    rows = []
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        tmp = Path(tmp)
        started = time.monotonic()
        hosts = [FleetHost(f"gpu{i:03d}", group="rack_a" if i % 2 else "rack_b")
                 for i in range(1, args.hosts + 1)]
        with LocalFleet(hosts, tmp / "fleet", children={"h200": ["rack_a", "rack_b"]}) as fleet:
            up = time.monotonic() - started
            print(f"fleet of {args.hosts} sshds up in {up:.1f} s", flush=True)
            env = fleet.controller_env()
            env["PYTHONPATH"] = str(REPO)
            addresses = [fleet.addresses[h.name] for h in hosts]
            (tmp / "hosts.txt").write_text("\n".join(addresses) + "\n")
            (tmp / "payload.bin").write_bytes(payload)
            ssh_opts = (f"-i {fleet.client_key_path} -o UserKnownHostsFile={fleet.known_hosts_path} "
                        f"-o StrictHostKeyChecking=yes -o KexAlgorithms={KEX} -o BatchMode=yes")
            for tool in tools:
                if tool == "sweep":
                    argv = [sys.executable, "-c", SWEEP, str(fleet.inventory_path), str(tmp / "run"),
                            str(fleet.known_hosts_path), str(args.forks)]
                    wall, cpu, out, err = run_child(argv, env)
                    ok = json.loads(out.decode().strip().splitlines()[-1])["ok"] if out.strip() else 0
                elif tool == "pssh":
                    argv = [sys.executable, "-c", PSSH, str(tmp / "hosts.txt"), str(fleet.client_key_path),
                            str(args.forks), str(tmp / "payload.bin"), command]
                    wall, cpu, out, err = run_child(argv, env)
                    ok = json.loads(out.decode().strip().splitlines()[-1])["ok"] if out.strip() else 0
                elif tool == "clush":
                    clush = str(Path(sys.executable).with_name("clush"))
                    argv = [clush, "-f", str(args.forks), "-w", ",".join(addresses), "-l", "root",
                            "-o", ssh_opts, "-L", command]
                    wall, cpu, out, err = run_child(argv, env, stdin=payload)
                    ok = count_json_by_prefix(out.decode(errors="replace"), addresses)
                elif tool == "ansible":
                    # the bundle (a zipapp) is too big for a command line (MAX_ARG_STRLEN), and -m raw
                    # has no stdin: -m script copies it to the host and runs it, in one ad-hoc command
                    pyz = build_bundle(tmp / "agent.pyz")
                    ansible = str(Path(sys.executable).with_name("ansible"))
                    argv = [ansible, "all", "-i", str(fleet.inventory_path), "-f", str(args.forks), "-m", "script",
                            "-a", str(pyz), f"--ssh-extra-args=-o KexAlgorithms={KEX}",
                            f"--ssh-common-args=-o UserKnownHostsFile={fleet.known_hosts_path}",
                            "--tree", str(tmp / "tree")]
                    aenv = dict(env, ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_LOCAL_TEMP=str(tmp / "ansible-tmp"),
                                ANSIBLE_SSH_CONTROL_PATH_DIR=str(tmp / "cp"), ANSIBLE_NOCOLOR="1")
                    wall, cpu, out, err = run_child(argv, aenv)
                    ok = 0
                    for path in (tmp / "tree").glob("*"):  # one JSON result per host
                        try:
                            health = json.loads(json.loads(path.read_text()).get("stdout", ""))
                            ok += isinstance(health, dict) and "schema_version" in health
                        except (ValueError, AttributeError):
                            pass
                else:
                    raise SystemExit(f"unknown tool {tool}")
                row = {"tool": tool, "hosts": args.hosts, "ok": ok, "wall_s": wall, "cpu_s": cpu,
                       "cpu_ms_per_host": 1000 * cpu / args.hosts, "hosts_per_s": args.hosts / wall}
                rows.append(row)
                print(f"{tool:8s} ok {ok}/{args.hosts}  wall {wall:6.1f} s  controller CPU {cpu:6.2f} s "
                      f"= {row['cpu_ms_per_host']:5.1f} ms/host", flush=True)
                if ok < args.hosts:
                    print(err.decode(errors="replace")[-1500:], file=sys.stderr)
    write_report(Path(args.out), rows, args, up)
    return 0


def write_report(path: Path, rows: list[dict], args, up: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "# sweep vs parallel-ssh, clush, ansible: collecting health.json from a loopback fleet",
        "",
        f"`python bench/bench_sweep.py --hosts {args.hosts} --forks {args.forks}` on "
        f"{platform.node() or 'this machine'}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}.",
        "",
        f"{args.hosts} real OpenSSH sshds on loopback (one per 127.x.y.z address; fleet up in {up:.1f} s), "
        "each running the agent bundle on a replayed H200 capture. sweep, parallel-ssh and clush send the "
        "same payload on stdin to the same remote command; ansible (`-m raw` has no stdin, and the bundle "
        "is too big for a command line) runs it with `-m script agent.pyz`, which copies it to the host "
        "first. Fan-out "
        f"{args.forks}. *ok* counts hosts whose output parsed as a health.json object. Controller CPU is "
        "the tool's process tree (ssh clients and workers included; sshd and the agents excluded). "
        "OpenSSH-based tools run with `KexAlgorithms=curve25519-sha256` forced.",
        "",
        "| tool | ok | wall (s) | hosts/s | controller CPU (s) | controller CPU per host (ms) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['tool']} | {r['ok']}/{r['hosts']} | {r['wall_s']:.1f} | {r['hosts_per_s']:.1f} | "
                     f"{r['cpu_s']:.2f} | {r['cpu_ms_per_host']:.1f} |")
    lines += [
        "",
        "Wall time on a small machine is bound by the hosts' side (sshd + a python3 start + the agent, "
        "~0.3 s of CPU per host, all on the same cores), so compare tools by controller CPU per host. "
        "The per-host figures include each tool's fixed start-up (interpreter, imports) spread over the hosts.",
        "",
    ]
    path.write_text("\n".join(lines))
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
