"""Timelines of the history index: each host's (and GPU's) value of every key, run by run, as
spans of equal values, and the change points between them ("2026-10-14 11:30 UTC: power limit 700 W
-> 500 W"), each with the run it was first seen in and the last run before it (the run folders a
page links to: several runs a day are normal in a change window, so a date alone names neither).

A host that was unreachable on a day has no comparability-key values that day: its keys keep
their span across the gap (reachability has its own timeline), so a host that was down for a
day does not "change" its driver twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import os

import numpy as np
import pandas as pd

from sweep.history.index import HistoryIndex, is_absent, render_value

HOST = -1  # the gpu of a host-level fact


@dataclass(frozen=True)
class Selection:
    """The runs and hosts a history covers, and the index's names for their ids."""

    runs: pd.DataFrame  # id, path, name, started_at, epoch, ..., folder (absolute) oldest first
    facts: pd.DataFrame  # run, host, gpu, key, val (ids) + epoch
    load: pd.DataFrame  # run, host, gpu, sm_mhz, power_w, ... + epoch
    hosts: dict  # id -> name
    keys: pd.DataFrame  # id -> name, label, scope
    vals: dict  # id -> the value as the index keeps it (typed, `render_value` makes its text)
    speed: pd.DataFrame = None  # run, host, gpu, figure, value + epoch: the speed tier's figures


def select(
    index: HistoryIndex, since_epoch: float | None = None, host_filter=None, paths=None
) -> Selection:
    """The indexed runs (those named in `paths`, the index's `runs.path`, if given) from
    `since_epoch`
    on, limited to the hosts `host_filter(name)` accepts."""
    runs = index.runs()
    if paths is not None:
        runs = runs[runs["path"].isin(set(paths))].reset_index(drop=True)
    if since_epoch is not None:
        runs = runs[runs["epoch"] >= since_epoch].reset_index(drop=True)
    hosts = index.names("hosts")
    facts, load, speed = index.facts(runs["id"]), index.load(runs["id"]), index.speed(runs["id"])
    if host_filter is not None:
        keep = [h for h, name in hosts.items() if host_filter(name)]
        facts = facts[facts["host"].isin(keep)]
        load = load[load["host"].isin(keep)]
        speed = speed[speed["host"].isin(keep)]
    base = str(index.path.parent.resolve())
    runs = runs.assign(folder=[os.path.normpath(os.path.join(base, p)) for p in runs["path"]])
    by_run = np.full(int(runs["id"].max()) + 1 if len(runs) else 1, np.nan)
    by_run[runs["id"].to_numpy()] = runs["epoch"].to_numpy()
    facts = facts.assign(epoch=by_run[facts["run"].to_numpy()])
    load = load.assign(epoch=by_run[load["run"].to_numpy()])
    speed = speed.assign(epoch=by_run[speed["run"].to_numpy()])
    return Selection(
        runs,
        facts.reset_index(drop=True),
        load.reset_index(drop=True),
        hosts,
        index.key_table(),
        index.names("vals"),
        speed.reset_index(drop=True),
    )


