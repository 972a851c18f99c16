"""report.html's charts: power limit and SM clock bars per host (or per class, for big fleets), and
the speed tier's bars per GPU against the reference.
"""

from __future__ import annotations

import math

import pandas as pd

from sweep.analysis.compare import Findings
from sweep.analysis.fleet import Fleet
from sweep.analysis.names import fold_hosts
from sweep.text import plural

# above this many hosts the chart shows one bar per class (a bar per host: hosts.csv)
CHART_HOSTS_MAX = 16
NAMED_MAX = 3  # a class of at most this many hosts is named by its hosts in the chart


def chart(fleet: Fleet, findings: Findings) -> dict:
    """Bars of enforced power limit against the maximum, and SM clock under load
    against the maximum.

    One bar per host up to CHART_HOSTS_MAX hosts, else one per comparability class (its lowest
    limit, the median loaded host's clock, and how many of its hosts have a HW slowdown). An SM bar
    is drawn only for a probe taken under --load: an idle GPU's clock says nothing about its speed
    (an idle card at 345 MHz would look slower than a throttled one at 1035 MHz), so a host probed
    idle gets "idle" and no bar.
    """
    per_host = _chart_per_host(fleet, findings)
    by_class = len(per_host) > CHART_HOSTS_MAX
    if by_class:
        rows = _class_rows(per_host)
    else:
        rows = per_host.sort_index().rename(columns={"sm": "sm_read", "sm_load": "sm"})
        rows["label"] = [str(h) for h in rows.index]
        rows["slow_n"] = rows["slow"].astype(int)
    # a fleet whose every power or clock value is unknown (null) still gets its chart, of empty bars
    power_scale = (
        (_known_float(pd.concat([rows["power_max"], rows["power_top"]]).max()) or 1.0)
        if len(rows)
        else 1.0
    )
    sm_scale = (_known_float(rows["sm_max"].max()) or 1.0) if len(rows) else 1.0
    # one bar per host drawn (at most CHART_HOSTS_MAX), or per class
    bars = [_bar(r, power_scale, sm_scale, by_class) for r in rows.itertuples()]
    return {
        "by_class": by_class,
        "bars": bars,
        "height": 44 + 22 * len(bars),
        "loaded": sum(b["loaded"] for b in bars),
    }


def _class_rows(per_host: pd.DataFrame) -> pd.DataFrame:
    """One row per comparability class: its lowest limit, the median loaded host's clock, how many
    of its hosts have a HW slowdown, and a label that names a small class's hosts."""
    rows = (
        per_host[per_host["klass"].notna()]
        .groupby("klass", sort=True)
        .agg(
            power=("power", "min"),
            power_top=("power_top", "max"),
            default=("default", "max"),
            power_max=("power_max", "max"),
            sm=("sm_load", "median"),
            sm_read=("sm", "median"),
            sm_max=("sm_max", "max"),
            slow_n=("slow", "sum"),
            n=("power", "size"),
        )
    )
    rows["slow"] = False  # the median clock is not a slowed one: a note counts the slowed hosts
    members = (
        per_host[per_host["klass"].notna()]
        .groupby("klass", sort=True)
        .apply(lambda g: list(g.index))
    )
    rows["label"] = [
        f"class {c}: {fold_hosts(members[c])}"
        if n <= NAMED_MAX
        else f"class {c} ({plural(n, 'host')})"
        # a small class (an outlier) is named
        for c, n in zip(rows.index, rows["n"])
    ]
    rows["klass"] = rows.index
    return rows


def _bar(r, power_scale: float, sm_scale: float, by_class: bool) -> dict:
    """One bar of the chart (a host's or a class's row), its widths in percent of the scales."""
    power, top, default, top_limit = (
        _known_float(r.power),
        _known_float(r.power_top),
        _known_float(r.default),
        _known_float(r.power_max),
    )
    return {
        "label": r.label,
        "class": r.klass if isinstance(r.klass, str) else None,
        "power": power,
        "power_top": top,
        "power_max": top_limit,
        "default": default,
        "power_w": _pct(power, power_scale),
        "power_top_w": _pct(top, power_scale),
        "power_max_w": _pct(top_limit, power_scale),
        "default_x": _pct(default, power_scale),
        "capped": power is not None and default is not None and power < default,
        "sm": _known_float(r.sm),
        "sm_read": _known_float(r.sm_read),
        "sm_max": _known_float(r.sm_max),
        "sm_w": _pct(_known_float(r.sm), sm_scale),
        "sm_max_w": _pct(_known_float(r.sm_max), sm_scale),
        "loaded": _known_float(r.sm) is not None,
        "slow": _flag(r.slow),
        "note": (f"{int(r.slow_n)} with HW slowdown" if by_class else "HW slowdown")
        if _known_float(r.slow_n)
        else "",
    }


