"""`sweep diff` as a pipe reads it (issue 41): no line wraps (a table's title is a line of its own, not
wrapped at the table's width), the same change on several GPUs is one statement naming them, values
are printed as the report prints them (``700 W``, not ``700.0``), and every line of both modes (two
probes, two run folders) is on stdout, nothing on stderr."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import fleet_variants as fv

ROOT = Path(__file__).resolve().parents[2]


def _diff(*paths: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="40")  # a narrow terminal's width must not matter
    return subprocess.run([sys.executable, "-m", "sweep.cli", "diff", *map(str, paths)], capture_output=True,
                          text=True, timeout=120, env=env)


def _runs(tmp_path: Path) -> tuple[Path, Path]:
    a = fv.write_run(tmp_path / "a-run-folder-with-a-long-name" / "run",
                     [fv.record(h, fv.h200(8, h)) for h in ("gpu01", "gpu02")])
    b = fv.write_run(tmp_path / "b-run-folder-with-a-long-name" / "run",
                     [fv.record("gpu01", fv.power_cap(fv.h200(8, "gpu01"), 250.0)), fv.record("gpu02", fv.h200(8, "gpu02"))])
    return a, b


def test_a_probe_diff_with_no_change_keeps_its_title_on_one_line(tmp_path):
    a, b = _runs(tmp_path)
    done = _diff(a / "hosts" / "gpu02.json", b / "hosts" / "gpu02.json")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.splitlines() == [
        "no throttle evidence: no clock-event reason appeared or cleared, and no power limit changed",
        f"{a / 'hosts' / 'gpu02.json'} -> {b / 'hosts' / 'gpu02.json'}: 0 changes"]


def test_a_probe_diff_folds_the_gpus_of_one_change_and_prints_values_as_the_report(tmp_path):
    a, b = _runs(tmp_path)
    done = _diff(a / "hosts" / "gpu01.json", b / "hosts" / "gpu01.json")
    assert done.returncode == 5 and done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == "power limit 700 -> 250 W on GPU 0-7"
    assert lines[1] == f"{a / 'hosts' / 'gpu01.json'} -> {b / 'hosts' / 'gpu01.json'}: 20 changes"
    row = next(line for line in lines if "power.enforced_limit_w" in line)
    assert [c.strip() for c in row.split("│")[3:6]] == ["0-7", "700 W", "250 W"]
    assert "700.0" not in done.stdout and '"ok"' not in done.stdout


def test_a_run_diff_prints_its_titles_as_lines_and_values_as_the_report_on_stdout(tmp_path):
    a, b = _runs(tmp_path)
    done = _diff(a, b)
    assert done.returncode == 5 and done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == f"{a} -> {b}: hosts: 1 changed; changes: power (1)"
    assert "Hosts" in lines and "Changes by kind (the same change on several hosts is one row)" in lines
    row = next(line for line in lines if "power.enforced_limit_w" in line)
    assert [c.strip() for c in row.split("│")[1:7]] == ["power", "gpu01", "power.enforced_limit_w", "0-7", "700 W",
                                                          "250 W"]
    assert "700.0" not in done.stdout
