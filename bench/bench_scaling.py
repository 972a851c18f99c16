"""Check sweep's scaling model: measure its inputs on small loopback runs, predict a big one, run it.

    python bench/bench_scaling.py [--small 20,50] [--big 100,200] [--forks 32]

The model (docs/scaling.md): a sweep of N hosts takes

    T(N) = t0 + N * b + L
    b    = max(c_ctrl, L / forks, (c_ctrl + c_host) / cores)   seconds per host at steady state

t0      controller start-up before the first connection (imports, bundle, inventory)
c_ctrl  controller CPU per further host (paramiko, crypto, judging, writing the record)
L       one host's latency alone: round trips (TCP, SSH handshake, auth, exec, payload) + agent time
c_host  the host's CPU per sweep: its sshd (connection, key exchange, decrypting the payload) + the
        agent (a python3 start + the probe; here replaying an H200 capture)
cores   CPU cores that run all of that. (c_ctrl + c_host) / cores only applies when the hosts share
        the controller's cores, as on loopback; on a real fleet each host brings its own.

Inputs are measured on runs of --small hosts (a LocalFleet: one real sshd per host on loopback):
c_ctrl and c_host as the marginal CPU between the two small runs (controller: the child process
and what it reaped, by wait4; hosts: utime+stime+cutime+cstime of every sshd of the fleet from
/proc), L as the median host duration of the smaller run, t0 from a 1-host run, the agent's own
CPU by running the bundle locally, the round trip as a TCP connect to one of the sshds. Then the
--big runs are predicted and measured. Writes bench/results/scaling.md.

Loopback hosts share this machine's cores with the controller, and so with anything else running
on it: the load average before each run is printed and recorded; wait for a quiet machine
(--wait-idle) for figures worth keeping. Needs root and /usr/sbin/sshd. Not part of the tests.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sweep.collect.bundle import BOOTSTRAP, bundle_bytes  # noqa: E402
from sweep.demo.loopback import FleetHost, LocalFleet, default_capture  # noqa: E402

SWEEP = """
import json, sys, time
t = time.monotonic()
from sweep.collect.options import HostSelection, SSHSettings
from sweep.collect.run import run_sweep
inventory, out, known, forks, limit = sys.argv[1:6]
result = run_sweep(inventory, out=out, forks=int(forks), hosts=HostSelection(limit=limit),
                   ssh=SSHSettings(known_hosts=known, ssh_config=None, allow_agent=False, look_for_keys=False))
print(json.dumps({"ok": result.ok, "failed": result.failed}))
"""


def run_child(argv: list[str], env: dict, stdin: bytes | None = None) -> tuple[float, float, bytes]:
    """Wall s, CPU s of the child and every descendant it reaped (os.wait4), stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as inp:
        if stdin is not None:
            inp.write(stdin)
            inp.seek(0)
        started = time.monotonic()
        proc = subprocess.Popen(argv, env=env, stdin=inp, stdout=out, stderr=subprocess.DEVNULL, cwd=REPO)
        _, _, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        out.seek(0)
        return wall, usage.ru_utime + usage.ru_stime, out.read()


