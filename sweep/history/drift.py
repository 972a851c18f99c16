"""Drift of each GPU under load against its own host's first runs.

For every GPU that ran `--load`, the median SM clock of each run is compared with the GPU's own
baseline: the median of its first `BASELINE_RUNS` runs, against the median of its last ones.
A configuration change named by a change point (a power limit, a driver...) explains a step, so
the baseline starts again after the host's last comparability-key change: `same_config_pct` is
the fall that no change explains, and it is what ranks the hosts. A GPU whose every run passes a
fixed floor can still have fallen 6% in six weeks: that is the drift this finds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

BASELINE_RUNS = 3
MEASURED_RUNS = (
    2  # a host's drift is measured once two of its runs have load samples (one run is no trend)
)
THRESHOLD_PCT = 3.0
WEEK_S = 7 * 86400


@dataclass(frozen=True)
class HostDrift:
    """The worst GPU of one host: how far its SM clock under load fell, and whether a change
    explains it."""

    host: str
    gpu: int
    baseline_mhz: float
    recent_mhz: float
    since_entry_pct: float  # fall from the host's first runs (positive: slower)
    same_config_pct: float  # fall since the host's last configuration change
    per_week_pct: float  # least-squares slope since that change, % of baseline per week
    min_run_mhz: float  # the lowest median of any run (what a fixed floor judges)
    runs: int
    power_baseline_w: float | None
    power_recent_w: float | None
    drifted: bool
    passes_floor: bool | None

    @property
    def measured(self) -> bool:
        """Whether enough of the host's runs had load samples for its drift to say anything."""
        return self.runs >= MEASURED_RUNS

    def as_dict(self) -> dict:
        return {
            **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()},
            "measured": self.measured,
        }


def _pct(base, now):
    """Fall from `base` to `now` in percent of `base` (positive: slower); 0 where unknown."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (base - now) / base * 100.0
    return np.where(np.isfinite(out), out, 0.0)


def _edge_median(
    values: pd.Series, group: np.ndarray, position: np.ndarray, count: np.ndarray, last: bool
):
    """Per group, the median of its first (or last) BASELINE_RUNS values; `position` counts from
    0."""
    pick = position >= count - BASELINE_RUNS if last else position < BASELINE_RUNS
    return values[pick].groupby(group[pick]).median()


def _slope(t, y, group, n_groups, base):
    """Least-squares slope of y over t (weeks) per group, in % of `base` per week (positive:
    falling)."""

    def total(w):
        return np.bincount(group, weights=w, minlength=n_groups)

    n, sx, sy, sxx, sxy = total(np.ones_like(t)), total(t), total(y), total(t * t), total(t * y)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
        out = -slope / base * 100.0
    return np.where(np.isfinite(out) & (n >= 3), out, 0.0)


def gpu_drift(load: pd.DataFrame, last_change: np.ndarray) -> pd.DataFrame:
    """Per (host, gpu) of `load` (host, gpu, epoch, sm_mhz, power_w), its drift figures, in one
    pass.

    `last_change[host id]`: epoch of the host's last configuration change (-inf: none).
    """
    f = load.sort_values(["host", "gpu", "epoch"], kind="stable").reset_index(drop=True)
    group, keys = pd.factorize(pd.MultiIndex.from_arrays([f["host"], f["gpu"]]))
    n_groups = len(keys)
    count = np.bincount(group, minlength=n_groups)
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    position = np.arange(len(f)) - start[group]
    sm, power = f["sm_mhz"].astype(float), f["power_w"].astype(float)
    base = _edge_median(sm, group, position, count[group], last=False).to_numpy()
    recent = _edge_median(sm, group, position, count[group], last=True).to_numpy()
    same = f["epoch"].to_numpy() >= last_change[f["host"].to_numpy()]
    seg = f[same]
    seg_group = group[same]
    seg_count = np.bincount(seg_group, minlength=n_groups)
    seg_position = seg.groupby(seg_group).cumcount().to_numpy()
    seg_sm = sm[same].reset_index(drop=True)
    seg_base = np.full(n_groups, np.nan)
    seg_recent = np.full(n_groups, np.nan)
    first = _edge_median(seg_sm, seg_group, seg_position, seg_count[seg_group], last=False)
    last = _edge_median(seg_sm, seg_group, seg_position, seg_count[seg_group], last=True)
    seg_base[first.index.to_numpy()], seg_recent[last.index.to_numpy()] = (
        first.to_numpy(),
        last.to_numpy(),
    )
    t0 = pd.Series(seg["epoch"].to_numpy()).groupby(seg_group).min()
    seg_t0 = np.zeros(n_groups)
    seg_t0[t0.index.to_numpy()] = t0.to_numpy()
    weeks = (seg["epoch"].to_numpy() - seg_t0[seg_group]) / WEEK_S
    return pd.DataFrame(
        {
            "host": keys.get_level_values(0),
            "gpu": keys.get_level_values(1).astype(int),
            "baseline_mhz": base,
            "recent_mhz": recent,
            "since_entry_pct": _pct(base, recent),
            "same_config_pct": _pct(seg_base, seg_recent),
            "per_week_pct": _slope(weeks, seg_sm.to_numpy(), seg_group, n_groups, seg_base),
            "min_run_mhz": sm.groupby(group).min().to_numpy(),
            "runs": count,
            "power_baseline_w": _edge_median(
                power, group, position, count[group], last=False
            ).to_numpy(),
            "power_recent_w": _edge_median(
                power, group, position, count[group], last=True
            ).to_numpy(),
        }
    )


def host_drift(
    load: pd.DataFrame,
    hosts: dict,
    last_change: dict,
    threshold_pct: float = THRESHOLD_PCT,
    floor_mhz: float | None = None,
) -> list[HostDrift]:
    """One HostDrift per host with load runs (its worst GPU), most drifted first.

    `load`: run, host, gpu, sm_mhz, power_w, epoch (host ids); `hosts`: id -> name; `last_change`:
    host name -> epoch of its last comparability-key change (absent: none).
    """
    frame = load.dropna(subset=["sm_mhz"])
    if not len(frame):
        return []
    since = np.full(max(hosts) + 1 if hosts else 1, -np.inf)
    for host_id, name in hosts.items():
        if name in last_change:
            since[host_id] = last_change[name]
    per_gpu = gpu_drift(frame, since)
    worst = per_gpu.sort_values(
        ["same_config_pct", "since_entry_pct"], ascending=False, kind="stable"
    )
    worst = worst.drop_duplicates("host")
    result = []
    for row in worst.to_dict("records"):
        passes = None if floor_mhz is None else bool(row["min_run_mhz"] >= floor_mhz)
        row = {k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in row.items()}
        result.append(
            HostDrift(
                **dict(
                    row,
                    host=hosts[row["host"]],
                    gpu=int(row["gpu"]),
                    runs=int(row["runs"]),
                    drifted=row["same_config_pct"] > threshold_pct,
                    passes_floor=passes,
                )
            )
        )
    result.sort(key=lambda d: (-d.same_config_pct, -d.since_entry_pct, d.host))
    return result
