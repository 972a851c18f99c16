"""A fact's values beside its declaration: the readers of the columns the fact table reads from a
health document itself, and the text of a typed value at the edge (each fact's renderer, the text of
a host whose GPUs disagree).

The declarations are the fact table's (`sweep.analysis.facts`); this module holds the code they
name, so that the table reads one entry per fact. Values stay typed everywhere else (`typed_value`).
"""

from __future__ import annotations

import numbers
import re
from typing import Optional

from sweep.analysis import impact as texts
from sweep.analysis.fact import NOT_RECORDED, Fact
from sweep.analysis.names import fold_numbers


def onoff(value, unknown="unknown") -> str:
    return unknown if value is None else ("on" if value else "off")


def onoff_text(column: str, unknown="unknown"):
    """The renderer of an on/off column: 'on', 'off', or `unknown` where it was not read."""
    return lambda r: onoff(r[column], unknown)


def as_number(value) -> str:
    return "?" if value is None else f"{float(value):g}"


def _compact_layout(layout: str) -> str:
    """'1g.18gb+1g.18gb+3g.71gb' -> '2x 1g.18gb + 3g.71gb'."""
    counts = {}
    for part in layout.split("+"):
        counts[part] = counts.get(part, 0) + 1
    return " + ".join(f"{n}x {p}" if n > 1 else p for p, n in counts.items())


def _pending(r, current: str, pending: str) -> str:
    """' (pending off)' where a mode waits for a reset to change; '' otherwise."""
    if r[pending] is not None and r[current] is not None and r[pending] != r[current]:
        return f" (pending {onoff(r[pending])})"
    return ""


def ecc_text(r) -> str:
    return onoff(r["ecc_current"]) + _pending(r, "ecc_current", "ecc_pending")


def mig_text(r) -> str:
    text = onoff(r["mig_current"])
    if r["mig_current"]:
        text = "on: " + (_compact_layout(r["mig_layout"]) if r["mig_layout"] else "no instances")
    return text + _pending(r, "mig_current", "mig_pending")


def clocks_text(r) -> str:
    if texts.clocks_unread(r):
        return "not read"
    if texts.default_clocks(r):
        return "default"
    return f"app clocks {r['app_sm_mhz']} MHz"


LINK_MEANING = {
    "PIX": "one PCIe switch",
    "PXB": "several PCIe switches",
    "PHB": "PCIe host bridge",
    "NODE": "host bridges of one NUMA node",
    "SYS": "across NUMA nodes",
}


def nearest_nic_text(r) -> str:
    """'NIC0 (PXB: several PCIe switches)', 'not read'."""
    if r["nearest_nic"] is None:
        return "not read"
    link = r["nearest_nic_link"]
    if link in LINK_MEANING:
        return r["nearest_nic"] + f" ({link}: {LINK_MEANING[link]})"
    return r["nearest_nic"] + f" ({link or '?'})"


def pcie_text(r) -> str:
    """'gen5 x16', 'gen? x16' (the generation not read), 'unknown'."""
    if r["pcie_width"] is None:
        return "unknown"
    generation = r["pcie_max_gen"] if r["pcie_max_gen"] is not None else "?"
    return f"gen{generation} x{r['pcie_width']}"


def power_text(r) -> str:
    enforced, default = as_number(r["power_enforced_w"]), as_number(r["power_default_w"])
    return f"{enforced} W" if enforced == default else f"{enforced} W (default {default} W)"


def link_text(r) -> str:
    # the mask selects none: no link between selected GPUs (a reading)
    if r["gpus_selected"] == 0:
        return "no GPU selected"
    if r["gpus_selected"] is not None and r["gpus_selected"] < 2:
        return "single GPU"
    link = r["worst_link"]
    if link is None:
        return "unknown"
    return f"{link} ({'NVLink' if link.startswith('NV') else LINK_MEANING.get(link, '?')})"


def nvlinks_text(r) -> str:
    """'18 of 18', 'none' (NVML: the GPU has no NVLink), 'not read'."""
    if texts.nvlinks_unread(r):
        return "not read"
    return "none" if not r["nvlink_links"] else f"{r['nvlink_active']} of {r['nvlink_links']}"


