"""Every CSV file sweep writes is inert in a spreadsheet: its text cells go through `sweep.text.csv_cell`
(issue 23, item 9: history's changes.csv and timeline.csv kept a GPU name `=cmd|...` raw)."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from sweep.demo.history import six_weeks
from sweep.history import build_history

ROOT = Path(__file__).resolve().parents[2]
FORMULA = '=cmd|"/C calc"!A0'


def cells(path: Path):
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.reader(fh):
            yield from row


def test_history_csvs_make_a_host_formula_inert(tmp_path):
    six_weeks(tmp_path / "runs", hosts=2, days=3)
    last = sorted((tmp_path / "runs").iterdir())[-1] / "hosts" / "gpu01.json"
    rec = json.loads(last.read_text())
    for gpu in rec["health"]["gpus"]:
        gpu["name"] = FORMULA  # the GPU model a host reports, now a spreadsheet formula
    last.write_text(json.dumps(rec))
    out = tmp_path / "history"
    build_history([tmp_path / "runs"], out)
    seen = {}  # file -> its cells that hold the formula
    for name in ("changes.csv", "timeline.csv", "drift.csv", "load.csv"):
        for cell in cells(out / name):
            assert cell[:1] not in ("=", "+", "@", "\t", "\r") or cell == "", (name, cell)
            if FORMULA in cell:
                seen.setdefault(name, set()).add(cell)
    assert set(seen) == {"changes.csv", "timeline.csv"}
    assert all("'" + FORMULA in found for found in seen.values()), seen  # the value itself, made text


def test_every_csv_writer_in_sweep_goes_through_csv_cell():
    writers = re.compile(r"\.to_csv\(|csv\.writer\(|csv\.DictWriter\(")
    for path in sorted((ROOT / "sweep").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if writers.search(text):
            assert "csv_cell" in text, f"{path.relative_to(ROOT)} writes CSV without sweep.text.csv_cell"
