"""Comparability classes and health findings of a loaded Fleet.

Every host that can run a benchmark gets one value per comparability key (`KEYS`), derived from the
GPUs its device mask selects; hosts equal on every key form a class. The reference class is the
largest one, or the class of the host or group the user names; every other class carries the keys
that differ from it and what each difference does to a benchmark.

Kept apart from the classes: hosts that failed (unreachable), hosts whose lowest broken contract
stops any benchmark (driver, device_mask, framework), and the health findings
(`sweep.analysis.health`).

The probe's own environment is not the host's (`probe_env_only`): where the agent ran in a login
session (the ssh / ansible engines: `sweep.analysis.fleet.probed_in`), a broken device mask (the SSH
session's CUDA_VISIBLE_DEVICES) or framework (the login python3's torch, where no interpreter was
named) does not stop the host: it is compared on what NVML read (every GPU NVML lists, when the mask
selected none) and the contract stays a warning finding of kind "probe_env"
(`sweep.analysis.owners`: never drained, no exit code of its own). Probed in a Slurm job, or where
the record does not say, it stops the host as before.

The pool, the hosts held out of it and the sentence that says so are not decided here: they are the
verdict's (`sweep.analysis.verdict`), which `sweep.judgment.assess` makes from these classes and
findings with every other section. A host of the reference class is held out when it has a broken
entry, a foreign process on its GPUs, processes of a running Slurm job (busy), or a probe that
stopped before it read everything (`HELD_OUT_BY`).
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
from sweep.analysis.names import fold_hosts

# Contracts below which a host cannot run the benchmark at all (the agent's contract table says
# which).
BLOCKING = tuple(c.name for c in CONTRACTS if c.blocks_benchmark)
# Health findings that keep a comparable, runnable host out of the pool (any of severity "broken"
# too).
HELD_OUT_BY = ("foreign_process", "probe_incomplete", "busy")
# Contracts that judge the environment the probe ran in, not the host, when that was a login
# session's.
PROBE_ENV = ("device_mask", "framework")


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
    """The comparison of a fleet: classes (reference first), hosts that cannot run or did not
    answer, health findings. No pool and no sentence: those are the verdict's (`sweep.assess`)."""

    hosts_total: int
    hosts_ok: int
    classes: tuple[ComparabilityClass, ...]
    reference_by: str
    unreachable: tuple[dict, ...]
    excluded: tuple[dict, ...]
    health: tuple[Finding, ...]  # the health findings (`sweep.analysis.health`), each of one host
    host_keys: pd.DataFrame = field(repr=False)

    @property
    def reference(self) -> ComparabilityClass | None:
        return self.classes[0] if self.classes else None

    @property
    def comparable(self) -> bool:
        """One class holds every host that can run: the fleet can be benchmarked as one pool."""
        return len(self.classes) == 1

    def to_dict(self) -> dict:
        def cls(c):
            return {
                "id": c.id,
                "hosts": list(c.hosts),
                "folded": c.folded,
                "size": c.size,
                "keys": c.keys,
                "differs": [
                    {
                        "key": d.key,
                        "label": d.label,
                        "value": d.value,
                        "reference": d.reference,
                        "impact": d.impact,
                    }
                    for d in c.differs
                ],
            }

        ref = self.reference
        return {
            "comparable": self.comparable,
            "hosts_total": self.hosts_total,
            "hosts_ok": self.hosts_ok,
            "hosts_in_reference": ref.size if ref else 0,
            "key_labels": dict(fact_table.COMPARED),
            "unreachable": list(self.unreachable),
            "reference_class": dict(cls(ref), chosen_by=self.reference_by) if ref else None,
            "classes": [cls(c) for c in self.classes],
            "excluded": list(self.excluded),
            "findings": [f.to_dict() for f in self.health],
        }


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
    """Classes, exclusions and findings of `fleet`; `reference` names a host or group to compare
    against."""
    hosts = fleet.hosts.set_index("host")
    keys, mixed, gpu_keys = host_keys(fleet)
    reachable = (hosts["status"] == "ok").to_numpy()
    env_only = reachable & probe_env_only(hosts)
    blocked = reachable & hosts["lowest_broken"].isin(BLOCKING).to_numpy() & ~env_only
    keys = _nvml_keys(keys, hosts, env_only, reachable & ~blocked & ~env_only)
    eligible = reachable & ~blocked

    runnable = keys[eligible]
    compared = fact_table.COMPARED
    code, first = factorize(runnable, list(compared))
    sizes = np.bincount(code, minlength=len(first))
    grouped = np.split(
        runnable.index.to_numpy(dtype=object)[np.argsort(code, kind="stable")],
        np.cumsum(sizes)[:-1],
    )
    ref_code, reference_by = _reference_code(reference, hosts, eligible, code, sizes)
    order = sorted(range(len(first)), key=lambda c: (c != ref_code, -sizes[c], min(grouped[c])))
    rows = rows_at(runnable[list(compared)], first) if len(first) else []
    ref_keys = rows[order[0]] if order else {}
    classes, id_of = [], np.empty(len(first), dtype=object)
    position = {h: i for i, h in enumerate(keys.index)}
    typed = lambda k, c: typed_rows(k, position[runnable.index[first[c]]], fleet.hosts, gpu_keys)
    for i, c in enumerate(order):
        names = tuple(sorted(grouped[c]))
        values = rows[c]
        differs = tuple(
            Difference(
                k,
                compared[k],
                values[k],
                ref_keys[k],
                impact_of(k, values[k], ref_keys[k], typed(k, c), typed(k, order[0])),
            )
            for k in compared
            if values[k] != ref_keys[k]
        )
        classes.append(ComparabilityClass(class_id(i), names, fold_hosts(names), values, differs))
        id_of[c] = class_id(i)
    class_of = np.full(len(hosts), None, dtype=object)
    class_of[eligible] = id_of[code] if len(code) else []
    keys = keys.assign(comparability_class=pd.array(class_of, dtype="string"))

    unreachable, excluded = _unreachable(hosts[~reachable]), _cannot_run(hosts[blocked])
    found = health_findings(fleet, hosts, keys, mixed, frozenset(hosts.index[env_only]))
    classes = tuple(classes)
    return Findings(
        len(hosts), int(reachable.sum()), classes, reference_by, unreachable, excluded, found, keys
    )


