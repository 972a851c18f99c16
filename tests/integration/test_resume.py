"""`sweep run --resume` finishes a run the way it was started, and `--retry-failed` sweeps failed hosts again.

A 20-host loopback fleet (sweep.demo.loopback.LocalFleet) of replaying hosts and hosts that fail by design
(host key unknown, connection refused). The run's options live in its manifest: a resumed session uses them,
an option given again wins and is recorded; a retried host's old record is kept beside the new one. And
`sweep run` interrupted by SIGINT at seeded-random moments, each time followed by exactly the --resume
command it printed, ends with one record per host, of the class the host has without interruptions.
"""
from __future__ import annotations

import json
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweep.cli import main, retry_failed_argv
from sweep.demo.loopback import FleetHost, LocalFleet
from sweep.store import list_records
from sweep.trust import sign

from helpers import read_records

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
CLASS = {**{f"r{i:02d}": "ok" for i in range(1, 17)}, "r-new1": "host_key_unknown", "r-new2": "host_key_unknown",
         "r-dead1": "refused", "r-dead2": "refused"}
KIND = {"host_key_unknown": "unknown_key", "refused": "dead", "ok": "healthy"}
RESUME_LINE = re.compile(r"finish with: (sweep run --resume \S+)")
INTERRUPTIONS = 10


@pytest.fixture(scope="module")
def twenty(needs_sshd, tmp_path_factory):
    hosts = [FleetHost(name, KIND[cls], group="fleet") for name, cls in CLASS.items()]
    with LocalFleet(hosts, tmp_path_factory.mktemp("twenty")) as fleet:
        yield fleet


def classes(run: Path) -> dict[str, str]:
    return {name: rec["status"] if rec["status"] == "ok" else rec["failure"]["class"]
            for name, rec in read_records(run).items()}


def manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def forget(run: Path, names: list[str]) -> None:
    """The run as a Ctrl-C leaves it: these hosts without a record, the manifest interrupted."""
    for name in names:
        (run / "hosts" / f"{name}.json").unlink()
    kept = manifest(run)
    kept["state"] = kept["sessions"][-1]["state"] = "interrupted"
    (run / "manifest.json").write_text(json.dumps(sign(kept)))  # as this user's sweep writes it: signed


def test_resume_reuses_the_options_the_run_was_started_with(twenty, tmp_path, monkeypatch):
    started_in = tmp_path / "here"
    started_in.mkdir()
    shutil.copy(twenty.known_hosts_path, started_in / "known_hosts")
    monkeypatch.chdir(started_in)  # relative paths on the command line, kept absolute
    assert main(["run", str(twenty.inventory_path), "--out", "run", "--known-hosts", "known_hosts", "--no-report",
                 "--forks", "3", "--host-deadline", "40", "--limit", "r01:r02:r03:r-new1"]) == 1
    run = started_in / "run"
    options = manifest(run)["options"]
    assert options["known_hosts"] == [str(started_in / "known_hosts")]
    assert (options["forks"], options["host_deadline"], options["limit"], options["no_report"]) == (3, 40, "r01:r02:r03:r-new1", True)
    assert manifest(run)["sessions"][0]["options_set"] == {
        "limit": "r01:r02:r03:r-new1", "forks": 3, "known_hosts": [str(started_in / "known_hosts")],
        "host_deadline": 40.0, "no_report": True}
    forget(run, ["r02", "r03"])
    monkeypatch.chdir(tmp_path)  # elsewhere: the paths still point where they did
    assert main(["run", "--resume", str(run)]) == 1  # r-new1's unknown key, as before; nothing else failed
    assert classes(run) == {"r01": "ok", "r02": "ok", "r03": "ok", "r-new1": "host_key_unknown"}
    after = manifest(run)
    assert after["state"] == "complete" and after["options"] == options | {"transport": "auto"}
    assert after["sessions"][1]["options_set"] == {} and after["sessions"][1]["hosts_swept"] == 2
    assert not (run / "report").exists()  # --no-report was kept too
    # an option given again wins, and the session that set it says so
    forget(run, ["r03"])
    assert main(["run", "--resume", str(run), "--forks", "5", "--host-deadline", "50"]) == 1
    after = manifest(run)
    assert (after["options"]["forks"], after["options"]["host_deadline"]) == (5, 50)
    assert after["options"]["known_hosts"] == options["known_hosts"]
    assert after["sessions"][2]["options_set"] == {"forks": 5, "host_deadline": 50.0}


