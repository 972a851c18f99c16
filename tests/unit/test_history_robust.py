"""`sweep history` on history roots it did not write: links planted at its files are refused, its
workers die with it, a broken index is rebuilt, two of it at once take turns, and a bad run folder
or host record is skipped and named instead of ending the history for every run."""
from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweep.cli import main
from sweep.history import build
from sweep.history.files import IndexLock
from sweep.history.index import INDEX_NAME
from sweep.store import RECORD_VERSION, RUN_FORMAT, RunFolder

ROOT = Path(__file__).resolve().parents[2]
DAYS = 6


def make_runs(reports: Path, days: int = DAYS, hosts: int = 2) -> list[Path]:
    """`days` daily run folders of `hosts` hosts each (unreachable ones: quick to write and to read)."""
    out = []
    for day in range(1, days + 1):
        started = f"2026-11-{day:02d}T03:00:00Z"
        folder = RunFolder.create(reports / f"202611{day:02d}T030000Z-fleet")
        names = [f"gpu{n:02d}" for n in range(1, hosts + 1)]
        for name in names:
            folder.write_record({"record_version": RECORD_VERSION, "host": name, "address": None, "status": "failed",
                                 "failure": {"class": "refused", "message": f"{name}: refused"}, "attempts": 1,
                                 "started_at": started, "ended_at": started, "duration_s": 0.1, "health": None})
        folder.write_manifest({"format": RUN_FORMAT, "record_version": RECORD_VERSION, "state": "complete",
                               "started_at": started, "hosts": names, "sessions": []})
        folder.close()
        out.append(folder.path)
    return out


@pytest.fixture()
def reports(tmp_path):
    root = tmp_path / "reports"
    make_runs(root)
    return root


def history(reports: Path, capsys, *extra) -> tuple[int, str, dict]:
    """(exit code, stderr, history.json) of `sweep history --root reports`."""
    code = main(["history", "--root", str(reports), *extra])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    out = reports / "history" / "history.json"
    return code, err, json.loads(out.read_text()) if out.exists() and code != 2 else {}


def indexed_runs(reports: Path) -> list[str]:
    with sqlite3.connect(reports / INDEX_NAME) as db:
        return sorted(r[0] for r in db.execute("SELECT name FROM runs"))


