"""Sweep a loopback fleet with sweep, parallel-ssh, ClusterShell's clush, pdsh, asyncssh and ansible ad-hoc.

    python bench/bench_sweep.py --hosts 200 [--forks 32] [--tools sweep,sweep-openssh,pssh,clush,pdsh,asyncssh,ansible]
    python bench/bench_sweep.py --hosts 300 --tools sweep,pssh,clush,pdsh,asyncssh --rounds 2

`sweep` is sweep's own transport (paramiko), `sweep-openssh` the same sweep with `--transport openssh`
(one system ssh per host). One LocalFleet (a real sshd per host, each replaying an H200 capture) serves every tool in turn.
Each tool runs in its own child process and must bring back the agent's health.json from every
host (same payload on stdin, same remote command); the table counts the valid ones. "Controller
CPU" is the user+system time of that child and every process it waited for (ssh clients, ansible
workers), read with os.wait4: the sshds and the agents on the hosts are not in it, and neither is
anything of the other tools. The OpenSSH-based tools get curve25519 key exchange forced, as sweep
does (OpenSSH 9.2's default sntrup761 costs them ~100 ms of CPU per host). `pdsh` cannot send stdin
to a remote command, so it runs through its `exec` module, one `sh -c 'exec ssh ... %h CMD < payload'`
per host (a fork and exec of sh more than clush, which runs ssh directly); `asyncssh` is the ~40-line
client bench/asyncssh_client.py. With `--rounds N` (N > 1) every tool runs N times on the one fleet,
the order of the tools reversed every round (ABBA for two tools), and the table gives each run, each
tool's median CPU per further host and, per round, its ratio to sweep's. `--wire`: the other tools
send what sweep sends each host (`sweep.collect.bundle.wire_bytes`, the sources in one zlib stream,
which the same remote command reads) instead of the zipapp, so that every tool moves the same bytes.

    python bench/bench_sweep.py --hosts 300 --tools sweep --against /tmp/base --rounds 2
    python bench/bench_sweep.py --hosts 300 --tools sweep-cli --against /tmp/base --rounds 2

`sweep-cli` is the command a user types, `sweep run INVENTORY --no-report` (the run_sweep call of `sweep`
plus the CLI's start, its summary and, before issue 52, the history index). `--against TREE` (with one
tool in --tools): that tool of another tree (a worktree of an older commit) as one more tool, `sweep@base`,
run paired with this tree's in ABBA order (`--rounds` pairs of runs, the order swapped every round),
each run after its own 1-host run; the table then gives every run and the per-round ratios of CPU per
further host. On a shared machine only neighbouring runs compare.

Writes bench/results/sweep.md. Needs root, /usr/sbin/sshd, pdsh (apt-get install pdsh), and
pip install '.[bench]' (parallel-ssh, asyncssh, ansible-core; ClusterShell); `BENCH_SITE=DIR`: a
`pip install --target DIR` folder the peers (not sweep) import from. Not part of the test suite.
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

from sweep.collect.bundle import build_bundle, bundle_bytes, remote_command, wire_bytes  # noqa: E402
from sweep.demo.loopback import FleetHost, LocalFleet  # noqa: E402

KEX = "curve25519-sha256"

SWEEP = """
import json, sys
from sweep.collect.options import HostSelection, SSHSettings
from sweep.collect.run import run_sweep
inventory, out, known, forks, limit, transport = sys.argv[1:7]
result = run_sweep(inventory, out=out, forks=int(forks), hosts=HostSelection(limit=limit),
                   ssh=SSHSettings(known_hosts=known, ssh_config=None, allow_agent=False, look_for_keys=False,
                                   transport=transport))
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


