"""Judging the speed tier: each GPU's figures against its model, its link and its class.

`speed_section(fleet, findings, baseline=None)` is summary.json's "speed" (None when no host ran the
tier). Per GPU and figure (validated by `sweep.analysis.speed_record`; a rejected field is listed
under "rejected", named by host and field, never judged):

- against the model: the operator's known-good hosts first (`baseline_references`, from a
  `sweep baseline set` folder), else the reference table (`sweep.analysis.speed_reference`).
  Below 90% of the reference: warning; below 75%: broken.
- PCIe against the GPU's own link too (its generation and width: a gen5 x16 link carries 63 GB/s
  raw, a good pinned copy ~85% of it), with the same thresholds.
- against the class: a host whose slowest GPU is more than a few scaled MADs from its class's
  median (as the fleet benchmark judges, `sweep.analysis.bench.is_outlier`) is named with the
  envelope's evidence (power cap, SW cap and HW slowdown during the tier, other processes).
  Classes stay the unit: figures of two classes are never pooled.
- a comparable class slow as a whole: "pool of 16: bf16 GEMM at 80% of the H200 reference; all 16
  at 500 W" goes to the headline (the report's top box).
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from sweep.analysis.bench import is_outlier
from sweep.analysis.compare import Findings
from sweep.analysis.fleet import Fleet, rows_at
from sweep.analysis.names import fold_hosts
from sweep.analysis.speed_reference import (
    BROKEN_BELOW,
    FIGURES,
    HOST_FIGURES,
    LABELS,
    PCIE_EFFICIENCY,
    UNITS,
    WARNING_BELOW,
    link_raw_bps,
    reference_of,
)
from sweep.analysis.speed_record import read_speed
from sweep.text import plural

GPU_COLUMNS = [
    "host",
    "index",
    "name",
    "power_enforced_w",
    "power_default_w",
    "pcie_max_gen",
    "pcie_width",
    "processes",
    "speed_limit_w",
    "speed_sw_power_cap",
    "speed_hw_slowdown",
    "speed_sm_mhz",
    *(f"speed_{f}" for f in FIGURES),
]
ROWS_MAX = 2000  # GPU rows summary.json lists (the worst first); the CSV holds every GPU


def rate(value, unit: str) -> str:
    """A figure as a person reads it: '4089 GB/s', '776.0 TFLOP/s'."""
    if value is None:
        return "?"
    return f"{value / 1e9:.0f} GB/s" if unit == "B/s" else f"{value / 1e12:.1f} TFLOP/s"


def severity_of(fraction) -> str:
    if fraction is None:
        return "unjudged"
    return "broken" if fraction < BROKEN_BELOW else "warning" if fraction < WARNING_BELOW else "ok"


def baseline_references(baseline: dict | None) -> dict:
    """(GPU model, figure) -> {"value", "source"}: the median of each figure over a
    baseline's hosts (`sweep.audit.baseline.read_baseline`: host -> its file, with the
    health.json it was set from)."""
    values, hosts = defaultdict(list), defaultdict(set)
    for host, data in (baseline or {}).items():
        health = data.get("health") if isinstance(data, dict) else None
        record = read_speed(health) if isinstance(health, dict) else None
        if record is None:
            continue
        names = {
            g.get("index"): g.get("name") for g in health.get("gpus") or () if isinstance(g, dict)
        }
        for index, figures in record.gpus.items():
            for figure, value in figures.items():
                values[(names.get(index), figure)].append(value)
                hosts[(names.get(index), figure)].add(host)
    return {
        key: {
            "value": statistics.median(v),
            "source": (
                f"baseline: median of {plural(len(hosts[key]), 'known-good host')} "
                f"({fold_hosts(sorted(hosts[key]))})"
            ),
            "model": key[0],
            "baseline": True,
        }
        for key, v in values.items()
        if isinstance(key[0], str)
    }


def _reference(model, figure: str, refs: dict) -> dict | None:
    return refs.get((model, figure)) or reference_of(model, figure)


def _evidence(r: dict, forced: bool) -> list[str]:
    """What the envelope saw on one GPU during the tier (and what the probe saw of it)."""
    out = []
    limit = r["speed_limit_w"] if r["speed_limit_w"] is not None else r["power_enforced_w"]
    if limit is not None and r["power_default_w"] is not None and limit < r["power_default_w"]:
        out.append(f"power capped at {limit:g} W (default {r['power_default_w']:g} W)")
    if r["speed_sw_power_cap"] is not None and r["speed_sw_power_cap"] >= 0.10:
        out.append(f"SW power cap in {r['speed_sw_power_cap']:.0%} of the tier's samples")
    if r["speed_hw_slowdown"]:
        out.append(f"HW slowdown in {r['speed_hw_slowdown']:.0%} of the tier's samples")
    if r["processes"]:
        out.append(f"{plural(r['processes'], 'other process', 'other processes')} on the GPU")
    if forced:
        out.append("measured with --force over other processes")
    return out


def _judge_gpu(r: dict, model, refs: dict) -> list[dict]:
    """The judgments of one GPU: one per figure with a reference, one per PCIe figure
    against its link."""
    out = []
    for figure in FIGURES:
        value = r[f"speed_{figure}"]
        if value is None:
            continue
        ref = _reference(model, figure, refs)
        if ref is not None:
            fraction = value / ref["value"]
            out.append(
                {
                    "figure": figure,
                    "against": "reference",
                    "value": value,
                    "reference": ref["value"],
                    "reference_model": ref["model"],
                    "reference_source": ref["source"],
                    "fraction": round(fraction, 4),
                    "severity": severity_of(fraction),
                }
            )
        raw = (
            link_raw_bps(r["pcie_max_gen"], r["pcie_width"]) if figure.startswith("pcie_") else None
        )
        if raw is not None:
            fraction = value / (raw * PCIE_EFFICIENCY)
            out.append(
                {
                    "figure": figure,
                    "against": "link",
                    "value": value,
                    "reference": raw * PCIE_EFFICIENCY,
                    "link": f"gen{r['pcie_max_gen']} x{r['pcie_width']}",
                    "link_raw": raw,
                    "fraction": round(fraction, 4),
                    "severity": severity_of(fraction),
                }
            )
    return out


def _message(host: str, gpu, j: dict) -> str:
    unit = UNITS[j["figure"]]
    what = f"{host} GPU {gpu}: {LABELS[j['figure']]} {rate(j['value'], unit)}"
    if j["against"] == "link":
        return (
            f"{what} is {j['fraction']:.0%} of what its PCIe {j['link']} link carries "
            f"({rate(j['link_raw'], unit)} raw, ~{rate(j['reference'], unit)} expected of a pinned "
            "copy)"
        )
    return (
        f"{what} is {j['fraction']:.0%} of the {j['reference_model']} reference "
        f"({rate(j['reference'], unit)})"
    )


def _gpu_rows(fleet: Fleet) -> list[dict]:
    g = fleet.gpus
    measured = g[[f"speed_{f}" for f in FIGURES]].notna().any(axis=1).to_numpy(dtype=bool)
    return rows_at(g[GPU_COLUMNS], [i for i, m in enumerate(measured) if m])


def speed_section(fleet: Fleet, findings: Findings, baseline: dict | None = None) -> dict | None:
    """summary.json "speed": the tier's figures and judgments (None when no host ran the tier)."""
    hosts = fleet.hosts
    ran = hosts["speed_status"].notna().to_numpy(dtype=bool)
    if not ran.any():
        return None
    refs = baseline_references(baseline)
    info = rows_at(hosts[list(HOST_COLUMNS)], [i for i, r in enumerate(ran) if r])
    contended = {h["host"]: h["speed_contended"] for h in info if h["speed_contended"]}
    gpus, judgments = _judge_gpus(fleet, findings, refs, info, contended)
    judgments.sort(key=lambda j: (j["severity"] != "broken", j["fraction"], j["host"]))
    section = {
        "hosts_ran": len(info),
        "gpus_measured": len(gpus),
        "status": {h["host"]: h["speed_status"] for h in info},
        "reasons": {h["host"]: h["speed_reason"] for h in info if h["speed_reason"]},
        "not_measured": [
            {"host": h["host"], "status": h["speed_status"], "reason": h["speed_reason"]}
            for h in info
            if h["speed_status"] in ("refused", "failed", "invalid")
        ],
        "rejected": [
            _rejected(h["host"], line)
            for h in info
            for line in (h["speed_rejected"] or "").splitlines()
            if line
        ],
        "skipped": [
            _skipped(h["host"], line)
            for h in info
            for line in (h["speed_skipped"] or "").splitlines()
        ],
        "host_figures": {
            h["host"]: {f: h[f"speed_{f}"] for f in HOST_FIGURES if h[f"speed_{f}"] is not None}
            for h in info
        },
        "contended": [{"host": h, "processes": line} for h, line in sorted(contended.items())],
        "judgments": judgments,
        "gpus": sorted(gpus, key=_worst)[:ROWS_MAX],
        "gpus_not_listed": max(0, len(gpus) - ROWS_MAX),
        "references": _references_used(gpus, refs),
        "thresholds": {"warning_below": WARNING_BELOW, "broken_below": BROKEN_BELOW},
    }
    # contended figures are recorded, never judged
    quiet = [g for g in gpus if g["host"] not in contended]
    section["class_outliers"] = _class_outliers(quiet, findings)
    section["slow_pools"] = _slow_pools(quiet, findings, fleet)
    section["broken_hosts"] = sorted({j["host"] for j in judgments if j["severity"] == "broken"})
    section["headline"] = headline_lines(section)
    return section