def fleet_cpu(pids: list[int]) -> float:
    """CPU s of the fleet's sshds so far, their reaped sessions and agents included."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().decode().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return total / tick


def wait_idle(limit: float, patience: float) -> float:
    """Wait (up to `patience` s) until the 1-minute load average is below `limit`; return it."""
    end = time.monotonic() + patience
    while os.getloadavg()[0] >= limit and time.monotonic() < end:
        time.sleep(5)
    return os.getloadavg()[0]


def sweep_run(fleet: LocalFleet, names: list[str], work: Path, tag: str, forks: int) -> dict:
    env = fleet.controller_env()
    env["PYTHONPATH"] = str(REPO)
    pids = [proc.pid for proc in fleet._procs.values()]  # the fleet's sshd listeners
    before = fleet_cpu(pids)
    load = os.getloadavg()[0]
    wall, cpu, out = run_child([sys.executable, "-c", SWEEP, str(fleet.inventory_path), str(work / tag),
                                str(fleet.known_hosts_path), str(forks), ":".join(names)], env)
    time.sleep(0.5)  # let the last sessions be reaped into their sshd's cutime
    hosts_cpu = fleet_cpu(pids) - before
    result = json.loads(out.decode().strip().splitlines()[-1])
    durations = [json.loads(p.read_text())["duration_s"] for p in (work / tag / "hosts").glob("*.json")]
    return {"n": len(names), "wall": wall, "cpu": cpu, "hosts_cpu": hosts_cpu, "ok": result["ok"],
            "load": load, "latency": statistics.median(durations) if durations else 0.0}


def agent_alone(payload: bytes, runs: int = 10) -> tuple[float, float]:
    """Median wall s and CPU s of the agent bundle run locally, as a host runs it (replayed capture)."""
    path = "/usr/local/bin:/usr/bin:/bin"  # sshd's default PATH: the python3 the hosts' sessions find
    env = {"PATH": path, "HOME": tempfile.mkdtemp(), "SWEEP_REPLAY": str(default_capture())}
    python = shutil.which("python3", path=path) or "python3"
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu, out = run_child([python, "-c", BOOTSTRAP, str(len(payload))], env, stdin=payload)
        assert b"schema_version" in out, out[:200]
        walls.append(wall)
        cpus.append(cpu)
    return statistics.median(walls), statistics.median(cpus)


def round_trip(address: str, port: int, runs: int = 50) -> float:
    """Median s of a TCP connect (one round trip) to an sshd of the fleet."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        socket.create_connection((address, port), timeout=5).close()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def predict(n: int, t0: float, c_ctrl: float, c_host: float, latency: float, forks: int, cores: float) -> dict:
    per_host = {"controller CPU": c_ctrl, "forks": latency / forks, "shared cores": (c_ctrl + c_host) / cores}
    bound = max(per_host, key=per_host.get)
    return {"wall": t0 + n * per_host[bound] + latency, "bound": bound, "per_host": per_host[bound]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", default="20,50", help="host counts of the two calibration runs")
    parser.add_argument("--big", default="100,200", help="host counts to predict, then measure")
    parser.add_argument("--forks", type=int, default=32)
    parser.add_argument("--wait-idle", type=float, default=0.0, metavar="LOAD",
                        help="before each run, wait (up to 10 min) for a 1-min load average below LOAD")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "scaling.md"))
    args = parser.parse_args()
    small = sorted(int(n) for n in args.small.split(","))
    targets = sorted(int(n) for n in args.big.split(","))
    cores = os.cpu_count() or 1
    payload = bundle_bytes()

    with tempfile.TemporaryDirectory(prefix="sweep-scaling-") as tmp:
        tmp = Path(tmp)
        hosts = [FleetHost(f"gpu{i:03d}") for i in range(1, max(targets + small) + 1)]
        with LocalFleet(hosts, tmp / "fleet") as fleet:
            names = [h.name for h in hosts]
            first = fleet.addresses[names[0]]
            rtt = round_trip(first, fleet.port)
            agent_wall, agent_cpu = agent_alone(payload)
            print(f"loopback round trip {rtt * 1e3:.3f} ms; agent alone {agent_wall * 1e3:.0f} ms wall, "
                  f"{agent_cpu * 1e3:.0f} ms CPU", flush=True)
            runs = {}
            # calibration runs use hosts from the end of the fleet, so the big run meets fresh ones
            for n in [1, *small]:
                if args.wait_idle:
                    wait_idle(args.wait_idle, 600)
                runs[n] = sweep_run(fleet, names[-n:], tmp, f"small-{n}", args.forks)
                r = runs[n]
                print(f"{n:4d} hosts: {r['wall']:6.2f} s wall, controller {r['cpu']:.2f} s CPU, hosts "
                      f"{r['hosts_cpu']:.2f} s CPU, median host {r['latency'] * 1e3:.0f} ms (load {r['load']:.1f})",
                      flush=True)
            a, b = runs[small[0]], runs[small[-1]]
            c_ctrl = (b["cpu"] - a["cpu"]) / (b["n"] - a["n"])
            c_host = (b["hosts_cpu"] - a["hosts_cpu"]) / (b["n"] - a["n"])
            latency = runs[1]["latency"]
            t0 = max(0.0, runs[1]["wall"] - latency)
            model = dict(t0=t0, c_ctrl=c_ctrl, c_host=c_host, latency=latency, forks=args.forks, cores=cores)
            checks = {n: predict(n, **model) for n in small}
            print(f"inputs: t0 {t0:.2f} s, c_ctrl {c_ctrl * 1e3:.1f} ms, c_host {c_host * 1e3:.0f} ms "
                  f"(sshd {max(0.0, c_host - agent_cpu) * 1e3:.0f} + agent {agent_cpu * 1e3:.0f}), "
                  f"L {latency * 1e3:.0f} ms, forks {args.forks}, cores {cores}", flush=True)
            results = []
            for n in targets:
                big = predict(n, **model)
                print(f"predicted {n} hosts: {big['wall']:.1f} s ({big['bound']} bound, "
                      f"{big['per_host'] * 1e3:.0f} ms per host)", flush=True)
                if args.wait_idle:
                    wait_idle(args.wait_idle, 600)
                measured = sweep_run(fleet, names[:n], tmp, f"big-{n}", args.forks)
                error = 100 * (big["wall"] - measured["wall"]) / measured["wall"]
                print(f"measured  {n} hosts: {measured['wall']:.1f} s (ok {measured['ok']}/{n}, load "
                      f"{measured['load']:.1f}); error {error:+.1f} %", flush=True)
                results.append((n, big, measured, error))
    write_report(Path(args.out), args, runs, model, agent_wall, agent_cpu, rtt, checks, results)
    return 0 if all(abs(e) <= 25 and m["ok"] == n for n, _, m, e in results) else 1


