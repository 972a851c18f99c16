"""A demo run keeps out of the operator's history (issue 41): `sweep demo --speed` writes its run under
reports/demo/, with the time it was made, and `sweep history --root reports/` then reads the
operator's runs only. (The loopback demo's folder is checked by tests/integration/test_readme_demo.py.)"""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import fleet_variants as fv
from sweep.history.index import run_folders


def test_the_speed_demo_writes_under_reports_demo_with_real_times_apart_from_the_operators_runs(
        tmp_path, monkeypatch, capsys):
    from sweep.cli import main

    monkeypatch.chdir(tmp_path)
    operator = fv.write_run(tmp_path / "reports" / "20261101T000000Z-fleet",
                            [fv.record(h, fv.h200(8, h)) for h in ("gpu01", "gpu02")])
    before = datetime.now(timezone.utc).replace(microsecond=0)
    assert main(["demo", "--speed"]) == 0, capsys.readouterr().out
    after = datetime.now(timezone.utc)
    [demo] = (tmp_path / "reports" / "demo").iterdir()
    assert demo.name.endswith("-demo-speed")
    started = datetime.strptime(json.loads((demo / "manifest.json").read_text())["started_at"],
                                "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert before <= started <= after + timedelta(seconds=1)
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["20261101T000000Z-fleet", "demo"]
    assert run_folders([tmp_path / "reports"]) == [operator]
    assert f"report: {demo.resolve() / 'report' / 'report.html'}" in capsys.readouterr().out.splitlines()


def test_sweep_demo_history_makes_the_six_week_history_from_the_command_line(tmp_path, capsys):
    """The six-week demo history used to be made from Python only: `sweep demo --history` writes its runs
    and its history, and says what the history found (each change the demo made, its chronic faults)."""
    from sweep.cli import main

    root = tmp_path / "weeks"
    assert main(["demo", "--history", "--out", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(run_folders([root])) == 45 and (root / "history" / "history.html").is_file()
    assert "chronic: gpu[11-13]: Contract: Power ceiling broken in every run since 2026-10-05 03:00 UTC (45 runs)" \
        in out, out
    assert any(line.startswith("drift #1 gpu30 GPU ") for line in out), out
    assert out[-1] == (f"history demo done: every change the demo made was found (4 hosts); try sweep history "
                       f"--root {root} --host 'gpu0*'")