def _chart_per_host(fleet: Fleet, findings: Findings) -> pd.DataFrame:
    """Per host, over its selected GPUs: lowest and highest enforced limit, SM clock read at
    probe time (the slowed GPU's when a HW slowdown is active), the lowest median SM clock under
    --load, slowed, class."""
    g = fleet.gpus[fleet.gpus["selected"].fillna(False).to_numpy()]
    slowed = (
        g[["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"]]
        .fillna(False)
        .any(axis=1)
    )
    g = g.assign(slowed=slowed, sm_slowed=g["sm_mhz"].where(slowed))
    per_host = g.groupby("host", observed=True).agg(
        power=("power_enforced_w", "min"),
        power_top=("power_enforced_w", "max"),
        default=("power_default_w", "max"),
        power_max=("power_max_w", "max"),
        sm=("sm_mhz", "min"),
        sm_slowed=("sm_slowed", "min"),
        sm_max=("sm_max_mhz", "max"),
        sm_load=("sm_load_mhz", "min"),
        slow=("slowed", "any"),
    )
    per_host["sm"] = per_host["sm_slowed"].where(per_host["slow"], per_host["sm"])
    klass = findings.host_keys["comparability_class"]
    per_host["klass"] = klass.reindex(per_host.index.astype(str)).to_numpy()
    return per_host


def _known_float(value):
    """A float, or None for what is unknown (None, NA, NaN, infinity)."""
    if value is None or pd.isna(value):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _flag(value) -> bool:
    return False if value is None or pd.isna(value) else bool(value)


def _pct(value, scale):
    return 0.0 if value is None or not scale else round(100.0 * value / scale, 2)


# GPU bars per figure (the slowest first); summary.json and fleet.csv hold every GPU
SPEED_BARS_MAX = 128

SPEED_COLOURS = {"ok": "#14866d", "warning": "#d97706", "broken": "#c2362b"}


def speed_chart(speed: dict | None) -> list[dict]:
    """Per figure with a reference: one bar per GPU, its fraction of the
    reference (0-125% drawn)."""
    from sweep.analysis.speed import rate
    from sweep.analysis.speed_reference import FIGURES, LABELS, UNITS

    if not speed:
        return []
    out = []
    for figure in FIGURES:
        bars = []
        for g in speed["gpus"]:
            j = next(
                (
                    j
                    for j in g["judgments"]
                    if j["figure"] == figure and j["against"] == "reference"
                ),
                None,
            )
            if j is not None:
                bars.append(
                    {
                        "label": f"{g['host']} GPU {g['gpu']}",
                        "fraction": j["fraction"],
                        "width": min(j["fraction"], 1.25) / 1.25,
                        "colour": SPEED_COLOURS[j["severity"]],
                        "text": f"{rate(j['value'], UNITS[figure])} · {j['fraction']:.0%}",
                        "title": j.get("reference_source", ""),
                    }
                )
        if bars:
            bars.sort(key=lambda b: (b["fraction"], b["label"]))
            ref = next(
                r for r in speed["references"] if r["figure"] == figure and r["value"] is not None
            )
            out.append(
                {
                    "figure": figure,
                    "label": LABELS[figure],
                    "bars": bars[:SPEED_BARS_MAX],
                    "more": max(0, len(bars) - SPEED_BARS_MAX),
                    "height": 30 + 20 * len(bars[:SPEED_BARS_MAX]),
                    "reference": (
                        f"{ref['model']} {rate(ref['value'], UNITS[figure])} ({ref['source']})"
                    ),
                }
            )
    return out
