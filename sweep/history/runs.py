"""One run folder read into the rows of the history index: its facts and load medians under local
ids (`read_run`), or why it cannot be read (`Skipped`: `read_or_skip`); many runs read by worker
processes that die with the process that started them, however it ends (`read_all`).

What a run's manifest must hold for the index (`read_manifest`: UTF-8 JSON, a sweep run's format,
a `state` among the states, a `started_at` that is text) is checked here; a host record that the
fleet reader refuses (torn, invalid) is left out of its run and named (`RunRows.skipped`), so
one bad file costs its host, never the run or the history.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import math
import multiprocessing
import os
import signal
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sweep.errors import HealthFileError, RunFolderError, SweepError
from sweep.analysis.fleet import load_fleet
from sweep.analysis.keys import GPU_KEY_TEXT, KEYS, host_keys
from sweep.store import MANIFEST, RUN_FORMAT, STATES, list_records, read_json

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
    """Local ids of the names of one run (host, key, value), sent back with the rows as small lists."""

    def __init__(self):
        self.hosts, self.keys, self.vals = {}, {}, {}

    def host(self, name: str) -> int:
        return self.hosts.setdefault(name, len(self.hosts))

    def key(self, name: str, label: str, scope: str) -> int:
        return self.keys.setdefault((name, label, scope), len(self.keys))

    def val(self, text) -> int:
        return self.vals.setdefault(str(text), len(self.vals))


@dataclass
class RunRows:
    """One run folder read: its manifest and its facts and load rows under local ids."""

    folder: str
    manifest: dict
    hosts: list
    keys: list
    vals: list
    facts: np.ndarray   # (n, 4): host, gpu, key, val (local ids)
    load: list          # (host, gpu, sm_mhz, power_w, limit_w, sw_power_cap, hw_slowdown), host a local id
    skipped: list       # Skipped host records (torn, invalid): left out of the run


def read_run(folder: str | Path) -> RunRows:
    """Read one run folder into rows (runs in a worker process when many runs are read)."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    fleet, skipped = _fleet_of(folder)
    keys, mixed, gpu_keys = host_keys(fleet)
    hosts = fleet.hosts
    names = _Interner()
    host_ids = [names.host(str(h)) for h in hosts["host"]]
    facts: list[tuple] = []
    for key, label in KEYS.items():
        kid = names.key(key, label, "gpu" if key in GPU_KEY_TEXT else "host")
        for hid, text in zip(host_ids, keys[key].astype(object).tolist()):
            if text is not None and text == text:
                facts.append((hid, -1, kid, names.val(text)))
    for key in GPU_KEY_TEXT:  # per-GPU values where a host's GPUs disagree
        mixed_hosts = np.flatnonzero(mixed[key].to_numpy(dtype=bool))
        if not len(mixed_hosts) or key not in KEYS:
            continue
        kid = names.key(key, KEYS[key], "gpu")
        labels, combos = gpu_keys.texts[key], gpu_keys.combos[key]
        for r in np.flatnonzero(np.isin(gpu_keys.host_codes, mixed_hosts)).tolist():
            facts.append((host_ids[gpu_keys.host_codes[r]], int(gpu_keys.gpu_index[r]), kid, names.val(labels[combos[r]])))
    reach = names.key(REACHABILITY, "Reachability", "health")
    for hid, s, f in zip(host_ids, hosts["status"].astype(object).tolist(), hosts["failure_class"].astype(object).tolist()):
        facts.append((hid, -1, reach, names.val("ok" if s == "ok" else f"unreachable ({f})")))
    _contract_facts(fleet, host_ids, names, facts)
    _hw_facts(fleet, host_ids, names, facts)
    load = _load_rows(hosts, host_ids)
    array = np.array(facts, dtype=np.int64).reshape(-1, 4)
    return RunRows(str(folder), manifest, list(names.hosts), list(names.keys), list(names.vals), array, load, skipped)


