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
THRESHOLD_PCT = 3.0
WEEK_S = 7 * 86400


@dataclass(frozen=True)
class HostDrift:
    """The worst GPU of one host: how far its SM clock under load fell, and whether a change explains it."""

    host: str
    gpu: int
    baseline_mhz: float
    recent_mhz: float
    since_entry_pct: float      # fall from the host's first runs (positive: slower)
    same_config_pct: float      # fall since the host's last configuration change
    per_week_pct: float         # least-squares slope since that change, % of baseline per week
    min_run_mhz: float          # the lowest median of any run (what a fixed floor judges)
    runs: int
    power_baseline_w: float | None
    power_recent_w: float | None
    drifted: bool
    passes_floor: bool | None

    def as_dict(self) -> dict:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def _median(values) -> float:
    return float(np.median(values)) if len(values) else float("nan")


def _pct(base: float, now: float) -> float:
    return 0.0 if not base or base != base or now != now else (base - now) / base * 100.0


def gpu_drift(series: pd.DataFrame, config_since: float | None) -> dict:
    """Drift figures of one GPU's runs (epoch, sm_mhz, power_w), oldest first."""
    sm, power, epoch = (series[c].to_numpy(dtype=float) for c in ("sm_mhz", "power_w", "epoch"))
    n = BASELINE_RUNS
    base, recent = _median(sm[:n]), _median(sm[-n:])
    same = series["epoch"].to_numpy() >= config_since if config_since is not None else np.ones(len(sm), bool)
    seg_sm, seg_t = sm[same], epoch[same]
    seg_base = _median(seg_sm[:n])
    slope = 0.0
    if len(seg_sm) >= 3 and seg_t[-1] > seg_t[0] and seg_base == seg_base and seg_base:
        slope = -np.polyfit((seg_t - seg_t[0]) / WEEK_S, seg_sm, 1)[0] / seg_base * 100.0
    return {"baseline_mhz": base, "recent_mhz": recent, "since_entry_pct": _pct(base, recent),
            "same_config_pct": _pct(seg_base, _median(seg_sm[-n:])), "per_week_pct": float(slope),
            "min_run_mhz": float(np.nanmin(sm)) if len(sm) else float("nan"), "runs": int(len(sm)),
            "power_baseline_w": _median(power[:n]), "power_recent_w": _median(power[-n:])}


def host_drift(load: pd.DataFrame, hosts: dict, last_change: dict, threshold_pct: float = THRESHOLD_PCT,
               floor_mhz: float | None = None) -> list[HostDrift]:
    """One HostDrift per host with load runs (its worst GPU), most drifted first.

    `load`: run, host, gpu, sm_mhz, power_w, epoch (host ids); `hosts`: id -> name; `last_change`:
    host name -> epoch of its last comparability-key change (absent: none).
    """
    out = []
    frame = load.dropna(subset=["sm_mhz"]).sort_values(["host", "gpu", "epoch"], kind="stable")
    for (host_id, gpu), series in frame.groupby(["host", "gpu"], sort=False):
        name = hosts[host_id]
        figures = gpu_drift(series, last_change.get(name))
        out.append((name, int(gpu), figures))
    worst: dict[str, tuple] = {}
    for name, gpu, figures in out:
        key = (figures["same_config_pct"], figures["since_entry_pct"])
        if name not in worst or key > worst[name][2]:
            worst[name] = (gpu, figures, key)
    result = []
    for name, (gpu, figures, _) in worst.items():
        passes = None if floor_mhz is None else bool(figures["min_run_mhz"] >= floor_mhz)
        result.append(HostDrift(host=name, gpu=gpu, drifted=figures["same_config_pct"] > threshold_pct,
                                passes_floor=passes, **figures))
    result.sort(key=lambda d: (-d.same_config_pct, -d.since_entry_pct, d.host))
    return result
