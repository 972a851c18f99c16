"""`sweep history`: run folders -> the history index -> timelines, change points, drift -> files.

`build_history(paths, out_dir, ...)` brings the index level with the run folders, reads the runs
since `since`, and writes into `out_dir`::

    history.html    one self-contained page (inline SVG, no script; its only links are relative ones
    to
                    the run folders of each change point): drifted hosts first, a legend of its
                    marks
    changes.csv     one row per change point: host, date, time (UTC), key, before, after, run (the
    first
                    run that showed `after`), time_before and run_before (the last run that showed
                    `before`)
    timeline.csv    one row per stretch of equal values: host, gpu (-1: the host), key, value,
                    first_seen, last_seen (the times of its first and last runs, UTC), runs
    drift.csv       one row per host with load runs: its worst GPU's figures, most drifted first
                    (`measured`: two runs or more with load samples; a host without is not measured,
                    and the page and the terminal say so rather than count it as steady)
    load.csv        per run, host and GPU: the medians under load (what the drift is computed from)
    history.json    all of the above, the speed tier's figures that fell (`speed_drift`), the
    chronic faults
                    (`chronic`: each host's health facts faulty in its latest run, since when, those
                    of every
                    run first: `sweep.history.chronic`), the runs read, and what could not be read
                    (`skipped`)

A run folder or host record that cannot be read is skipped and named (`History.skipped`: on
stderr, the page and history.json); a damaged index is rebuilt from the run folders
(`History.update.rebuilt`). Nothing is written through a link (`sweep.history.files`).
"""

from __future__ import annotations

import fnmatch
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sweep.errors import ConfigError
from sweep.history.chronic import Fault, chronic_faults, folded as folded_faults
from sweep.history.drift import MEASURED_RUNS, THRESHOLD_PCT, HostDrift, host_drift
from sweep.history.files import refuse_output_links
from sweep.history.speeddrift import SpeedDrift, speed_drift
from sweep.history.index import (
    HistoryIndex,
    IndexDamaged,
    Skipped,
    UpdateResult,
    damaged,
    default_index_path,
    run_folders,
)
from sweep.history.timeline import HOST, Change, Selection, changes, day, iso, select, spans
from sweep.store import write_bytes_atomic, write_json_atomic
from sweep.folders import SHARED, make_dirs
from sweep.text import csv_cell, plural

MEASURE_FIX = "`sweep run INVENTORY --load 60` samples the SM clock under load on every host"

