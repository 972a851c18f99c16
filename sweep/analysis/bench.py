"""A fleet benchmark's figures, compared only within a comparability class (`sweep run --wrap`).

The classes come from the probes taken *before* each command (`sweep.analysis.compare`). Per
class: the median, the spread and each host's figure; a host far from its class's median is an
outlier, named with the envelope evidence that explains it (SW power cap fraction, SM clock
median against its class, a process that appeared during the run, a HW slowdown, a probe after
that differs from the probe before, a forced run). Figures of two classes are never pooled: the
section says which keys keep them apart. The one figure an operator may quote is the median of
the reference class, with its provenance (hosts, keys, command, records).

No host chooses that figure: it is the one the operator named first with `--metric` (the run's
manifest), or else the name most hosts that ran the benchmark print, and only when more than half
of them print it; its unit is the one most of those hosts give. A host that ran but has no such
figure (or gives it in another unit) is `no_figure`. A figure beyond FIGURE_ABS_MAX (or not a
finite number) is an outlier, never part of a median or a spread.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter
from pathlib import Path


from sweep.analysis.compare import Findings
from sweep.analysis.fleet import Fleet
from sweep import exitcodes
from sweep.text import plural

OUTLIER_MIN = 0.02  # a figure within 2% of its class's median is never an outlier
OUTLIER_MADS = 3.0  # ... nor one within 3 scaled median absolute deviations
CAP_FRACTION_GAP = 0.10
CLOCK_GAP = 0.02
# no benchmark measures this much on one host: the figure is not a measurement
FIGURE_ABS_MAX = 1e30
METRICS_LISTED = 50  # the figure names summary.json lists (the most reported first)
NAME = re.compile(r"[A-Za-z0-9_.:/%+-]{1,64}\Z")  # sweep.collect.wrap's --metric NAME


def wrap_records(fleet: Fleet) -> dict[str, dict]:
    """host -> the `wrap` section of its record, for the reachable hosts whose record holds one.

    The fleet's load kept them as it read the records (`Fleet.wraps`): no file is read again, so a
    manifest listing 100,000 hosts without a record costs nothing here.
    """
    return dict(fleet.wraps)


def _manifest_wraps(sources):
    """The `options.wrap` of each run folder's manifest among `sources` (what the operator
    asked)."""
    for source in sources:
        manifest = Path(source) / "manifest.json"
        if not manifest.is_file():
            continue
        try:
            doc = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        options = (doc.get("options") if isinstance(doc, dict) else None) or {}
        wrap = options.get("wrap") if isinstance(options, dict) else None
        if isinstance(wrap, dict):
            yield wrap


def operator_metrics(sources) -> tuple[tuple[str, ...], list | None]:
    """(the figure names the operator gave with --metric, in order; the command), from the run
    folders' manifests."""
    names: list[str] = []
    command = None
    for wrap in _manifest_wraps(sources):
        argv = wrap.get("command")
        if (
            command is None
            and isinstance(argv, list)
            and argv
            and all(isinstance(a, str) for a in argv)
        ):
            command = argv
        metrics = wrap.get("metrics")
        for text in metrics if isinstance(metrics, list) else ():
            name = text.partition("=")[0] if isinstance(text, str) else ""
            if NAME.match(name) and name not in names:
                names.append(name)
    return tuple(names), command


def bench_section(fleet: Fleet, findings: Findings) -> dict | None:
    """The benchmark part of the report (summary.json "benchmark"), or None when nothing was
    wrapped."""
    wraps = wrap_records(fleet)
    if not wraps:
        return None
    named, command = operator_metrics(fleet.sources)
    metric, chosen_by = _primary_metric(wraps, named)
    unit, agreed = _unit(wraps, metric, bool(named))
    values = {
        h: _figure(w, metric, unit, bool(named)) if agreed else None for h, w in wraps.items()
    }
    class_of = {h: c.id for c in findings.classes for h in c.hosts}
    classes, outliers = [], []
    for c in findings.classes:
        table = _class_table(c, wraps, values)
        if table is not None:
            table["reference"] = c is findings.reference
            classes.append(table)
            outliers += [dict(h, **{"class": c.id}) for h in table["hosts"] if h["outlier"]]
    not_run = [
        {"host": h, "status": status, "why": why, "class": class_of.get(h)}
        for h, (status, why) in sorted(
            _not_run(wraps, values, metric, unit, chosen_by, agreed).items()
        )
    ]
    ref = next((t for t in classes if t["reference"]), None)
    with_figures = [t for t in classes if t["n"]]
    reported = Counter(k for w in wraps.values() for k in _figures_of(w))
    section = {
        "metric": metric,
        "metric_chosen_by": chosen_by,
        "unit": unit,
        "metrics": sorted(k for k, _ in reported.most_common(METRICS_LISTED)),
        "metrics_not_listed": max(0, len(reported) - METRICS_LISTED),
        "command": command or _command(wraps),
        "hosts_wrapped": len(wraps),
        "hosts_with_figure": sum(t["n"] for t in classes),
        "classes": classes,
        "outliers": outliers,
        "not_run": not_run,
        "quote": _quote(ref, findings, metric, wraps, chosen_by),
        "not_pooled": _not_pooled(with_figures, findings),
    }
    section["exit_code"], section["exit_meaning"] = _verdict(not_run, with_figures)
    return section


