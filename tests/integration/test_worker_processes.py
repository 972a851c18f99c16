"""`sweep run --workers N`: the hosts shared out among forked worker processes, one run folder, one tally.

Over a loopback fleet of real sshds: the records of a run with three workers are those of one process
(every host once, its class, digests this user's sweep signed), the workers really are processes; Ctrl-C,
kill -9 of the parent and the death of one worker each leave a folder that `--resume` finishes, and no
process of the sweep behind.
"""
from __future__ import annotations

import json
import os
import pty
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweep.demo.loopback import FleetHost, LocalFleet
from sweep.store import read_digests

from helpers import read_records

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
CLASS = {**{f"w{i:02d}": "ok" for i in range(1, 19)}, "w-dead": "refused", "w-new": "host_key_unknown"}
RESUME_LINE = re.compile(r"finish with: (sweep run --resume \S+)")


@pytest.fixture(autouse=True)
def controllers_key(fleet, monkeypatch):
    """The sweeps run with the fleet's controller HOME: their run key is read from there."""
    monkeypatch.setenv("HOME", fleet.controller_env()["HOME"])
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)


@pytest.fixture(scope="module")
def fleet(needs_sshd, tmp_path_factory):
    hosts = [FleetHost(name, "slow", group="fleet", delay_s=0.6) for name, cls in CLASS.items() if cls == "ok"]
    hosts += [FleetHost("w-dead", "dead", group="fleet"), FleetHost("w-new", "unknown_key", group="fleet")]
    with LocalFleet(hosts, tmp_path_factory.mktemp("workers")) as running:
        yield running


def argv(fleet: LocalFleet, run: Path, workers: int) -> list[str]:
    return [sys.executable, "-m", "sweep.cli", "run", str(fleet.inventory_path), "--out", str(run), "--no-report",
            "--known-hosts", str(fleet.known_hosts_path), "--forks", "6", "--workers", str(workers),
            "--host-deadline", "60"]


def start(fleet: LocalFleet, command: list[str]) -> subprocess.Popen:
    env = {**fleet.controller_env(), "PYTHONPATH": str(REPO)}
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own session: every process it leaves is findable


def session(sid: int) -> dict[int, int]:
    """pid -> parent pid of every live process of session `sid` (zombies left out)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            out[int(entry)] = int(fields[1])
    return out


def workers_of(proc: subprocess.Popen, wanted: int, timeout: float = 30.0) -> list[int]:
    """The worker processes of the sweep `proc`, once `wanted` of them run (its children in its session)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        children = [pid for pid, ppid in session(proc.pid).items() if ppid == proc.pid]
        if len(children) >= wanted:
            return children
        time.sleep(0.05)
    raise AssertionError(f"{wanted} worker processes never ran under pid {proc.pid}")


def gone(sid: int, timeout: float = 20.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not session(sid):
            return True
        time.sleep(0.1)
    return False


def records_at_least(run: Path, n: int, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if len(list((run / "hosts").glob("*.json"))) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} records in {run} after {timeout} s")


def classes(run: Path) -> dict[str, str]:
    return {name: rec["status"] if rec["status"] == "ok" else rec["failure"]["class"]
            for name, rec in read_records(run).items()}


def whole(run: Path) -> dict:
    """Every record file is whole JSON, listed with the digest this user's sweep signed; the manifest."""
    digests = read_digests(run)
    assert digests, f"no digest of {run} verifies with this user's run key"
    for path in (run / "hosts").glob("*.json"):
        json.loads(path.read_text())
        assert path.name in digests, f"{path.name} has no signed digest line"
    return json.loads((run / "manifest.json").read_text())


def resume(fleet: LocalFleet, run: Path, err: str) -> subprocess.CompletedProcess:
    line = RESUME_LINE.search(err)
    command = shlex.split(line.group(1))[1:] if line else ["run", "--resume", str(run)]
    env = {**fleet.controller_env(), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "sweep.cli", *command], env=env, capture_output=True, text=True,
                          timeout=180)


