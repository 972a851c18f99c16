"""Comparability classes and health findings of a loaded Fleet.

Every host that can run a benchmark gets one value per comparability key (`KEYS`), derived from
the GPUs its device mask selects; hosts equal on every key form a class. The reference class is
the largest one, or the class of the host or group the user names; every other class carries the
keys that differ from it and what each difference does to a benchmark.

Kept apart from the classes: hosts that failed (unreachable), hosts whose lowest broken contract
stops any benchmark (driver, device_mask, framework), and the health findings.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from ClusterShell.NodeSet import NodeSet

from probe_agent.contracts import link_rank
from sweep.errors import ConfigError
from sweep.fleet import Fleet, rows_at

# Contracts below which a host cannot run the benchmark at all.
BLOCKING = ("driver", "device_mask", "framework")
KEYS = {
    "gpu_model": "GPU model", "memory": "GPU memory", "gpu_count": "GPUs selected", "driver": "Driver",
    "cuda_driver": "CUDA (driver)", "framework": "Framework build", "ecc": "ECC", "power_limit": "Power limit",
    "mig": "MIG", "persistence": "Persistence mode", "compute_mode": "Compute mode",
    "confidential_compute": "Confidential computing", "clock_policy": "Clock policy", "link": "Worst link",
}
LINK_MEANING = {"PIX": "one PCIe switch", "PXB": "several PCIe switches", "PHB": "PCIe host bridge",
                "NODE": "host bridges of one NUMA node", "SYS": "across NUMA nodes"}


@dataclass(frozen=True)
class Difference:
    """One key on which a class differs from the reference, and what that does to a benchmark."""

    key: str
    label: str
    value: str
    reference: str
    impact: str


@dataclass(frozen=True)
class ComparabilityClass:
    """Hosts equal on every comparability key."""

    id: str
    hosts: tuple[str, ...]
    folded: str
    keys: dict
    differs: tuple[Difference, ...] = ()

    @property
    def size(self) -> int:
        return len(self.hosts)


@dataclass(frozen=True)
class Finding:
    """A health fact about one host, apart from comparability. severity: broken, warning, unreachable."""

    host: str
    kind: str
    severity: str
    title: str
    detail: str
    fix: str | None = None
    contract: str | None = None

    @property
    def message(self) -> str:
        """The finding as a user reads it: host, what, where."""
        return f"{self.host}: {self.detail}"

    def to_dict(self) -> dict:
        return dict(asdict(self), message=self.message)


@dataclass(frozen=True)
class Findings:
    """The comparison of a fleet: classes (reference first), hosts kept out, health findings."""

    hosts_total: int
    hosts_ok: int
    classes: tuple[ComparabilityClass, ...]
    reference_by: str
    unreachable: tuple[dict, ...]
    excluded: tuple[dict, ...]
    findings: tuple[Finding, ...]
    host_keys: pd.DataFrame = field(repr=False)

    @property
    def reference(self) -> ComparabilityClass | None:
        return self.classes[0] if self.classes else None

    @property
    def comparable(self) -> bool:
        """One class holds every host that can run: the fleet can be benchmarked as one pool."""
        return len(self.classes) == 1

    def verdict(self) -> tuple[str, str]:
        """(the answer in a few words, the sentence that backs it)."""
        ref, total = self.reference, self.hosts_total
        tail = []
        if self.excluded:
            tail.append(f"{len(self.excluded)} cannot run a benchmark")
        if self.unreachable:
            tail.append(f"{len(self.unreachable)} unreachable")
        tail = ("; " + "; ".join(tail)) if tail else ""
        if ref is None:
            return "No host can run a benchmark", f"none of the {total} hosts reached a runnable state{tail}."
        if self.comparable:
            whole = "all " if ref.size == total else ""
            return ("One pool" if not tail else "One pool, hosts kept out",
                    f"{whole}{ref.size} of {total} hosts ({abbreviate(ref.folded)}) can be benchmarked "
                    f"together{tail}.")
        others = sum(c.size for c in self.classes[1:])
        keys = []
        for c in self.classes[1:]:
            keys.extend(d.label for d in c.differs if d.label not in keys)
        return (f"Not one pool: {len(self.classes)} comparability classes",
                f"the largest comparable pool is {abbreviate(ref.folded)} ({ref.size} of {total} hosts); "
                f"{others} host(s) in {len(self.classes) - 1} other class(es) differ in {', '.join(keys)}{tail}.")

    def headline(self) -> str:
        """The verdict in one sentence."""
        answer, detail = self.verdict()
        return f"{answer}: {detail}"

    def to_dict(self) -> dict:
        def cls(c):
            return {"id": c.id, "hosts": list(c.hosts), "folded": c.folded, "size": c.size, "keys": c.keys,
                    "differs": [{"key": d.key, "label": d.label, "value": d.value, "reference": d.reference,
                                 "impact": d.impact} for d in c.differs]}
        ref = self.reference
        answer, detail = self.verdict()
        return {
            "comparable": self.comparable, "headline": self.headline(), "verdict": answer,
            "verdict_detail": detail[:1].upper() + detail[1:], "hosts_total": self.hosts_total,
            "hosts_ok": self.hosts_ok, "hosts_in_reference": ref.size if ref else 0,
            "key_labels": dict(KEYS), "unreachable": list(self.unreachable),
            "reference_class": dict(cls(ref), chosen_by=self.reference_by) if ref else None,
            "classes": [cls(c) for c in self.classes], "excluded": list(self.excluded),
            "findings": [f.to_dict() for f in self.findings],
        }


def fold_hosts(names) -> str:
    """Host names folded the way operators write them (``gpu[01-08,10]``), odd names listed as they are.

    ClusterShell's NodeSet does the folding. It parses every name it is given, which takes seconds
    for 10,000 names, so names that differ in one number only are first written as one pattern
    (``gpu[00001-00100]``) and NodeSet folds the few patterns; the result is checked by expanding it.
    """
    names = list(dict.fromkeys(names))
    plain = [n for n in names if _FOLDABLE.match(n)]
    odd = sorted(n for n in names if not _FOLDABLE.match(n))
    parts = []
    if plain:
        try:
            folded = str(NodeSet.fromlist(_patterns(plain)))
            if len(NodeSet(folded)) != len(plain):
                folded = str(NodeSet.fromlist(plain))
                if len(NodeSet(folded)) != len(plain):
                    raise ValueError("fold does not round-trip")
            parts.append(folded)
        except Exception:  # NodeSet reads some names as ranges or operators: list them plainly
            parts.append(",".join(sorted(plain)))
    return ",".join(parts + odd)


def abbreviate(folded: str, limit: int = 120) -> str:
    """A folded host list cut to about `limit` characters at a comma: ``gpu[0001-0008,0010,…]``."""
    if len(folded) <= limit:
        return folded
    cut = folded.rfind(",", 0, limit)
    head = folded[:cut if cut > 0 else limit]
    return head + (",…]" if head.count("[") > head.count("]") else ",…")


_FOLDABLE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_DIGITS = re.compile(r"(\d+)")


def _patterns(names) -> list[str]:
    """Names that differ in one digit run only, as one NodeSet pattern per group; others as they are."""
    groups: dict = {}
    for name in names:
        parts = _DIGITS.split(name)  # text, digits, text, digits, ..., text
        skeleton = tuple(parts[0::2]) + tuple(len(d) for d in parts[1::2])
        groups.setdefault(skeleton, []).append(parts)
    out = []
    for members in groups.values():
        digits = list(zip(*(m[1::2] for m in members)))
        varying = [i for i, column in enumerate(digits) if len(set(column)) > 1]
        if len(varying) != 1:
            out.extend("".join(m) for m in members)
            continue
        i = varying[0]
        width = len(digits[i][0])
        numbers = sorted({int(d) for d in digits[i]})
        ranges = ",".join(f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in _runs(numbers))
        parts = list(members[0])
        parts[1 + 2 * i] = f"[{ranges}]"
        out.append("".join(parts))
    return out


def _runs(numbers):
    start = prev = numbers[0]
    for n in numbers[1:]:
        if n != prev + 1:
            yield start, prev
            start = n
        prev = n
    yield start, prev


def fold_numbers(numbers) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2,5``."""
    numbers = sorted({int(x) for x in numbers})
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in _runs(numbers)) if numbers else ""


