"""Hostile hosts beside healthy ones on a real sshd fleet: none takes the sweep, the report or a neighbour down.

Each hostile host runs a fake interpreter (a shell script in place of python3) that prints what the
test chooses, drawn at random each run (the seed is in the failure message): a health.json nesting
far past the limit, numbers a double cannot hold, hostile text in its fields; one forks a
daemonised child that keeps the SSH channel open after a valid health.json and exit 0; one runs
the real agent on a capture whose driver query hangs, with an agent deadline longer than the
sweep's. Healthy hosts' records and the report stay intact, each hostile host gets its class, and
no agent process is left on any host after the sweep. SIGTERM to `sweep run` ends like Ctrl-C.
"""
from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweep.collect.bundle import TOO_OLD_MARK
from sweep.collect.run import run_sweep
from sweep.demo import synth
from sweep.demo.loopback import FleetHost, LocalFleet
from sweep.report.build import build_report
from sweep.strictjson import MAX_DEPTH

from helpers import read_records

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
IDLE = json.loads((REPO / "tests" / "fixtures" / "h200" / "idle.health.json").read_text())
HOST_DEADLINE = 8.0
SEED = int.from_bytes(os.urandom(4), "little")
NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e999999", "-1e999999", "1E400", "123456789012345678901234567890"]
HOSTILE_TEXT = ["=cmd|' /C calc'!A0", "+1+1", "@SUM(1)", "\t=1", "-2+3", "a\x00b", "\u202eevil\u202c",
                "\u2066x\u2069", "<script>document.title='pwned'</script>", "\x1b]0;pwned\x07"]


def printer(path: Path) -> str:
    """A fake interpreter: read the agent from stdin, print `path`, exit 0."""
    return f"cat >/dev/null\ncat '{path}'\nexit 0\n"


def hostile_documents(rng: random.Random, folder: Path) -> dict[str, tuple[Path, dict]]:
    """host -> (stdout file, what it holds), drawn from rng."""
    found = {}
    depth = rng.choice([MAX_DEPTH + 1, rng.randint(MAX_DEPTH + 2, 990), rng.randint(990, 1100), 50_000])
    deep = json.dumps(IDLE).replace('"evidence": {', '"evidence": {"nested": ' + "[" * depth + "]" * depth + ", ", 1)
    found["x-deep"] = (deep, {"depth": depth})
    text, numbers = json.dumps(IDLE), {}
    for field in ("draw_w", "enforced_limit_w", "default_limit_w", "max_limit_w"):
        form = rng.choice(NON_FINITE)
        text = re.sub(f'"{field}": [-+.0-9eE]+', f'"{field}": {form}', text, count=1)
        numbers[f"gpus[0].power.{field}"] = form
    found["x-numbers"] = (text, {"numbers": numbers})
    doc = json.loads(json.dumps(IDLE))
    picks = {key: rng.choice(HOSTILE_TEXT) for key in ("hostname", "kernel")}
    doc["host"].update(picks)
    doc["gpus"][0]["name"] = rng.choice(HOSTILE_TEXT)
    doc["summary"] = rng.choice(HOSTILE_TEXT)
    found["x-strings"] = (json.dumps(doc), {"strings": picks})
    out = {}
    for host, (content, what) in found.items():
        path = folder / f"{host}.out"
        path.write_text(content, encoding="utf-8")
        out[host] = (path, what)
    return out


@pytest.fixture(scope="module")
def hostile(needs_sshd, tmp_path_factory):
    work = tmp_path_factory.mktemp("hostile")
    rng = random.Random(SEED)
    docs = hostile_documents(rng, work)
    hang = synth.write(synth.derive(synth.base_capture("h200-idle"), [synth.hang("gpu0.temp")]), work / "hang.json")
    tag = f"x13{SEED:08x}"  # marks this fleet's processes among other tests' on the same machine
    hosts = [FleetHost(f"ok{i}-{tag}", group="healthy") for i in range(1, 4)]
    hosts += [FleetHost(f"{name}-{tag}", group="hostile", script=printer(path)) for name, (path, _) in docs.items()]
    hosts += [FleetHost(f"x-daemon-{tag}", group="hostile",
                        script="setsid sh -c 'sleep 25' &\nexec python3 \"$@\"\n"),
              FleetHost(f"x-hung-{tag}", group="hostile", capture=str(hang),
                        script="exec python3 \"$@\" --deadline 1000\n")]
    with LocalFleet(hosts, work / "fleet") as fleet:
        home, os.environ["HOME"] = os.environ.get("HOME"), str(fleet.home)  # hermetic: no ~/.ssh of the tester
        try:
            started = time.monotonic()
            result = run_sweep(fleet.inventory_path, out=work / "run", forks=8,
                               ssh=fleet.ssh_settings(connect_timeout=3.0, host_deadline=HOST_DEADLINE))
            swept_s = time.monotonic() - started
        finally:
            os.environ["HOME"] = home or "/root"
        leftovers = agents_of(tag, wait_s=HOST_DEADLINE + 5)
        yield {"result": result, "tag": tag, "docs": docs, "records": read_records(work / "run"),
               "run": work / "run", "swept_s": swept_s, "leftovers": leftovers}


