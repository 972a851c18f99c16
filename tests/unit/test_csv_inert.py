"""Every CSV file sweep writes is inert in a spreadsheet: its text cells go through `sweep.text.csv_cell`
(issue 23, item 9: history's changes.csv and timeline.csv kept a GPU name `=cmd|...` raw)."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from hypothesis import given, settings, strategies as st

from sweep.demo.history import six_weeks
from sweep.history import build_history
from sweep.text import csv_cell, csv_cells

ROOT = Path(__file__).resolve().parents[2]
FORMULA = '=cmd|"/C calc"!A0'
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]")
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


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


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
       | st.text(alphabet="=+-@\t\r 0123456789.eE\u202e\u2066\x00\x1b\x85\u2028abc", max_size=8))
def test_a_cell_keeps_no_control_or_bidi_character_and_no_formula(text):
    """What a spreadsheet reads: no control character but tab, CR and LF, every bidi override written as
    its visible escape, and a cell that would start a formula quoted unless it is a number."""
    cell = csv_cell(text)
    assert not CONTROL.search(cell) and not BIDI.search(cell)
    shown = BIDI.sub(lambda m: ascii(m.group())[1:-1], CONTROL.sub("", text))
    formula = shown.startswith(("=", "+", "-", "@", "\t", "\r")) and not NUMBER.fullmatch(shown)
    assert cell == ("'" + shown if formula else shown)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.none() | st.integers() | st.text(max_size=6)
                | st.text(alphabet="=+-@\t\r 0123456789.eE\u202eabc", max_size=6), max_size=8))
def test_a_column_of_cells_reads_as_each_cell_does(values):
    assert csv_cells(values) == [csv_cell(v) for v in values]


# fleet.csv and hosts.csv are joined by str.join, not csv.writer: the bytes must be the csv module's
_TEXT = st.text(alphabet=',"\r\n =+-@\tab\u202e\x00é', max_size=6)
_COLUMNS = {
    "Int64": st.none() | st.integers(-2**63, 2**63 - 1),
    "Float64": st.none() | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([0.0, -0.0, 700.0]),
    "boolean": st.none() | st.booleans(),
    "category": st.none() | _TEXT,
    "string": st.none() | _TEXT,
}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(sorted(_COLUMNS)), min_size=1, max_size=4).flatmap(
    lambda dtypes: st.tuples(st.just(dtypes), st.lists(st.tuples(*(_COLUMNS[d] for d in dtypes)), max_size=6))))
def test_a_report_csv_is_byte_for_byte_what_the_csv_module_writes(tmp_path_factory, spec):
    """Every dtype of the frames, NA, -0.0, quotes, commas, CR and LF in text, a line of one empty field."""
    import io
    import pandas as pd
    from sweep.report.csv_files import _write_csv

    dtypes, rows = spec
    names = [f"{d}_{i}" for i, d in enumerate(dtypes)]
    frame = pd.DataFrame({name: pd.array([r[i] for r in rows], dtype=dtype)
                          for i, (name, dtype) in enumerate(zip(names, dtypes))})
    path = tmp_path_factory.mktemp("csv") / "frame.csv"
    _write_csv(frame, path)
    expected = io.StringIO()
    writer = csv.writer(expected, lineterminator="\r\n")
    writer.writerow([csv_cell(n) for n in names])
    for i in range(len(frame)):
        writer.writerow([None if pd.isna(frame.iat[i, j]) else csv_cell(frame.iat[i, j]) if dtypes[j] in
                         ("category", "string") else frame.iat[i, j].item() if hasattr(frame.iat[i, j], "item")
                         else frame.iat[i, j] for j in range(len(names))])
    assert path.read_bytes() == expected.getvalue().encode("utf-8")