def run_child(argv: list[str], env: dict, stdin: bytes | None = None, cwd: Path = REPO) -> tuple[float, float, bytes, bytes]:
    """Wall time, CPU of the child and its reaped descendants, stdout, stderr. `cwd`: the tree a sweep child
    imports (``python -c`` and ``-m`` put the working folder before PYTHONPATH)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as inp:
        if stdin is not None:
            inp.write(stdin)
            inp.seek(0)
        started = time.monotonic()
        proc = subprocess.Popen(argv, env=env, stdin=inp, stdout=out, stderr=err, cwd=cwd)
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


def run_tool(tool: str, fleet: LocalFleet, names: list[str], tmp: Path, payload: bytes, forks: int,
             tag: str, tree: Path = REPO) -> tuple[float, float, int, bytes]:
    """Run one tool over the hosts `names`: wall s, controller CPU s, valid health.json count, stderr.
    `tree`: the sweep tree the sweep tools run from (``sweep@base``: --against's)."""
    env = fleet.controller_env()
    env["PYTHONPATH"] = str(tree)
    work = tmp / f"{tool}-{tag}"
    work.mkdir()
    addresses = [fleet.addresses[name] for name in names]
    command = remote_command("python3", len(payload), [])
    if tool == "sweep@base":
        tool = "sweep"
    if not tool.startswith("sweep") and os.environ.get("BENCH_SITE"):  # the peers' own packages
        env["PYTHONPATH"] = os.pathsep.join([str(tree), os.environ["BENCH_SITE"]])
    if tool == "sweep-cli":  # the command a user types: `sweep run INVENTORY --no-report` (history, manifest, summary)
        argv = [sys.executable, "-m", "sweep.cli", "run", str(fleet.inventory_path), "--out", str(work / "run"),
                "--known-hosts", str(fleet.known_hosts_path), "--forks", str(forks), "--limit", ",".join(names),
                "--no-report"]
        wall, cpu, out, err = run_child(argv, env, cwd=tree)
        ok = len(list((work / "run" / "hosts").glob("*.json"))) if (work / "run" / "hosts").is_dir() else 0
    elif tool in ("sweep", "sweep-openssh"):
        argv = [sys.executable, "-c", SWEEP, str(fleet.inventory_path), str(work / "run"),
                str(fleet.known_hosts_path), str(forks), ",".join(names),
                "openssh" if tool == "sweep-openssh" else "paramiko"]
        wall, cpu, out, err = run_child(argv, env, cwd=tree)
        ok = json.loads(out.decode().strip().splitlines()[-1])["ok"] if out.strip() else 0
    elif tool == "pssh":
        (work / "hosts.txt").write_text("\n".join(addresses) + "\n")
        (work / "payload.bin").write_bytes(payload)
        argv = [sys.executable, "-c", PSSH, str(work / "hosts.txt"), str(fleet.client_key_path),
                str(forks), str(work / "payload.bin"), command]
        wall, cpu, out, err = run_child(argv, env)
        ok = json.loads(out.decode().strip().splitlines()[-1])["ok"] if out.strip() else 0
    elif tool == "clush":
        ssh_opts = (f"-i {fleet.client_key_path} -o UserKnownHostsFile={fleet.known_hosts_path} "
                    f"-o StrictHostKeyChecking=yes -o KexAlgorithms={KEX} -o BatchMode=yes")
        argv = [str(Path(sys.executable).with_name("clush")), "-f", str(forks), "-w", ",".join(addresses),
                "-l", "root", "-o", ssh_opts, "-L", command]
        wall, cpu, out, err = run_child(argv, env, stdin=payload)
        ok = count_json_by_prefix(out.decode(errors="replace"), addresses)
    elif tool == "pdsh":  # no stdin to a remote command: its exec module runs one ssh per host, fed a file
        (work / "payload.bin").write_bytes(payload)
        ssh = (f"exec ssh -i {fleet.client_key_path} -o UserKnownHostsFile={fleet.known_hosts_path} "
               f"-o StrictHostKeyChecking=yes -o KexAlgorithms={KEX} -o BatchMode=yes -l root %h "
               f"{shlex.quote(command)} < {work / 'payload.bin'}")
        argv = ["pdsh", "-R", "exec", "-f", str(forks), "-w", ",".join(addresses), "sh", "-c", ssh]
        wall, cpu, out, err = run_child(argv, env)
        ok = count_json_by_prefix(out.decode(errors="replace"), addresses)
    elif tool == "asyncssh":
        (work / "hosts.txt").write_text("\n".join(addresses) + "\n")
        (work / "payload.bin").write_bytes(payload)
        argv = [sys.executable, str(REPO / "bench" / "asyncssh_client.py"), str(work / "hosts.txt"),
                str(fleet.client_key_path), str(fleet.known_hosts_path), str(forks), str(work / "payload.bin"),
                command]
        wall, cpu, out, err = run_child(argv, env)
        ok = json.loads(out.decode().strip().splitlines()[-1])["ok"] if out.strip() else 0
    elif tool == "ansible":
        # the bundle (a zipapp) is too big for a command line (MAX_ARG_STRLEN), and -m raw has no
        # stdin: -m script copies it to the host and runs it, in one ad-hoc command
        pyz = build_bundle(work / "agent.pyz")
        argv = [str(Path(sys.executable).with_name("ansible")), "all", "-i", str(fleet.inventory_path),
                "--limit", ",".join(names), "-f", str(forks), "-m", "script", "-a", str(pyz),
                f"--ssh-extra-args=-o KexAlgorithms={KEX}",
                f"--ssh-common-args=-o UserKnownHostsFile={fleet.known_hosts_path}", "--tree", str(work / "tree")]
        env.update(ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_LOCAL_TEMP=str(work / "ansible-tmp"),
                   ANSIBLE_SSH_CONTROL_PATH_DIR=str(work / "cp"), ANSIBLE_NOCOLOR="1")
        wall, cpu, out, err = run_child(argv, env)
        ok = 0
        for path in (work / "tree").glob("*"):  # one JSON result per host
            try:
                health = json.loads(json.loads(path.read_text()).get("stdout", ""))
                ok += isinstance(health, dict) and "schema_version" in health
            except (ValueError, AttributeError):
                pass
    else:
        raise SystemExit(f"unknown tool {tool}")
    return wall, cpu, ok, err


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--forks", type=int, default=32)
    parser.add_argument("--tools", default="sweep,sweep-openssh,pssh,clush,ansible")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "sweep.md"))
    parser.add_argument("--against", type=Path, default=None, help="another sweep tree, run paired (ABBA)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="runs of each tool, the order reversed every round (default 1; with --against 2)")
    parser.add_argument("--gpus", type=int, default=1, help="with --against: GPUs of the replayed H200 capture")
    parser.add_argument("--wire", action="store_true",
                        help="the other tools send sweep's own payload (157 KB zlib stream), not the 514 KiB zipapp")
    args = parser.parse_args()
    if args.against is not None:
        args.rounds = args.rounds or 2
        return paired(args)
    args.rounds = args.rounds or 1

    payload = wire_bytes() if args.wire else bundle_bytes()
    rows = []
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        tmp = Path(tmp)
        started = time.monotonic()
        hosts = [FleetHost(f"gpu{i:03d}", group="rack_a" if i % 2 else "rack_b")
                 for i in range(1, args.hosts + 1)]
        with LocalFleet(hosts, tmp / "fleet", children={"h200": ["rack_a", "rack_b"]}) as fleet:
            up = time.monotonic() - started
            print(f"fleet of {args.hosts} sshds up in {up:.1f} s", flush=True)
            names = [h.name for h in hosts]
            tools = args.tools.split(",")
            for r in range(args.rounds):
                for tool in (tools if r % 2 == 0 else tools[::-1]):
                    rows.append(measure(tool, fleet, names, tmp, payload, args, r))
    write_report(Path(args.out), rows, args, up, len(payload))
    return 0


def measure(tool: str, fleet: LocalFleet, names: list[str], tmp: Path, payload: bytes, args, r: int) -> dict:
    """One run of `tool` over every host, after its own 1-host run (the tool's fixed start-up cost)."""
    load = os.getloadavg()[0]
    _, cpu_one, ok_one, _ = run_tool(tool, fleet, names[:1], tmp, payload, args.forks, f"one-{r}")
    wall, cpu, ok, err = run_tool(tool, fleet, names, tmp, payload, args.forks, f"all-{r}")
    per_host = 1000 * (cpu - cpu_one) / max(1, args.hosts - 1)
    row = {"round": r, "tool": tool, "hosts": args.hosts, "ok": ok, "wall_s": wall, "cpu_s": cpu,
           "cpu_ms_per_host": 1000 * cpu / args.hosts, "startup_s": cpu_one, "marginal_ms": per_host,
           "hosts_per_s": args.hosts / wall, "load": load}
    print(f"round {r} {tool:8s} ok {ok}/{args.hosts}  wall {wall:6.1f} s  controller CPU {cpu:6.2f} s "
          f"= {row['cpu_ms_per_host']:5.1f} ms/host (1 host: {cpu_one:.2f} s; each further host "
          f"{per_host:.1f} ms)", flush=True)
    if ok < args.hosts or ok_one < 1:
        print(err.decode(errors="replace")[-1500:], file=sys.stderr)
    return row


def paired(args) -> int:
    """This tree's sweep and --against's, ABBA, on one fleet: CPU per further host of each run, and ratios."""
    import statistics

    payload = bundle_bytes()
    tool = args.tools if "," not in args.tools else "sweep"
    runs = []
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        tmp = Path(tmp)
        capture = None
        if args.gpus > 1:  # the recorded H200 made into N GPUs (sweep.demo.synth): answers as large as a real node's
            from sweep.demo import synth

            capture = str(synth.write(synth.derive(synth.base_capture(), [synth.multi_gpu(args.gpus)]),
                                      tmp / f"h200x{args.gpus}.json"))
        hosts = [FleetHost(f"gpu{i:03d}", group="rack_a" if i % 2 else "rack_b", capture=capture)
                 for i in range(1, args.hosts + 1)]
        with LocalFleet(hosts, tmp / "fleet", children={"h200": ["rack_a", "rack_b"]}) as fleet:
            names = [h.name for h in hosts]
            for r in range(args.rounds):
                order = [("this", REPO), ("base", args.against)]
                for label, tree in (order if r % 2 == 0 else order[::-1]):
                    tag = f"{label}-{r}"
                    load = os.getloadavg()[0]
                    _, cpu_one, ok_one, _ = run_tool(tool, fleet, names[:1], tmp, payload, args.forks,
                                                     tag + "-one", tree)
                    wall, cpu, ok, err = run_tool(tool, fleet, names, tmp, payload, args.forks, tag, tree)
                    row = {"round": r, "tree": label, "ok": ok, "wall_s": wall, "cpu_s": cpu, "startup_s": cpu_one,
                           "marginal_ms": 1000 * (cpu - cpu_one) / max(1, args.hosts - 1), "load": load}
                    runs.append(row)
                    print(json.dumps(row), flush=True)
                    if ok < args.hosts:
                        print(err.decode(errors="replace")[-1500:], file=sys.stderr)
    ratios = []
    for r in range(args.rounds):
        this, base = (next(x for x in runs if x["round"] == r and x["tree"] == t) for t in ("this", "base"))
        ratios.append(this["marginal_ms"] / base["marginal_ms"])
    lines = [f"# sweep against {args.against}: controller CPU per further host, paired (ABBA)", "",
             f"`python bench/bench_sweep.py --hosts {args.hosts} --forks {args.forks} --tools {tool} --against "
             f"{args.against} --rounds {args.rounds} --gpus {args.gpus}` on {platform.node() or 'this machine'}, {os.cpu_count()} CPUs, "
             f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')}; a shared machine: the load "
             "average before each run is given.", "",
             "| round | tree | ok | wall (s) | controller CPU (s) | 1-host run (s) | CPU per further host (ms) | load |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for x in runs:
        lines.append(f"| {x['round']} | {x['tree']} | {x['ok']}/{args.hosts} | {x['wall_s']:.1f} | {x['cpu_s']:.2f} | "
                     f"{x['startup_s']:.2f} | {x['marginal_ms']:.2f} | {x['load']:.1f} |")
    lines += ["", "Per round, this tree's CPU per further host / the other's: "
              + ", ".join(f"{q:.2f}" for q in ratios) + f" (median {statistics.median(ratios):.2f}).", ""]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


def write_report(path: Path, rows: list[dict], args, up: float, payload_size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "# sweep and its peers: collecting health.json from a loopback fleet",
        "",
        f"`python bench/bench_sweep.py --hosts {args.hosts} --forks {args.forks} --tools {args.tools} "
        f"--rounds {args.rounds}{' --wire' if args.wire else ''}` on {platform.node() or 'this machine'}, "
        f"{os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')}; a shared machine: the load average "
        "before each run is given.",
        "",
        f"{args.hosts} real OpenSSH sshds on loopback (one per 127.x.y.z address; fleet up in {up:.1f} s), "
        f"each running the agent on a replayed H200 capture. The other tools send {payload_size // 1024} KiB "
        + ("(sweep's own payload, `--wire`: the sources in one zlib stream, as sweep sends them)"
           if args.wire else f"(the zipapp; sweep sends its own payload, the sources in one {len(wire_bytes()) // 1024} KiB zlib stream)")
        + ": parallel-ssh, clush, pdsh and asyncssh on stdin to the remote command sweep runs "
        "(pdsh through its exec module: `sh -c 'exec ssh ... %h CMD < payload'` per host, as pdsh has no "
        "stdin for a remote command); ansible (`-m raw` has no stdin, and the bundle is too big for a "
        "command line) runs it with `-m script agent.pyz`, which copies it to the host first. Fan-out "
        f"{args.forks}. *ok* counts hosts whose output parsed as a health.json object. Controller CPU is "
        "the tool's process tree (ssh clients, shells and workers included; sshd and the agents excluded). "
        "OpenSSH-based tools and asyncssh run with `curve25519-sha256` key exchange forced. The sshds run "
        "with `-r` (no re-exec per connection), as LocalFleet starts them. Every tool ran "
        f"{args.rounds} time(s) on the one fleet, the order of the tools reversed every round.",
        "",
        "| round | tool | ok | wall (s) | hosts/s | controller CPU (s) | CPU per host, all in (ms) "
        "| start-up: 1-host run (s) | CPU per further host (ms) | load |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['round']} | {r['tool']} | {r['ok']}/{r['hosts']} | {r['wall_s']:.1f} | "
                     f"{r['hosts_per_s']:.1f} | {r['cpu_s']:.2f} | {r['cpu_ms_per_host']:.1f} | "
                     f"{r['startup_s']:.2f} | {r['marginal_ms']:.1f} | {r['load']:.1f} |")
    lines += ["", *summary(rows), "",
              "Wall time on a small machine is bound by the hosts' side (sshd + a python3 start + the agent, "
              "~0.3 s of CPU per host, all on the same cores), so compare tools by controller CPU per host. "
              "*CPU per host, all in* spreads each tool's fixed start-up (interpreter, imports; for sweep also "
              "building the bundle) over the hosts; *CPU per further host* is (CPU of the full run - CPU of a "
              "1-host run) / (hosts - 1). sweep's 1-host run includes reading the whole inventory "
              "(and its host_vars files).", ""]
    path.write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {path}")


def summary(rows: list[dict]) -> list[str]:
    """Each tool's median CPU per further host over the rounds and, per round, its ratio to sweep's."""
    import statistics

    tools = list(dict.fromkeys(r["tool"] for r in rows))
    base = {r["round"]: r["marginal_ms"] for r in rows if r["tool"] == "sweep"}
    lines = ["| tool | CPU per further host, median (ms) | per round (ms) | / sweep's, per round |",
             "|---|---:|---|---|"]
    for tool in tools:
        mine = {r["round"]: r["marginal_ms"] for r in rows if r["tool"] == tool}
        ratios = [mine[k] / base[k] for k in sorted(mine) if k in base and base[k] > 0]
        lines.append(f"| {tool} | {statistics.median(mine.values()):.1f} | "
                     f"{', '.join(f'{mine[k]:.1f}' for k in sorted(mine))} | "
                     f"{', '.join(f'{q:.2f}' for q in ratios) or '-'} |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