# ---------------------------------------------------------------- keys
#
# A key's value is text made from a few raw columns. The text is formatted once per distinct
# combination of those columns (a handful in a real fleet), never once per host or GPU: rows are
# factorized into combination ids with numpy, and the ids index the formatted texts.


def _factor(frame: pd.DataFrame, columns) -> tuple[np.ndarray, np.ndarray]:
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


def _num(value) -> str:
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
    enforced, default = _num(r["power_enforced_w"]), _num(r["power_default_w"])
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
}


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
        combo, first = _factor(used, raw)
        records = rows_at(used, first)
        labels = [text(r) for r in records]
        combos[key], texts[key] = combo, labels
        if key == "power_limit":
            power_enforced = [(r["power_enforced_w"], r["power_default_w"]) for r in records]
        columns[key], mixed[key] = _per_host(used_hosts, combo, labels, n_hosts, key, power_enforced)
    for key, (raw, text) in HOST_KEY_TEXT.items():
        combo, first = _factor(hosts, raw)
        labels = [text(r) for r in rows_at(hosts, first)]
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
        text = "/".join(_num(e) for e in enforced) + " W"
        return text if enforced == default else text + " (default " + "/".join(_num(d) for d in default) + " W)"
    return (" / " if key in ("mig", "ecc") else "/").join(sorted({labels[c] for c in combos}))