def _unreachable(failed: pd.DataFrame) -> tuple:
    """The hosts with no record, each with its failure class, message and attempts."""
    return tuple(
        {
            "host": h,
            "failure_class": as_text(r.failure_class),
            "message": as_text(r.failure_message),
            "attempts": None if pd.isna(r.attempts) else int(r.attempts),
        }
        for h, r in zip(
            failed.index, failed[["failure_class", "failure_message", "attempts"]].itertuples()
        )
    )


def _cannot_run(cannot: pd.DataFrame) -> tuple:
    """The hosts whose lowest broken contract stops any benchmark, with its message and fix."""
    return tuple(
        {
            "host": h,
            "contract": str(r.lowest_broken),
            "message": as_text(r.lowest_message),
            "fix": as_text(r.lowest_fix),
        }
        for h, r in zip(cannot.index, cannot.itertuples())
    )


def probe_env_only(hosts: pd.DataFrame) -> np.ndarray:
    """Per host (`hosts` indexed by host): its lowest broken contract judged only the environment
    the probe ran in: a device mask or a framework build (`PROBE_ENV`), read in a login session
    (``probed_in`` is "login": the ssh / ansible engines), the framework read with the login python3
    (no interpreter named)."""
    lowest = hosts["lowest_broken"].astype(object)
    login = hosts["probed_in"].astype(object).eq("login").fillna(False).to_numpy(dtype=bool)
    named = hosts["interpreter_named"].fillna(False).to_numpy(dtype=bool)
    mask = lowest.eq(PROBE_ENV[0]).fillna(False).to_numpy(dtype=bool)
    framework = lowest.eq(PROBE_ENV[1]).fillna(False).to_numpy(dtype=bool) & ~named
    return login & (mask | framework)