def write_report(path: Path, args, runs, model, agent_wall, agent_cpu, rtt, checks, results) -> None:
    m = model
    lines = [
        "# sweep's scaling model against a measured loopback sweep",
        "",
        f"`python bench/bench_scaling.py --small {args.small} --big {args.big} --forks {args.forks}` on "
        f"{platform.node() or 'this machine'}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}. One real sshd per host on loopback (`-r`), the agent replaying "
        "an H200 capture. Model and reading: docs/scaling.md.",
        "",
        "| run | hosts | wall (s) | controller CPU (s) | hosts' CPU (s) | median host (ms) | load avg before |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for n, r in runs.items():
        lines.append(f"| calibration | {n} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['hosts_cpu']:.2f} | "
                     f"{r['latency'] * 1e3:.0f} | {r['load']:.1f} |")
    for n, _, r, _ in results:
        lines.append(f"| **measured** | {n} | **{r['wall']:.2f}** | {r['cpu']:.2f} | {r['hosts_cpu']:.2f} | "
                     f"{r['latency'] * 1e3:.0f} | {r['load']:.1f} |")
    lines += [
        "",
        "| model input | value | from |",
        "|---|---:|---|",
        f"| t0, start-up | {m['t0']:.2f} s | 1-host run wall - its host's duration |",
        f"| c_ctrl, controller CPU per host | {m['c_ctrl'] * 1e3:.1f} ms | marginal, {args.small} runs |",
        f"| c_host, hosts' CPU per host | {m['c_host'] * 1e3:.0f} ms | marginal, {args.small} runs (sshd tree) |",
        f"| of which the agent | {agent_cpu * 1e3:.0f} ms CPU, {agent_wall * 1e3:.0f} ms wall | bundle run "
        "locally, 10 runs |",
        f"| of which sshd per connection | {max(0.0, m['c_host'] - agent_cpu) * 1e3:.0f} ms | c_host - agent |",
        f"| L, one host alone | {m['latency'] * 1e3:.0f} ms | 1-host run |",
        f"| round trip (TCP connect) | {rtt * 1e3:.3f} ms | 50 connects |",
        f"| forks, cores | {m['forks']}, {m['cores']} | |",
        "",
        "| hosts | predicted (s) | bound | measured (s) | error |",
        "|---:|---:|---|---:|---:|",
    ]
    for n, p in checks.items():
        lines.append(f"| {n} (calibration) | {p['wall']:.2f} | {p['bound']} | {runs[n]['wall']:.2f} | "
                     f"{100 * (p['wall'] - runs[n]['wall']) / runs[n]['wall']:+.1f} % |")
    for n, big, measured, error in results:
        lines.append(f"| **{n}** | **{big['wall']:.1f}** | {big['bound']} | **{measured['wall']:.1f}** | "
                     f"**{error:+.1f} %** |")
    lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