def governor_text(r) -> str:
    """'performance', 'not exposed' (sysfs has no cpufreq: a VM, or scaling left to the firmware),
    'not read'."""
    if texts.governor_unread(r):
        return "not read"
    return "not exposed" if r["cpufreq_exposed"] is False else r["cpu_governor"]


def framework_text(r) -> str:
    if r["torch"] is None:
        return "no torch found"
    runtime = f"CUDA {r['cuda_runtime']}" if r["cuda_runtime"] else "CPU-only"
    return f"torch {r['torch']}, {runtime}"


def present_text(r) -> str:
    """'8', '7 of 8 on the bus' (one fell off), '8 (bus not read)'."""
    count, bus = r["gpu_count"], r["gpus_on_bus"]
    if count is None:
        return "unknown"
    if bus is None:
        return f"{count} (bus not read)"
    return f"{count}" if bus == count else f"{count} of {bus} on the bus"


def version_text(column, absent=NOT_RECORDED):
    """The renderer of a version column: the version, or `absent` where none was recorded."""
    return lambda r: r[column] if r[column] is not None else absent


def gsp_text(r) -> str:
    if r["gsp_mode"] is None and r["gsp_version"] is None:
        return NOT_RECORDED
    if r["gsp_mode"] is False:
        return "off"
    return r["gsp_version"] or "on (version not read)"


def rate_text(value, unit) -> str:
    """4.089e12 B/s -> '4089 GB/s'; 7.76e14 FLOP/s -> '776 TFLOP/s' (the edge only)."""
    if value is None:
        return "not measured"
    return f"{value / 1e9:.0f} GB/s" if unit == "B/s" else f"{value / 1e12:.1f} TFLOP/s"


def hca_firmware(health) -> Optional[str]:
    """The firmware of the host's IB / RoCE HCAs (/sys/class/infiniband/*/fw_ver), their distinct
    versions joined by '/'; 'no HCA' on a host without one; None where it was not read."""
    ports = (health.get("host_settings") or {}).get("ib_ports")
    if not isinstance(ports, list):
        return None
    if not ports:
        return "no HCA"
    versions = sorted({p.get("fw_ver") for p in ports if isinstance(p, dict) and p.get("fw_ver")})
    return "/".join(versions) or None


def port_rate(health, pick) -> Optional[float]:
    """The slowest (`pick` min) or fastest (max) rate in Gb/s of the host's ACTIVE IB / RoCE ports;
    None where no port is active or none was read (the impact rules compare these, not the text)."""
    ports = (health.get("host_settings") or {}).get("ib_ports")
    if not isinstance(ports, list):
        return None
    rates = [
        p["rate_gbps"]
        for p in ports
        if isinstance(p, dict)
        and p.get("state") == "ACTIVE"
        and type(p.get("rate_gbps")) in (int, float)
    ]
    return float(pick(rates)) if rates else None


def mixed_text(fact: Fact, rows: list, gpus: list | None = None) -> str:
    """The text of a host whose GPUs disagree on `fact`: each value with how many GPUs have it, the
    most common first, and which GPUs have the others: "700 W x7, 250 W x1 (GPU 3)". `gpus[i]`: the
    GPU indexes of `rows[i]`; without them (a history index keeps the distinct values only) the
    values are listed, highest first: "700 W, 250 W"."""
    render = fact.per_gpu or fact.render
    if gpus is None:
        return ", ".join(sorted({render(r) for r in rows}, key=_natural, reverse=True))
    by_text: dict = {}
    for row, ix in zip(rows, gpus):
        by_text.setdefault(render(row), []).extend(ix)
    if len(by_text) == 1:
        return next(iter(by_text))
    ranked = sorted(by_text.items(), key=lambda t: (-len(t[1]), _first(t[1])))
    return ", ".join(
        f"{text} x{len(ix)}" + (f" (GPU {fold_numbers(ix)})" if n else "")
        for n, (text, ix) in enumerate(ranked)
    )


def _natural(text: str):
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", text)]


def _first(indexes):
    return min((int(i) for i in indexes if isinstance(i, numbers.Integral)), default=0)


def typed_value(fact: Fact, row: dict):
    """The typed value of one row of the fact's columns: a tuple, or None when none of them was
    read."""
    values = tuple(row[c] for c in fact.columns)
    return None if all(v is None for v in values) else values
