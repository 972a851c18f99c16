"""A fleet benchmark's figures, compared only within a comparability class (`sweep run --wrap`).

The classes come from the probes taken *before* each command (`sweep.analysis.compare`). Per
class: the median, the spread and each host's figure; a host far from its class's median is an
outlier, named with the envelope evidence that explains it (SW power cap fraction, SM clock
median against its class, a process that appeared during the run, a HW slowdown, a probe after
that differs from the probe before, a forced run). Figures of two classes are never pooled: the
section says which keys keep them apart. The one figure an operator may quote is the median of
the reference class, with its provenance (hosts, keys, command, records).
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from sweep.analysis.compare import Findings
from sweep.analysis.fleet import Fleet, rows_at
from sweep import exitcodes

OUTLIER_MIN = 0.02  # a figure within 2% of its class's median is never an outlier
OUTLIER_MADS = 3.0  # ... nor one within 3 scaled median absolute deviations
CAP_FRACTION_GAP = 0.10
CLOCK_GAP = 0.02


def wrap_records(fleet: Fleet) -> dict[str, dict]:
    """host -> the `wrap` section of its record, for the hosts whose record holds one."""
    out = {}
    for row in rows_at(fleet.hosts[["host", "source"]], range(len(fleet.hosts))):
        path = Path(row["source"])
        if path.suffix != ".json" or not path.is_file():
            continue
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and isinstance(rec.get("wrap"), dict):
            out[row["host"]] = dict(rec["wrap"], source=str(path))
    return out


def bench_section(fleet: Fleet, findings: Findings) -> dict | None:
    """The benchmark part of the report (summary.json "benchmark"), or None when nothing was wrapped."""
    wraps = wrap_records(fleet)
    if not wraps:
        return None
    metric = _primary_metric(wraps)
    class_of = {h: c.id for c in findings.classes for h in c.hosts}
    classes, outliers = [], []
    for c in findings.classes:
        table = _class_table(c, wraps, metric)
        if table is not None:
            table["reference"] = c is findings.reference
            classes.append(table)
            outliers += [dict(h, **{"class": c.id}) for h in table["hosts"] if h["outlier"]]
    not_run = [{"host": h, "status": w["status"], "why": w["why"], "class": class_of.get(h)}
               for h, w in sorted(wraps.items()) if w["status"] != "ok"]
    ref = next((t for t in classes if t["reference"]), None)
    with_figures = [t for t in classes if t["n"]]
    section = {
        "metric": metric, "unit": _unit(wraps, metric),
        "metrics": sorted({k for w in wraps.values() for k in (w.get("figures") or {})}),
        "command": _command(wraps), "hosts_wrapped": len(wraps),
        "hosts_with_figure": sum(t["n"] for t in classes), "classes": classes, "outliers": outliers,
        "not_run": not_run, "quote": _quote(ref, findings, metric, wraps),
        "not_pooled": _not_pooled(with_figures, findings),
    }
    section["exit_code"], section["exit_meaning"] = _verdict(not_run, with_figures)
    return section


def _primary_metric(wraps: dict) -> str | None:
    for w in wraps.values():
        for name in w.get("figures") or {}:
            return name
    return None


def _unit(wraps: dict, metric: str | None) -> str | None:
    return next(((w.get("figures") or {}).get(metric, {}).get("unit") for w in wraps.values()
                 if (w.get("figures") or {}).get(metric, {}).get("unit")), None)


def _command(wraps: dict) -> list | None:
    for w in wraps.values():
        argv = ((w.get("provenance") or {}).get("command") or {}).get("argv")
        if argv:
            return argv
    return None


def _figure(w: dict, metric: str | None) -> float | None:
    if w.get("status") != "ok" or metric is None:
        return None
    return ((w.get("figures") or {}).get(metric) or {}).get("value")


def _class_table(c, wraps: dict, metric: str | None) -> dict | None:
    members = [h for h in c.hosts if h in wraps]
    if not members:
        return None
    values = {h: _figure(wraps[h], metric) for h in members}
    figures = [v for v in values.values() if v is not None]
    median = statistics.median(figures) if figures else None
    verdicts = {h: ((wraps[h].get("provenance") or {}).get("verdict") or {}) for h in members}
    rows = []
    for h in members:
        v = values[h]
        dev = None if v is None or not median else (v - median) / abs(median)
        row = {"host": h, "value": v, "status": wraps[h]["status"], "deviation_pct": _pct(dev),
               "outlier": bool(dev is not None and _is_outlier(dev, figures, median)),
               "envelope": verdicts[h].get("summary"), "evidence": []}
        if row["outlier"]:
            row["evidence"] = evidence(wraps[h], [verdicts[o] for o in members if o != h and values[o] is not None])
        rows.append(row)
    rows.sort(key=lambda r: (r["value"] is None, r["value"] if r["value"] is not None else 0, r["host"]))
    return {"id": c.id, "folded": c.folded, "size": c.size, "n": len(figures), "median": median,
            "min": min(figures) if figures else None, "max": max(figures) if figures else None,
            "spread_pct": _pct((max(figures) - min(figures)) / abs(median)) if len(figures) > 1 and median else None,
            "hosts": rows, "differs": [d.label for d in c.differs]}


def _is_outlier(dev: float, figures: list, median: float) -> bool:
    if len(figures) < 3:
        return False  # two figures that disagree: no telling which one is off
    mad = statistics.median(abs(x - median) for x in figures) * 1.4826 / abs(median)
    return abs(dev) > max(OUTLIER_MIN, OUTLIER_MADS * mad)


def _pct(x: float | None) -> float | None:
    return None if x is None else round(100.0 * x, 2)


def evidence(wrap: dict, peers: list[dict]) -> list[str]:
    """What the envelope says about one host's run, against the other hosts of its class."""
    prov = wrap.get("provenance") or {}
    v = prov.get("verdict") or {}
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
        spans = [f"GPU {i['gpu']} {i['what']} {i['from_s']:g}-{i['to_s']:g} s" for i in prov.get("intervals") or []
                 if i.get("what") != "other_process"][:3]
        frac = v.get("hw_slowdown_fraction")
        out.append("HW slowdown" + (f" in {frac:.0%} of samples" if frac else " (its counters grew)") +
                   (f" ({'; '.join(spans)})" if spans else ""))
    for p in (v.get("other_processes") or [])[:3]:
        when = (f"appeared at {p['first_seen_s']:g} s into the run" if not p.get("present_before")
                and p.get("first_seen_s") is not None else "there before the run")
        gpus = ",".join(str(g) for g in p.get("gpus") or [])
        out.append(f"another process, {p.get('name')} (pid {p.get('pid')}), on GPU {gpus}: {when}")
    for ch in (v.get("changes") or [])[:3]:
        out.append(f"the probe after differs from the probe before: {ch['field']} {ch['before']} -> {ch['after']}")
    forced = (prov.get("command") or {}).get("forced")
    if forced:
        out.append("run with --force over: " + "; ".join(forced))
    if not out:
        out.append("nothing in the envelope explains it (power cap, clocks, processes and both probes match "
                   "its class): look at the benchmark or its inputs")
    return out


