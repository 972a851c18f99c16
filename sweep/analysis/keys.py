"""The comparability keys: what two hosts must share to be benchmarked together, per host and per GPU.

`host_keys(fleet)` turns the fleet's frames into one label per key per host (the GPUs the mask
selects decide a host's value; GPUs that differ inside one host give a "mixed" value).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweep.analysis.fleet import Fleet, rows_at

KEYS = {
    "gpu_model": "GPU model", "memory": "GPU memory", "gpu_count": "GPUs selected", "driver": "Driver",
    "cuda_driver": "CUDA (driver)", "framework": "Framework build", "ecc": "ECC", "power_limit": "Power limit",
    "mig": "MIG", "persistence": "Persistence mode", "compute_mode": "Compute mode",
    "confidential_compute": "Confidential computing", "clock_policy": "Clock policy", "link": "Worst link",
    "gpus_present": "GPUs present", "pcie": "PCIe link", "nvlinks": "NVLinks active", "ib_rate": "IB/RoCE rate",
    "cpu_governor": "CPU governor",
}
LINK_MEANING = {"PIX": "one PCIe switch", "PXB": "several PCIe switches", "PHB": "PCIe host bridge",
                "NODE": "host bridges of one NUMA node", "SYS": "across NUMA nodes"}


def factorize(frame: pd.DataFrame, columns) -> tuple[np.ndarray, np.ndarray]:
    """(combination id per row, position of the first row of each combination) over `columns`."""
    key = np.zeros(len(frame), dtype=np.int64)
    for column in columns:
        codes, uniques = pd.factorize(frame[column])
        key = pd.factorize(key * (len(uniques) + 1) + codes + 1)[0].astype(np.int64)
    n = int(key.max()) + 1 if len(key) else 0
    first = np.full(n, -1, dtype=np.int64)
    first[key[::-1]] = np.arange(len(key) - 1, -1, -1)
    return key, first


def _onoff(value, unknown="unknown") -> str:
    return unknown if value is None else ("on" if value else "off")


def as_number(value) -> str:
    return "?" if value is None else f"{float(value):g}"


def _compact_layout(layout: str) -> str:
    """'1g.18gb+1g.18gb+3g.71gb' -> '2x 1g.18gb + 3g.71gb'."""
    counts = {}
    for part in layout.split("+"):
        counts[part] = counts.get(part, 0) + 1
    return " + ".join(f"{n}x {p}" if n > 1 else p for p, n in counts.items())


def _ecc(r) -> str:
    text = _onoff(r["ecc_current"])
    if r["ecc_pending"] is not None and r["ecc_current"] is not None and r["ecc_pending"] != r["ecc_current"]:
        text += f" (pending {_onoff(r['ecc_pending'])})"
    return text


def _mig(r) -> str:
    text = _onoff(r["mig_current"])
    if r["mig_current"]:
        text = "on: " + (_compact_layout(r["mig_layout"]) if r["mig_layout"] else "no instances")
    if r["mig_pending"] is not None and r["mig_current"] is not None and r["mig_pending"] != r["mig_current"]:
        text += f" (pending {_onoff(r['mig_pending'])})"
    return text


def _clocks(r) -> str:
    # NVML often has no default application clock (H100/H200): the max SM clock is the default then
    baseline = r["default_app_sm_mhz"] if r["default_app_sm_mhz"] is not None else r["sm_max_mhz"]
    if r["app_sm_mhz"] is None or baseline is None or r["app_sm_mhz"] == baseline:
        return "default"
    return f"app clocks {r['app_sm_mhz']} MHz"


def _power(r) -> str:
    enforced, default = as_number(r["power_enforced_w"]), as_number(r["power_default_w"])
    return f"{enforced} W" if enforced == default else f"{enforced} W (default {default} W)"


# per-GPU key -> (raw GPU columns, text of one combination)
GPU_KEY_TEXT = {
    "gpu_model": (("name",), lambda r: r["name"] or "unknown"),
    "memory": (("memory_total_bytes",),
               lambda r: "unknown" if r["memory_total_bytes"] is None else f"{r['memory_total_bytes'] // 2**20} MiB"),
    "ecc": (("ecc_current", "ecc_pending"), _ecc),
    "power_limit": (("power_enforced_w", "power_default_w"), _power),
    "mig": (("mig_current", "mig_pending", "mig_layout"), _mig),
    "persistence": (("persistence_mode",), lambda r: _onoff(r["persistence_mode"])),
    "compute_mode": (("compute_mode",), lambda r: r["compute_mode"] or "unknown"),
    "clock_policy": (("app_sm_mhz", "default_app_sm_mhz", "sm_max_mhz"), _clocks),
    # the link's generation capability and its trained width: the current generation drops at idle
    "pcie": (("pcie_max_gen", "pcie_width"), lambda r: "unknown" if r["pcie_width"] is None else
             f"gen{r['pcie_max_gen'] if r['pcie_max_gen'] is not None else '?'} x{r['pcie_width']}"),
    "nvlinks": (("nvlink_links", "nvlink_active"), lambda r: "none" if not r["nvlink_links"] else
                f"{r['nvlink_active']} of {r['nvlink_links']}"),
}


def _link(r) -> str:
    if r["gpus_selected"] is not None and r["gpus_selected"] < 2:
        return "single GPU"
    link = r["worst_link"]
    if link is None:
        return "unknown"
    return f"{link} ({'NVLink' if link.startswith('NV') else LINK_MEANING.get(link, '?')})"


def _framework(r) -> str:
    if r["torch"] is None:
        return "no torch found"
    return f"torch {r['torch']}, " + (f"CUDA {r['cuda_runtime']}" if r["cuda_runtime"] else "CPU-only")


# host-level key -> (raw host columns, text of one combination)
HOST_KEY_TEXT = {
    "gpu_count": (("gpus_selected",), lambda r: "unknown" if r["gpus_selected"] is None else
                  f"{r['gpus_selected']} GPU{'' if r['gpus_selected'] == 1 else 's'}"),
    "driver": (("driver",), lambda r: r["driver"] or "unknown"),
    "cuda_driver": (("cuda_driver",), lambda r: f"CUDA {r['cuda_driver'] or '?'}"),
    "framework": (("torch", "cuda_runtime"), _framework),
    "confidential_compute": (("confidential_compute",), lambda r: _onoff(r["confidential_compute"], "not reported")),
    "link": (("worst_link", "gpus_selected"), _link),
    "gpus_present": (("gpu_count", "gpus_on_bus"), lambda r: _present(r)),
    "ib_rate": (("ib_rates",), lambda r: r["ib_rates"] or "not read"),
    "cpu_governor": (("cpu_governor",), lambda r: r["cpu_governor"] or "not exposed"),
}


def _present(r) -> str:
    """'8', '7 of 8 on the bus' (one fell off), '8 (bus not read)'."""
    count, bus = r["gpu_count"], r["gpus_on_bus"]
    if count is None:
        return "unknown"
    if bus is None:
        return f"{count} (bus not read)"
    return f"{count}" if bus == count else f"{count} of {bus} on the bus"


@dataclass(frozen=True)
class GpuKeys:
    """How the per-GPU keys were read: the rows used, their combination ids and texts."""

    host_codes: np.ndarray
    gpu_index: np.ndarray
    combos: dict
    texts: dict
    power_enforced: list


def host_keys(fleet: Fleet) -> tuple[pd.DataFrame, pd.DataFrame, GpuKeys]:
    """(keys, mixed, gpu_keys): per host one text per key (categoricals, NA for a failed host);
    per host and per-GPU key whether its selected GPUs disagree; the per-GPU readings behind them.

    Host-level values come from the GPUs the mask selects (all GPUs when it selects none, so that
    an excluded host still shows what it has). A host whose GPUs disagree gets the values joined
    ("700/250 W").
    """
    hosts, gpus = fleet.hosts, fleet.gpus
    n_hosts = len(hosts)
    host_codes = gpus["host"].cat.codes.to_numpy(dtype=np.int64)
    selected = gpus["selected"].fillna(False).to_numpy(dtype=bool)
    has_selection = np.bincount(host_codes[selected], minlength=n_hosts) > 0
    use = selected | ~has_selection[host_codes]
    used = gpus[use]
    used_hosts = host_codes[use]
    ok = (hosts["status"] == "ok").to_numpy()
    columns, mixed, combos, texts = {}, {}, {}, {}
    power_enforced = []
    for key, (raw, text) in GPU_KEY_TEXT.items():
        combo, first = factorize(used, raw)
        records = rows_at(used[list(raw)], first)  # only the key's columns: 10x faster on 8,000 GPUs
        labels = [text(r) for r in records]
        combos[key], texts[key] = combo, labels
        if key == "power_limit":
            power_enforced = [(r["power_enforced_w"], r["power_default_w"]) for r in records]
        columns[key], mixed[key] = _per_host(used_hosts, combo, labels, n_hosts, key, power_enforced)
    for key, (raw, text) in HOST_KEY_TEXT.items():
        combo, first = factorize(hosts, raw)
        labels = [text(r) for r in rows_at(hosts[list(raw)], first)]
        columns[key] = _categorical(np.where(ok, combo, -1), labels)
    index = pd.Index(hosts["host"], name="host")
    keys = pd.DataFrame({key: columns[key] for key in KEYS}, index=index)
    for key in KEYS:  # a failed host has no key values; a probed host without the reading has "unknown"
        column = keys[key]
        gap = column.isna().to_numpy() & ok
        if gap.any():
            if "unknown" not in column.cat.categories:
                column = column.cat.add_categories(["unknown"])
            column[gap] = "unknown"
        keys[key] = column.where(ok)
    mixed = pd.DataFrame(mixed, index=index)
    return keys, mixed, GpuKeys(used_hosts, used["index"].to_numpy(dtype=object), combos, texts, power_enforced)


def _unique(labels) -> list:
    """Categories from texts that may repeat (two raw combinations can read the same)."""
    return list(dict.fromkeys(labels))


def _categorical(combo: np.ndarray, labels: list) -> pd.Categorical:
    """The texts of combination ids (-1: NA) as a Categorical; equal texts share one category."""
    categories = _unique(labels)
    position = {label: i for i, label in enumerate(categories)}
    remap = np.array([position[label] for label in labels] + [-1], dtype=np.int64)
    return pd.Categorical.from_codes(remap[combo], categories=categories)


def _per_host(host_codes, combo, labels, n_hosts, key, power):
    """(Categorical of each host's text, whether the host's GPUs disagree) from per-GPU combination ids."""
    n_combos = max(len(labels), 1)
    pairs = np.unique(host_codes * n_combos + combo)
    pair_host, pair_combo = pairs // n_combos, pairs % n_combos
    count = np.bincount(pair_host, minlength=n_hosts)
    categories = _unique(labels)
    position = {label: i for i, label in enumerate(categories)}
    remap = np.array([position[label] for label in labels] + [-1], dtype=np.int64)
    codes = np.full(n_hosts, -1, dtype=np.int64)
    single = count[pair_host] == 1
    codes[pair_host[single]] = remap[pair_combo[single]]
    joined = {}
    for h, c in zip(pair_host[~single].tolist(), pair_combo[~single].tolist()):  # mixed hosts only: rare
        joined.setdefault(h, []).append(c)
    for h, cs in joined.items():
        text = _mixed_text(key, cs, labels, power)
        if text not in position:
            position[text] = len(categories)
            categories.append(text)
        codes[h] = position[text]
    return pd.Categorical.from_codes(codes, categories=categories), count > 1


def _mixed_text(key, combos, labels, power) -> str:
    if key == "power_limit":
        pairs = [power[c] for c in combos]
        enforced = sorted({e for e, _ in pairs if e is not None}, reverse=True)
        default = sorted({d for _, d in pairs if d is not None}, reverse=True)
        text = "/".join(as_number(e) for e in enforced) + " W"
        return text if enforced == default else text + " (default " + "/".join(as_number(d) for d in default) + " W)"
    return (" / " if key in ("mig", "ecc") else "/").join(sorted({labels[c] for c in combos}))


# ---------------------------------------------------------------- impacts


def as_text(value):
    return None if value is None or pd.isna(value) else str(value)
