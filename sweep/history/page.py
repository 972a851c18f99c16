"""history.html: one self-contained page (inline CSS and SVG, no script, no URL), Jinja2 autoescaped.

Small multiples per host: the SM clock under load of its worst GPU (with its baseline and the
fixed floor), and one band per key whose value changed, coloured by value. Drifted hosts come
first (ranked), then hosts with change points; steady hosts are one table row each.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from sweep import __version__
from sweep.analysis.speed import rate
from sweep.analysis.speed_reference import UNITS
from sweep.history.speeddrift import THRESHOLD_PCT as SPEED_THRESHOLD_PCT
from sweep.history.timeline import HOST, day
from sweep.text import noun, plural

W, H = 300, 56
CHART_HOSTS_MAX = 200   # hosts drawn; the rest are rows of the steady table and the CSVs
STEADY_ROWS_MAX = 500
SKIPPED_ROWS_MAX = 200  # run folders and host records that could not be read; all of them in history.json
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d")

_env = Environment(loader=FileSystemLoader(str(Path(__file__).parent)), autoescape=True,
                   undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
_env.filters.update(plural=plural, noun=noun)


def _x(epoch, t0, t1) -> float:
    return round((epoch - t0) / (t1 - t0) * W, 1) if t1 > t0 else W / 2


def _clock_chart(series, t0, t1, baseline, floor):
    """Polyline points and reference lines of one GPU's SM clock medians under load."""
    sm = series["sm_mhz"].to_numpy(dtype=float)
    lo = min(sm.min(), floor if floor else sm.min(), baseline) * 0.99
    hi = max(sm.max(), baseline) * 1.01
    y = lambda v: round(H - 4 - (v - lo) / (hi - lo) * (H - 8), 1) if hi > lo else H / 2  # noqa: E731
    points = " ".join(f"{_x(e, t0, t1)},{y(v)}" for e, v in zip(series["epoch"], sm))
    return {"points": points, "baseline_y": y(baseline), "floor_y": y(floor) if floor else None,
            "lo": f"{lo:.0f}", "hi": f"{hi:.0f}", "last": f"{sm[-1]:g}"}


def _bands(host_spans, t0, t1, step):
    """One band per key that changed: a rectangle per span, coloured by value."""
    out = []
    for key, part in host_spans.groupby("key", sort=False):
        if part["value"].nunique() < 2:
            continue
        colours = {v: PALETTE[i % len(PALETTE)] for i, v in enumerate(dict.fromkeys(part["value"]))}
        rects = []
        for row in part.sort_values("first_seen").itertuples(index=False):
            x0 = _x(row.first_seen, t0, t1)
            x1 = min(W, _x(row.last_seen, t0, t1) + step)
            rects.append({"x": x0, "w": max(1.0, round(x1 - x0, 1)), "fill": colours[row.value], "value": row.value,
                          "title": f"{row.value} ({day(row.first_seen)} .. {day(row.last_seen)})",
                          "label": row.value if x1 - x0 > 7 * len(row.value) else ""})
        out.append({"label": part["key_label"].iloc[0], "rects": rects})
    return out


def render_page(history) -> str:
    sel = history.selection
    runs = sel.runs
    t0, t1 = (float(runs["epoch"].min()), float(runs["epoch"].max())) if len(runs) else (0.0, 1.0)
    step = W / max(len(runs) - 1, 1)
    drift = {d.host: d for d in history.drift}
    changed = history.changed_hosts
    order = [d.host for d in history.drifted] + [h for h in sorted(changed) if h not in
                                                 {d.host for d in history.drifted}]
    drawn = set(order[:CHART_HOSTS_MAX])
    host_spans = history.spans[(history.spans["gpu"] == HOST) & history.spans["host"].isin(drawn)]
    by_host = dict(tuple(host_spans.groupby("host", sort=False)))
    ids = [h for h, name in sel.hosts.items() if name in drawn]
    load = sel.load[sel.load["host"].isin(ids)].dropna(subset=["sm_mhz"]).sort_values("epoch")
    load = load.assign(name=load["host"].map(sel.hosts))
    series = dict(tuple(load.groupby(["name", "gpu"], sort=False)))
    cards = []
    for rank, name in enumerate(order[:CHART_HOSTS_MAX], 1):
        d = drift.get(name)
        chart = None
        if d is not None and (name, d.gpu) in series:
            chart = _clock_chart(series[(name, d.gpu)], t0, t1, d.baseline_mhz, history.floor_mhz)
        cards.append({"host": name, "drift": d, "rank": rank if d is not None and d.drifted else None,
                      "changes": [c.text for c in changed.get(name, [])], "chart": chart,
                      "bands": _bands(by_host[name], t0, t1, step) if name in by_host else []})
    shown = set(order)
    steady = [d for d in history.drift if d.host not in shown]
    hosts = len(set(sel.hosts[h] for h in np.unique(sel.facts["host"]))) if len(sel.facts) else 0
    return _env.get_template("page.html.j2").render(
        runs=len(runs), first=day(t0) if len(runs) else "-", last=day(t1) if len(runs) else "-", hosts=hosts,
        cards=cards, more_cards=max(0, len(order) - CHART_HOSTS_MAX), steady=steady[:STEADY_ROWS_MAX],
        more_steady=max(0, len(steady) - STEADY_ROWS_MAX), threshold=history.threshold_pct,
        floor=history.floor_mhz, drifted=len(history.drifted), changed=len(changed), W=W, H=H,
        skipped=history.skipped[:SKIPPED_ROWS_MAX], more_skipped=max(0, len(history.skipped) - SKIPPED_ROWS_MAX),
        speed_drift=[d for d in history.speed_drift if d.drifted][:STEADY_ROWS_MAX],
        speed_threshold=SPEED_THRESHOLD_PCT, rate=lambda v, figure: rate(v, UNITS[figure]),
        version=__version__, now=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