def _figures_of(w: dict) -> dict:
    """A record's figures that are well formed: name -> {value, unit, source}."""
    figures = w.get("figures")
    return (
        {k: f for k, f in figures.items() if isinstance(k, str) and isinstance(f, dict)}
        if isinstance(figures, dict)
        else {}
    )


def _primary_metric(wraps: dict, named: tuple[str, ...]) -> tuple[str | None, str]:
    """(the figure to quote, how it was chosen): the operator's first --metric, else the majority's
    name."""
    if named:
        return named[0], "--metric"
    ran = [w for w in wraps.values() if w.get("status") == "ok"]
    count, first = Counter(), Counter()
    for w in ran:
        names = [k for k, f in _figures_of(w).items() if _plain_number(f.get("value"))]
        count.update(set(names))
        first.update(names[:1])
    if not count:
        return None, "no host printed a figure"
    name = min(count, key=lambda k: (-count[k], -first[k], k))
    if 2 * count[name] <= len(ran):
        return None, (
            f"no figure name is printed by more than half of the {plural(len(ran), 'host')} "
            "that ran the "
            f"benchmark ({name} by {count[name]}): name the figure with --metric NAME=REGEX"
        )
    return (
        name,
        f"printed by {count[name]} of the {plural(len(ran), 'host')} that ran the benchmark",
    )


def _plain_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _unit(wraps: dict, metric: str | None, operator: bool) -> tuple[str | None, bool]:
    """(the unit most of the hosts with the figure give, whether more than half of them agree on
    one): where they do not, (None, False), and no figure is compared (figures in two units are no
    one number)."""
    if metric is None:
        return None, True
    units = [
        f.get("unit") if isinstance(f.get("unit"), str) else None
        for w in wraps.values()
        if w.get("status") == "ok"
        for k, f in _figures_of(w).items()
        if k == metric and (not operator or f.get("source") == "--metric")
    ]
    if not units:
        return None, True
    unit, n = Counter(units).most_common(1)[0]
    return (unit, True) if 2 * n > len(units) else (None, False)


def _figure(w: dict, metric: str | None, unit: str | None, operator: bool) -> float | None:
    """One host's figure of `metric` (in the fleet's unit; an operator's figure from --metric
    only)."""
    if w.get("status") != "ok" or metric is None:
        return None
    fig = _figures_of(w).get(metric)
    if (
        fig is None
        or not _plain_number(fig.get("value"))
        or (operator and fig.get("source") != "--metric")
    ):
        return None
    if (fig.get("unit") if isinstance(fig.get("unit"), str) else None) != unit and unit is not None:
        return None
    return float(fig["value"])


def _not_run(
    wraps: dict, values: dict, metric: str | None, unit: str | None, chosen_by: str, agreed: bool
) -> dict:
    """host -> (status, why) of each host without a figure to compare (no figure name agreed: every
    host)."""
    out = {h: (w.get("status"), w.get("why")) for h, w in wraps.items() if w.get("status") != "ok"}
    for h, w in wraps.items():
        if w.get("status") == "ok" and metric is None:
            out[h] = ("no_figure", chosen_by)
        elif w.get("status") == "ok" and values[h] is None:
            printed = sorted(_figures_of(w))
            other = _figures_of(w).get(metric)
            if other and chosen_by == "--metric" and other.get("source") != "--metric":
                why = f"its {metric} is from a JSON line, not the operator's --metric"
            elif other and not agreed:
                why = (
                    f"the hosts give {metric} in no one unit (none by more than half of "
                    f"them): no {metric} "
                    "figure is compared"
                )
            elif other and unit:
                why = f"its {metric} is in {other.get('unit')!s}, not the fleet's {unit}"
            else:
                why = f"printed no {metric} figure" + (
                    f" (it printed {', '.join(printed[:5])})" if printed else ""
                )
            out[h] = ("no_figure", why)
    return out