def agents_of(tag: str, wait_s: float) -> list[str]:
    """Agent processes (the bootstrap's command line) of this fleet's hosts still running after wait_s."""
    end = time.monotonic() + wait_s
    while True:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                environ = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                continue
            if TOO_OLD_MARK.encode() in cmdline and tag.encode() in environ:
                found.append(f"{pid}: {cmdline[:80]!r}")
        if not found or time.monotonic() > end:
            return found
        time.sleep(0.25)


def named(records: dict, prefix: str, tag: str) -> dict:
    return records[f"{prefix}-{tag}"]


def test_healthy_hosts_and_the_report_are_intact(hostile, tmp_path):
    records, tag = hostile["records"], hostile["tag"]
    assert len(records) == 8, f"seed {SEED}"
    for i in range(1, 4):
        record = named(records, f"ok{i}", tag)
        assert record["status"] == "ok" and record["health"]["gpus"][0]["name"] == "NVIDIA H200"
    result = build_report([hostile["run"]], tmp_path / "report")
    summary = json.loads((tmp_path / "report" / "summary.json").read_text(),
                         parse_constant=lambda name: pytest.fail(f"{name} in summary.json"))
    assert summary["hosts_total"] == 8 and result.exit_code == 1  # the hung host is unreachable
    html = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    assert all(f"ok{i}-{tag}" in html for i in range(1, 4))
    assert "\u202e" not in html and "<script>document" not in html


def test_each_hostile_host_has_its_class(hostile):
    records, tag, docs = hostile["records"], hostile["tag"], hostile["docs"]
    deep = named(records, "x-deep", tag)
    assert deep["status"] == "failed" and deep["failure"]["class"] == "agent_error", f"seed {SEED}"
    assert deep["exit_status"] == 0 and "nests" in deep["failure"]["message"]
    numbers = named(records, "x-numbers", tag)
    assert numbers["status"] == "ok", f"seed {SEED}: {numbers['failure']}"
    unknown = {u["path"]: u["text"] for u in numbers["unknown_numbers"]}
    assert unknown == docs["x-numbers"][1]["numbers"]
    assert all(numbers["health"]["gpus"][0]["power"][k.rsplit(".", 1)[1]] is None for k in unknown)
    strings = named(records, "x-strings", tag)
    assert strings["status"] == "ok"
    assert {k: strings["health"]["host"][k] for k in ("hostname", "kernel")} == docs["x-strings"][1]["strings"]


def test_a_daemonised_child_does_not_make_a_finished_host_time_out(hostile):
    record = named(hostile["records"], "x-daemon", hostile["tag"])
    assert record["status"] == "ok" and record["exit_status"] == 0
    assert record["duration_s"] < HOST_DEADLINE / 2


def test_a_hung_agent_times_out_and_ends_itself_on_the_host(hostile):
    record = named(hostile["records"], "x-hung", hostile["tag"])
    assert record["status"] == "failed" and record["failure"]["class"] == "timeout"
    assert hostile["leftovers"] == [], "agent processes left running on the hosts"


@pytest.fixture
def slow_fleet(needs_sshd, tmp_path):
    hosts = [FleetHost("s-fast", group="fast")] + \
        [FleetHost(f"s-slow{i}", "slow", group="slow", delay_s=6.0) for i in range(1, 4)]
    with LocalFleet(hosts, tmp_path / "fleet") as fleet:
        yield fleet


def test_sigterm_ends_a_sweep_like_ctrl_c_and_resume_finishes_it(slow_fleet, tmp_path):
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "sweep.cli", "run", str(slow_fleet.inventory_path), "--out", str(run),
            "--known-hosts", str(slow_fleet.known_hosts_path), "--no-report", "--host-deadline", "30"]
    env = {**slow_fleet.controller_env(), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 60
    while not (run / "hosts" / "s-fast.json").exists():
        assert proc.poll() is None and time.monotonic() < end, proc.stderr.read() if proc.poll() is not None else ""
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 130, proc.stderr.read()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["state"] == "interrupted" and manifest["sessions"][-1]["state"] == "interrupted"
    assert "s-fast" in read_records(run)
    done = subprocess.run([sys.executable, "-m", "sweep.cli", "run", "--resume", str(run), "--known-hosts",
                           str(slow_fleet.known_hosts_path), "--no-report", "--host-deadline", "30"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads((run / "manifest.json").read_text())["state"] == "complete"
    assert set(read_records(run)) == {"s-fast", "s-slow1", "s-slow2", "s-slow3"}