def _nvml_keys(
    keys: pd.DataFrame, hosts: pd.DataFrame, env_only: np.ndarray, judged: np.ndarray
) -> pd.DataFrame:
    """`keys` with what the probe's login environment read replaced, for the `env_only` hosts, by
    what the host has: where the SSH session's mask was broken, the GPUs NVML lists and the worst
    link between them; where the login python3's framework was read (no interpreter named), the
    build most hosts probed in their own environment have (`judged`: the job's build is not known,
    so it is not held against the host; with no such host, its own)."""
    if not env_only.any():
        return keys
    keys = keys.copy()
    masked = env_only & hosts["lowest_broken"].astype(object).eq(PROBE_ENV[0]).fillna(
        False
    ).to_numpy(dtype=bool)
    count = hosts["gpu_count"].astype(object).where(hosts["gpu_count"].notna(), None)
    links = hosts["worst_link_nvml"].astype(object).where(hosts["worst_link_nvml"].notna(), None)
    _set(
        keys,
        "gpu_count",
        masked,
        [fact_table.BY_NAME["gpu_count"].render({"gpus_selected": n}) for n in count],
    )
    _set(
        keys,
        "link",
        masked,
        [
            fact_table.BY_NAME["link"].render({"worst_link": w, "gpus_selected": n})
            for w, n in zip(links, count)
        ],
    )
    login_python = env_only & ~hosts["interpreter_named"].fillna(False).to_numpy(dtype=bool)
    builds = keys["framework"][judged].dropna()
    if len(builds) and login_python.any():
        _set(keys, "framework", login_python, [builds.mode().iloc[0]] * len(keys))
    return keys


def _set(keys: pd.DataFrame, key: str, rows: np.ndarray, values: list) -> None:
    """keys[key] = values where `rows` (a categorical column: new texts become categories)."""
    if not rows.any():
        return
    column = keys[key]
    new = [
        v
        for v in dict.fromkeys(np.asarray(values, dtype=object)[rows])
        if v not in column.cat.categories
    ]
    if new:
        column = column.cat.add_categories(new)
    column[rows] = np.asarray(values, dtype=object)[rows]
    keys[key] = column


def _reference_code(reference, hosts, eligible, code, sizes):
    """(combination id of the reference class, how it was chosen)."""
    runnable = hosts.index[eligible]
    if reference is None:
        return (int(np.argmax(sizes)) if len(sizes) else None), "largest class"
    if reference in hosts.index:
        if reference not in runnable:
            status = hosts.loc[reference]
            why = (
                f"unreachable ({status.failure_class})"
                if status["status"] != "ok"
                else f"it cannot run a benchmark (lowest broken contract: {status.lowest_broken})"
            )
            raise ConfigError(
                f"the reference host {reference} is in no comparability class: {why}",
                where="--reference",
                fix="name a host that can run, or one of its groups",
            )
        return int(code[runnable.get_loc(reference)]), f"host {reference}"
    groups = hosts["groups"].astype("category")
    # per distinct group list
    member_of = [reference in str(g).split(",") for g in groups.cat.categories]
    in_group = np.append(np.array(member_of, dtype=bool), False)[groups.cat.codes.to_numpy()]
    if not in_group.any():
        raise ConfigError(
            f"{reference!r} is neither a host nor a group of this fleet",
            where="--reference",
            fix="name one of the hosts, or a group of the inventory the sweep ran",
        )
    codes = code[in_group[eligible]]
    if not len(codes):
        raise ConfigError(
            f"no host of group {reference} can run a benchmark",
            where="--reference",
            fix="name a host or group that can run",
        )
    return int(np.bincount(codes).argmax()), f"group {reference} (its most common class)"