def _command(wraps: dict) -> list | None:
    """The command the hosts ran, where the manifest names none: the first record's whose provenance
    the controller did not find forged (a mismatch's argv is the host's claim, not what was
    sent)."""
    for w in wraps.values():
        if w.get("mismatches"):
            continue
        prov = w.get("provenance") if isinstance(w.get("provenance"), dict) else {}
        argv = prov.get("command").get("argv") if isinstance(prov.get("command"), dict) else None
        if isinstance(argv, list) and argv:
            return [str(a) for a in argv]
    return None


def _class_table(c, wraps: dict, values: dict) -> dict | None:
    members = [h for h in c.hosts if h in wraps]
    if not members:
        return None
    absurd = {h for h in members if values[h] is not None and not _plausible(values[h])}
    figures = [values[h] for h in members if values[h] is not None and h not in absurd]
    median = statistics.median(figures) if figures else None
    verdicts = {h: _verdict_of(wraps[h]) for h in members}
    rows = []
    for h in members:
        v = None if h in absurd and not math.isfinite(values[h]) else values[h]
        dev = None if v is None or not median or h in absurd else (v - median) / abs(median)
        row = {
            "host": h,
            "value": v,
            "status": wraps[h].get("status"),
            "deviation_pct": _pct(dev),
            "outlier": h in absurd or bool(dev is not None and is_outlier(dev, figures, median)),
            "envelope": verdicts[h].get("summary"),
            "evidence": [],
        }
        if h in absurd:
            row["evidence"] = [
                f"the figure {values[h]:g} is not a measurement (not a finite number within "
                f"±{FIGURE_ABS_MAX:g}): it is left out of the class's median and spread"
            ]
        elif row["outlier"]:
            row["evidence"] = evidence(
                wraps[h], [verdicts[o] for o in members if o != h and values[o] is not None]
            )
        rows.append(row)
    rows.sort(
        key=lambda r: (r["value"] is None, r["value"] if r["value"] is not None else 0, r["host"])
    )
    return {
        "id": c.id,
        "folded": c.folded,
        "size": c.size,
        "n": len(figures),
        "median": median,
        "min": min(figures) if figures else None,
        "max": max(figures) if figures else None,
        "spread_pct": _pct((max(figures) - min(figures)) / abs(median))
        if len(figures) > 1 and median
        else None,
        "hosts": rows,
        "differs": [d.label for d in c.differs],
    }


def _plausible(value: float) -> bool:
    return math.isfinite(value) and abs(value) <= FIGURE_ABS_MAX


def _verdict_of(w: dict) -> dict:
    prov = w.get("provenance") if isinstance(w.get("provenance"), dict) else {}
    return prov.get("verdict") if isinstance(prov.get("verdict"), dict) else {}


def is_outlier(dev: float, figures: list, median: float) -> bool:
    """Whether a deviation from the median is an outlier: beyond 2% and 3 scaled MADs (three figures
    at least)."""
    if len(figures) < 3:
        return False  # two figures that disagree: no telling which one is off
    mad = statistics.median(abs(x - median) for x in figures) * 1.4826 / abs(median)
    return abs(dev) > max(OUTLIER_MIN, OUTLIER_MADS * mad)


def _pct(x: float | None) -> float | None:
    return None if x is None else round(100.0 * x, 2)


