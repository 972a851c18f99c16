"""Faults at scale: a 200-host sweep with 25% faulty hosts, kill -9 and resume, and bad input.

    python bench/bench_faults.py [--hosts 200] [--forks 200] [--host-deadline 30]

One LocalFleet of real sshds on loopback serves every part:

1. a clean sweep of `--hosts` healthy hosts (the time every other figure is compared with);
2. a sweep of the same number of hosts of which 25% are faulty, about equally in each fault class
   of tests/integration/test_faults.py (slow banner within / beyond the connect timeout, Python 2.7,
   an agent hung in a driver query, 100 MiB of output, output that is not JSON, JSON that breaks the
   schema, a connection cut mid-output, more connections than sshd's MaxStartups): every host must
   end as exactly one record of the expected class, and the sweep must end within the per-host
   deadline plus 10% of the clean sweep's time;
3. kill -9 of a sweep at three points (10%, 50%, 90% of the hosts recorded), each followed by
   --resume: 0 records lost, 0 duplicated, 0 corrupt;
4. every bad input of tests/unit/bad_input_cases.py through `python -m sweep.cli`: exit 2 and the
   one expected line on stderr.

Prints a table and writes bench/results/faults.md. Needs root and /usr/sbin/sshd. Not part of the
test suite.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "unit"))

from bad_input_cases import build_cases  # noqa: E402

from sweep.demo import synth  # noqa: E402
from sweep.demo.loopback import FleetHost, LocalFleet  # noqa: E402
from sweep.collect.options import AgentOptions, HostSelection  # noqa: E402
from sweep.collect.run import run_sweep  # noqa: E402
from sweep.store import safe_name  # noqa: E402

CONNECT_TIMEOUT = 10.0
# The agent's own deadline. 200 hosts on 2 cores start 200 pythons at once: an agent can begin
# 10-15 s after its session, so the default (0.6 x the host deadline, from the agent's start) would
# let the host deadline cut the hung agents instead; on real hosts there is no such queue.
AGENT_DEADLINE = 10.0
# fault class -> (fleet kind, FleetHost extras, expected (status, failure class, probe complete))
FAULTS = {
    "slow banner, within timeout": ("slow_banner", {"delay_s": 2.0}, ("ok", None, True)),
    "slow banner, beyond timeout": ("slow_banner", {"delay_s": CONNECT_TIMEOUT + 10}, ("failed", "timeout", None)),
    "python 2.7": ("old_python", {}, ("failed", "python_too_old", None)),
    "agent hung in a driver query": ("healthy", {"capture": "HANG"}, ("ok", None, False)),
    "100 MiB of output": ("huge_output", {}, ("failed", "output_too_large", None)),
    "output not JSON": ("bad_output", {}, ("failed", "bad_output", None)),
    "JSON breaking the schema": ("bad_schema", {}, ("failed", "bad_output", None)),
    "connection cut mid-output": ("drop_mid_output", {}, ("failed", "agent_error", None)),
    "over sshd MaxStartups": ("healthy", {"sshd_options": ("MaxStartups 2:100:2",)}, ("ok", None, True)),
}
ALIASED = "over sshd MaxStartups"  # one sshd, several inventory names


def build_fleet(hosts: int, work: Path) -> tuple[list[FleetHost], dict, list[str], list[str]]:
    """Healthy hosts h0001.., faulty hosts f-<class>-NN; expected outcome per host name."""
    hang = synth.write(synth.derive(synth.base_capture("h200-idle"), [synth.hang("gpu0.temp")]), work / "hang.json")
    faulty = hosts // 4
    per_class = [faulty // len(FAULTS) + (1 if i < faulty % len(FAULTS) else 0) for i in range(len(FAULTS))]
    fleet_hosts = [FleetHost(f"h{i:04d}", group="clean") for i in range(1, hosts + 1)]
    expected, faulty_names = {}, []
    for (label, (kind, extra, outcome)), count in zip(FAULTS.items(), per_class):
        slug = "-".join(re.findall(r"[a-z0-9]+", label.lower()))[:24]
        names = [f"f-{slug}-{n:02d}" for n in range(1, count + 1)]
        extra = {**extra, "capture": str(hang)} if extra.get("capture") == "HANG" else extra
        if label == ALIASED:
            fleet_hosts.append(FleetHost(names[0], kind, group="faulty", aliases=tuple(names[1:]), **extra))
        else:
            fleet_hosts += [FleetHost(name, kind, group="faulty", **extra) for name in names]
        for name in names:
            expected[name] = (label, outcome)
        faulty_names += names
    mixed = [h.name for h in fleet_hosts[:hosts - faulty]] + faulty_names
    for name in mixed[:hosts - faulty]:
        expected[name] = ("healthy", ("ok", None, True))
    return fleet_hosts, expected, mixed, [h.name for h in fleet_hosts[:hosts]]


def read_records(run_dir: Path) -> tuple[dict, int, int, int]:
    """host -> record; and counts of duplicated, corrupt (unreadable or misnamed) and leftover temp files."""
    found, dup, corrupt, temp = {}, 0, 0, 0
    for path in sorted((run_dir / "hosts").iterdir()):
        if path.name.startswith("."):
            temp += 1
            continue
        try:
            record = json.loads(path.read_text())
            assert path.name == f"{safe_name(record['host'])}.json"
        except Exception:
            corrupt += 1
            continue
        if record["host"] in found:
            dup += 1
        found[record["host"]] = record
    return found, dup, corrupt, temp


def outcome_of(record: dict) -> tuple:
    health = record.get("health") or {}
    return (record["status"], (record.get("failure") or {}).get("class"),
            (health.get("probe") or {}).get("complete") if record["status"] == "ok" else None)


KILLED = """
import sys
from sweep.collect.options import HostSelection, SSHSettings
from sweep.collect.run import run_sweep
run_sweep(sys.argv[1], hosts=HostSelection(limit=sys.argv[4]), out=sys.argv[2], forks=int(sys.argv[5]),
          ssh=SSHSettings(known_hosts=sys.argv[3], ssh_config=None, allow_agent=False, look_for_keys=False))
