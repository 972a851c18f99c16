"""The history index: every run folder under a root, reduced to a few small tables in SQLite.

The run folders stay the source of truth; the index is a cache of them that `HistoryIndex.update`
keeps current: a run is read again only when its manifest changed (mtime, size, then a SHA-256 of
its bytes) or its hosts/ folder gained a record, and forgotten when its folder is gone. Delete the
file and the next `update` rebuilds it; a sweep with another index version or another fact table
(a fact added to `sweep.analysis.facts`, another column or dtype behind one) rebuilds it by itself. Run paths inside the index's folder are kept
relative to it, so `reports/` can move with its index.

What a run becomes (names interned in `hosts`, `keys`, `vals`; each run's rows one packed array,
int32 facts and float64 load, because millions of SQL rows take seconds to read back):

    facts(run, host, gpu, key, val)   gpu -1: the host's value. Keys are the facts of
                                      `sweep.analysis.facts.FACTS` (whatever that table holds), each
                                      contract's status, reachability and the HW clock-event reasons.
                                      A fact's value is its typed value (JSON of its columns: a list
                                      of the distinct per-GPU tuples, `null` where nothing was read),
                                      rendered only when shown (`render_value`), so rewording a label
                                      changes no value. A GPU key's per-GPU values are kept only where
                                      the host's GPUs disagree (the host's value says the rest).
    load(run, host, gpu, sm_mhz, power_w, limit_w, sw_power_cap, hw_slowdown)
                                      the medians of `--load` runs (health.json `load.summary`, as
                                      the fleet frames' load columns hold them)
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import sqlite3
import sys
import threading
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from sweep.errors import RunFolderError
from sweep.analysis import facts as table
from sweep.analysis.facts import mixed_text, signature as fact_signature, typed_value
from sweep.analysis.fleet import GPU_COLUMNS, HOST_COLUMNS, load_fleet, rows_at, usable_cpus
from sweep.analysis.keys import host_keys
from sweep.store import MANIFEST, RunFolder

INDEX_VERSION = 3
FACT_COLUMNS = ("host", "gpu", "key", "val")
LOAD_COLUMNS = ("host", "gpu", "sm_mhz", "power_w", "limit_w", "sw_power_cap", "hw_slowdown")
INDEX_NAME = ".sweep-history.sqlite"
HW_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
REACHABILITY = "reachability"
HW_KEY = "hw_clock_reasons"
MAX_WORKERS = 4  # each holds one run's frames (~150 MiB for 1,000 8-GPU hosts): a bound on memory

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS runs(id INTEGER PRIMARY KEY, path TEXT UNIQUE, name TEXT, started_at TEXT,
    epoch REAL, state TEXT, stamp TEXT, digest TEXT, hosts INTEGER);
CREATE TABLE IF NOT EXISTS hosts(id INTEGER PRIMARY KEY, name TEXT UNIQUE);
CREATE TABLE IF NOT EXISTS keys(id INTEGER PRIMARY KEY, name TEXT UNIQUE, label TEXT, scope TEXT);
CREATE TABLE IF NOT EXISTS vals(id INTEGER PRIMARY KEY, text TEXT UNIQUE);
CREATE TABLE IF NOT EXISTS facts(run INTEGER PRIMARY KEY, rows INTEGER, data BLOB);
CREATE TABLE IF NOT EXISTS load(run INTEGER PRIMARY KEY, rows INTEGER, data BLOB);
"""


@dataclass(frozen=True)
class UpdateResult:
    """What `HistoryIndex.update` did: runs read (added or changed), kept as they were, forgotten."""

    read: tuple[str, ...]
    kept: int
    removed: tuple[str, ...]


def run_folders(paths) -> list[Path]:
    """The run folders among `paths`: each path that is one, else its direct subfolders that are."""
    found = []
    for path in (Path(p) for p in paths):
        if (path / MANIFEST).is_file():
            found.append(path)
        elif path.is_dir():
            found.extend(sorted(p for p in path.iterdir() if (p / MANIFEST).is_file()))
        else:
            raise RunFolderError("no such run folder or folder of runs", where=str(path),
                                 fix="pass run folders, or --root the folder that holds them (reports/)")
    return found


def _signature() -> str:
    """The index version and what the fact table declares (names, scopes, history treatment,
    columns and their dtypes) and the health facts it was built with: when sweep gains a fact or
    reads one from other columns, every run is read again."""
    dtypes = {**HOST_COLUMNS, **GPU_COLUMNS}
    return f"{INDEX_VERSION}:" + fact_signature(dtypes) + f";{REACHABILITY};{HW_KEY}"


def _encode(value) -> str:
    """A typed value as the index keeps it (compact JSON: equal values, equal text)."""
    return json.dumps(value, separators=(",", ":"), default=str)