def _judge_gpus(fleet: Fleet, findings: Findings, refs: dict, info: list, contended: dict):
    """(each measured GPU's figures, judgments and evidence; the warning and broken judgments of
    the GPUs not contended, each with its host, GPU and message)."""
    forced = {h["host"]: bool(h["speed_forced"]) for h in info}
    class_of = {h: c.id for c in findings.classes for h in c.hosts}
    gpus, judgments = [], []
    for r in _gpu_rows(fleet):
        host = str(r["host"])
        js = _judge_gpu(r, r["name"], refs)
        evidence = _evidence(r, forced.get(host, False)) + (
            [f"contended: {contended[host]} appeared during the tier"] if host in contended else []
        )
        for j in js:
            # recorded, not judged
            if j["severity"] in ("warning", "broken") and host not in contended:
                judgments.append(
                    dict(
                        j,
                        host=host,
                        gpu=r["index"],
                        message=_message(host, r["index"], j),
                        evidence=evidence,
                    )
                )
        gpus.append(
            {
                "host": host,
                "gpu": r["index"],
                "model": r["name"],
                "class": class_of.get(host),
                "figures": {f: r[f"speed_{f}"] for f in FIGURES if r[f"speed_{f}"] is not None},
                "judgments": js,
                "evidence": evidence,
            }
        )
    return gpus, judgments


