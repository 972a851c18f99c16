"""The runs beside a run: the run folders under the same parent that started before it
(`earlier_runs`), and a host's health in the newest of them (`previous_health`), for the Xid
comparison with the previous sweep (sweep.analysis.xid)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from sweep.errors import ReadBackWarning, RunFolderError
from sweep.store.files import HOSTS, MANIFEST, safe_name, why_unreadable
from sweep.store.records import left_out, normalize_health, read_record
from sweep.store.folder import RunFolder


def earlier_runs(run_dir: Path) -> list[tuple[str, Path]]:
    """The run folders beside `run_dir` (its parent, as `sweep run` puts them under reports/) that
    started before it: (started_at, folder), the newest first. A folder whose manifest cannot be
    read (the one reader, `RunFolder.read_manifest`: no link, no FIFO, bounded, checked) is left
    out, and named."""

    def started(folder: Path, name: bool = True) -> str | None:
        try:
            value = RunFolder(folder).read_manifest().get("started_at")
        except RunFolderError as err:
            if name:
                warnings.warn(
                    ReadBackWarning(
                        f"{err.where}: left out of the previous-sweep comparison ({err.message})"
                    ),
                    stacklevel=3,
                )
            return None
        return value if isinstance(value, str) else None

    mine = started(run_dir, name=False)
    if mine is None:
        return []
    try:
        siblings = [
            p for p in run_dir.parent.iterdir() if p != run_dir and os.path.lexists(p / MANIFEST)
        ]
    except OSError:
        return []
    runs = [
        (at, p) for p, at in ((p, started(p)) for p in siblings) if at is not None and at < mine
    ]
    return sorted(runs, reverse=True)


def previous_health(runs: list[tuple[str, Path]], host: str) -> tuple[dict, Path] | None:
    """The health.json of `host` in the newest of `runs` (`earlier_runs`) that holds one, and that
    run; a record that cannot be read back (`read_record`) is left out, and named."""
    for _, run in runs:
        path = run / HOSTS / f"{safe_name(host)}.json"
        if not os.path.lexists(path):
            continue
        try:
            record = read_record(path)  # strictly and checked: a sibling's bytes are nobody's word
        except (OSError, ValueError) as err:
            left_out(path, why_unreadable(err), "the previous-sweep comparison does not read it")
            continue
        if not isinstance(record, dict) or record.get("host") != host:
            continue
        health = record.get("health")
        if record.get("status") == "ok" and isinstance(health, dict):
            return normalize_health(health), run
    return None
