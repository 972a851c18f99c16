"""The comparability keys: what two hosts must share to be benchmarked together, per host and per
GPU.

The keys are the fact table's (`sweep.analysis.facts`): `KEYS` (the table's `COMPARED`) are the
facts that split the fleet into classes; `facts.LABELS` names every fact, compared or not.
`host_keys(fleet)` turns the fleet's frames into one label per key per host (the GPUs the mask
selects decide a host's value; GPUs that differ inside one host give a "mixed" value).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweep.analysis import facts as fact_table
from sweep.analysis.facts import COMPARED as KEYS, as_number, mixed_text
from sweep.analysis.fleet import Fleet, rows_at

__all__ = ["KEYS", "GpuKeys", "as_number", "as_text", "factorize", "host_keys", "typed_rows"]


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


@dataclass(frozen=True)
class GpuKeys:
    """How the per-GPU keys were read: the rows used, their combination ids and texts."""

    host_codes: np.ndarray
    gpu_index: np.ndarray
    combos: dict
    texts: dict
    rows: dict  # key -> the raw row of each combination (for the fact's per-GPU text)


def host_keys(fleet: Fleet) -> tuple[pd.DataFrame, pd.DataFrame, GpuKeys]:
    """(keys, mixed, gpu_keys): per host one text per key (categoricals, NA for a failed host);
    per host and per-GPU key whether its selected GPUs disagree; the per-GPU readings behind them.

    Host-level values come from the GPUs the mask selects (all GPUs when it selects none, so that
    an excluded host still shows what it has). A host whose GPUs disagree gets each value with how
    many GPUs have it ("700 W x7, 250 W x1 (GPU 3)").
    """
    hosts, gpus = fleet.hosts, fleet.gpus
    n_hosts = len(hosts)
    host_codes = gpus["host"].cat.codes.to_numpy(dtype=np.int64)
    selected = gpus["selected"].fillna(False).to_numpy(dtype=bool)
    has_selection = np.bincount(host_codes[selected], minlength=n_hosts) > 0
    use = selected | ~has_selection[host_codes]
    used = gpus[use]
    used_hosts = host_codes[use]
    gpu_index = used["index"].to_numpy(dtype=object)
    ok = (hosts["status"] == "ok").to_numpy()
    columns, mixed, combos, texts, raw_rows = {}, {}, {}, {}, {}
    for fact in fact_table.GPU_FACTS:
        combo, first = factorize(used, fact.columns)
        # only the key's columns: 10x faster on 8,000 GPUs
        records = rows_at(used[list(fact.columns)], first)
        labels = [fact.render(r) for r in records]
        combos[fact.name], texts[fact.name], raw_rows[fact.name] = combo, labels, records
        columns[fact.name], mixed[fact.name] = _per_host(
            used_hosts, combo, labels, n_hosts, fact, records, gpu_index
        )
    for fact in fact_table.HOST_FACTS:
        combo, first = factorize(hosts, fact.columns)
        labels = [fact.render(r) for r in rows_at(hosts[list(fact.columns)], first)]
        columns[fact.name] = _categorical(np.where(ok, combo, -1), labels)
    index = pd.Index(hosts["host"], name="host")
    keys = pd.DataFrame({f.name: columns[f.name] for f in fact_table.FACTS}, index=index)
    # a failed host has no key values; a probed host without the reading has "unknown"
    for key in keys.columns:
        column = keys[key]
        gap = column.isna().to_numpy() & ok
        if gap.any():
            if "unknown" not in column.cat.categories:
                column = column.cat.add_categories(["unknown"])
            column[gap] = "unknown"
        keys[key] = column.where(ok)
    mixed = pd.DataFrame(mixed, index=index)
    return keys, mixed, GpuKeys(used_hosts, gpu_index, combos, texts, raw_rows)


def _unique(labels) -> list:
    """Categories from texts that may repeat (two raw combinations can read the same)."""
    return list(dict.fromkeys(labels))


def _categorical(combo: np.ndarray, labels: list) -> pd.Categorical:
    """The texts of combination ids (-1: NA) as a Categorical; equal texts share one category."""
    categories = _unique(labels)
    position = {label: i for i, label in enumerate(categories)}
    remap = np.array([position[label] for label in labels] + [-1], dtype=np.int64)
    return pd.Categorical.from_codes(remap[combo], categories=categories)


def _distinct(values: np.ndarray, bound: int) -> np.ndarray:
    """The distinct values (each in 0..bound-1), ascending: as ``np.unique`` gives them, by a mark
    per possible value where there are few (a fleet's GPU keys have a handful of combinations:
    80,000 values in 0.3 ms, where the sort took 2.4)."""
    if bound > 4 * len(values) + 4096:
        return np.unique(values)
    mark = np.zeros(bound, dtype=bool)
    mark[values] = True
    return np.flatnonzero(mark)


def _per_host(host_codes, combo, labels, n_hosts, fact, records, gpu_index):
    """(Categorical of each host's text, whether the host's GPUs disagree) from per-GPU combination
    ids (`gpu_index`: each row's GPU index, for the text of a host whose GPUs disagree)."""
    n_combos = max(len(labels), 1)
    pairs = _distinct(host_codes * n_combos + combo, n_hosts * n_combos)
    pair_host, pair_combo = pairs // n_combos, pairs % n_combos
    count = np.bincount(pair_host, minlength=n_hosts)
    categories = _unique(labels)
    position = {label: i for i, label in enumerate(categories)}
    remap = np.array([position[label] for label in labels] + [-1], dtype=np.int64)
    codes = np.full(n_hosts, -1, dtype=np.int64)
    single = count[pair_host] == 1
    codes[pair_host[single]] = remap[pair_combo[single]]
    joined: dict = {}
    rows = np.flatnonzero((count > 1)[host_codes])  # the GPUs of mixed hosts only: rare
    for h, c, ix in zip(host_codes[rows].tolist(), combo[rows].tolist(), gpu_index[rows].tolist()):
        joined.setdefault(h, {}).setdefault(c, []).append(ix)
    for h, by_combo in joined.items():
        text = mixed_text(fact, [records[c] for c in by_combo], list(by_combo.values()))
        if text not in position:
            position[text] = len(categories)
            categories.append(text)
        codes[h] = position[text]
    return pd.Categorical.from_codes(codes, categories=categories), count > 1


# ---------------------------------------------------------------- impacts


def as_text(value):
    return None if value is None or pd.isna(value) else str(value)


def typed_rows(key: str, position: int, hosts: pd.DataFrame, gpu_keys: GpuKeys) -> list[dict]:
    """The typed readings behind one host's value of `key`: its row of a host fact; for a GPU fact
    one raw row per distinct value among the GPUs its mask selects (several: the GPUs disagree)."""
    fact = fact_table.BY_NAME[key]
    if fact.scope == "host":
        return rows_at(hosts[list(fact.columns)], [position])
    combos = np.unique(gpu_keys.combos[key][gpu_keys.host_codes == position])
    by_text = {}  # raw rows that read alike are one value, as the host's text says
    for c in combos.tolist():
        by_text.setdefault(gpu_keys.texts[key][c], gpu_keys.rows[key][c])
    return list(by_text.values())
