"""Comparability classes and health findings of a loaded Fleet.

Every host that can run a benchmark gets one value per comparability key (`KEYS`), derived from
the GPUs its device mask selects; hosts equal on every key form a class. The reference class is
the largest one, or the class of the host or group the user names; every other class carries the
keys that differ from it and what each difference does to a benchmark.

Kept apart from the classes: hosts that failed (unreachable), hosts whose lowest broken contract
stops any benchmark (driver, device_mask, framework), and the health findings (`sweep.analysis.health`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from probe_agent.contracts import link_rank
from sweep.errors import ConfigError
from sweep.analysis.fleet import Fleet, rows_at
from sweep.analysis.health import Finding, health_findings
from sweep.analysis.keys import KEYS, factorize, as_text, host_keys
from sweep.analysis.names import abbreviate, fold_hosts
from sweep.text import plural

# Contracts below which a host cannot run the benchmark at all.
BLOCKING = ("driver", "device_mask", "framework")


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
                f"{plural(others, 'host')} in {plural(len(self.classes) - 1, 'other class', 'other classes')} differ in {', '.join(keys)}{tail}.")

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
    code, first = factorize(runnable, list(KEYS))
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
    unreachable = tuple({"host": h, "failure_class": as_text(r.failure_class), "message": as_text(r.failure_message),
                         "attempts": None if pd.isna(r.attempts) else int(r.attempts)}
                        for h, r in zip(failed.index, failed.itertuples()))
    cannot = hosts[blocked]
    excluded = tuple({"host": h, "contract": str(r.lowest_broken), "message": as_text(r.lowest_message),
                      "fix": as_text(r.lowest_fix)} for h, r in zip(cannot.index, cannot.itertuples()))
    found = health_findings(fleet, hosts, keys, mixed, gpu_keys)
    return Findings(len(hosts), int(reachable.sum()), tuple(classes), reference_by, unreachable, excluded,
                    found, keys)


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