def test_retry_failed_sweeps_failed_hosts_again_and_keeps_their_old_records(twenty, tmp_path, capsys):
    known = tmp_path / "known_hosts"
    shutil.copy(twenty.known_hosts_path, known)  # --accept-new-host-keys below writes into it
    run = tmp_path / "run"
    assert main(["run", str(twenty.inventory_path), "--out", str(run), "--known-hosts", str(known), "--no-report",
                 "--limit", "r01:r-new1:r-dead1"]) == 1
    first = read_records(run)
    # the operator trusts the new host's key: the transient classes are retried, the old records kept
    assert main(["run", "--resume", str(run), "--retry-failed", "--accept-new-host-keys"]) == 1
    assert classes(run) == {"r01": "ok", "r-new1": "ok", "r-dead1": "refused"}
    kept = json.loads((run / "hosts" / "r-new1~attempt-1.json").read_text())
    assert kept == first["r-new1"]
    assert json.loads((run / "hosts" / "r-dead1~attempt-1.json").read_text()) == first["r-dead1"]
    session = manifest(run)["sessions"][-1]
    assert session["retried"] == {"r-new1": "r-new1~attempt-1.json", "r-dead1": "r-dead1~attempt-1.json"}
    assert session["options_set"] == {"accept_new_host_keys": True}
    # a class named: only those hosts; each retry keeps one more attempt
    assert main(["run", "--resume", str(run), "--retry-failed", "refused"]) == 1
    assert (run / "hosts" / "r-dead1~attempt-2.json").is_file()
    assert manifest(run)["sessions"][-1]["retried"] == {"r-dead1": "r-dead1~attempt-2.json"}
    # readers see the hosts, not the attempts
    assert sorted(p.name for p in list_records(run).files) == ["r-dead1.json", "r-new1.json", "r01.json"]
    assert set(read_records(run)) == {"r01", "r-new1", "r-dead1"}
    main(["report", str(run)])
    rows = (run / "report" / "hosts.csv").read_text().splitlines()[1:]
    assert sorted(row.split(",")[0] for row in rows) == ["r-dead1", "r-new1", "r01"]


def test_retry_lines_name_the_hosts_and_say_when_there_is_nothing_to_retry(twenty, tmp_path, capsys):
    """`--retry-failed auth` where no host failed for auth says there is nothing to retry (it used to say
    nothing), and the failed hosts of earlier sessions are named, by class, with the command that retries
    them (it used to say "1 more failed host from an earlier session" without naming it)."""
    run = tmp_path / "run"
    assert main(["run", str(twenty.inventory_path), "--out", str(run), "--known-hosts", str(twenty.known_hosts_path),
                 "--no-report", "--limit", "r01:r-new1:r-dead1"]) == 1
    capsys.readouterr()
    assert main(["run", "--resume", str(run), "--retry-failed", "auth"]) == 1
    err = capsys.readouterr().err
    assert "  nothing to retry: no host of this run had failed with auth\n" in err, err
    assert (f"  2 more failed hosts from an earlier session of this run, not swept again: r-dead1 (refused); "
            f"r-new1 (host_key_unknown); their records are in {run}/hosts/; sweep them again with: sweep run --resume "
            f"{run} --retry-failed refused host_key_unknown\n") in err, err
    assert main(["run", "--resume", str(run), "--retry-failed", "refused"]) == 1
    err = capsys.readouterr().err
    assert ("  retried 1 host that had failed with refused: r-dead1 (their earlier records kept beside, as "
            "hosts/<name>~attempt-N.json)\n") in err, err
    assert "  1 more failed host from an earlier session of this run, not swept again: r-new1 (host_key_unknown);" in err


@pytest.mark.parametrize("argv,said", [
    (["--retry-failed", "bogus"], "--retry-failed 'bogus' is not a failure class"),
    (["--retry-failed", "ok"], "--retry-failed 'ok' is not a failure class"),
])
def test_retry_failed_names_failure_classes_only(twenty, tmp_path, capsys, argv, said):
    run = tmp_path / "run"
    assert main(["run", str(twenty.inventory_path), "--out", str(run), "--known-hosts", str(twenty.known_hosts_path),
                 "--no-report", "--limit", "r-dead1"]) == 1
    capsys.readouterr()
    assert main(["run", "--resume", str(run), *argv]) == 2
    err = capsys.readouterr().err
    assert said in err and "auth" in err and "transient" in err
    assert not any("~attempt-" in p.name for p in (run / "hosts").iterdir())