# The hosts' columns the section reads, of the hosts that ran the tier.
HOST_COLUMNS = (
    "host",
    "speed_status",
    "speed_reason",
    "speed_rejected",
    "speed_forced",
    "speed_skipped",
    "speed_p2p",
    "speed_allreduce",
    "speed_contended",
)


def _skipped(host: str, line: str) -> dict:
    """A figure the tier skipped, said as such (never a number): {host, gpu, figure, reason}."""
    where, _, reason = line.partition(": ")
    gpu, _, figure = where.partition(" ")
    return {
        "host": host,
        "gpu": int(gpu) if gpu.isdigit() else None,
        "figure": figure,
        "reason": reason,
    }


def _rejected(host: str, line: str) -> dict:
    field, _, why = line.partition(": ")
    detail = f"{field} {why}; the figure is left out (not shown as a measurement)"
    return {
        "host": host,
        "field": field,
        "detail": detail,
        "message": f"{host}: {detail}: probe the host again with this sweep's agent",
    }


def _worst(g: dict):
    fractions = [j["fraction"] for j in g["judgments"]]
    return (
        min(fractions) if fractions else 9.0,
        g["host"],
        g["gpu"] if g["gpu"] is not None else -1,
    )


def _references_used(gpus: list, refs: dict) -> list[dict]:
    seen = {}
    for g in gpus:
        for figure in FIGURES:
            ref = _reference(g["model"], figure, refs)
            key = (g["model"], figure)
            if key not in seen:
                seen[key] = {
                    "model": g["model"],
                    "figure": figure,
                    "unit": UNITS[figure],
                    "value": ref["value"] if ref else None,
                    "source": ref["source"]
                    if ref
                    else "unknown: no reference for this model and figure",
                    "by": ("baseline" if ref.get("baseline") else "table") if ref else None,
                }
    return list(seen.values())


def _per_host(gpus: list, figure: str) -> dict:
    """host -> its slowest GPU's figure (a synchronous job runs at the pace of its slowest GPU)."""
    out = {}
    for g in gpus:
        v = g["figures"].get(figure)
        if v is not None:
            out[g["host"]] = min(v, out.get(g["host"], v))
    return out