def read_manifest(folder: Path) -> dict:
    """A run's manifest, checked for what the index keeps of it; RunFolderError says what is wrong."""
    fix = "repair or remove the run folder (the history skips it meanwhile)"
    try:
        blob = (folder / MANIFEST).read_bytes()
    except OSError as err:
        raise RunFolderError(f"{MANIFEST} cannot be read ({err.strerror or err})", where=str(folder), fix=fix) from None
    try:
        manifest = json.loads(blob.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise RunFolderError(f"{MANIFEST} is not UTF-8 ({err})", where=str(folder), fix=fix) from None
    except ValueError as err:
        raise RunFolderError(f"{MANIFEST} is not valid JSON, cut short or garbled ({err})", where=str(folder),
                             fix=fix) from None
    if not isinstance(manifest, dict) or manifest.get("format") != RUN_FORMAT:
        raise RunFolderError(f"is not a sweep run folder ({MANIFEST} has no format {RUN_FORMAT!r})", where=str(folder),
                             fix="pass the folder a sweep run wrote")
    state, started = manifest.get("state"), manifest.get("started_at")
    if state is not None and state not in STATES:
        raise RunFolderError(f"{MANIFEST}: state {_short(state)} is not one of {', '.join(STATES)}",
                             where=str(folder), fix=fix)
    if started is not None and not isinstance(started, str):
        raise RunFolderError(f"{MANIFEST}: started_at {_short(started)} is not a date", where=str(folder), fix=fix)
    return manifest


def _short(value, limit: int = 60) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _fleet_of(folder: Path):
    """The run's fleet and the host records left out of it (Skipped): one torn record costs its host,
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
    while files:  # then what only the fleet reader refuses (a record version, no host name), one by one
        try:
            return load_fleet(files, workers=1), skipped
        except HealthFileError as err:
            if not _is_record(err.where, folder) or Path(err.where) not in files:
                raise
            files.remove(Path(err.where))
            skipped.append(Skipped(err.where, err.message))
    first = skipped[0] if skipped else Skipped(str(folder / "hosts"), "no record")
    raise RunFolderError(f"no host record of the run can be read ({first.where}: {first.why})", where=str(folder),
                         fix="repair or remove the run folder (the history skips it meanwhile)")


def _is_record(where: str | None, folder: Path) -> bool:
    return where is not None and Path(where).parent == folder / "hosts"


def _contract_facts(fleet, host_ids, names: _Interner, facts) -> None:
    c = fleet.contracts
    if not len(c):
        return
    codes = c["host"].cat.codes.to_numpy()
    for (contract, title), part in c.groupby(["contract", "title"], observed=True, sort=False).groups.items():
        kid = names.key(f"contract:{contract}", f"Contract: {title}", "health")
        rows = c.loc[part]
        for code, status in zip(codes[part], rows["status"].astype(object).tolist()):
            facts.append((host_ids[code], -1, kid, names.val(status or "unknown")))


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
        facts.append((host_ids[code], -1, kid, names.val(",".join(active.get(code, ())) or "none")))


_SUMMARY = '"summary": ['
_DECODER = json.JSONDecoder()


def _load_summary(text: str) -> list:
    """health.json `load.summary` of a record: the array decoded where it stands (the last list-valued
    "summary" key, after "load"), else from the whole document. Only this array is decoded: a
    second full parse of every record would cost as much as the rest of the index."""
    at, load_at = text.rfind(_SUMMARY), text.rfind('"load": {')
    if at > load_at >= 0:
        try:
            found, _ = _DECODER.raw_decode(text, at + len(_SUMMARY) - 1)
            if isinstance(found, list) and all(isinstance(s, dict) and "gpu" in s for s in found):
                return found
        except ValueError:
            pass
    doc = json.loads(text)
    health = doc.get("health") if isinstance(doc, dict) and "record_version" in doc else doc
    return ((health if isinstance(health, dict) else {}).get("load") or {}).get("summary") or []


def _load_rows(hosts: pd.DataFrame, host_ids) -> list[tuple]:
    """Per GPU, the medians under load of each probed host that ran `--load` (read from its record)."""
    out = []
    for hid, source, status in zip(host_ids, hosts["source"].tolist(), hosts["status"].astype(object).tolist()):
        if status != "ok" or not source:
            continue
        try:
            text = Path(source).read_text(encoding="utf-8")
            summary = _load_summary(text) if '"load": {' in text else []
        except (OSError, ValueError):
            continue
        for s in summary:
            if not isinstance(s, dict) or type(s.get("gpu")) is not int or abs(s["gpu"]) > 2**31:
                continue
            figures = [_finite(s.get(k)) for k in ("sm_mhz_median", "power_w_median", "enforced_limit_w",
                                                    "sw_power_cap_fraction", "hw_slowdown_fraction")]
            if figures[0] is not None:  # a figure that is not a finite number is not a reading
                out.append((hid, s["gpu"], *figures))
    return out


def _finite(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def read_or_skip(folder: str | Path):
    """`read_run`, or Skipped naming the folder and what is wrong with it: one bad run never ends the
    history. Whatever a hostile run folder raises is caught here, in the worker that read it."""
    try:
        return read_run(folder)
    except SweepError as err:
        return Skipped(str(folder), err.message if err.where == str(folder) or not err.where
                       else f"{err.where}: {err.message}")
    except Exception as err:  # noqa: BLE001 - a run folder sweep did not write may hold anything
        return Skipped(str(folder), f"cannot be read ({type(err).__name__}: {err})")


def read_all(folders: list[Path], workers: int):
    """RunRows (or Skipped) of each folder, in order; up to `workers` processes when there are several runs."""
    workers = max(1, min(workers, len(folders)))
    if workers == 1:
        yield from (read_or_skip(f) for f in folders)
        return
    fork = sys.platform.startswith("linux") and threading.active_count() == 1
    context = multiprocessing.get_context("fork" if fork else "spawn")
    with _workers_end_with_sigterm(), ProcessPoolExecutor(
            workers, mp_context=context, initializer=tie_to_parent, initargs=(os.getpid(),)) as pool:
        yield from pool.map(read_or_skip, folders)


def tie_to_parent(parent: int) -> None:
    """Pool initializer: the worker is killed when the process that started it dies, however it dies
    (kill -9 included: Linux PR_SET_PDEATHSIG), and it ends on SIGTERM without the parent's handler."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the prctl: nobody would ever read our answer
        os._exit(1)


@contextlib.contextmanager
def _workers_end_with_sigterm():
    """While the pool reads: SIGTERM kills its workers first, then takes its usual course in this process."""
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