def _median(values) -> float | None:
    values = [x for x in values if x is not None]
    return statistics.median(values) if values else None


def _quote(ref: dict | None, findings: Findings, metric: str | None, wraps: dict) -> dict:
    """The one figure an operator may quote: the reference class's median, with its provenance."""
    if ref is None or not ref["n"]:
        why = ("no host of the reference class ran the benchmark to a figure" if ref is not None
               else "no host can run a benchmark")
        return {"value": None, "why": why}
    c = findings.reference
    hosts = [r["host"] for r in ref["hosts"] if r["value"] is not None]
    return {"value": ref["median"], "metric": metric, "class": ref["id"], "hosts": hosts, "n": ref["n"],
            "spread_pct": ref["spread_pct"], "folded": ref["folded"], "keys": dict(c.keys),
            "chosen_by": findings.reference_by, "outliers": [r["host"] for r in ref["hosts"] if r["outlier"]],
            "records": [wraps[h]["source"] for h in hosts]}


def _not_pooled(with_figures: list[dict], findings: Findings) -> str | None:
    if len(with_figures) < 2:
        return None
    by_id = {c.id: c for c in findings.classes}
    parts = []
    for t in with_figures:
        c = by_id[t["id"]]
        if c.differs:
            parts.append(f"class {c.id} differs in " + ", ".join(f"{d.label} ({d.value} vs {d.reference})"
                                                                  for d in c.differs))
    return (f"figures from {len(with_figures)} comparability classes are not pooled into one number: "
            + "; ".join(parts) + ". A median across them would mix machines that are not the same machine.")


def _verdict(not_run: list, with_figures: list) -> tuple[int, str]:
    """The benchmark's own exit code (precedence: a failed benchmark, a refusal, several classes)."""
    failed = [n for n in not_run if n["status"] in ("failed", "timed_out", "no_figure")]
    if failed:
        return exitcodes.BENCH_FAILED, exitcodes.MEANING[exitcodes.BENCH_FAILED]
    if any(n["status"] == "refused" for n in not_run):
        return exitcodes.REFUSED, exitcodes.MEANING[exitcodes.REFUSED]
    if len(with_figures) > 1:
        return exitcodes.NOT_COMPARABLE, "the figures come from more than one comparability class: no pooled number"
    return exitcodes.OK, exitcodes.MEANING[exitcodes.OK]