def _class_outliers(gpus: list, findings: Findings) -> list[dict]:
    """Hosts far from their class's median, per figure and per class (never across classes)."""
    out = []
    evidence = defaultdict(list)
    for g in gpus:
        evidence[g["host"]] += [e for e in g["evidence"] if e not in evidence[g["host"]]]
    for c in findings.classes:
        members = set(c.hosts)
        for figure in FIGURES:
            values = {h: v for h, v in _per_host(gpus, figure).items() if h in members}
            if len(values) < 3:
                continue
            figures = list(values.values())
            median = statistics.median(figures)
            for host, v in sorted(values.items()):
                dev = (v - median) / median
                if is_outlier(dev, figures, median):
                    unit = UNITS[figure]
                    out.append(
                        {
                            "host": host,
                            "class": c.id,
                            "figure": figure,
                            "value": v,
                            "median": median,
                            "deviation_pct": round(100 * dev, 2),
                            "evidence": evidence[host]
                            or [
                                "nothing in the envelope explains it (power cap, slowdown and "
                                "processes match its class): look at the card"
                            ],
                            "detail": (
                                f"{LABELS[figure]} {rate(v, unit)} against its class "
                                f"{c.id}'s median {rate(median, unit)} ({100 * dev:+.0f}%)"
                            ),
                        }
                    )
                    out[-1]["message"] = f"{host}: {out[-1]['detail']}"
    return out


def _slow_pools(gpus: list, findings: Findings, fleet: Fleet) -> list[dict]:
    """Classes whose GPUs sit below the warning line of their reference as a whole (the
    median fraction)."""
    out = []
    limits = _power_limits(fleet)
    for c in findings.classes:
        members = set(c.hosts)
        mine = [g for g in gpus if g["host"] in members]
        for figure in FIGURES:
            fractions = [
                j["fraction"]
                for g in mine
                for j in g["judgments"]
                if j["figure"] == figure and j["against"] == "reference"
            ]
            if not fractions or statistics.median(fractions) >= WARNING_BELOW:
                continue
            model = next(
                j["reference_model"]
                for g in mine
                for j in g["judgments"]
                if j["figure"] == figure and j["against"] == "reference"
            )
            hosts = sorted({g["host"] for g in mine})
            watts = {limits.get(h) for h in hosts}
            name = "pool" if c is findings.reference else f"class {c.id}"
            text = (
                f"{name} of {len(hosts)}: {LABELS[figure]} at {statistics.median(fractions):.0%} "
                f"of the {model} reference"
            )
            if len(watts) == 1 and None not in watts:
                text += f"; all {len(hosts)} at {watts.pop():g} W"
            out.append(
                {
                    "class": c.id,
                    "reference": c is findings.reference,
                    "figure": figure,
                    "hosts": len(hosts),
                    "median_fraction": round(statistics.median(fractions), 4),
                    "message": text,
                }
            )
    return out


def _power_limits(fleet: Fleet) -> dict:
    """host -> the one enforced power limit of its GPUs (None where they differ)."""
    g = fleet.gpus[["host", "power_enforced_w"]]
    out = {}
    for host, limits in g.groupby("host", observed=True)["power_enforced_w"]:
        values = set(limits.dropna().tolist())
        out[str(host)] = values.pop() if len(values) == 1 else None
    return out


def headline_lines(section: dict, broken: bool = True) -> list[str]:
    """The section in a few lines: its slow classes, its broken hosts' worst figures (`broken`:
    False where a
    view says each broken host's figure as its cause already), its rejected figures."""
    lines = [p["message"] for p in section["slow_pools"]]
    worst = {}
    for j in section["judgments"]:  # sorted worst first: each host's worst broken figure
        if j["severity"] == "broken":
            worst.setdefault(j["host"], j)
    if worst and broken:
        shown = list(worst.values())[:3]
        lines.append(
            f"speed: {plural(len(worst), 'host')} below {BROKEN_BELOW:.0%} of reference "
            f"({fold_hosts(sorted(worst))}): "
            + "; ".join(j["message"] for j in shown)
            + (f"; and {len(worst) - 3} more" if len(worst) > 3 else "")
        )
    if section["rejected"]:
        hosts = sorted({r["host"] for r in section["rejected"]})
        lines.append(
            f"speed: {plural(len(section['rejected']), 'figure')} of {plural(len(hosts), 'host')} "
            f"rejected as no measurement ({fold_hosts(hosts)}): {section['rejected'][0]['message']}"
        )
    return lines


__all__ = ["baseline_references", "headline_lines", "rate", "severity_of", "speed_section"]
