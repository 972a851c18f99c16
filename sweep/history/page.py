"""history.html: one self-contained page (inline CSS and SVG, no script), Jinja2 autoescaped.

Small multiples per host: the SM clock under load of its worst GPU (with its baseline, the fixed
floor and a mark at each change point), and one band per key whose value changed, coloured by
value, every stretch of it drawn and named under the band. Drifted hosts come first (ranked),
then hosts with change points; steady hosts are one table row each. A legend names every colour
and mark. The x axis has one step per run, oldest left, not one per day: the several runs of a
change window each get their own step, so a state that lasted one run is as wide as any run.

The page's only links are those of each change point to its two run folders (the last run before
it and the first run after), relative to the history folder so that they work wherever the
history root is opened from, as long as the history folder stays inside it.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from sweep import __version__
from sweep.analysis.names import fold_hosts
from sweep.analysis.speed import rate
from sweep.analysis.speed_reference import UNITS
from sweep.history.drift import BASELINE_RUNS, MEASURED_RUNS
from sweep.history.speeddrift import THRESHOLD_PCT as SPEED_THRESHOLD_PCT
from sweep.history.timeline import HOST, moment
from sweep.text import noun, plural

W, H = 300, 56
BAND_H = 16
MIN_RECT_W = 2.0  # a stretch of one run among thousands is still drawn
CHAR_W = 6.2  # width of one character of the band's 10px text, for "does the label fit"
CHART_HOSTS_MAX = 200  # hosts drawn; the rest are rows of the steady table and the CSVs
STEADY_ROWS_MAX = 500
STRETCHES_MAX = 8  # stretches named under one band (all are drawn; the rest: timeline.csv)
CHANGES_MAX = 6  # change points (pairs of runs) listed on a card; all of them in changes.csv
SKIPPED_ROWS_MAX = (
    200  # run folders and host records that could not be read; all of them in history.json
)
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d")
# every colour and mark of the charts, one declaration: the template draws them and the legend
MARKS = {
    "clock": "#4c78a8",
    "baseline": "#54a24b",
    "floor": "#e45756",
    "change": "#222222",
    "drifted": "#e45756",
}

_env = Environment(
    loader=FileSystemLoader(str(Path(__file__).parent)),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.filters.update(plural=plural, noun=noun)


class Axis:
    """One step per run, oldest left: run `i` takes [i * step, (i + 1) * step)."""

    def __init__(self, epochs):
        self.epochs = [float(e) for e in epochs]
        self.step = W / max(len(self.epochs), 1)
        self.index = {}
        for i, e in enumerate(self.epochs):
            self.index.setdefault(e, i)

    def left(self, epoch) -> float:
        return round(self.index.get(float(epoch), 0) * self.step, 1)

    def centre(self, epoch) -> float:
        return round((self.index.get(float(epoch), 0) + 0.5) * self.step, 1)

    def span(self, first, last) -> tuple[float, float]:
        """x and width of the runs from `first` to `last` (epochs), at least MIN_RECT_W wide, inside
        the chart."""
        x0 = self.left(first)
        x1 = round((self.index.get(float(last), 0) + 1) * self.step, 1)
        width = max(MIN_RECT_W, x1 - x0)
        return min(x0, W - width), round(width, 1)


def _clock_chart(series, axis: Axis, baseline, floor, change_epochs):
    """Polyline points, reference lines and change marks of one GPU's SM clock medians under
    load."""
    sm = series["sm_mhz"].to_numpy(dtype=float)
    lo = min(sm.min(), floor if floor else sm.min(), baseline) * 0.99
    hi = max(sm.max(), baseline) * 1.01

    def y(v: float) -> float:
        return round(H - 4 - (v - lo) / (hi - lo) * (H - 8), 1) if hi > lo else H / 2

    points = " ".join(f"{axis.centre(e)},{y(v)}" for e, v in zip(series["epoch"], sm))
    epochs = series["epoch"].to_numpy(dtype=float)
    return {
        "points": points,
        "baseline_y": y(baseline),
        "floor_y": y(floor) if floor else None,
        "changes": sorted({axis.left(e) for e in change_epochs}),
        "lo": f"{lo:.0f}",
        "hi": f"{hi:.0f}",
        "last": f"{sm[-1]:g}",
        "first_run": moment(epochs[0]),
        "last_run": moment(epochs[-1]),
    }


def _stretch(row, axis: Axis, fill: str) -> dict:
    x, w = axis.span(row.first_seen, row.last_seen)
    when = (
        moment(row.first_seen)
        if row.first_seen == row.last_seen
        else (f"{moment(row.first_seen)} .. {moment(row.last_seen)}")
    )
    return {
        "x": x,
        "w": w,
        "fill": fill,
        "value": row.value,
        "runs": int(row.runs),
        "when": when,
        "label": row.value if w > CHAR_W * len(row.value) + 6 else "",
    }


def _bands(host_spans, axis: Axis):
    """One band per key that changed: a rectangle per stretch, coloured by value, and each stretch
    named."""
    out = []
    for key, part in host_spans.groupby("key", sort=False):
        if part["value"].nunique() < 2:
            continue
        part = part.sort_values("first_seen")
        colours = {v: PALETTE[i % len(PALETTE)] for i, v in enumerate(dict.fromkeys(part["value"]))}
        stretches = [
            _stretch(row, axis, colours[row.value]) for row in part.itertuples(index=False)
        ]
        out.append(
            {
                "key": key,
                "label": part["key_label"].iloc[0],
                "rects": stretches,
                "named": stretches[:STRETCHES_MAX],
                "more": max(0, len(stretches) - STRETCHES_MAX),
            }
        )
    return out


def _link(folder: str, out_dir: Path) -> str:
    """A run folder as a link relative to the history folder (quoted: a folder name may hold any
    byte)."""
    if not folder:
        return ""
    return quote(os.path.relpath(folder, out_dir.resolve())) + "/"


def _change_items(items, out_dir: Path) -> list[dict]:
    """The host's change points, one entry per pair of runs (what changed between them), newest
    last."""
    groups: dict[tuple, list] = {}
    for c in items:
        groups.setdefault(
            (c.epoch, c.before_epoch, c.run, c.run_before, c.folder, c.folder_before), []
        ).append(c)
    return [
        {
            "time": moment(epoch),
            "what": [f"{c.label} {c.before} -> {c.after}" for c in found],
            "before": before,
            "before_href": _link(folder_before, out_dir),
            "before_time": moment(before_epoch),
            "after": after,
            "after_href": _link(folder, out_dir),
        }
        for (epoch, before_epoch, after, before, folder, folder_before), found in groups.items()
    ]


def _cards(history, order, axis: Axis, out_dir: Path) -> list[dict]:
    sel = history.selection
    drawn = set(order)
    host_spans = history.spans[(history.spans["gpu"] == HOST) & history.spans["host"].isin(drawn)]
    by_host = dict(tuple(host_spans.groupby("host", sort=False)))
    ids = [h for h, name in sel.hosts.items() if name in drawn]
    load = sel.load[sel.load["host"].isin(ids)].dropna(subset=["sm_mhz"]).sort_values("epoch")
    load = load.assign(name=load["host"].map(sel.hosts))
    series = dict(tuple(load.groupby(["name", "gpu"], sort=False)))
    drift = {d.host: d for d in history.drift}
    changed = history.changed_hosts
    cards = []
    for rank, name in enumerate(order, 1):
        d = drift.get(name)
        mine = changed.get(name, [])
        chart = None
        if d is not None and (name, d.gpu) in series:
            chart = _clock_chart(
                series[(name, d.gpu)],
                axis,
                d.baseline_mhz,
                history.floor_mhz,
                [c.epoch for c in mine],
            )
        changes = _change_items(mine, out_dir)
        cards.append(
            {
                "host": name,
                "drift": d,
                "rank": rank if d is not None and d.drifted else None,
                "measured": d is not None and d.measured,
                "changes": changes[:CHANGES_MAX],
                "more_changes": max(0, len(changes) - CHANGES_MAX),
                "chart": chart,
                "bands": _bands(by_host[name], axis) if name in by_host else [],
            }
        )
    return cards


def render_page(history, out_dir: str | Path) -> str:
    """The page of `history`, its links relative to `out_dir` (where it is written)."""
    runs = history.selection.runs
    axis = Axis(runs["epoch"])
    drifted = {d.host for d in history.drifted}
    order = [d.host for d in history.drifted] + [
        h for h in sorted(history.changed_hosts) if h not in drifted
    ]
    cards = _cards(history, order[:CHART_HOSTS_MAX], axis, Path(out_dir))
    shown = set(order)
    steady = [d for d in history.drift if d.host not in shown and d.measured]
    unmeasured = history.unmeasured
    first, last = (moment(axis.epochs[0]), moment(axis.epochs[-1])) if len(runs) else ("-", "-")
    return _env.get_template("page.html.j2").render(
        runs=len(runs),
        first=first,
        last=last,
        hosts=len(history.host_names),
        cards=cards,
        more_cards=max(0, len(order) - CHART_HOSTS_MAX),
        steady=steady[:STEADY_ROWS_MAX],
        more_steady=max(0, len(steady) - STEADY_ROWS_MAX),
        threshold=history.threshold_pct,
        floor=history.floor_mhz,
        drifted=len(history.drifted),
        changed=len(history.changed_hosts),
        W=W,
        H=H,
        band_h=BAND_H,
        marks=MARKS,
        baseline_runs=BASELINE_RUNS,
        measured_runs=MEASURED_RUNS,
        measured=sum(d.measured for d in history.drift),
        unmeasured=len(unmeasured),
        unmeasured_hosts=fold_hosts(unmeasured) if unmeasured else "",
        drift_text=history.drift_text(),
        legend_bands=any(c["bands"] for c in cards),
        legend_charts=any(c["chart"] for c in cards),
        legend_changes=any(c["chart"] and c["chart"]["changes"] for c in cards),
        legend_drifted=any(c["rank"] for c in cards),
        skipped=history.skipped[:SKIPPED_ROWS_MAX],
        more_skipped=max(0, len(history.skipped) - SKIPPED_ROWS_MAX),
        speed_drift=[d for d in history.speed_drift if d.drifted][:STEADY_ROWS_MAX],
        speed_threshold=SPEED_THRESHOLD_PCT,
        rate=lambda v, figure: rate(v, UNITS[figure]),
        chronic=history.chronic[:STEADY_ROWS_MAX],
        more_chronic=max(0, len(history.chronic) - STEADY_ROWS_MAX),
        every_run=len({f.host for f in history.faults if f.every_run}),
        version=__version__,
        now=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    )
