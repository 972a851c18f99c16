"""One run folder read into the rows of the history index: its facts and load medians under local
ids (`read_run`), or why it cannot be read (`Skipped`: `read_or_skip`); many runs read by worker
processes that die with the process that started them, however it ends (`read_all`).

A fact of the fact table (`sweep.analysis.facts`) is kept as its typed value (`encode`: compact JSON
of its columns, a list of the distinct per-GPU tuples, `null` where nothing was read), never as
its rendered label; the load medians come from the fleet frames' load columns.

What a run's manifest must hold for the index (`read_manifest`: UTF-8 JSON, a sweep run's format,
a `state` among the states, a `started_at` that is text) is checked here; a host record that the
fleet reader refuses (torn, invalid) is left out of its run and named (`RunRows.skipped`), so
one bad file costs its host, never the run or the history.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import multiprocessing
import os
import signal
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from sweep.errors import HealthFileError, RunFolderError, SweepError
from sweep.analysis import facts as fact_table
from sweep.analysis.facts import typed_value
from sweep.analysis.fleet import Fleet, load_fleet, rows_at
from sweep.analysis.keys import factorize, host_keys
from sweep.analysis.speed_record import finite_number
from sweep.store import MANIFEST, RUN_FORMAT, STATES, RunFolder, list_records, read_json

HW_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
REACHABILITY = "reachability"
HW_KEY = "hw_clock_reasons"
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Skipped:
    """A run folder or host record the history could not read, and why."""

    where: str
    why: str

    def as_dict(self) -> dict:
        return {"where": self.where, "why": self.why}


class _Interner:
    """Local ids of the names of one run (host, key, value), sent back with the rows as small
    lists."""

    def __init__(self):
        self.hosts, self.keys, self.vals = {}, {}, {}
        self.encoded: dict = {}  # plain value -> its val id (`value`)

    def host(self, name: str) -> int:
        return self.hosts.setdefault(name, len(self.hosts))

    def key(self, name: str, label: str, scope: str) -> int:
        return self.keys.setdefault((name, label, scope), len(self.keys))

    def val(self, text) -> int:
        return self.vals.setdefault(str(text), len(self.vals))

    def value(self, value) -> int:
        """The id of a hashable plain value's text (`encode`), encoded once per distinct value."""
        got = self.encoded.get(value)
        if got is None:
            got = self.encoded[value] = self.val(encode(value))
        return got


@dataclass
class RunRows:
    """One run folder read: its manifest and its facts and load rows under local ids."""

    folder: str
    manifest: dict
    hosts: list
    keys: list
    vals: list
    facts: np.ndarray  # (n, 4): host, gpu, key, val (local ids)
    load: list  # (host, gpu, sm_mhz, power_w, limit_w, sw_power_cap, hw_slowdown), host a local id
    skipped: list  # Skipped host records (torn, invalid): left out of the run
    speed: list = field(
        default_factory=list
    )  # (host, gpu or -1, figure position in SPEED_FIGURES, value)


def encode(value) -> str:
    """A typed value as the index keeps it (compact JSON: equal values, equal text)."""
    return json.dumps(value, separators=(",", ":"), default=str)


