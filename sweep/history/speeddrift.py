"""Drift of the speed tier's measured figures, run on run, against each GPU's own first runs.

A measured bandwidth moves a little every run (the H200's HBM: 0.1% across five runs), so its
history is no change point: it is a series. For every (host, GPU, figure) with at least
BASELINE_RUNS + 1 runs, the median of its first BASELINE_RUNS runs is its baseline and the median
of its last BASELINE_RUNS runs (never overlapping the baseline) its recent figure; a fall of more
than THRESHOLD_PCT is drift. Week-on-week drift of HBM or PCIe bandwidth says more of a card's
health than the SM clock alone (issue 25).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from sweep.analysis.speed import rate
from sweep.analysis.speed_reference import LABELS, UNITS
from sweep.history.runs import SPEED_FIGURES

BASELINE_RUNS = 3
THRESHOLD_PCT = 5.0


@dataclass(frozen=True)
class SpeedDrift:
    """One figure of one GPU (gpu -1: a host figure) across the runs read."""

    host: str
    gpu: int
    figure: str
    baseline: float
    recent: float
    fall_pct: float  # positive: slower than its first runs
    runs: int
    drifted: bool

    @property
    def text(self) -> str:
        unit = UNITS[self.figure]
        where = f"{self.host}" + (f" GPU {self.gpu}" if self.gpu >= 0 else "")
        return (
            f"{where}: {LABELS[self.figure]} {rate(self.baseline, unit)} -> "
            f"{rate(self.recent, unit)} "
            f"(-{self.fall_pct:.1f}% over {self.runs} runs)"
        )

    def as_dict(self) -> dict:
        return dict(asdict(self), text=self.text)


def speed_drift(
    speed: pd.DataFrame | None, hosts: dict, threshold_pct: float = THRESHOLD_PCT
) -> list[SpeedDrift]:
    """Each (host, GPU, figure) series' drift, the most fallen first (`speed`: the index's rows +
    epoch)."""
    if speed is None or not len(speed):
        return []
    out = []
    ordered = speed.sort_values(["epoch", "run"], kind="stable")
    for (host, gpu, figure), series in ordered.groupby(["host", "gpu", "figure"], sort=False):
        values = series["value"].tolist()
        if len(values) <= BASELINE_RUNS or not 0 <= figure < len(SPEED_FIGURES):
            continue
        tail = values[max(BASELINE_RUNS, len(values) - BASELINE_RUNS) :]
        baseline = float(pd.Series(values[:BASELINE_RUNS]).median())
        recent = float(pd.Series(tail).median())
        fall = 100.0 * (baseline - recent) / baseline if baseline > 0 else 0.0
        out.append(
            SpeedDrift(
                str(hosts.get(int(host), host)),
                int(gpu),
                SPEED_FIGURES[int(figure)],
                baseline,
                recent,
                round(fall, 2),
                len(values),
                fall > threshold_pct,
            )
        )
    out.sort(key=lambda d: (-d.fall_pct, d.host, d.gpu, d.figure))
    return out