# ---------------------------------------------------------------- impacts


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?", text.split("(")[0])]


def impact(key: str, value: str, reference: str) -> str:
    """What a benchmark on a host with `value` for `key` suffers or gains against `reference`."""
    mixed = "/" in value and "/" not in reference
    if "unknown" in (value, reference):
        return ("not read on " + ("this host" if value == "unknown" else "the reference hosts") + ": the probe "
                "could not tell, so the hosts cannot be shown alike on this key; read the host's health.json "
                "and probe it again")
    if key == "gpu_model":
        return ("another GPU model: SM count, clocks, memory size and bandwidth all differ; the results "
                "measure a different product and cannot be pooled with the reference")
    if key == "memory":
        return (f"{value} instead of {reference} per GPU (another SKU, or a different ECC or MIG setting): "
                "the largest batch or model that fits changes, and usually the memory bandwidth behind it")
    if key == "gpu_count":
        return (f"{value} instead of {reference} visible to CUDA: a different degree of parallelism; "
                "data-parallel throughput, per-GPU batch and collective sizes change, and a job sized for "
                f"{reference} will not launch the same way")
    if key == "driver":
        return (f"a different driver ({value} vs {reference}): another kernel module, PTX JIT compiler and "
                "CUDA user-mode libraries; cuBLAS and NCCL heuristics can pick other kernels and transports, "
                "so timings are not comparable")
    if key == "cuda_driver":
        return (f"the driver speaks {value} instead of {reference}: a framework built for the newer CUDA runs "
                "through minor-version compatibility or PTX JIT here, with other kernels and a slower first start")
    if key == "framework":
        return (f"a different framework build ({value} vs {reference}): other cuBLAS, cuDNN and NCCL versions "
                "and other compiled kernels; a speed difference may come from the software, not the hardware")
    if key == "ecc":
        if "pending" in value:
            return ("an ECC mode change is pending: it takes effect at the next GPU reset or reboot, so the "
                    "host will not stay as it was benchmarked")
        if mixed:
            return ("ECC differs between this host's GPUs: the cards run at different memory speeds and "
                    "capacities, and synchronous multi-GPU work waits for the slowest")
        if value.startswith("off"):
            return ("ECC off: about 6% more usable memory where the check bits live in the memory itself (GDDR "
                    "cards), and no ECC work on memory accesses, so memory-bound work runs faster; the host "
                    "flatters itself against ECC-on hosts, and memory errors go undetected")
        return ("ECC on while the reference runs without it: this host pays the ECC overhead (lower effective "
                "memory bandwidth; about 6% less memory on GDDR cards) and looks slower than it is")
    if key == "power_limit":
        if mixed:
            return ("one or more GPUs capped lower than the others: in data- or tensor-parallel work every step "
                    "waits for the slowest GPU, so the whole host runs at the capped card's pace")
        mine, ref = _numbers(value), _numbers(reference)
        if mine and ref and min(mine) < min(ref):
            return (f"a lower power cap ({value} vs {reference}): under sustained load the GPU lowers its SM "
                    "clock to stay under the cap; compute-bound work slows by about the SM clock it loses "
                    "(tens of percent at a deep cap), memory-bound work less")
        return (f"a higher power cap ({value} vs {reference}): the GPU holds higher clocks under load than the "
                "reference; its results overstate what the rest of the fleet delivers")
    if key == "mig":
        if "pending" in value:
            return "a MIG mode change is pending: the GPU changes mode at the next reset"
        if value.startswith("on") and reference.startswith("on"):
            return (f"another MIG layout ({value} vs {reference}): the slices have other sizes, so a job lands "
                    "on a different fraction of the GPU's SMs, memory and bandwidth")
        if value.startswith("on"):
            return (f"MIG {value}: the benchmark runs on a slice with a fraction of the SMs, memory and memory "
                    "bandwidth, not on the whole GPU; per-slice numbers cannot be compared with whole GPUs")
        return "MIG off: the benchmark gets the whole GPU while the reference gets a slice"
    if key == "persistence":
        if value.startswith("off") or mixed:
            return ("persistence mode off: the driver tears the GPU state down whenever the last process exits, "
                    "so every process start pays driver initialisation (up to seconds per GPU); start-up "
                    "latency and short benchmarks suffer")
        return "persistence on while the reference has it off: processes start faster here"
    if key == "compute_mode":
        return (f"compute mode {value} instead of {reference}: EXCLUSIVE_PROCESS allows one CUDA context per "
                "GPU, so a second process (a monitor, a multi-process launcher) fails to start; PROHIBITED "
                "allows none; the benchmark may fail rather than slow down")
    if key == "confidential_compute":
        if value == "on":
            return ("confidential computing on: host-GPU copies go through encrypted bounce buffers, so "
                    "host-to-device bandwidth drops and copy and launch latency rise; I/O-heavy and "
                    "small-kernel work slows")
        return (f"confidential computing {value} while the reference has it {reference}: copies and launches "
                "run at a different cost")
    if key == "clock_policy":
        if value == "default":
            return ("default clocks while the reference pins application clocks: this host boosts freely, so "
                    "compute-bound work runs at another SM clock")
        return (f"{value} instead of {reference}: the SM clock under load is fixed by the operator, so "
                "compute-bound work runs at that clock, not at the boost clock; the result reflects the clock "
                "setting, not the hardware")
    if key == "link":
        if "single GPU" in (value, reference):
            return ("one side has a single GPU selected: no GPU-to-GPU traffic at all, so multi-GPU results "
                    "cannot be compared (see GPUs selected)")
        mine, ref = value.split()[0], reference.split()[0]
        if mine.startswith("NV") and ref.startswith("NV") and _numbers(mine) and _numbers(ref):
            more = _numbers(mine)[0] > _numbers(ref)[0]
            return (f"{mine} instead of {ref} between the selected GPUs: {'more' if more else 'fewer'} NVLink "
                    f"links, so all-reduce and other collectives run {'faster' if more else 'slower'} here")
        mine, ref = link_rank(mine), link_rank(ref)
        if mine is not None and ref is not None and mine < ref:
            return (f"a better link than the reference ({value} vs {reference}): collectives are faster here; "
                    "multi-GPU results overstate the reference hosts")
        return (f"the selected GPUs talk over {value} instead of {reference}: all-reduce, all-gather and other "
                "collectives cross PCIe or the host bridge at a fraction of NVLink bandwidth; multi-GPU "
                "scaling and every communication-bound step slow down")
    return f"{value} instead of {reference}"


# ---------------------------------------------------------------- classes


def class_id(n: int) -> str:
    """0 -> A, 25 -> Z, 26 -> AA."""
    out = ""
    n += 1
    while n:
        n, r = divmod(n - 1, 26)
        out = chr(65 + r) + out
    return out


def compare(fleet: Fleet, reference: str | None = None) -> Findings:
    """Classes, exclusions and findings of `fleet`; `reference` names a host or group to compare against."""
    hosts = fleet.hosts.set_index("host")
    keys, mixed, gpu_keys = host_keys(fleet)
    reachable = (hosts["status"] == "ok").to_numpy()
    blocked = reachable & hosts["lowest_broken"].isin(BLOCKING).to_numpy()
    eligible = reachable & ~blocked

    runnable = keys[eligible]
    code, first = _factor(runnable, list(KEYS))
    sizes = np.bincount(code, minlength=len(first))
    grouped = np.split(runnable.index.to_numpy(dtype=object)[np.argsort(code, kind="stable")], np.cumsum(sizes)[:-1])
    ref_code, reference_by = _reference_code(reference, hosts, eligible, code, sizes)
    order = sorted(range(len(first)), key=lambda c: (c != ref_code, -sizes[c], min(grouped[c])))
    rows = rows_at(runnable, first) if len(first) else []
    ref_keys = rows[order[0]] if order else {}
    classes, id_of = [], np.empty(len(first), dtype=object)
    for i, c in enumerate(order):
        names = tuple(sorted(grouped[c]))
        values = rows[c]
        differs = tuple(Difference(k, KEYS[k], values[k], ref_keys[k], impact(k, values[k], ref_keys[k]))
                        for k in KEYS if values[k] != ref_keys[k])
        classes.append(ComparabilityClass(class_id(i), names, fold_hosts(names), values, differs))
        id_of[c] = class_id(i)
    class_of = np.full(len(hosts), None, dtype=object)
    class_of[eligible] = id_of[code] if len(code) else []
    keys = keys.assign(comparability_class=pd.array(class_of, dtype="string"))

    failed = hosts[~reachable]
    unreachable = tuple({"host": h, "failure_class": _text(r.failure_class), "message": _text(r.failure_message),
                         "attempts": None if pd.isna(r.attempts) else int(r.attempts)}
                        for h, r in zip(failed.index, failed.itertuples()))
    cannot = hosts[blocked]
    excluded = tuple({"host": h, "contract": str(r.lowest_broken), "message": _text(r.lowest_message),
                      "fix": _text(r.lowest_fix)} for h, r in zip(cannot.index, cannot.itertuples()))
    found = health_findings(fleet, hosts, keys, mixed, gpu_keys)
    return Findings(len(hosts), int(reachable.sum()), tuple(classes), reference_by, unreachable, excluded,
                    found, keys)


def _text(value):
    return None if value is None or pd.isna(value) else str(value)


def _reference_code(reference, hosts, eligible, code, sizes):
    """(combination id of the reference class, how it was chosen)."""
    runnable = hosts.index[eligible]
    if reference is None:
        return (int(np.argmax(sizes)) if len(sizes) else None), "largest class"
    if reference in hosts.index:
        if reference not in runnable:
            status = hosts.loc[reference]
            why = (f"unreachable ({status.failure_class})" if status["status"] != "ok"
                   else f"it cannot run a benchmark (lowest broken contract: {status.lowest_broken})")
            raise ConfigError(f"the reference host {reference} is in no comparability class: {why}",
                              where="--reference", fix="name a host that can run, or one of its groups")
        return int(code[runnable.get_loc(reference)]), f"host {reference}"
    groups = hosts["groups"].astype("category")
    member_of = [reference in str(g).split(",") for g in groups.cat.categories]  # per distinct group list
    in_group = np.append(np.array(member_of, dtype=bool), False)[groups.cat.codes.to_numpy()]
    if not in_group.any():
        raise ConfigError(f"{reference!r} is neither a host nor a group of this fleet", where="--reference",
                          fix="name one of the hosts, or a group of the inventory the sweep ran")
    codes = code[in_group[eligible]]
    if not len(codes):
        raise ConfigError(f"no host of group {reference} can run a benchmark", where="--reference",
                          fix="name a host or group that can run")
    return int(np.bincount(codes).argmax()), f"group {reference} (its most common class)"


# ---------------------------------------------------------------- findings

GPU_FINDINGS = (  # (GPU column, kind, severity, title, what, fix)
    ("hw_slowdown", "hw_slowdown", "broken", "HW slowdown", "HW slowdown active",
     "check the host's power delivery and cooling (PSU, fans, inlet temperature)"),
    ("hw_thermal_slowdown", "hw_thermal_slowdown", "broken", "HW thermal slowdown", "HW thermal slowdown active",
     "check fans, airflow and inlet temperature; the GPU is too hot for its clocks"),
    ("hw_power_brake_slowdown", "hw_power_brake", "broken", "HW power brake", "HW power brake active",
     "the chassis asserts the power-brake signal: check PSUs and the rack's power budget"),
    ("sw_thermal_slowdown", "sw_thermal_slowdown", "warning", "SW thermal slowdown",
     "SW thermal slowdown active", "check cooling; the driver lowers clocks to stay below the slowdown temperature"),
    ("remap_failure", "row_remap_failure", "broken", "Row remapping failed", "row remapping failed",
     "drain the host and replace or RMA the card"),
    ("uncorrected", "uncorrected_ecc", "broken", "Uncorrected ECC errors", "uncorrected ECC errors since reset",
     "drain the host and have the card checked (nvidia-smi -q -d ECC)"),
    ("remap_pending", "row_remap_pending", "warning", "Row remap pending", "a row remap is pending",
     "reset the GPU (or reboot) to apply the remap"),
    ("ecc_change", "ecc_pending", "warning", "ECC change pending", "ECC mode change pending",
     "reset the GPU or reboot to apply it, or revert with nvidia-smi -e"),
    ("persistence_off", "persistence_off", "warning", "Persistence mode off", "persistence mode off",
     "nvidia-smi -pm 1, or run nvidia-persistenced"),
)


def health_findings(fleet, hosts, keys, mixed, gpu_keys) -> tuple[Finding, ...]:
    """Per host: the lowest broken contract, GPU faults, foreign processes, pending changes, unreachability."""
    out = []
    failed = hosts[hosts["status"] != "ok"]
    out += [Finding(h, "unreachable", "unreachable", "Unreachable",
                    f"{r.failure_class}: {_text(r.failure_message) or 'no health.json'}",
                    _UNREACHABLE_FIX.get(str(r.failure_class)))
            for h, r in zip(failed.index, failed.itertuples())]
    broken = hosts[hosts["lowest_broken"].notna()]
    out += [Finding(h, "lowest_broken", "broken", f"Lowest broken contract: {r.lowest_broken}",
                    f"{r.lowest_broken}: {_text(r.lowest_message)}", _text(r.lowest_fix), str(r.lowest_broken))
            for h, r in zip(broken.index, broken.itertuples())]
    incomplete = hosts[hosts["probe_complete"].eq(False).fillna(False)]
    out += [Finding(h, "probe_incomplete", "warning", "Probe incomplete",
                    "the probe stopped early: some facts are missing", "probe again with a longer --deadline")
            for h in incomplete.index]

    g = fleet.gpus
    flags = {
        "hw_slowdown": g["hw_slowdown"], "hw_thermal_slowdown": g["hw_thermal_slowdown"],
        "hw_power_brake_slowdown": g["hw_power_brake_slowdown"], "sw_thermal_slowdown": g["sw_thermal_slowdown"],
        "remap_failure": g["remap_failure"], "remap_pending": g["remap_pending"],
        "uncorrected": g["ecc_volatile_uncorrected"] > 0, "ecc_change": g["ecc_pending"] != g["ecc_current"],
        "persistence_off": ~g["persistence_mode"],
    }
    for column, kind, severity, title, what, fix in GPU_FINDINGS:
        hit = flags[column].fillna(False).to_numpy(dtype=bool)
        if not hit.any():
            continue
        rows = rows_at(g, np.flatnonzero(hit))  # only the GPUs concerned
        per_host = {}
        for r in rows:
            detail = f"GPU {r['index']}"
            if kind.startswith(("hw_", "sw_")):
                detail += f" (SM {r['sm_mhz']} of {r['sm_max_mhz']} MHz, {_num(r['temperature_c'])} C)"
            per_host.setdefault(r["host"], []).append(detail)
        out += [Finding(h, kind, severity, title, f"{what} on {'; '.join(d)}", fix) for h, d in per_host.items()]

    per_host = {}
    for p in rows_at(fleet.processes, np.arange(len(fleet.processes))):  # one row per foreign process
        used = "?" if p["used_memory_bytes"] is None else p["used_memory_bytes"] // 2**20
        per_host.setdefault(p["host"], []).append(f"{p['name']} (pid {p['pid']}, {used} MiB) on GPU {p['gpu']}")
    for h, items in per_host.items():
        out.append(Finding(h, "foreign_process", "warning", "Foreign processes",
                           f"{len(items)} other process(es) on the GPUs: {', '.join(items[:5])}"
                           + (f" and {len(items) - 5} more" if len(items) > 5 else ""),
                           "stop them, or benchmark elsewhere: they take memory and SM time", "processes"))

    positions = {h: i for i, h in enumerate(hosts.index)}
    mixed_hosts = mixed[mixed.any(axis=1)]
    for h, row in mixed_hosts.iterrows():  # rare: hosts whose selected GPUs differ among themselves
        parts = [f"{KEYS[k]} {keys.at[h, k]} ({_which_gpus(gpu_keys, positions[h], k)})"
                 for k in mixed_hosts.columns if row[k]]
        out.append(Finding(h, "mixed_gpus", "warning", "GPUs differ within the host",
                           "the selected GPUs differ: " + "; ".join(parts),
                           "make the cards alike (power limit, ECC, MIG, clocks) or mask out the odd one"))
    order = {"unreachable": 0, "broken": 1, "warning": 2}
    return tuple(sorted(out, key=lambda f: (order[f.severity], f.kind, f.host)))


def _which_gpus(gpu_keys: GpuKeys, position: int, key: str) -> str:
    """'700 W on GPU 0-2,4-7, 250 W on GPU 3': which selected GPU has which value."""
    mine = np.flatnonzero(gpu_keys.host_codes == position)
    by_value = {}
    for row in mine:
        combo = gpu_keys.combos[key][row]
        text = (_num(gpu_keys.power_enforced[combo][0]) + " W") if key == "power_limit" else gpu_keys.texts[key][combo]
        by_value.setdefault(text, []).append(gpu_keys.gpu_index[row])
    return ", ".join(f"{v} on GPU {fold_numbers(ix)}" for v, ix in by_value.items())


_UNREACHABLE_FIX = {
    "refused": "start sshd on the host, or check the port and firewall",
    "timeout": "check that the host is up and routable; raise the timeout for slow links",
    "dns": "fix the name in DNS or give the address in the inventory",
    "auth": "check the user and key the inventory names for this host",
    "host_key_unknown": "add the host key to known_hosts after checking its fingerprint",
    "host_key_changed": "find out why the host key changed (reinstall? another machine?) before trusting it",
    "no_python": "install python3 on the host, or name one with python= in the inventory",
    "python_too_old": "install python3 >= 3.8 on the host, or set ansible_python_interpreter to one",
    "agent_error": "read the message; run the agent by hand on the host with --no-json",
    "output_too_large": "probe the host alone and read its output",
    "bad_output": "probe the host alone and read its output",
    "not_probed": "finish the run: sweep run --resume RUN_DIR",
}