HISTORY_SCHEMA = "sweep.history/1"
OUTPUT_FILES = (
    "changes.csv",
    "timeline.csv",
    "drift.csv",
    "load.csv",
    "history.json",
    "history.html",
)
_SINCE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([hdw])\s*$")
_UNIT_S = {"h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str | None, now: float | None = None) -> float | None:
    """'6w', '30d', '12h' -> the epoch that long before `now`; None -> None."""
    if text is None:
        return None
    m = _SINCE.match(text)
    if not m:
        raise ConfigError(
            f"--since {text!r} is not a duration", fix="write e.g. --since 6w, 30d or 12h"
        )
    return (time.time() if now is None else now) - float(m.group(1)) * _UNIT_S[m.group(2)]


@dataclass(frozen=True)
class History:
    """What `sweep history` found: the runs read, each host's change points, drift, the
    timelines."""

    selection: Selection
    spans: pd.DataFrame
    changes: list[Change]
    drift: list[HostDrift]
    update: UpdateResult
    threshold_pct: float
    floor_mhz: float | None
    speed_drift: tuple[
        SpeedDrift, ...
    ] = ()  # the speed tier's figures against each GPU's first runs
    faults: tuple[
        Fault, ...
    ] = ()  # health facts faulty in each host's latest run, since when (chronic first)

    @property
    def chronic(self) -> list[dict]:
        """The faults folded across hosts: those of every run first, each with since when."""
        return folded_faults(list(self.faults))

    @property
    def skipped(self) -> list[Skipped]:
        """Run folders not read this time, and host records left out of the runs read."""
        found = list(self.update.skipped)
        for text in self.selection.runs["skipped"] if "skipped" in self.selection.runs else ():
            found.extend(Skipped(**s) for s in json.loads(text or "[]"))
        return found

    @property
    def changed_hosts(self) -> dict[str, list[Change]]:
        out: dict[str, list[Change]] = {}
        for c in self.changes:
            out.setdefault(c.host, []).append(c)
        return out

    @property
    def drifted(self) -> list[HostDrift]:
        return [d for d in self.drift if d.drifted]

    @property
    def host_names(self) -> set[str]:
        """Every host with a fact in the runs read."""
        sel = self.selection
        return (
            {sel.hosts[h] for h in np.unique(sel.facts["host"]).tolist()}
            if len(sel.facts)
            else set()
        )

    @property
    def unmeasured(self) -> list[str]:
        """The hosts whose drift was not measured: fewer than two of their runs had load samples."""
        measured = {d.host for d in self.drift if d.measured}
        return sorted(self.host_names - measured)

    def drift_text(self, short: bool = False) -> str:
        """What the history says of drift: how many hosts drifted of those measured, and which were
        not
        measured and how to measure them ("0 hosts drifted" of a history without load samples is
        false).
        `short`: the counts alone, for a summary line."""
        measured = sum(d.measured for d in self.drift)
        missing = len(self.unmeasured)
        if not measured:
            return (
                "drift not measured"
                if short
                else (
                    f"drift not measured: no host has {MEASURED_RUNS} runs with load samples; "
                    f"{MEASURE_FIX}"
                )
            )
        said = f"{plural(len(self.drifted), 'host')} drifted of {measured} measured"
        if not missing:
            return said
        if short:
            return f"{said}, {missing} not measured"
        return (
            f"{said}; drift not measured on {plural(missing, 'host')} (fewer than "
            f"{MEASURED_RUNS} of {'its' if missing == 1 else 'their'} runs had load samples; "
            f"{MEASURE_FIX})"
        )

    @property
    def speed_drifted(self) -> list[SpeedDrift]:
        return [d for d in self.speed_drift if d.drifted]

    def lines(self) -> list[str]:
        """What the terminal shows: drifted hosts (ranked), then each changed host and its
        changes."""
        out = []
        for rank, d in enumerate(self.drifted, 1):
            floor = (
                ""
                if d.passes_floor is None
                else (", every run above the floor" if d.passes_floor else ", below the floor")
            )
            out.append(
                f"drift #{rank} {d.host} GPU {d.gpu}: SM clock under load {d.baseline_mhz:g} -> "
                f"{d.recent_mhz:g} MHz (-{d.same_config_pct:.1f}%, "
                f"{d.per_week_pct:.2f}%/week){floor}"
            )
        out += [f"speed drift {d.text}" for d in self.speed_drifted]
        out += [f"{'chronic' if c['every_run'] else 'faulty'}: {c['text']}" for c in self.chronic]
        for host, items in self.changed_hosts.items():
            out.append(f"{host}: " + "; ".join(c.text for c in items))
        if self.unmeasured:
            out.append(self.drift_text())
        return out


def build(
    paths,
    *,
    index_path: str | Path | None = None,
    since: str | None = None,
    host: str | None = None,
    threshold_pct: float = THRESHOLD_PCT,
    floor_mhz: float | None = None,
    now: float | None = None,
) -> History:
    """Update the index from the run folders `paths` (run folders or folders of them) and read
    it."""
    paths = [Path(p) for p in paths]
    folders = run_folders(paths)
    if index_path is None:
        root = (
            paths[0]
            if len(paths) == 1 and not (paths[0] / "manifest.json").is_file()
            else paths[0].parent
        )
        index_path = default_index_path(root)
    since_epoch = parse_since(since, now)
    accept = None if host is None else (lambda name: fnmatch.fnmatchcase(name, host))
    with HistoryIndex(index_path) as index:
        why = None
        try:
            update, sel = _indexed(index, folders, since_epoch, accept)
        except Exception as err:
            if not damaged(err):
                raise
            why = str(err) if isinstance(err, IndexDamaged) else f"it is damaged ({err})"
        if (
            why is not None
        ):  # a cache: rebuilt (once the failed attempt, its workers included, is let go)
            index.reset(why)
            update, sel = _indexed(index, folders, since_epoch, accept)
    span_frame = spans(sel)
    found = changes(span_frame, sel)
    scope = dict(zip(sel.keys["name"], sel.keys["scope"]))
    last_change: dict[str, float] = {}
    for c in found:  # a configuration change restarts the baseline; a health fact does not
        if scope.get(c.key) != "health":
            last_change[c.host] = max(last_change.get(c.host, c.epoch), c.epoch)
    drift = host_drift(sel.load, sel.hosts, last_change, threshold_pct, floor_mhz)
    return History(
        sel,
        span_frame,
        found,
        drift,
        update,
        threshold_pct,
        floor_mhz,
        tuple(speed_drift(sel.speed, sel.hosts)),
        tuple(chronic_faults(span_frame)),
    )


def _indexed(index: HistoryIndex, folders, since_epoch, accept) -> tuple[UpdateResult, Selection]:
    update = index.update(folders)
    return update, select(index, since_epoch, accept, [index.key_of(f) for f in folders])


def build_history(paths, out_dir: str | Path, **options) -> History:
    """`build` and write the history folder (see the module docstring)."""
    from sweep.history.page import render_page

    out = Path(out_dir)
    refuse_output_links(out, OUTPUT_FILES)  # before anything is read or written
    history = build(paths, **options)
    make_dirs(out, SHARED)
    _csv(
        pd.DataFrame(
            [c.as_dict() for c in history.changes],
            columns=[
                "host",
                "date",
                "time",
                "key",
                "label",
                "before",
                "after",
                "run",
                "time_before",
                "run_before",
                "text",
                "gpu",
            ],
        ),
        out / "changes.csv",
    )
    timeline = _timeline(history)
    _csv(timeline, out / "timeline.csv")
    _csv(pd.DataFrame([d.as_dict() for d in history.drift]), out / "drift.csv")
    _csv(_load_rows(history.selection), out / "load.csv")
    write_json_atomic(
        out / "history.json",
        {
            "schema": HISTORY_SCHEMA,
            "runs": history.selection.runs[["name", "started_at", "path"]].to_dict("records"),
            "threshold_pct": history.threshold_pct,
            "floor_mhz": history.floor_mhz,
            "changes": [c.as_dict() for c in history.changes],
            "drift": [d.as_dict() for d in history.drift],
            "drift_measured": not history.unmeasured,
            "drift_not_measured": history.unmeasured,
            "speed_drift": [d.as_dict() for d in history.speed_drift],
            "chronic": [f.as_dict() for f in history.faults],
            "timeline": timeline.to_dict("records"),
            "skipped": [s.as_dict() for s in history.skipped],
        },
    )
    write_bytes_atomic(out / "history.html", render_page(history, out).encode("utf-8"))
    return history


def _timeline(history: History) -> pd.DataFrame:
    s = history.spans
    if not len(s):
        return pd.DataFrame(
            columns=["host", "gpu", "key", "value", "first_seen", "last_seen", "runs"]
        )
    frame = s[["host", "gpu", "key", "value", "runs"]].copy()
    times = {
        e: iso(e) for e in history.selection.runs["epoch"]
    }  # a run's time, made once per run, not per row
    frame["first_seen"] = s["first_seen"].map(times)
    frame["last_seen"] = s["last_seen"].map(times)
    return frame[["host", "gpu", "key", "value", "first_seen", "last_seen", "runs"]]


def _load_rows(sel: Selection) -> pd.DataFrame:
    frame = sel.load.copy()
    frame["host"] = frame["host"].map(sel.hosts)
    frame["date"] = frame["epoch"].map({e: day(e) for e in sel.runs["epoch"]})
    run_name = dict(zip(sel.runs["id"], sel.runs["name"]))
    frame["run"] = frame["run"].map(run_name)
    return frame[
        [
            "date",
            "run",
            "host",
            "gpu",
            "sm_mhz",
            "power_w",
            "limit_w",
            "sw_power_cap",
            "hw_slowdown",
        ]
    ]


def _csv(frame: pd.DataFrame, path: Path) -> None:
    """The frame as CSV, every text cell and name through `csv_cell` (inert in a spreadsheet),
    written without
    following links."""
    frame = frame.rename(columns=csv_cell)
    for name in frame.columns:
        column = frame[name]
        if not (
            pd.api.types.is_numeric_dtype(column.dtype) or pd.api.types.is_bool_dtype(column.dtype)
        ):
            frame[name] = column.astype(object).map(csv_cell, na_action="ignore")
    write_bytes_atomic(path, frame.to_csv(index=False).encode("utf-8"))


__all__ = ["History", "build", "build_history", "parse_since", "HOST"]