def pid_alive(pid: int) -> bool:
    """Running (a zombie or a vanished pid is not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            text = fh.read()
    except OSError:
        return False
    return text[text.rindex(")") + 2] not in "ZX"


def wait_until(check, what: str, deadline_s: float = 120.0) -> None:
    """Poll `check` until it holds; a generous deadline (a busy machine), never a sleep as the sync."""
    end = time.monotonic() + deadline_s
    while not check():
        assert time.monotonic() < end, f"{what} did not happen within {deadline_s:g} s"
        time.sleep(0.05)


# ------------------------------------------------------------------ links (item 7)

@pytest.mark.parametrize("dangling", [False, True])
def test_an_index_that_is_a_link_is_refused_and_its_target_untouched(reports, tmp_path, capsys, dangling):
    other = tmp_path / "other.db"
    if not dangling:
        with sqlite3.connect(other) as db:
            db.execute("CREATE TABLE mine(x)")
    before = other.read_bytes() if not dangling else None
    (reports / INDEX_NAME).symlink_to(other)
    code, err, _ = history(reports, capsys)
    assert code == 2
    assert f"{reports / INDEX_NAME}: the history index is a symbolic link; sweep never writes through a link" in err
    assert "remove it (the index is a cache" in err
    assert (other.read_bytes() == before) if not dangling else not other.exists()
    assert not (reports / "history").exists()  # refused before anything was written


@pytest.mark.parametrize("name", [f"{INDEX_NAME}-wal", f"{INDEX_NAME}-shm", f"{INDEX_NAME}.lock"])
def test_links_beside_the_index_are_refused(reports, tmp_path, capsys, name):
    target = tmp_path / "elsewhere"
    (reports / name).symlink_to(target)
    code, err, _ = history(reports, capsys)
    assert code == 2 and f"{reports / name}: the history index's {name} is a symbolic link" in err
    assert not target.exists()


@pytest.mark.parametrize("name", ["history.html", "changes.csv", "history.json"])
def test_a_link_in_the_history_folder_is_refused_and_nothing_written_through_it(reports, tmp_path, capsys, name):
    target = tmp_path / "x"
    (reports / "history").mkdir()
    (reports / "history" / name).symlink_to(target)
    code, err, _ = history(reports, capsys)
    assert code == 2 and f"{reports / 'history' / name}: {name} is a symbolic link" in err
    assert not target.exists()
    assert not (reports / INDEX_NAME).exists()  # refused up front: the index was not even made


def test_a_history_folder_that_is_a_link_is_refused(reports, tmp_path, capsys):
    (tmp_path / "elsewhere").mkdir()
    (reports / "history").symlink_to(tmp_path / "elsewhere")
    code, err, _ = history(reports, capsys)
    # refused by the one check of every output path (issue 53), before the history's own
    assert code == 2 and f"{reports / 'history'}: is a symbolic link; sweep never writes through one (--out)" in err
    assert list((tmp_path / "elsewhere").iterdir()) == []


# ------------------------------------------------------------------ workers die with it (item 7)

BLOCKING_RUNNER = r'''
import os, sys, time
import sweep.history.index as index

def read_run(folder, fleet=None):  # a worker that stays busy until it is killed: it says who it is, then waits
    with open(os.path.join(sys.argv[1], str(os.getpid())), "w") as fh:
        fh.write(str(os.getppid()))
    time.sleep(3600)

try:  # where the run reader lives (sweep.history.runs; sweep.history.index before it moved)
    import sweep.history.runs as reader
except ImportError:
    reader = index
read_run.__module__ = reader.__name__  # pickled by reference, as the real one is
reader.read_run = read_run
index.usable_cpus = lambda: 2  # two workers, however few CPUs this machine lends
from sweep.cli import main
from sweep.history import build
sys.exit(main(["history", "--root", sys.argv[2]]))
'''


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_the_workers_of_sweep_history_die_with_it(reports, tmp_path, signum):
    seen = tmp_path / "workers"
    seen.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", BLOCKING_RUNNER, str(seen), str(reports)], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    workers: list[int] = []
    try:
        wait_until(lambda: len([p for p in seen.iterdir() if p.read_text()]) >= 2, "two busy workers")
        workers = [int(p.name) for p in seen.iterdir()]
        assert {int(p.read_text()) for p in seen.iterdir()} == {proc.pid}  # the pool of this sweep history
        proc.send_signal(signum)
        assert proc.wait(timeout=120) == -signum
        wait_until(lambda: not any(pid_alive(w) for w in workers), "the workers' end")
    finally:
        for pid in workers:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


# ------------------------------------------------------------------ the index is a cache (item 8)

def test_a_garbage_index_is_rebuilt_and_said_so(reports, capsys):
    (reports / INDEX_NAME).write_bytes(b"this is not sqlite\n" * 100)
    code, err, result = history(reports, capsys)
    assert code == 0
    assert f"sweep: the history index {reports / INDEX_NAME} was rebuilt from the run folders: it is damaged" in err
    assert len(result["runs"]) == DAYS and indexed_runs(reports) == sorted(r["name"] for r in result["runs"])


def test_a_truncated_index_is_rebuilt(reports, capsys):
    assert history(reports, capsys)[0] == 0
    index = reports / INDEX_NAME
    with sqlite3.connect(index) as db:  # everything in the main file, then cut it in half
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with open(index, "r+b") as fh:
        fh.truncate(index.stat().st_size // 2)
    code, err, result = history(reports, capsys)
    assert code == 0 and "was rebuilt from the run folders: it is damaged" in err
    assert len(result["runs"]) == DAYS and len(indexed_runs(reports)) == DAYS


def test_an_index_whose_rows_do_not_add_up_is_rebuilt_when_read(reports, capsys):
    """Damage found only while reading (a packed array of the wrong size): rebuilt, not a traceback."""
    assert history(reports, capsys)[0] == 0
    with sqlite3.connect(reports / INDEX_NAME) as db:
        db.execute("UPDATE facts SET rows = rows + 1 WHERE run = (SELECT min(run) FROM facts)")
    code, err, result = history(reports, capsys)
    assert code == 0 and "was rebuilt from the run folders: it is damaged (run " in err
    assert len(result["runs"]) == DAYS
    assert "was rebuilt" not in history(reports, capsys)[1]  # and whole again


def test_another_programs_database_at_the_index_path_is_not_taken_for_the_index(reports, capsys):
    with sqlite3.connect(reports / INDEX_NAME) as db:
        db.execute("CREATE TABLE runs(x)")  # a table of the same name, not sweep's
    code, err, result = history(reports, capsys)
    assert code == 0 and "it is not a sweep history index" in err and len(result["runs"]) == DAYS


def test_a_second_sweep_history_waits_for_the_first(reports, tmp_path):
    """The index's lock held here: `sweep history` waits (and says for whom) instead of writing; let go,
    it finishes. Deterministic: the test reads the line it prints while it waits."""
    lock = IndexLock(reports / INDEX_NAME)
    lock.acquire()
    proc = subprocess.Popen([sys.executable, "-m", "sweep.cli", "history", "--root", str(reports)], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        assert line == (f"sweep: waiting for the history index {INDEX_NAME}: pid {os.getpid()} is updating it "
                        f"({reports / INDEX_NAME}.lock)\n")
        assert proc.poll() is None and not (reports / "history").exists()
    finally:
        lock.release()
    rest = proc.stderr.read()
    assert proc.wait(timeout=300) == 0, rest
    assert "Traceback" not in rest and (reports / "history" / "history.html").is_file()
    assert len(indexed_runs(reports)) == DAYS


def test_two_sweep_history_at_once_both_succeed(tmp_path):
    reports = tmp_path / "reports"
    make_runs(reports, days=30)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-m", "sweep.cli", "history", "--root", str(reports)], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outcomes = [(p.wait(timeout=600), p.communicate()) for p in procs]
    for code, (out, err) in outcomes:
        assert code == 0 and "Traceback" not in err and "error" not in err, err
    page = (reports / "history" / "history.html").read_text()
    assert "30 runs" in page
    assert indexed_runs(reports) == sorted(p.name for p in reports.iterdir() if p.name.startswith("2026"))


# ------------------------------------------------------------------ bad runs and records (item 8)

def _cut(text: bytes) -> bytes:
    return text[:len(text) // 2]


MANIFEST_DAMAGE = {
    "truncated": (_cut, "manifest.json is not valid JSON, cut short or garbled"),
    "not UTF-8": (lambda text: b"\xff\xfe" + text, "manifest.json is not UTF-8"),
    "state is an object": (lambda text: json.dumps(dict(json.loads(text), state={"a": 1})).encode(),
                           'manifest.json: state {"a": 1} is not one of running, complete, interrupted'),
    "started_at is a number": (lambda text: json.dumps(dict(json.loads(text), started_at=7)).encode(),
                               "manifest.json: started_at 7 is not a date"),
    "not an object": (lambda text: b"[1, 2]", "is not a sweep run folder"),
}


@pytest.mark.parametrize("damage", sorted(MANIFEST_DAMAGE))
@pytest.mark.parametrize("indexed_first", [False, True])
def test_a_bad_manifest_skips_that_run_and_names_it(reports, capsys, damage, indexed_first):
    if indexed_first:  # the run was good when it was indexed, and broke since
        assert history(reports, capsys)[0] == 0
    bad = sorted(p for p in reports.iterdir() if p.name.startswith("2026"))[2]
    spoil, why = MANIFEST_DAMAGE[damage]
    (bad / "manifest.json").write_bytes(spoil((bad / "manifest.json").read_bytes()))
    code, err, result = history(reports, capsys)
    assert code == 0
    assert f"sweep: warning: {bad}: skipped: {why}" in err
    assert bad.name not in {r["name"] for r in result["runs"]} and len(result["runs"]) == DAYS - 1
    assert [s["where"] for s in result["skipped"]] == [str(bad)] and result["skipped"][0]["why"].startswith(why)
    assert str(bad) in (reports / "history" / "history.html").read_text()
    assert bad.name not in indexed_runs(reports)  # read again (and named again) next time
    assert f"{bad}: skipped: {why}" in history(reports, capsys)[1]


@pytest.mark.parametrize("indexed_first", [False, True])
def test_a_torn_record_is_left_out_of_its_run_and_named(reports, capsys, indexed_first):
    if indexed_first:
        assert history(reports, capsys)[0] == 0
    run = sorted(p for p in reports.iterdir() if p.name.startswith("2026"))[1]
    torn = run / "hosts" / "gpu02.json"
    torn.write_bytes(_cut(torn.read_bytes()))
    os.utime(run / "hosts", ns=(0, 0))  # the record changed in place: its folder's stamp says so
    code, err, result = history(reports, capsys)
    assert code == 0 and f"sweep: warning: {torn}: skipped: is not valid JSON" in err
    assert len(result["runs"]) == DAYS  # the run itself is read, with its other host
    assert [s["where"] for s in result["skipped"]] == [str(torn)]
    page = (reports / "history" / "history.html").read_text()
    assert str(torn) in page
    # kept from the index next time, and still named
    code, err, _ = history(reports, capsys)
    assert code == 0 and f"{torn}: skipped: is not valid JSON" in err
    again = build([reports])
    run_id = int(again.selection.runs.set_index("name").loc[run.name, "id"])
    facts = again.selection.facts
    assert {again.selection.hosts[h] for h in facts[facts["run"] == run_id]["host"]} == {"gpu01"}
    assert [s.where for s in again.skipped] == [str(torn)]


def test_a_run_whose_every_record_is_torn_is_skipped_naming_one(reports, capsys):
    run = sorted(p for p in reports.iterdir() if p.name.startswith("2026"))[0]
    for record in (run / "hosts").iterdir():
        record.write_bytes(b"{")
    code, err, result = history(reports, capsys)
    assert code == 0 and f"{run}: skipped: no host record of the run can be read ({run / 'hosts'}" in err
    assert len(result["runs"]) == DAYS - 1


def test_the_hook_warns_of_runs_it_cannot_read_and_the_run_still_succeeds(reports):
    from sweep.history.hook import keep_index_current

    runs = sorted(p for p in reports.iterdir() if p.name.startswith("2026"))
    (runs[0] / "manifest.json").write_bytes(b"{")
    warning = keep_index_current(runs[-1])
    assert warning.startswith(f"1 run or record under {reports} cannot be read")
    assert f"first {runs[0]}: manifest.json is not valid JSON" in warning
    assert len(indexed_runs(reports)) == DAYS - 1


def test_a_copied_history_root_keeps_working(reports, tmp_path, capsys):
    """The lock file travels with a copied root without harm (it only means something while held)."""
    assert history(reports, capsys)[0] == 0
    copy = tmp_path / "copy"
    shutil.copytree(reports, copy)
    assert history(copy, capsys)[0] == 0


def test_an_interrupted_empty_run_is_named_as_such_and_warned_about_once(reports):
    """A run stopped before any host answered (Ctrl-C during the first connections) leaves a manifest
    and no record: the next run's warning names it as that, with what to do, and later runs say
    nothing more of it (it used to warn at every run that a run "cannot be read")."""
    from sweep.history.hook import keep_index_current

    empty = RunFolder.create(reports / "20261107T030000Z-fleet")
    empty.write_manifest({"format": RUN_FORMAT, "record_version": RECORD_VERSION, "state": "interrupted",
                          "started_at": "2026-11-07T03:00:00Z", "hosts": ["gpu01"], "sessions": []})
    empty.close()
    runs = sorted(p for p in reports.iterdir() if p.name.startswith("2026"))
    warning = keep_index_current(runs[0])
    assert warning is not None
    assert (f"{empty.path}: an interrupted run with no host record (it was interrupted when it stopped, "
            f"before any host answered); finish it with `sweep run --resume {empty.path}`, or remove the folder"
            in warning), warning
    assert keep_index_current(runs[0]) is None  # said once
    assert keep_index_current(runs[1]) is None
