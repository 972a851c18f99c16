"""Issue 36, item 5: a forged history index (`sweep history --root`) is rebuilt from the run folders.

The index is a cache sweep wrote, but a history root may be shared: whoever can write it can write the
SQLite file. Each case builds a real index from two run folders, then forges one table as such a
person would (a dangling host, key or value id; a value that is not JSON, or not of its key's shape;
text where the runs table keeps numbers). The next `sweep history` says it rebuilt the index, and
why, and writes the same history as from a fresh index: no traceback.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import fleet_variants as fv
from sweep.cli import main
from sweep.history.index import INDEX_NAME

FORGERIES = {
    "a dangling host id": "DELETE FROM hosts WHERE name='gpu01'",
    "a dangling key id": "DELETE FROM keys WHERE id=(SELECT min(id) FROM keys)",
    "a dangling value id": "DELETE FROM vals WHERE id=(SELECT max(id) FROM vals)",
    "a value that is not JSON": "UPDATE vals SET text='{not json' WHERE id=(SELECT max(id) FROM vals)",
    "a value of another shape": "UPDATE vals SET text='[' || id || ']' WHERE text LIKE '[[%'",
    "a host name that is a blob": "UPDATE hosts SET name=x'00ff' WHERE name='gpu01'",
    "an epoch that is text": "UPDATE runs SET epoch='x'",
    "a started_at that is a blob": "UPDATE runs SET started_at=x'00'",
    "skipped that is not a list": "UPDATE runs SET skipped='{\"a\": 1}'",
    "skipped entries of another shape": "UPDATE runs SET skipped='[{\"where\": 1}]'",
}


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "reports"
    for day in (1, 2):
        health = [fv.h200(2, n) for n in ("gpu01", "gpu02")]
        if day == 2:
            health[0]["driver"]["version"] = "580.99.01"  # a change the history shows
        fv.write_run(root / f"r{day}", [fv.record(h["host"]["hostname"], h) for h in health],
                     {"format": "sweep-run", "record_version": 1, "state": "complete", "hosts": ["gpu01", "gpu02"],
                      "started_at": f"2026-11-0{day}T03:00:00Z", "sessions": []})
    return root


def _history(root: Path, capsys) -> tuple[int, str, dict]:
    code = main(["history", "--root", str(root)])
    err = capsys.readouterr().err
    return code, err, json.loads((root / "history" / "history.json").read_text())


@pytest.mark.parametrize("case", sorted(FORGERIES))
def test_a_forged_index_is_rebuilt_from_the_run_folders_with_a_warning(tmp_path, capsys, case):
    root = _root(tmp_path)
    first, err, fresh = _history(root, capsys)
    assert first in (0, 5) and "rebuilt" not in err and fresh["changes"], "the history shows the driver change"
    with sqlite3.connect(root / INDEX_NAME) as db:
        assert db.execute(FORGERIES[case]).rowcount > 0, "the forgery changed nothing"
    code, err, again = _history(root, capsys)
    assert code == first and "Traceback" not in err
    assert f"sweep: the history index {root / INDEX_NAME} was rebuilt from the run folders: it is damaged" in err
    assert again["changes"] == fresh["changes"] and again["runs"] == fresh["runs"]