def day(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d")


def moment(epoch: float) -> str:
    """A run's time as a person reads it: '2026-10-14 11:30 UTC'."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def iso(epoch: float) -> str:
    """A run's time for a file: '2026-10-14T11:30:00Z'."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def spans(sel: Selection) -> pd.DataFrame:
    """host, gpu, key, value, first_seen, last_seen, runs: one row per stretch of equal values.

    A GPU's row exists only for the runs in which its host's GPUs disagreed on that key; on the
    other runs the host's row is the GPU's value too.
    """
    if not len(sel.facts):
        return pd.DataFrame(
            columns=["host", "gpu", "key", "value", "first_seen", "last_seen", "runs"]
        )
    columns = [sel.facts[c].to_numpy() for c in ("host", "gpu", "key", "val", "epoch")]
    order = np.lexsort(
        (columns[4], columns[2], columns[1], columns[0])
    )  # host, gpu, key, then time
    h, g, k, v, epoch = (c[order] for c in columns)
    new = np.ones(len(h), dtype=bool)
    new[1:] = (h[1:] != h[:-1]) | (g[1:] != g[:-1]) | (k[1:] != k[:-1]) | (v[1:] != v[:-1])
    group = np.cumsum(new) - 1
    first = epoch[new]
    last = np.maximum.reduceat(epoch, np.flatnonzero(new))
    count = np.bincount(group)
    out = pd.DataFrame(
        {
            "host": h[new],
            "gpu": g[new],
            "key": k[new],
            "val": v[new],
            "first_seen": first,
            "last_seen": last,
            "runs": count,
        }
    )
    return _named(out, sel)


def _named(frame: pd.DataFrame, sel: Selection) -> pd.DataFrame:
    frame = frame.copy()
    frame["host"] = frame["host"].map(sel.hosts)
    frame["key_label"] = frame["key"].map(sel.keys["label"])
    frame["scope"] = frame["key"].map(sel.keys["scope"])
    frame["key"] = frame["key"].map(sel.keys["name"])
    if "val" in frame:
        stored = frame.pop("val").map(sel.vals)
        frame["absent"] = [is_absent(v) for v in stored]
        frame["value"] = [render_value(k, v) for k, v in zip(frame["key"], stored)]
    return frame


@dataclass(frozen=True)
class Change:
    """One change point: in run `run` (at `epoch`, the first run that showed it) `key` went from
    `before` to `after`; `run_before` (at `before_epoch`) is the last run that showed `before`.
    `folder` and `folder_before` are those runs' folders (absolute paths)."""

    host: str
    gpu: int | None
    key: str
    label: str
    before: str
    after: str
    epoch: float
    run: str
    before_epoch: float
    run_before: str
    folder: str = ""
    folder_before: str = ""

    @property
    def date(self) -> str:
        return day(self.epoch)

    @property
    def time(self) -> str:
        return moment(self.epoch)

    @property
    def text(self) -> str:
        where = f" (GPU {self.gpu})" if self.gpu is not None else ""
        return f"{self.time}: {self.label}{where} {self.before} -> {self.after}"

    def as_dict(self) -> dict:
        return {
            "host": self.host,
            "gpu": self.gpu,
            "key": self.key,
            "label": self.label,
            "before": self.before,
            "after": self.after,
            "date": self.date,
            "time": iso(self.epoch),
            "run": self.run,
            "time_before": iso(self.before_epoch),
            "run_before": self.run_before,
            "text": self.text,
        }


def changes(span_frame: pd.DataFrame, sel: Selection) -> list[Change]:
    """Every change point of the host-level timelines, per host in time order.

    GPU rows refine a host change ("700/500 W" names which GPU has which), so only host rows
    make change points; the per-GPU spans are in the timeline files. A fact that earlier runs did
    not read (an older agent without that field) is first seen, not changed: no change point.
    """
    s = span_frame[span_frame["gpu"] == HOST].sort_values(
        ["host", "key", "first_seen"], kind="stable"
    )
    run_of = {
        e: (name, folder)
        for e, name, folder in zip(sel.runs["epoch"], sel.runs["name"], sel.runs["folder"])
    }
    out = []
    prev = None
    for row in s.itertuples(index=False):
        if prev is not None and prev.host == row.host and prev.key == row.key and not prev.absent:
            (after, folder), (before, folder_before) = (
                run_of.get(row.first_seen, ("", "")),
                run_of.get(prev.last_seen, ("", "")),
            )
            out.append(
                Change(
                    row.host,
                    None,
                    row.key,
                    row.key_label,
                    prev.value,
                    row.value,
                    row.first_seen,
                    after,
                    prev.last_seen,
                    before,
                    folder,
                    folder_before,
                )
            )
        prev = row
    out.sort(key=lambda c: (c.host, c.epoch, c.key))
    return out