def render_value(key: str, stored: str) -> str:
    """The text of a value the index keeps: a fact's typed value rendered by the fact table; the
    other keys' (contracts, reachability) text as stored."""
    value = json.loads(stored)
    fact = table.BY_NAME.get(key)
    if fact is None:
        return str(value)
    rows = [dict(zip(fact.columns, v)) for v in value] if value is not None else [dict.fromkeys(fact.columns)]
    return fact.render(rows[0]) if len(rows) == 1 else mixed_text(fact, rows)


def is_absent(stored: str) -> bool:
    """Whether a kept value says "not read" (a field older records lack)."""
    return stored == "null"


def _stamp(run: Path) -> str:
    """Cheap change detector: the manifest's mtime and size, and the hosts/ folder's mtime."""
    m = (run / MANIFEST).stat()
    hosts = run / "hosts"
    h = hosts.stat().st_mtime_ns if hosts.is_dir() else 0
    return f"{m.st_mtime_ns}:{m.st_size}:{h}"


def epoch_of(text: str | None) -> float | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class HistoryIndex:
    """The SQLite file of one history; `update(run_folders)` brings it level with them."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path)
        except (OSError, sqlite3.Error) as err:
            raise RunFolderError(f"cannot open the history index ({err})", where=str(self.path),
                                 fix="make the folder writable, or choose another with --index") from None
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        signature = _signature()
        found = self._signature()
        if found not in (None, signature):  # another index version or key table: a cache, so rebuild it
            self.db.close()
            for leftover in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")):
                leftover.unlink(missing_ok=True)
            self.db = sqlite3.connect(self.path)
            self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(_SCHEMA)
        self.db.execute("INSERT OR REPLACE INTO meta VALUES ('signature', ?)", (signature,))
        self.db.commit()
        self._ids = {t: dict(self.db.execute(f"SELECT {c}, id FROM {t}")) for t, c in
                     (("hosts", "name"), ("keys", "name"), ("vals", "text"))}

    def _signature(self) -> str | None:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE name='signature'").fetchone()
        except sqlite3.Error:
            return None
        return row[0] if row else ""

    def close(self) -> None:
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _id(self, table: str, name: str, extra: tuple = ()) -> int:
        ids = self._ids[table]
        got = ids.get(name)
        if got is None:
            columns = {"hosts": "(name)", "keys": "(name, label, scope)", "vals": "(text)"}[table]
            marks = ",".join("?" * (1 + len(extra)))
            got = self.db.execute(f"INSERT INTO {table}{columns} VALUES ({marks})", (name, *extra)).lastrowid
            ids[name] = got
        return got

    # ------------------------------------------------------------ update

    def update(self, folders, workers: int | None = None) -> UpdateResult:
        """Read the run folders that are new or changed; forget indexed runs whose folder is gone.

        Runs indexed but not among `folders` stay while their folder exists: `sweep history RUN_A
        RUN_B` reads two runs without dropping the rest of the root's history.

        Many runs (a rebuild) are read by `workers` processes (default: one per usable CPU, at most
        MAX_WORKERS); this process alone writes the index.
        """
        folders = [Path(f).resolve() for f in folders]
        known = {path: (rid, stamp, digest) for rid, path, stamp, digest in
                 self.db.execute("SELECT id, path, stamp, digest FROM runs")}
        todo, kept = [], 0
        for folder in folders:
            stamp = _stamp(folder)
            old = known.pop(self._key(folder), None)
            if old and old[1] == stamp:
                kept += 1
                continue
            digest = hashlib.sha256((folder / MANIFEST).read_bytes()).hexdigest()
            hosts_same = old and old[1].rsplit(":", 1)[1] == stamp.rsplit(":", 1)[1]
            if old and old[2] == digest and hosts_same:  # touched, not changed
                self.db.execute("UPDATE runs SET stamp=? WHERE id=?", (stamp, old[0]))
                kept += 1
                continue
            todo.append((folder, stamp, digest, old[0] if old else None))
        for (folder, stamp, digest, old_id), rows in zip(todo, _read_all([t[0] for t in todo], workers)):
            with self.db:
                if old_id is not None:
                    self._forget(old_id)
                self._write(rows, folder, stamp, digest)
        removed = []
        with self.db:
            for path, (rid, _, _) in known.items():
                if not (self.path.parent / path / MANIFEST).is_file():  # absolute paths stay absolute
                    self._forget(rid)
                    removed.append(path)
        self.db.commit()
        return UpdateResult(tuple(str(t[0]) for t in todo), kept, tuple(removed))

    def _write(self, rows: RunRows, folder: Path, stamp: str, digest: str) -> None:
        manifest = rows.manifest
        started = manifest.get("started_at")
        epoch = epoch_of(started)
        if epoch is None:
            epoch = (folder / MANIFEST).stat().st_mtime
        run_id = self.db.execute(
            "INSERT INTO runs(path, name, started_at, epoch, state, stamp, digest, hosts) VALUES (?,?,?,?,?,?,?,?)",
            (self._key(folder), folder.name, started, epoch, manifest.get("state"), stamp, digest,
             len(rows.hosts))).lastrowid
        hosts = np.array([self._id("hosts", h) for h in rows.hosts] or [0], dtype=np.int64)
        keys = np.array([self._id("keys", k[0], k[1:]) for k in rows.keys] or [0], dtype=np.int64)
        vals = np.array([self._id("vals", v) for v in rows.vals] or [0], dtype=np.int64)
        f = rows.facts
        facts = np.column_stack([hosts[f[:, 0]], f[:, 1], keys[f[:, 2]], vals[f[:, 3]]]).astype("<i4")
        self.db.execute("INSERT INTO facts VALUES (?,?,?)", (run_id, len(facts), facts.tobytes()))
        load = np.array([(hosts[h], *rest) for h, *rest in rows.load], dtype="<f8").reshape(-1, len(LOAD_COLUMNS))
        self.db.execute("INSERT INTO load VALUES (?,?,?)", (run_id, len(load), load.tobytes()))

    def _key(self, folder: Path) -> str:
        """A run's path as the index keeps it: relative to the index's folder when inside it, so that
        the folder of runs and its index can move together."""
        base = self.path.parent.resolve()
        return str(folder.relative_to(base)) if folder.is_relative_to(base) else str(folder)

    def _forget(self, run_id: int) -> None:
        for table in ("facts", "load"):
            self.db.execute(f"DELETE FROM {table} WHERE run=?", (run_id,))
        self.db.execute("DELETE FROM runs WHERE id=?", (run_id,))

    # ------------------------------------------------------------ reading

    def key_of(self, folder: str | Path) -> str:
        """How the index names a run folder (the `path` column of `runs`)."""
        return self._key(Path(folder).resolve())

    def runs(self) -> pd.DataFrame:
        """One row per indexed run: id, path, name, started_at, epoch, state, hosts; oldest first."""
        return pd.read_sql_query("SELECT id, path, name, started_at, epoch, state, hosts FROM runs ORDER BY epoch, id",
                                 self.db)

    def names(self, table: str) -> dict[int, str]:
        column = "text" if table == "vals" else "name"
        return dict(self.db.execute(f"SELECT id, {column} FROM {table}"))

    def key_table(self) -> pd.DataFrame:
        return pd.read_sql_query("SELECT id, name, label, scope FROM keys", self.db).set_index("id")

    def facts(self, run_ids) -> pd.DataFrame:
        """run, host, gpu, key, val (ids) of the runs `run_ids`."""
        return self._arrays("facts", run_ids, FACT_COLUMNS, "<i4").astype(np.int64)

    def load(self, run_ids) -> pd.DataFrame:
        """run, host, gpu, sm_mhz, power_w, limit_w, sw_power_cap, hw_slowdown of the runs `run_ids`."""
        frame = self._arrays("load", run_ids, LOAD_COLUMNS, "<f8")
        return frame.astype({"run": np.int64, "host": np.int64, "gpu": np.int64})

    def _arrays(self, table: str, run_ids, columns, dtype) -> pd.DataFrame:
        """A run's rows are one packed array (a blob): 2 million facts read in a blink, where as
        SQL rows they take seconds to become Python tuples."""
        wanted = {int(r) for r in run_ids}
        parts, runs = [], []
        for run, n, data in self.db.execute(f"SELECT run, rows, data FROM {table} ORDER BY run"):
            if run in wanted and n:
                parts.append(np.frombuffer(data, dtype=dtype).reshape(n, len(columns)))
                runs.append(np.full(n, run, dtype=np.int64))
        array = np.concatenate(parts) if parts else np.zeros((0, len(columns)), dtype=dtype)
        frame = pd.DataFrame(array, columns=list(columns))
        frame.insert(0, "run", np.concatenate(runs) if runs else np.zeros(0, dtype=np.int64))
        return frame


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


def read_run(folder: str | Path) -> RunRows:
    """Read one run folder into rows (runs in a worker process when many runs are read)."""
    folder = Path(folder)
    _, manifest = RunFolder.existing(folder)
    fleet = load_fleet([folder], workers=1)
    keys, mixed, gpu_keys = host_keys(fleet)
    hosts = fleet.hosts
    names = _Interner()
    host_ids = [names.host(str(h)) for h in hosts["host"]]
    facts: list[tuple] = []
    probed = (hosts["status"] == "ok").to_numpy()
    for fact in table.FACTS:
        kid = names.key(fact.name, fact.label, fact.scope)
        for position, value in _host_values(fact, hosts, gpu_keys):
            if probed[position]:
                facts.append((host_ids[position], -1, kid, names.val(_encode(value))))
    for fact in table.GPU_FACTS:  # per-GPU values where a host's GPUs disagree
        mixed_hosts = np.flatnonzero(mixed[fact.name].to_numpy(dtype=bool))
        if not len(mixed_hosts):
            continue
        kid = names.key(fact.name, fact.label, "gpu")
        rows, combos = gpu_keys.rows[fact.name], gpu_keys.combos[fact.name]
        for r in np.flatnonzero(np.isin(gpu_keys.host_codes, mixed_hosts)).tolist():
            value = typed_value(fact, rows[combos[r]])
            facts.append((host_ids[gpu_keys.host_codes[r]], int(gpu_keys.gpu_index[r]), kid,
                          names.val(_encode(None if value is None else [value]))))
    reach = names.key(REACHABILITY, "Reachability", "health")
    for hid, s, f in zip(host_ids, hosts["status"].astype(object).tolist(), hosts["failure_class"].astype(object).tolist()):
        facts.append((hid, -1, reach, names.val(_encode("ok" if s == "ok" else f"unreachable ({f})"))))
    _contract_facts(fleet, host_ids, names, facts)
    _hw_facts(fleet, host_ids, names, facts)
    load = _load_rows(fleet, host_ids)
    array = np.array(facts, dtype=np.int64).reshape(-1, 4)
    return RunRows(str(folder), manifest, list(names.hosts), list(names.keys), list(names.vals), array, load)


def _host_values(fact, hosts: pd.DataFrame, gpu_keys):
    """(host position, typed value) of every host: a host fact's value as a one-item list; a GPU
    fact's distinct per-GPU values (the GPUs the mask selects) in a sorted list; None: not read."""
    if fact.scope == "host":
        for position, row in enumerate(rows_at(hosts[list(fact.columns)], range(len(hosts)))):
            value = typed_value(fact, row)
            yield position, None if value is None else [value]
        return
    rows, combos = gpu_keys.rows[fact.name], gpu_keys.combos[fact.name]
    per_host: dict[int, set] = {}
    for code, combo in zip(gpu_keys.host_codes.tolist(), combos.tolist()):
        per_host.setdefault(code, set()).add(combo)
    for position in range(len(hosts)):
        values = {typed_value(fact, rows[c]) for c in per_host.get(position, ())}
        known = sorted((v for v in values if v is not None), key=_encode)
        yield position, known or None