def test_retry_failed_belongs_to_resume(twenty, tmp_path, capsys):
    assert main(["run", str(twenty.inventory_path), "--out", str(tmp_path / "run"), "--retry-failed"]) == 2
    assert "--retry-failed belongs to --resume" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_retry_failed_takes_the_class_words_after_it_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inventory").write_text("")  # a file named like a word stays the inventory
    assert retry_failed_argv(["run", "--resume", "R", "--retry-failed"]) == \
        ["run", "--resume", "R", "--retry-failed", "transient"]
    assert retry_failed_argv(["run", "--retry-failed", "timeout", "dns", "inventory", "--forks", "2"]) == \
        ["run", "--retry-failed", "timeout", "--retry-failed", "dns", "inventory", "--forks", "2"]
    assert retry_failed_argv(["run", "inv.yml", "--wrap", "--", "bench", "--retry-failed", "x"]) == \
        ["run", "inv.yml", "--wrap", "--", "bench", "--retry-failed", "x"]


def _sweep(argv: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sweep.cli", *argv], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _interrupted_until_done(first: list[str], run: Path, env: dict, rng: random.Random, wanted: int) -> int:
    """Start `first`, SIGINT it at a random moment, then run exactly the --resume command it printed, and so on
    `wanted` times; then let the last printed command finish. The number of sweeps interrupted (a command
    that was still starting, or ended before the signal, does not count)."""
    argv, resumed = first, 0
    while True:
        proc = _sweep(argv, env)
        if resumed == wanted:  # the last printed command, left to finish
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 1 and manifest(run)["state"] == "complete", err  # 1: the failing hosts
            return resumed
        time.sleep(rng.uniform(0.0, 4.0))  # the moment of the interruption; the assertions hold for any
        live = proc.poll() is None
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        line = RESUME_LINE.search(err)
        if line:
            assert proc.returncode == 130, err
            argv, resumed = shlex.split(line.group(1))[1:], resumed + 1  # exactly what it printed, less "sweep"
            continue
        state = manifest(run)["state"] if (run / "manifest.json").exists() else None
        if state == "complete":  # it ended before the signal, or the signal came after the sweep
            return resumed
        # interrupted before there was anything to resume (python still starting, sweep reading the
        # inventory): nothing was changed, and the same command again is what the user does
        assert live and state in (None, "interrupted"), (proc.returncode, err)


def test_sigint_at_random_moments_then_the_printed_resume_ends_with_the_uninterrupted_records(twenty, tmp_path):
    env = {**twenty.controller_env(), "PYTHONPATH": str(REPO)}
    rng, interrupted, runs = random.Random(22), 0, []
    while interrupted < INTERRUPTIONS:
        run = tmp_path / f"run{len(runs) + 1}"
        runs.append(run)
        interrupted += _interrupted_until_done(
            ["run", str(twenty.inventory_path), "--out", str(run), "--known-hosts", str(twenty.known_hosts_path),
             "--no-report", "--host-deadline", "60", "--forks", "4"],  # 4 at a time: the sweep outlasts more of the
            run, env, rng, min(5, INTERRUPTIONS - interrupted))  # moments, fewer runs end before their signal
    for run in runs:
        assert classes(run) == CLASS, run  # every host, once, with its own class
        assert sorted(p.name for p in (run / "hosts").iterdir()) == sorted(f"{name}.json" for name in CLASS)
        kept = manifest(run)
        assert kept["state"] == "complete" and all(s["state"] in ("complete", "interrupted") for s in kept["sessions"])
        assert kept["options"]["known_hosts"] == [str(twenty.known_hosts_path)]


def test_resume_reports_with_the_runs_own_expectations(twenty, tmp_path):
    expect = tmp_path / "expect.yml"
    expect.write_text("version: 1\ndefaults:\n  gpu_count: 8\n")  # the replayed hosts have one GPU: off it
    run = tmp_path / "run"
    assert main(["run", str(twenty.inventory_path), "--out", str(run), "--known-hosts", str(twenty.known_hosts_path),
                 "--limit", "r01:r02", "--expect", str(expect)]) == 5
    forget(run, ["r02"])
    shutil.rmtree(run / "report")
    assert main(["run", "--resume", str(run)]) == 5  # the report judged the run against the same file
    assert (run / "report" / "report.html").is_file()
    assert manifest(run)["options"]["expect"] == str(expect)
