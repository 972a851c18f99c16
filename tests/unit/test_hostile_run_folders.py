"""Issue 36, item 4: run folders sweep did not write neither crash nor hang it.

Each hostile file is put in a run folder's hosts/ as someone with write access to it would: a record
that is no object, 200,000 nested ``[``, a FIFO, a link to /dev/zero, a link to a huge (sparse)
file, a huge regular file, and records edited after the sweep into shapes no reader expects. Then
the readers run as the operator runs them, in this process (an uncaught exception fails the test):
``sweep report``, ``sweep export prometheus``, ``sweep run --resume`` (its reading of the records:
``--list-hosts``) and the previous-sweep Xid comparison of a report. Each ends with a line naming
the file, and an exit code of the documented table; none hangs (the FIFO case would block in
open()).
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

import fleet_variants as fv
from probe_agent.xid import read_kernel_log
from sweep.analysis.fleet import load_fleet
from sweep.analysis.xid import xid_section
from sweep.cli import main
from sweep.collect.run import planned_hosts
from sweep.errors import ReadBackWarning
from sweep.store import RunFolder

from test_xid import Answer, xid_line

NAMES = ["gpu01", "gpu02", "gpu03"]


def _raw(path: Path, text: str) -> None:
    path.write_text(text)


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _sparse(path: Path, link: bool) -> None:
    path.unlink()
    big = path.parent.parent.parent / "huge.json"
    with open(big, "wb") as fh:
        fh.truncate(3 * 2**30)  # 3 GiB, no block on disk
    if link:
        path.symlink_to(big)
    else:
        os.rename(big, path)


def _edit(**changes):
    """A record of gpu02 edited after the sweep: `changes` are dotted paths in its health (or the record)."""
    def edit(path: Path) -> None:
        record = json.loads(path.read_text())
        for dotted, value in changes.items():
            node, *keys = dotted.split(".")
            target = record if node == "record" else record["health"]
            if node not in ("record", "health"):
                keys = [node, *keys]
            for key in keys[:-1]:
                target = target[int(key)] if key.isdigit() else target[key]
            last = keys[-1]
            target[int(last) if last.isdigit() else last] = value
        path.write_text(json.dumps(record))
    return edit


UNREADABLE = {  # files no reader can take for a record: refused naming the file (exit 2)
    "a list": lambda p: _raw(p, "[1,2]"),
    "200,000 nested [": lambda p: _raw(p, "[" * 200_000 + "]" * 200_000),
    "a FIFO": _fifo,
    "a link to /dev/zero": _zero,
    "a link to a 3 GiB file": lambda p: _sparse(p, link=True),
    "a 3 GiB file": lambda p: _sparse(p, link=False),
}
MISSHAPEN = {  # records of the wrong shape: that host is bad_output, naming the file; the others are read
    "health.gpus = 'eight'": _edit(**{"gpus": "eight"}),
    "gpus[0].name = ['a']": _edit(**{"gpus.0.name": ["a"]}),
    "contracts = 'x'": _edit(contracts="x"),
    **{f"{part} = 'x'": _edit(**{part: "x"}) for part in ("driver", "probe", "firmware", "frameworks", "host_settings")},
    "failure = 'x'": _edit(**{"record.failure": "x", "record.status": "failed"}),
}


def _run(tmp_path: Path, spoil) -> tuple[Path, Path]:
    run = fv.write_run(tmp_path / "reports" / "run", [fv.record(n, fv.h200(2, n)) for n in NAMES],
                       {"format": "sweep-run", "record_version": 1, "state": "complete", "hosts": NAMES,
                        "started_at": "2026-11-30T12:00:00Z", "sessions": []})
    path = run / "hosts" / "gpu02.json"
    spoil(path)
    return run, path


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_a_file_no_reader_can_take_is_refused_by_name_by_report_and_export(tmp_path, capsys, case):
    run, path = _run(tmp_path, UNREADABLE[case])
    code, _, err = _cli(capsys, "report", str(run), "--out", str(tmp_path / "out"))
    assert code == 2 and err.splitlines()[-1].startswith(f"sweep: error: {path}: ") and "Traceback" not in err, err
    code, out, err = _cli(capsys, "export", "prometheus", str(run))
    assert code == 2 and err.splitlines()[-1].startswith(f"sweep: error: {path}: ") and not out, err


@pytest.mark.parametrize("case", sorted(MISSHAPEN))
def test_a_record_of_the_wrong_shape_is_its_hosts_bad_output_naming_the_file(tmp_path, capsys, case):
    run, path = _run(tmp_path, MISSHAPEN[case])
    code, out, err = _cli(capsys, "report", str(run), "--out", str(tmp_path / "out"))
    assert code == 1 and "Traceback" not in err, err  # exit 1: a host without a readable record
    hosts = load_fleet([run]).hosts.set_index("host")
    assert hosts.loc["gpu02", "failure_class"] == "bad_output"
    assert hosts.loc["gpu02", "failure_message"].startswith(f"{path}: not a host record sweep can read: it does "
                                                            "not match the ")  # issue 48: what it is
    assert (hosts.loc[["gpu01", "gpu03"], "status"] == "ok").all()
    code, out, err = _cli(capsys, "export", "prometheus", str(run))
    assert code == 0 and 'host="gpu02"' in out and "Traceback" not in err


@pytest.mark.parametrize("case", sorted(UNREADABLE) + sorted(MISSHAPEN))
def test_resume_reads_a_hostile_record_as_no_record_or_a_failed_one_and_never_hangs(tmp_path, monkeypatch, case):
    run, path = _run(tmp_path, {**UNREADABLE, **MISSHAPEN}[case])
    folder = RunFolder(run)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        records = folder.read_records()
    assert sorted(records) in (NAMES, ["gpu01", "gpu03"])
    if "gpu02" in records:  # read, but not as the host's health: a failed record naming the file
        assert records["gpu02"]["status"] == "failed" and records["gpu02"]["health"] is None
        assert str(path) in records["gpu02"]["failure"]["message"]
    else:  # left out, named: the host is swept again
        assert any(isinstance(w.message, ReadBackWarning) and str(path) in str(w.message) for w in said)


def test_resume_list_hosts_of_a_folder_with_a_fifo_lists_that_host_again(tmp_path, monkeypatch):
    run, path = _run(tmp_path, _fifo)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["inventory"] = {"path": "gpu01,gpu02,gpu03,"}
    (run / "manifest.json").write_text(json.dumps(manifest))
    with pytest.warns(ReadBackWarning, match="FIFO"):
        hosts = planned_hosts("gpu01,gpu02,gpu03,", resume=run)
    assert [h.name for h in hosts] == ["gpu02"]


def _xid_health(name: str) -> dict:
    health = fv.h200(2, name)
    health["kernel_log"] = read_kernel_log(Answer([[xid_line(95), xid_line(95, at=300.0), 5]]))
    return health


@pytest.mark.parametrize("case", sorted(UNREADABLE) + sorted(MISSHAPEN) + ["its manifest a FIFO", "its manifest [1]"])
def test_a_hostile_earlier_run_beside_this_one_is_left_out_of_the_xid_comparison(tmp_path, capsys, case):
    earlier, path = _run(tmp_path, {**UNREADABLE, **MISSHAPEN}.get(case, lambda p: None))
    if case == "its manifest a FIFO":
        (earlier / "manifest.json").unlink()
        os.mkfifo(earlier / "manifest.json")
    elif case == "its manifest [1]":
        (earlier / "manifest.json").write_text("[1]")
    now = fv.write_run(tmp_path / "reports" / "now", [fv.record(n, _xid_health(n)) for n in NAMES],
                       {"format": "sweep-run", "record_version": 1, "state": "complete", "hosts": NAMES,
                        "started_at": "2026-11-30T13:00:00Z", "sessions": []})
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        section = xid_section(load_fleet([now]))
    previous = {h["host"]: h["previous_run"] for h in section["hosts"]}
    assert previous["gpu02"] in (None, "run") and set(previous) == set(NAMES)
    code, _, err = _cli(capsys, "report", str(now), "--out", str(tmp_path / "out"))
    assert code in (0, 1, 4) and "Traceback" not in err