def _contract_facts(fleet, host_ids, names: _Interner, facts) -> None:
    c = fleet.contracts
    if not len(c):
        return
    codes = c["host"].cat.codes.to_numpy()
    for (contract, title), part in c.groupby(["contract", "title"], observed=True, sort=False).groups.items():
        kid = names.key(f"contract:{contract}", f"Contract: {title}", "health")
        rows = c.loc[part]
        for code, status in zip(codes[part], rows["status"].astype(object).tolist()):
            facts.append((host_ids[code], -1, kid, names.val(_encode(status or "unknown"))))


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
        facts.append((host_ids[code], -1, kid, names.val(_encode(",".join(active.get(code, ())) or "none"))))


def _load_rows(fleet, host_ids) -> list[tuple]:
    """Per GPU, the medians under load of each probed host that ran `--load` (the frames' load columns)."""
    g = fleet.gpus
    columns = ["host", "index", "sm_load_mhz", "load_power_w", "load_limit_w", "load_sw_power_cap", "load_hw_slowdown"]
    ran = g[g["sm_load_mhz"].notna().to_numpy(dtype=bool) & g["index"].notna().to_numpy(dtype=bool)]
    codes = ran["host"].cat.codes.to_numpy()
    rows = rows_at(ran[columns[1:]], range(len(ran)))
    return [(host_ids[code], r["index"], r["sm_load_mhz"], r["load_power_w"], r["load_limit_w"],
             r["load_sw_power_cap"], r["load_hw_slowdown"]) for code, r in zip(codes.tolist(), rows)]


def _read_all(folders: list[Path], workers: int | None):
    """RunRows of each folder, in order; several processes when there are several runs to read."""
    if workers is None:
        workers = min(usable_cpus(), MAX_WORKERS)
    workers = max(1, min(workers, len(folders)))
    if workers == 1:
        yield from (read_run(f) for f in folders)
        return
    fork = sys.platform.startswith("linux") and threading.active_count() == 1
    context = multiprocessing.get_context("fork" if fork else "spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        yield from pool.map(read_run, folders)


def default_index_path(root: str | Path) -> Path:
    return Path(root) / INDEX_NAME