"""


def kill_and_resume(fleet: LocalFleet, names: list[str], fraction: float, forks: int, work: Path, env: dict) -> dict:
    run_dir = work / f"killed-{int(fraction * 100)}"
    at = max(1, int(len(names) * fraction))
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(fleet.inventory_path), str(run_dir),
                             str(fleet.known_hosts_path), "clean", str(forks)], env=env, cwd=work)
    try:
        end = time.monotonic() + 300
        while time.monotonic() < end and proc.poll() is None:
            if (run_dir / "hosts").is_dir() and sum(1 for _ in (run_dir / "hosts").glob("h*.json")) >= at:
                break
            time.sleep(0.005)
    finally:
        proc.kill()
        proc.wait()
    before, _, corrupt_before, _ = read_records(run_dir)
    result = run_sweep(None, resume=run_dir, forks=forks, ssh=fleet.ssh_settings())
    found, dup, corrupt, temp = read_records(run_dir)
    kept = sum(1 for name, rec in before.items() if found.get(name) == rec)
    return {"point": f"{fraction:.0%} ({len(before)} recorded at kill)", "hosts": len(names),
            "lost": len(set(names) - set(found)), "duplicated": dup, "corrupt": corrupt + corrupt_before + temp,
            "kept_as_written": f"{kept}/{len(before)}", "state": result.state, "resumed": result.resumed}


def bad_inputs(work: Path, env: dict) -> list[dict]:
    rows = []
    for case in build_cases(work / "bad-input"):
        done = subprocess.run([sys.executable, "-m", "sweep.cli", *case.argv], capture_output=True, text=True,
                              env={**{k: v for k, v in env.items() if k != "SWEEP_KEY_PASSPHRASE"}, **case.env},
                              cwd=work, timeout=60)
        lines = done.stderr.splitlines()
        rows.append({"input": case.name, "exit": done.returncode, "stderr_lines": len(lines),
                     "exact": lines == [case.line], "line": lines[0] if lines else ""})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--forks", type=int, default=200, help="hosts in flight (default: all of them)")
    parser.add_argument("--host-deadline", type=float, default=30.0)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (sshd binds port 22 and switches users)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="sweep-bench-faults-"))
    home = work / "home"
    (home / ".ssh").mkdir(parents=True)
    os.environ["HOME"] = str(home)
    os.environ.pop("SSH_AUTH_SOCK", None)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        fleet_hosts, expected, mixed, clean = build_fleet(args.hosts, work)
        started = time.monotonic()
        with LocalFleet(fleet_hosts, work / "fleet") as fleet:
            up = time.monotonic() - started
            opts = dict(forks=args.forks, ssh=fleet.ssh_settings(connect_timeout=CONNECT_TIMEOUT,
                                                                  host_deadline=args.host_deadline),
                        agent=AgentOptions(args=["--deadline", f"{AGENT_DEADLINE:g}"]))
            t0 = time.monotonic()
            clean_result = run_sweep(fleet.inventory_path, hosts=HostSelection(limit="clean"), out=work / "clean",
                                     **opts)
            t_clean = time.monotonic() - t0
            t0 = time.monotonic()
            faulty_result = run_sweep(fleet.inventory_path, hosts=HostSelection(limit=",".join(mixed)),
                                      out=work / "faulty", **opts)
            t_faulty = time.monotonic() - t0
            found, dup, corrupt, temp = read_records(faulty_result.run_dir)
            by_class: dict[str, Counter] = {}
            wrong = []
            for name, (label, want) in expected.items():
                got = outcome_of(found[name]) if name in found else ("missing",)
                by_class.setdefault(label, Counter())["right" if got == want else "wrong"] += 1
                if got != want:
                    wrong.append((name, want, got, (found.get(name, {}).get("failure") or {}).get("message")))
            kills = [kill_and_resume(fleet, clean[: args.hosts // 2], f, min(args.forks, 32), work, env)
                     for f in (0.1, 0.5, 0.9)]
        rows = bad_inputs(work, env)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    bound = args.host_deadline + 0.10 * t_clean
    figures = {
        "hosts": args.hosts, "faulty": sum(1 for lbl, _ in expected.values() if lbl != "healthy"),
        "clean_ok": clean_result.ok, "t_clean": t_clean, "t_faulty": t_faulty, "bound": bound,
        "records": len(found), "lost": len(set(mixed) - set(found)), "duplicated": dup, "corrupt": corrupt + temp,
        "wrong": wrong, "fleet_up": up,
    }
    text = report(args, figures, by_class, kills, rows)
    print(text)
    out = REPO / "bench" / "results" / "faults.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out.relative_to(REPO)}")
    ok = (not wrong and figures["lost"] == figures["duplicated"] == figures["corrupt"] == 0 and t_faulty <= bound
          and all(k["lost"] == k["duplicated"] == k["corrupt"] == 0 for k in kills)
          and all(r["exit"] == 2 and r["exact"] for r in rows))
    return 0 if ok else 1


def report(args, f: dict, by_class: dict, kills: list[dict], rows: list[dict]) -> str:
    cpus = os.cpu_count()
    lines = [
        "# Faults at scale: 25% faulty hosts, kill -9 and resume, bad input",
        "",
        f"`python bench/bench_faults.py --hosts {args.hosts} --forks {args.forks} --host-deadline "
        f"{args.host_deadline:g}` on {platform.node() or 'this machine'}, {cpus} CPUs, Python "
        f"{platform.python_version()}, {time.strftime('%Y-%m-%d')}.",
        "",
        f"One LocalFleet of real sshds on loopback (up in {f['fleet_up']:.1f} s). Sweeps run with "
        f"--forks {args.forks}, --connect-timeout {CONNECT_TIMEOUT:g}, --host-deadline {args.host_deadline:g} "
        f"and the agent's own deadline at {AGENT_DEADLINE:g} s (`--deadline`: 200 hosts on 2 cores start 200 "
        "pythons at once, so an agent may begin 10-15 s after its session; 0.6 x the host deadline from "
        "that start would let the host deadline cut the hung agents instead).",
        "",
        "## A sweep with 25% faulty hosts",
        "",
        "| figure | value |",
        "|---|---:|",
        f"| hosts in each sweep | {f['hosts']} |",
        f"| clean sweep: hosts ok | {f['clean_ok']}/{f['hosts']} |",
        f"| clean sweep: wall time (s) | {f['t_clean']:.1f} |",
        f"| faulty hosts in the second sweep | {f['faulty']} |",
        f"| second sweep: wall time (s) | {f['t_faulty']:.1f} |",
        f"| bound: per-host deadline + 10% of the clean time (s) | {f['bound']:.1f} |",
        f"| within the bound | {'yes' if f['t_faulty'] <= f['bound'] else 'NO'} |",
        f"| records | {f['records']}/{f['hosts']} |",
        f"| records lost / duplicated / corrupt | {f['lost']} / {f['duplicated']} / {f['corrupt']} |",
        f"| hosts recorded with the wrong class | {len(f['wrong'])} |",
        "",
        "| host class | hosts | expected record | right |",
        "|---|---:|---|---:|",
    ]
    for label, counts in by_class.items():
        want = dict(FAULTS).get(label, (None, None, ("ok", None, True)))[2] if label != "healthy" else ("ok", None, True)
        shown = want[1] or ("ok, probe incomplete" if want[2] is False else "ok")
        lines.append(f"| {label} | {sum(counts.values())} | {shown} | {counts['right']}/{sum(counts.values())} |")
    for name, want, got, message in f["wrong"][:10]:
        lines.append(f"\nWRONG: {name}: expected {want}, got {got}: {message}")
    lines += ["", "## kill -9, then --resume", "",
              "| killed at | hosts | lost | duplicated | corrupt | records kept as written | resumed from | state |",
              "|---|---:|---:|---:|---:|---:|---:|---|"]
    for k in kills:
        lines.append(f"| {k['point']} | {k['hosts']} | {k['lost']} | {k['duplicated']} | {k['corrupt']} | "
                     f"{k['kept_as_written']} | {k['resumed']} | {k['state']} |")
    lines += ["", "## Bad input (python -m sweep.cli)", "",
              f"{sum(1 for r in rows if r['exit'] == 2 and r['exact'])}/{len(rows)} end with exit 2 and exactly "
              "the one expected line on stderr.", "",
              "| input | exit | stderr lines | the expected line |", "|---|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['input']} | {r['exit']} | {r['stderr_lines']} | {'yes' if r['exact'] else 'NO'} |")
    lines += ["", "The lines, with this run's temporary paths:", "", "```"] + [r["line"] for r in rows] + ["```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
