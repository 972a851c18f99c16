"""`sweep run` keeps the history index current when it finishes, and never fails a sweep for it."""
from __future__ import annotations

import os
import sqlite3

from sweep.history.hook import keep_index_current
from sweep.history.index import INDEX_NAME
from sweep.store import RECORD_VERSION, RUN_FORMAT, RunFolder


def _run(path, started):
    folder = RunFolder.create(path)
    folder.write_record({"record_version": RECORD_VERSION, "host": "gpu01", "address": None, "status": "failed",
                         "failure": {"class": "refused", "message": "gpu01: refused"}, "attempts": 1,
                         "started_at": started, "ended_at": started, "duration_s": 0.1, "health": None})
    folder.write_manifest({"format": RUN_FORMAT, "record_version": RECORD_VERSION, "state": "complete",
                           "started_at": started, "hosts": ["gpu01"], "sessions": []})
    return folder.path


def test_the_run_updates_its_roots_index(tmp_path):
    reports = tmp_path / "reports"
    first = _run(reports / "20261101T030000Z-fleet", "2026-11-01T03:00:00Z")
    assert keep_index_current(first) is None
    second = _run(reports / "20261102T030000Z-fleet", "2026-11-02T03:00:00Z")
    assert keep_index_current(second) is None
    with sqlite3.connect(reports / INDEX_NAME) as db:
        assert [r[0] for r in db.execute("SELECT name FROM runs ORDER BY epoch")] == [first.name, second.name]


def test_a_failing_index_is_a_warning_not_an_error(tmp_path):
    reports = tmp_path / "reports"
    run = _run(reports / "20261101T030000Z-fleet", "2026-11-01T03:00:00Z")
    (reports / INDEX_NAME).mkdir()  # something in the way of the index file
    warning = keep_index_current(run)
    assert warning.startswith(f"the history index of {reports} was not updated (")
    assert warning.endswith(f"`sweep history --root {reports}` rebuilds it")
    assert os.path.isdir(reports / INDEX_NAME)


def test_a_run_without_report_leaves_the_index_to_sweep_history(tmp_path, capsys):
    """`--no-report` only collects: the run's records are not read back into the history index on the
    sweep's critical path (23.9 s at 10,000 x 8 hosts, issue 52); the next `sweep history` reads the run,
    and a run that reports brings the index up to date as before."""
    from sweep.cli import main

    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n" + "".join(
        f"    {name}: {{ansible_host: 127.0.0.1, ansible_port: 1}}\n" for name in ("gpu01", "gpu02")))
    reports = tmp_path / "reports"
    quick = ["--connect-timeout", "1", "--host-deadline", "2"]
    assert main(["run", str(inventory), "--out", str(reports / "first"), "--no-report", *quick]) == 1
    assert sorted(p.name for p in reports.iterdir()) == ["first"]  # no index written, no report
    main(["history", "--root", str(reports)])
    with sqlite3.connect(reports / INDEX_NAME) as db:
        assert [r[0] for r in db.execute("SELECT name FROM runs")] == ["first"]
    main(["run", str(inventory), "--out", str(reports / "second"), *quick])
    with sqlite3.connect(reports / INDEX_NAME) as db:
        assert sorted(r[0] for r in db.execute("SELECT name FROM runs")) == ["first", "second"]
    capsys.readouterr()