def read_run(folder: str | Path, fleet: Fleet | None = None) -> RunRows:
    """One run folder's rows (in a worker when many runs are read); `fleet`: its records, read."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    _refuse_empty_interrupted(folder, manifest)
    fleet, skipped = (fleet, []) if fleet is not None else _fleet_of(folder)
    _, mixed, gpu_keys = host_keys(fleet)
    hosts = fleet.hosts
    names = _Interner()
    host_ids = [names.host(str(h)) for h in hosts["host"]]
    facts: list[tuple] = []
    probed = (hosts["status"] == "ok").to_numpy()
    for fact in (
        f for f in fact_table.FACTS if f.history == "value"
    ):  # measured figures drift: no change points
        kid = names.key(fact.name, fact.label, fact.scope)
        texts = _host_texts(fact, hosts, gpu_keys)
        facts += [
            (host_ids[p], -1, kid, names.val(texts[p])) for p in np.flatnonzero(probed).tolist()
        ]
    for fact in (
        f for f in fact_table.GPU_FACTS if f.history == "value"
    ):  # per-GPU values where a host's GPUs disagree
        mixed_hosts = np.flatnonzero(mixed[fact.name].to_numpy(dtype=bool))
        if not len(mixed_hosts):
            continue
        kid = names.key(fact.name, fact.label, "gpu")
        rows, combos = gpu_keys.rows[fact.name], gpu_keys.combos[fact.name]
        for r in np.flatnonzero(np.isin(gpu_keys.host_codes, mixed_hosts)).tolist():
            value = typed_value(fact, rows[combos[r]])
            facts.append(
                (
                    host_ids[gpu_keys.host_codes[r]],
                    int(gpu_keys.gpu_index[r]),
                    kid,
                    names.val(encode(None if value is None else [value])),
                )
            )
    reach = names.key(REACHABILITY, "Reachability", "health")
    for hid, s, f in zip(
        host_ids,
        hosts["status"].astype(object).tolist(),
        hosts["failure_class"].astype(object).tolist(),
    ):
        facts.append((hid, -1, reach, names.value("ok" if s == "ok" else f"unreachable ({f})")))
    _contract_facts(fleet, host_ids, names, facts)
    _hw_facts(fleet, host_ids, names, facts)
    load = _load_rows(fleet, host_ids)
    array = np.array(facts, dtype=np.int64).reshape(-1, 4)
    return RunRows(
        str(folder),
        manifest,
        list(names.hosts),
        list(names.keys),
        list(names.vals),
        array,
        load,
        skipped,
        _speed_rows(fleet, host_ids),
    )


class EmptyInterruptedRun(RunFolderError):
    """A run folder stopped before any host record was written (nothing to read; resume or remove
    it)."""


def _refuse_empty_interrupted(folder: Path, manifest: dict) -> None:
    """A run stopped (Ctrl-C, a kill) before any host record was written is named as such, with
    what to do, rather than as a run folder that cannot be read."""
    if manifest.get("state") not in ("interrupted", "running"):
        return
    hosts = folder / "hosts"
    if hosts.is_dir() and any(p.suffix == ".json" for p in hosts.iterdir()):
        return
    raise EmptyInterruptedRun(
        f"an interrupted run with no host record (it was {manifest.get('state')} "
        "when it stopped, before any host answered)",
        where=str(folder),
        fix=f"finish it with `sweep run --resume {folder}`, or remove the folder",
    )


def _host_texts(fact, hosts: pd.DataFrame, gpu_keys) -> list[str]:
    """Per host position, the text of its typed value (`encode`): a host fact's value as a one-item
    list;
    a GPU fact's distinct per-GPU values (the GPUs the mask selects) in a sorted list; null: not
    read.

    Each distinct value (a host fact's combination of columns, a GPU fact's set of per-GPU
    combinations)
    is made and encoded once: a fleet has a handful, so the cost per host is an array lookup."""
    if fact.scope == "host":
        combo, first = factorize(hosts, fact.columns)
        texts = []
        for row in rows_at(hosts[list(fact.columns)], first):
            value = typed_value(fact, row)
            texts.append(encode(None if value is None else [value]))
        return [texts[c] for c in combo.tolist()]
    rows, combos = gpu_keys.rows[fact.name], gpu_keys.combos[fact.name]
    n_combos = len(rows) + 1
    pairs = np.unique(
        gpu_keys.host_codes * n_combos + combos
    )  # each host's distinct combinations, host by host
    owner, combo = (pairs // n_combos).tolist(), (pairs % n_combos).tolist()
    counts = np.bincount(owner, minlength=len(hosts)).tolist()
    memo: dict[tuple, str] = {(): encode(None)}
    out, at = [], 0
    for count in counts:  # the hosts in order: each one's combinations are the next `count` pairs
        combo_set = tuple(combo[at : at + count])
        at += count
        text = memo.get(combo_set)
        if text is None:
            values = {typed_value(fact, rows[c]) for c in combo_set}
            known = sorted((v for v in values if v is not None), key=encode)
            text = memo[combo_set] = encode(known or None)
        out.append(text)
    return out


def read_manifest(folder: Path) -> dict:
    """A run's manifest, checked for what the index keeps of it; RunFolderError says what is
    wrong."""
    fix = "repair or remove the run folder (the history skips it meanwhile)"
    manifest = RunFolder(folder).read_manifest(fix=fix)  # the controller's own reader of manifests
    if manifest.get("format") != RUN_FORMAT:
        raise RunFolderError(
            f"is not a sweep run folder ({MANIFEST} has no format {RUN_FORMAT!r})",
            where=str(folder),
            fix="pass the folder a sweep run wrote",
        )
    state, started = manifest.get("state"), manifest.get("started_at")
    if state is not None and state not in STATES:
        raise RunFolderError(
            f"{MANIFEST}: state {_short(state)} is not one of {', '.join(STATES)}",
            where=str(folder),
            fix=fix,
        )
    if started is not None and not isinstance(started, str):
        raise RunFolderError(
            f"{MANIFEST}: started_at {_short(started)} is not a date", where=str(folder), fix=fix
        )
    return manifest


def _short(value, limit: int = 60) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _fleet_of(folder: Path):
    """The run's fleet and the host records left out of it (Skipped): one torn record costs its
    host,
    not the run. Only when a record fails are the run's records read one by one."""
    try:
        return load_fleet([folder], workers=1), []
    except HealthFileError as err:
        if not _is_record(err.where, folder):
            raise
    skipped, files = [], []
    for file in list_records(folder).files:  # parse errors first, all at once
        try:
            read_json(file, HealthFileError, "")
            files.append(file)
        except HealthFileError as err:
            skipped.append(Skipped(str(file), err.message))
    while (
        files
    ):  # then what only the fleet reader refuses (a record version, no host name), one by one
        try:
            return load_fleet(files, workers=1), skipped
        except HealthFileError as err:
            if not _is_record(err.where, folder) or Path(err.where) not in files:
                raise
            files.remove(Path(err.where))
            skipped.append(Skipped(err.where, err.message))
    first = skipped[0] if skipped else Skipped(str(folder / "hosts"), "no record")
    raise RunFolderError(
        f"no host record of the run can be read ({first.where}: {first.why})",
        where=str(folder),
        fix="repair or remove the run folder (the history skips it meanwhile)",
    )