def test_three_workers_keep_the_records_one_process_keeps(fleet, tmp_path):
    one, three = tmp_path / "one", tmp_path / "three"
    single = subprocess.run(argv(fleet, one, 1), env={**fleet.controller_env(), "PYTHONPATH": str(REPO)},
                            capture_output=True, text=True, timeout=180)
    proc = start(fleet, argv(fleet, three, 3))
    assert len(workers_of(proc, 3)) == 3  # really processes, forked by the sweep
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == single.returncode == 1, err  # 1: the refused and the unknown-key host
    assert classes(three) == classes(one) == CLASS
    kept, alone = whole(three), whole(one)
    assert kept["counts"] == alone["counts"] == {"total": 20, "ok": 18, "failed": 2, "pending": 0}
    assert kept["options"]["workers"] == 3 and kept["state"] == "complete"
    assert sorted(p.name for p in (three / "hosts").iterdir()) == sorted(f"{n}.json" for n in CLASS)
    assert "host_key_unknown" in err and "refused" in err  # the parent's one summary names the failures
    assert gone(proc.pid, 1.0)


def test_ctrl_c_stops_every_worker_and_the_printed_resume_finishes(fleet, tmp_path):
    run = tmp_path / "run"
    proc = start(fleet, argv(fleet, run, 3))
    workers_of(proc, 3)
    records_at_least(run, 3)
    os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C: the whole foreground group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    kept = whole(run)
    assert kept["state"] == "interrupted"
    held = len(list((run / "hosts").glob("*.json")))
    assert kept["counts"]["ok"] + kept["counts"]["failed"] == held < len(CLASS)  # the counts say what it holds
    assert gone(proc.pid)
    finished = resume(fleet, run, err)
    assert finished.returncode == 1, finished.stderr
    assert classes(run) == CLASS and whole(run)["state"] == "complete"


def test_kill_9_of_the_parent_ends_the_workers_and_resume_finishes(fleet, tmp_path):
    run = tmp_path / "run"
    proc = start(fleet, argv(fleet, run, 3))
    workers_of(proc, 3)
    records_at_least(run, 3)
    proc.kill()
    proc.communicate(timeout=30)
    assert gone(proc.pid), f"processes of the sweep left behind: {session(proc.pid)}"
    whole(run)  # what the workers kept before and while they stopped: whole, signed
    finished = resume(fleet, run, "")
    assert finished.returncode == 1, finished.stderr
    assert classes(run) == CLASS


def test_a_worker_that_dies_leaves_its_hosts_pending_and_the_others_go_on(fleet, tmp_path):
    run = tmp_path / "run"
    proc = start(fleet, argv(fleet, run, 3))
    victim = workers_of(proc, 3)[0]
    os.kill(victim, signal.SIGKILL)  # the OOM killer, say, before it kept any of its 6 or 7 hosts
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err
    assert re.search(rf"worker process \d \(pid {victim}\) ended \(signal 9\)", err), err
    kept = whole(run)
    assert kept["counts"]["pending"] > 0 and kept["counts"]["ok"] + kept["counts"]["failed"] == len(read_records(run))
    assert gone(proc.pid, 1.0)
    finished = resume(fleet, run, err)
    assert finished.returncode == 1, finished.stderr
    assert classes(run) == CLASS


def test_workers_fork_beside_the_live_bar_of_a_terminal(fleet, tmp_path):
    """On a terminal the progress bar's refresher thread runs while the workers are forked: they must not
    inherit its locks (a worker that wrote to the terminal through them would hang)."""
    run, (master, slave) = tmp_path / "run", pty.openpty()
    env = {**fleet.controller_env(), "PYTHONPATH": str(REPO), "TERM": "xterm", "COLUMNS": "120"}
    proc = subprocess.Popen(argv(fleet, run, 3), env=env, stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True)
    os.close(slave)
    shown = bytearray()
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's last writer is gone
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    assert proc.wait(timeout=180) == 1, shown.decode(errors="replace")[-2000:]
    assert classes(run) == CLASS
    assert b"18 ok" in shown and b"2 failed" in shown  # the bar's last frame, drawn by the parent alone