def evidence(wrap: dict, peers: list[dict]) -> list[str]:
    """What the envelope says about one host's run, against the other hosts of its class."""
    prov = wrap.get("provenance") if isinstance(wrap.get("provenance"), dict) else {}
    v = _verdict_of(wrap)
    out = []
    cap = v.get("sw_power_cap_fraction")
    peer_cap = _median(p.get("sw_power_cap_fraction") for p in peers)
    if cap is not None and peer_cap is not None and abs(cap - peer_cap) >= CAP_FRACTION_GAP:
        out.append(f"SW power cap in {cap:.0%} of samples (its class: {peer_cap:.0%})")
    sm = v.get("sm_mhz_median")
    peer_sm = _median(p.get("sm_mhz_median") for p in peers)
    if sm is not None and peer_sm and abs(sm - peer_sm) / peer_sm >= CLOCK_GAP:
        out.append(f"SM clock median {sm:g} MHz against {peer_sm:g} MHz in its class")
    if v.get("hw_slowdown"):
        spans = [
            f"GPU {i.get('gpu')} {i.get('what')} {_g(i.get('from_s'))}-{_g(i.get('to_s'))} s"
            for i in prov.get("intervals") or []
            if isinstance(i, dict) and i.get("what") != "other_process"
        ][:3]
        frac = v.get("hw_slowdown_fraction")
        out.append(
            "HW slowdown"
            + (f" in {frac:.0%} of samples" if frac else " (its counters grew)")
            + (f" ({'; '.join(spans)})" if spans else "")
        )
    for p in (v.get("other_processes") or [])[:3]:
        when = (
            f"appeared at {p['first_seen_s']:g} s into the run"
            if not p.get("present_before") and p.get("first_seen_s") is not None
            else "there before the run"
        )
        gpus = ",".join(str(g) for g in p.get("gpus") or [])
        out.append(f"another process, {p.get('name')} (pid {p.get('pid')}), on GPU {gpus}: {when}")
    for ch in (v.get("changes") or [])[:3]:
        out.append(
            f"the probe after differs from the probe before: {ch['field']} {ch['before']} -> "
            f"{ch['after']}"
        )
    forced = (prov.get("command") or {}).get("forced")
    if forced:
        out.append("run with --force over: " + "; ".join(forced))
    if not out:
        out.append(
            "nothing in the envelope explains it (power cap, clocks, processes and both "
            "probes match "
            "its class): look at the benchmark or its inputs"
        )
    return out


def _g(x) -> str:
    """A number of the envelope as text; one the agent could not time (null) as '?'."""
    return f"{x:g}" if _plain_number(x) else "?"


def _median(values) -> float | None:
    values = [x for x in values if x is not None]
    return statistics.median(values) if values else None


def _quote(
    ref: dict | None, findings: Findings, metric: str | None, wraps: dict, chosen_by: str
) -> dict:
    """The one figure an operator may quote: the reference class's median, with its provenance."""
    if metric is None:
        return {"value": None, "why": chosen_by}
    if ref is None or not ref["n"]:
        why = (
            "no host of the reference class ran the benchmark to a figure"
            if ref is not None
            else "no host can run a benchmark"
        )
        return {"value": None, "why": why}
    c = findings.reference
    hosts = [r["host"] for r in ref["hosts"] if r["value"] is not None and _plausible(r["value"])]
    return {
        "value": ref["median"],
        "metric": metric,
        "class": ref["id"],
        "hosts": hosts,
        "n": ref["n"],
        "spread_pct": ref["spread_pct"],
        "folded": ref["folded"],
        "keys": dict(c.keys),
        "chosen_by": findings.reference_by,
        "metric_chosen_by": chosen_by,
        "outliers": [r["host"] for r in ref["hosts"] if r["outlier"]],
        "records": [wraps[h]["source"] for h in hosts],
    }


def _not_pooled(with_figures: list[dict], findings: Findings) -> str | None:
    if len(with_figures) < 2:
        return None
    by_id = {c.id: c for c in findings.classes}
    parts = []
    for t in with_figures:
        c = by_id[t["id"]]
        if c.differs:
            parts.append(
                f"class {c.id} differs in "
                + ", ".join(f"{d.label} ({d.value} vs {d.reference})" for d in c.differs)
            )
    return (
        f"figures from {len(with_figures)} comparability classes are not pooled into one number: "
        + "; ".join(parts)
        + ". A median across them would mix machines that are not the same machine."
    )


def _verdict(not_run: list, with_figures: list) -> tuple[int, str]:
    """The benchmark's own exit code (precedence: a failed benchmark, a refusal, several
    classes)."""
    failed = [n for n in not_run if n["status"] in ("failed", "timed_out", "no_figure")]
    if failed:
        return exitcodes.BENCH_FAILED, exitcodes.MEANING[exitcodes.BENCH_FAILED]
    if any(n["status"] == "refused" for n in not_run):
        return exitcodes.REFUSED, exitcodes.MEANING[exitcodes.REFUSED]
    if len(with_figures) > 1:
        return (
            exitcodes.NOT_COMPARABLE,
            "the figures come from more than one comparability class: no pooled number",
        )
    return exitcodes.OK, exitcodes.MEANING[exitcodes.OK]