def _is_record(where: str | None, folder: Path) -> bool:
    return where is not None and Path(where).parent == folder / "hosts"


def _contract_facts(fleet, host_ids, names: _Interner, facts) -> None:
    c = fleet.contracts
    if not len(c):
        return
    codes = c["host"].cat.codes.to_numpy()
    for (contract, title), part in c.groupby(
        ["contract", "title"], observed=True, sort=False
    ).groups.items():
        kid = names.key(f"contract:{contract}", f"Contract: {title}", "health")
        rows = c.loc[part]
        for code, status in zip(codes[part], rows["status"].astype(object).tolist()):
            facts.append((host_ids[code], -1, kid, names.value(status or "unknown")))


def _hw_facts(fleet, host_ids, names: _Interner, facts) -> None:
    """Per host, the HW clock-event reasons active on any GPU ('none' when none is)."""
    g = fleet.gpus
    kid = names.key(HW_KEY, "HW clock-event reasons", "health")
    active: dict[int, list] = {}
    codes = g["host"].cat.codes.to_numpy()
    for reason in HW_REASONS:
        on = g[reason].fillna(False).to_numpy(dtype=bool)
        for code in np.unique(codes[on]).tolist():
            active.setdefault(code, []).append(reason)
    for code in np.unique(codes).tolist():
        facts.append(
            (host_ids[code], -1, kid, names.value(",".join(active.get(code, ())) or "none"))
        )


