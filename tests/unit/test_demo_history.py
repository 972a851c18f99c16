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
