"""Chronic faults: hosts whose health fact is faulty in their latest run and has been since a moment
the history names, most of all those faulty in every run the history holds of them (a host broken
in every run has no change point, so a history of change points alone says "No host changed").

A fault is a host-level health fact of the index (`scope` "health") whose value says so: a contract
``broken``, reachability ``unreachable (...)``, a HW clock-event reason active.
`chronic_faults(spans)` reads the timelines (`sweep.history.timeline.spans`): the host's last
stretch of that key, when it reaches the host's last run and its value is a fault, is the fault,
since the first run of the stretch; `every_run` when the stretch covers every run of the host.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sweep.analysis.names import fold_hosts, host_key
from sweep.history.timeline import HOST, moment
from sweep.text import plural

NOT_FAULTS = {
    "ok",
    "none",
    "unknown",
    "not_applicable",
    "warning",
}  # a warning is watched, not a fault


def is_fault(key: str, value: str) -> bool:
    """Whether a health fact's value is a fault (a contract broken, the host unreachable, a HW
    slowdown)."""
    if key == "reachability":
        return value.startswith("unreachable")
    return value not in NOT_FAULTS and value != ""


@dataclass(frozen=True)
class Fault:
    """One host's health fact faulty in its latest run, since `since` (epoch), for `runs` runs."""

    host: str
    key: str
    label: str
    value: str
    since: float
    runs: int
    every_run: bool  # faulty in every run the history holds of the host: no change point shows it

    def as_dict(self) -> dict:
        return {
            "host": self.host,
            "key": self.key,
            "label": self.label,
            "value": self.value,
            "since": moment(self.since),
            "runs": self.runs,
            "every_run": self.every_run,
        }


def chronic_faults(span_frame: pd.DataFrame) -> list[Fault]:
    """The faults of each host's latest run and since when, those of every run first (`Fault`)."""
    s = span_frame[(span_frame["gpu"] == HOST) & (span_frame["scope"] == "health")]
    if not len(s):
        return []
    reach = s[s["key"] == "reachability"]
    runs_of = reach.groupby("host")["runs"].sum().to_dict()  # every run holds a host's reachability
    last_of = reach.groupby("host")["last_seen"].max().to_dict()
    latest = s.sort_values("last_seen").groupby(["host", "key"], sort=False).tail(1)
    out = []
    for row in latest.itertuples(index=False):
        if row.last_seen != last_of.get(row.host) or not is_fault(row.key, str(row.value)):
            continue
        out.append(
            Fault(
                row.host,
                row.key,
                row.key_label,
                str(row.value),
                float(row.first_seen),
                int(row.runs),
                int(row.runs) >= runs_of.get(row.host, 0),
            )
        )
    out.sort(key=lambda f: (not f.every_run, f.since, host_key(f.host), f.key))
    return out


def folded(faults: list[Fault]) -> list[dict]:
    """The faults folded across hosts that share them (the same fact, value, first run and reach):
    {hosts, folded, count, label, value, since, runs, every_run, text}, every-run ones first."""
    groups: dict[tuple, list[Fault]] = {}
    for f in faults:
        groups.setdefault((f.every_run, f.key, f.value, f.since, f.runs), []).append(f)
    out = []
    for (every, _, value, since, runs), items in groups.items():
        hosts = sorted((f.host for f in items), key=host_key)
        when = f"in every run since {moment(since)}" if every else f"since {moment(since)}"
        text = f"{fold_hosts(hosts)}: {items[0].label} {value} {when} ({plural(runs, 'run')})"
        out.append(
            {
                "hosts": hosts,
                "folded": fold_hosts(hosts),
                "count": len(hosts),
                "label": items[0].label,
                "value": value,
                "since": moment(since),
                "runs": runs,
                "every_run": every,
                "text": text,
            }
        )
    return out