def _load_rows(fleet, host_ids) -> list[tuple]:
    """Per GPU, the medians under load of each probed host that ran `--load` (the frames' load
    columns;
    a figure that is not a finite number is not a reading)."""
    g = fleet.gpus
    columns = [
        "index",
        "sm_load_mhz",
        "load_power_w",
        "load_limit_w",
        "load_sw_power_cap",
        "load_hw_slowdown",
    ]
    ran = g[g["sm_load_mhz"].notna().to_numpy(dtype=bool) & g["index"].notna().to_numpy(dtype=bool)]
    codes = ran["host"].cat.codes.to_numpy()
    out = []
    for code, r in zip(codes.tolist(), rows_at(ran[columns], range(len(ran)))):
        figures = [finite_number(r[c]) for c in columns[1:]]
        if figures[0] is not None and abs(r["index"]) <= 2**31:
            out.append((host_ids[code], r["index"], *figures))
    return out


SPEED_FIGURES = tuple(
    f.name for f in fact_table.FACTS if f.history == "drift"
)  # the measured figures, in table order


def _speed_rows(fleet, host_ids) -> list[tuple]:
    """(host, gpu (-1: the host), figure, value) of every validated speed figure of the run (the
    frames' columns)."""
    out = []
    for code, fact in enumerate(f for f in fact_table.FACTS if f.history == "drift"):
        frame = fleet.gpus if fact.scope == "gpu" else fleet.hosts
        column = frame[fact.columns[0]]
        have = np.flatnonzero(column.notna().to_numpy(dtype=bool))
        if not len(have):
            continue
        values = column.to_numpy(dtype=float, na_value=np.nan)
        if fact.scope == "gpu":
            hosts = frame["host"].cat.codes.to_numpy()
            gpus = frame["index"].to_numpy(dtype=float, na_value=np.nan)
            out += [
                (host_ids[hosts[r]], int(gpus[r]), code, float(values[r]))
                for r in have.tolist()
                if not np.isnan(gpus[r]) and abs(gpus[r]) <= 2**31
            ]
        else:
            out += [(host_ids[r], -1, code, float(values[r])) for r in have.tolist()]
    return out


def read_or_skip(folder: str | Path, fleet: Fleet | None = None):
    """`read_run`, or Skipped naming the folder and what is wrong with it: one bad run never ends
    the history. Whatever a hostile run folder raises is caught here, in the worker that read it."""
    try:
        return read_run(folder, fleet)
    except SweepError as err:
        why = (
            err.message
            if err.where == str(folder) or not err.where
            else f"{err.where}: {err.message}"
        )
        return Skipped(
            str(folder), f"{why}; {err.fix}" if isinstance(err, EmptyInterruptedRun) else why
        )
    except Exception as err:  # noqa: BLE001 - a run folder sweep did not write may hold anything
        return Skipped(str(folder), f"cannot be read ({type(err).__name__}: {err})")


def read_all(folders: list[Path], workers: int):
    """RunRows (or Skipped) of each folder, in order; up to `workers` processes when there are
    several runs."""
    workers = max(1, min(workers, len(folders)))
    if workers == 1:
        yield from (read_or_skip(f) for f in folders)
        return
    fork = sys.platform.startswith("linux") and threading.active_count() == 1
    context = multiprocessing.get_context("fork" if fork else "spawn")
    with (
        _workers_end_with_sigterm(),
        ProcessPoolExecutor(
            workers, mp_context=context, initializer=tie_to_parent, initargs=(os.getpid(),)
        ) as pool,
    ):
        yield from pool.map(read_or_skip, folders)


def tie_to_parent(parent: int) -> None:
    """Pool initializer: the worker is killed when the process that started it dies, however it dies
    (kill -9 included: Linux PR_SET_PDEATHSIG), and it ends on SIGTERM without the parent's
    handler."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if (
        os.getppid() != parent
    ):  # the parent died before the prctl: nobody would ever read our answer
        os._exit(1)


@contextlib.contextmanager
def _workers_end_with_sigterm():
    """While the pool reads: SIGTERM kills its workers first, then takes its usual course in this
    process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)

    def end(signum, frame):
        for child in multiprocessing.active_children():
            child.kill()
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, end)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
