"""Comparability classes and health findings of a loaded Fleet.

Every host that can run a benchmark gets one value per comparability key (`KEYS`), derived from
the GPUs its device mask selects; hosts equal on every key form a class. The reference class is
the largest one, or the class of the host or group the user names; every other class carries the
keys that differ from it and what each difference does to a benchmark.

Kept apart from the classes: hosts that failed (unreachable), hosts whose lowest broken contract
stops any benchmark (driver, device_mask, framework), and the health findings (`sweep.analysis.health`).

The pool is what can be benchmarked together: the hosts of the reference class that are also
healthy. A host of that class is held out of the pool, with its reasons, when it has a broken
contract (HW slowdown, a row-remap failure...), a foreign process on its GPUs, processes of a running
Slurm job (busy), or a probe that stopped before it read everything (`HELD_OUT_BY`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from probe_agent.chain import CONTRACTS
from sweep.errors import ConfigError
from sweep.analysis.fleet import Fleet, rows_at
from sweep.analysis.health import Finding, health_findings
from sweep.analysis import facts as fact_table
from sweep.analysis.facts import impact_of
from sweep.analysis.impact import impact  # noqa: F401  (re-exported: the text rules of one key)
from sweep.analysis.keys import factorize, as_text, host_keys, typed_rows
from sweep.analysis.names import abbreviate, fold_hosts
from sweep.text import plural

# Contracts below which a host cannot run the benchmark at all (the agent's contract table says which).
BLOCKING = tuple(c.name for c in CONTRACTS if c.blocks_benchmark)
# Health findings that keep a comparable, runnable host out of the pool (any of severity "broken" too).
HELD_OUT_BY = ("foreign_process", "probe_incomplete", "busy")


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
    held_out: tuple[dict, ...] = ()  # hosts of the reference class kept out of the pool: host, reasons

    @property
    def reference(self) -> ComparabilityClass | None:
        return self.classes[0] if self.classes else None

    @property
    def pool(self) -> tuple[str, ...]:
        """The hosts that can be benchmarked together: comparable (the reference class), runnable, healthy."""
        if self.reference is None:
            return ()
        out = {h["host"] for h in self.held_out}
        return tuple(h for h in self.reference.hosts if h not in out)

    @property
    def comparable(self) -> bool:
        """One class holds every host that can run: the fleet can be benchmarked as one pool."""
        return len(self.classes) == 1

    def verdict(self, brief: bool = False) -> tuple[str, str]:
        """(the answer in a few words, the sentence that backs it); `brief`: the sentence without the
        hosts kept out and why (the report lists them under it)."""
        ref, total, pool = self.reference, self.hosts_total, self.pool
        kept = total - len(pool)
        tail = []
        if self.held_out:
            tail.append(f"{len(self.held_out)} held out for health ({_held_out_text(self.held_out)})")
        if self.excluded:
            tail.append(f"{len(self.excluded)} cannot run a benchmark")
        if self.unreachable:
            tail.append(f"{len(self.unreachable)} unreachable")
        tail = ("; " + "; ".join(tail)) if tail else ""
        if brief and kept:
            tail = f"; {plural(kept, 'host')} {'is' if kept == 1 else 'are'} kept out for the reasons listed below"
        if ref is None:
            none = "the one host did not reach" if total == 1 else f"none of the {total} hosts reached"
            return "No host can run a benchmark", f"{none} a runnable state{tail}."
        if not pool:
            held = "the one comparable host of class {} is held out" if ref.size == 1 else \
                f"the {ref.size} comparable hosts of class {{}} are all held out"
            return "No healthy pool", f"{held.format(ref.id)} for health{tail}."
        folded = abbreviate(fold_hosts(pool))
        if self.comparable:
            whole = "all " if len(pool) == total else ""
            ready = (f"the one host ({folded}) can run a benchmark" if total == 1 else
                     f"{whole}{len(pool)} of {plural(total, 'host')} ({folded}) can be benchmarked together")
            return "One pool" if not tail else "One pool, hosts kept out", f"{ready}{tail}."
        if brief:
            return (f"Not one pool: {len(self.classes)} comparability classes",
                    f"the pool is {folded} ({len(pool)} of {plural(total, 'host')}){tail}.")
        others = sum(c.size for c in self.classes[1:])
        keys = []
        for c in self.classes[1:]:
            keys.extend(d.label for d in c.differs if d.label not in keys)
        return (f"Not one pool: {len(self.classes)} comparability classes",
                f"the pool is {folded} ({len(pool)} of {plural(total, 'host')}); "
                f"{plural(others, 'host')} in {plural(len(self.classes) - 1, 'other class', 'other classes')} {'differs' if others == 1 else 'differ'} in {', '.join(keys)}{tail}.")

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
            "verdict_detail": detail[:1].upper() + detail[1:], "verdict_brief": _capital(self.verdict(brief=True)[1]),
            "hosts_total": self.hosts_total,
            "hosts_ok": self.hosts_ok, "hosts_in_reference": ref.size if ref else 0,
            "pool": {"hosts": list(self.pool), "folded": fold_hosts(self.pool), "size": len(self.pool)},
            "held_out": list(self.held_out),
            "key_labels": dict(fact_table.COMPARED), "unreachable": list(self.unreachable),
            "reference_class": dict(cls(ref), chosen_by=self.reference_by) if ref else None,
            "classes": [cls(c) for c in self.classes], "excluded": list(self.excluded),
            "findings": [f.to_dict() for f in self.findings],
        }


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _held_out_text(held_out: tuple[dict, ...], shown: int = 4) -> str:
    """'gpu21: 1 other process ...; gpu25: HW slowdown ...' for the first `shown` hosts."""
    text = "; ".join(f"{h['host']}: {h['reasons'][0]}" for h in held_out[:shown])
    return text + (f"; and {len(held_out) - shown} more" if len(held_out) > shown else "")


def held_out_for_health(classes: tuple[ComparabilityClass, ...], found: tuple[Finding, ...]) -> tuple[dict, ...]:
    """Hosts of the reference class whose health keeps them out of the pool, each with its reasons
    (the findings' own words, the most severe first; a lowest-broken-contract line is dropped where a
    finding says the same thing more precisely)."""
    if not classes:
        return ()
    members = set(classes[0].hosts)
    reasons: dict[str, list[Finding]] = {}
    for f in found:  # already sorted: broken before warning
        if f.host in members and (f.severity == "broken" or f.kind in HELD_OUT_BY):
            reasons.setdefault(f.host, []).append(f)
    order = {host: i for i, host in enumerate(classes[0].hosts)}
    out = []
    for host in sorted(reasons, key=order.__getitem__):
        items = reasons[host]
        precise = [f for f in items if f.kind != "lowest_broken"]
        chosen = precise if any(f.severity == "broken" for f in precise) else items
        out.append({"host": host, "kinds": [f.kind for f in chosen], "reasons": [f.detail for f in chosen]})
    return tuple(out)


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
    compared = fact_table.COMPARED
    code, first = factorize(runnable, list(compared))
    sizes = np.bincount(code, minlength=len(first))
    grouped = np.split(runnable.index.to_numpy(dtype=object)[np.argsort(code, kind="stable")], np.cumsum(sizes)[:-1])
    ref_code, reference_by = _reference_code(reference, hosts, eligible, code, sizes)
    order = sorted(range(len(first)), key=lambda c: (c != ref_code, -sizes[c], min(grouped[c])))
    rows = rows_at(runnable[list(compared)], first) if len(first) else []
    ref_keys = rows[order[0]] if order else {}
    classes, id_of = [], np.empty(len(first), dtype=object)
    position = {h: i for i, h in enumerate(keys.index)}
    typed = (lambda k, c: typed_rows(k, position[runnable.index[first[c]]], fleet.hosts, gpu_keys))
    for i, c in enumerate(order):
        names = tuple(sorted(grouped[c]))
        values = rows[c]
        differs = tuple(Difference(k, compared[k], values[k], ref_keys[k], impact_of(
            k, values[k], ref_keys[k], typed(k, c), typed(k, order[0]))) for k in compared if values[k] != ref_keys[k])
        classes.append(ComparabilityClass(class_id(i), names, fold_hosts(names), values, differs))
        id_of[c] = class_id(i)
    class_of = np.full(len(hosts), None, dtype=object)
    class_of[eligible] = id_of[code] if len(code) else []
    keys = keys.assign(comparability_class=pd.array(class_of, dtype="string"))

    failed = hosts[~reachable]
    unreachable = tuple({"host": h, "failure_class": as_text(r.failure_class), "message": as_text(r.failure_message),
                         "attempts": None if pd.isna(r.attempts) else int(r.attempts)}
                        for h, r in zip(failed.index, failed[["failure_class", "failure_message", "attempts"]].itertuples()))
    cannot = hosts[blocked]
    excluded = tuple({"host": h, "contract": str(r.lowest_broken), "message": as_text(r.lowest_message),
                      "fix": as_text(r.lowest_fix)} for h, r in zip(cannot.index, cannot.itertuples()))
    found = health_findings(fleet, hosts, keys, mixed)
    classes = tuple(classes)
    return Findings(len(hosts), int(reachable.sum()), classes, reference_by, unreachable, excluded,
                    found, keys, held_out_for_health(classes, found))


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
