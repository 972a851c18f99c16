"""The history index: every run folder under a root, reduced to a few small tables in SQLite.

The run folders stay the source of truth; the index is a cache of them that `HistoryIndex.update`
keeps current: a run is read again only when its manifest changed (mtime, size, then a SHA-256 of
its bytes) or its hosts/ folder gained a record, and forgotten when its folder is gone. Delete the
file and the next `update` rebuilds it; so does an index that is damaged (truncated, garbage,
another program's database) or was built by another index version or fact table (a fact added to
`sweep.analysis.facts`, another column or dtype behind one): `HistoryIndex.rebuilt` says why. Run
paths inside the index's folder are kept
relative to it, so `reports/` can move with its index. The index is never opened through a link
and has one writer at a time (`sweep.history.files`).

A run that cannot be read (a manifest cut short, not UTF-8, a `state` that is not a state, ...) is
skipped and named (`UpdateResult.skipped`), never the end of the history; a host record that
cannot be read is left out of its run and named (`runs.skipped`). Many runs are read by worker
processes that die with the process that started them (however it ends).

What a run becomes (names interned in `hosts`, `keys`, `vals`; each run's rows one packed array,
int32 facts and float64 load, because millions of SQL rows take seconds to read back):

    facts(run, host, gpu, key, val)   gpu -1: the host's value. Keys are the facts of
                                      `sweep.analysis.facts.FACTS` (whatever that table holds), each
                                      contract's status, reachability and the HW clock-event
                                      reasons.
                                      A fact's value is its typed value (JSON of its columns: a list
                                      of the distinct per-GPU tuples, `null` where nothing was
                                      read),
                                      rendered only when shown (`render_value`), so rewording a
                                      label
                                      changes no value. A GPU key's per-GPU values are kept only
                                      where
                                      the host's GPUs disagree (the host's value says the rest).
    load(run, host, gpu, sm_mhz, power_w, limit_w, sw_power_cap, hw_slowdown)
                                      the medians of `--load` runs (health.json `load.summary`, as
                                      the fleet frames' load columns hold them)
    speed(run, host, gpu, figure, value)
                                      the speed tier's validated figures (gpu -1: a host figure;
                                      figure: its position in `runs.SPEED_FIGURES`), for their drift
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from sweep.errors import RunFolderError, SweepError
from sweep.analysis import facts as fact_table
from sweep.analysis.facts import mixed_text, signature as fact_signature
from sweep.analysis.fleet import GPU_COLUMNS, HOST_COLUMNS, usable_cpus
from sweep.history.files import IndexLock, refuse_index_links, remove_index
from sweep.history.runs import HW_KEY, REACHABILITY, RunRows, Skipped, read_all, read_or_skip
from sweep.folders import SHARED, make_dirs
from sweep.store import MANIFEST

INDEX_VERSION = 5  # 4: typed values (JSON), not rendered labels; 5: the speed tier's figures
FACT_COLUMNS = ("host", "gpu", "key", "val")
LOAD_COLUMNS = ("host", "gpu", "sm_mhz", "power_w", "limit_w", "sw_power_cap", "hw_slowdown")
SPEED_COLUMNS = ("host", "gpu", "figure", "value")
INDEX_NAME = ".sweep-history.sqlite"
MAX_WORKERS = 4  # each holds one run's frames (~150 MiB for 1,000 8-GPU hosts): a bound on memory

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS runs(id INTEGER PRIMARY KEY, path TEXT UNIQUE, name TEXT,
    started_at TEXT, epoch REAL, state TEXT, stamp TEXT, digest TEXT, hosts INTEGER, skipped TEXT);
CREATE TABLE IF NOT EXISTS hosts(id INTEGER PRIMARY KEY, name TEXT UNIQUE);
CREATE TABLE IF NOT EXISTS keys(id INTEGER PRIMARY KEY, name TEXT UNIQUE, label TEXT, scope TEXT);
CREATE TABLE IF NOT EXISTS vals(id INTEGER PRIMARY KEY, text TEXT UNIQUE);
CREATE TABLE IF NOT EXISTS facts(run INTEGER PRIMARY KEY, rows INTEGER, data BLOB);
CREATE TABLE IF NOT EXISTS load(run INTEGER PRIMARY KEY, rows INTEGER, data BLOB);
CREATE TABLE IF NOT EXISTS speed(run INTEGER PRIMARY KEY, rows INTEGER, data BLOB);
CREATE TABLE IF NOT EXISTS told(path TEXT PRIMARY KEY, stamp TEXT);
"""


@dataclass(frozen=True)
class UpdateResult:
    """What `HistoryIndex.update` did: runs read (added or changed), kept as they were, forgotten,
    skipped (unreadable); `rebuilt`: why the index was rebuilt from the run folders, or None;
    `fresh`: the skipped runs not skipped before as they are now (a warning names each once)."""

    read: tuple[str, ...]
    kept: int
    removed: tuple[str, ...]
    skipped: tuple[Skipped, ...] = ()
    rebuilt: str | None = None
    fresh: tuple[Skipped, ...] = ()


class IndexDamaged(SweepError):
    """The index file holds something that is not a sweep history index (it is rebuilt)."""


def damaged(err: BaseException) -> bool:
    """Whether `err`, met while using the index, says the file is broken (rather than unwritable,
    locked)."""
    if isinstance(err, IndexDamaged):
        return True
    return isinstance(err, sqlite3.DatabaseError) and not isinstance(
        err, (sqlite3.OperationalError, sqlite3.ProgrammingError, sqlite3.InterfaceError)
    )


def run_folders(paths) -> list[Path]:
    """The run folders among `paths`: each path that is one, else its direct subfolders that are."""
    found = []
    for path in (Path(p) for p in paths):
        if (path / MANIFEST).is_file():
            found.append(path)
        elif path.is_dir():
            found.extend(sorted(p for p in path.iterdir() if (p / MANIFEST).is_file()))
        else:
            raise RunFolderError(
                "no such run folder or folder of runs",
                where=str(path),
                fix="pass run folders, or --root the folder that holds them (reports/)",
            )
    return found


def _signature() -> str:
    """The index version and what the fact table declares (names, scopes, history treatment,
    columns and their dtypes) and the health facts it was built with: when sweep gains a fact or
    reads one from other columns, every run is read again."""
    dtypes = {**HOST_COLUMNS, **GPU_COLUMNS}
    return f"{INDEX_VERSION}:" + fact_signature(dtypes) + f";{REACHABILITY};{HW_KEY}"


def render_value(key: str, stored: str) -> str:
    """The text of a value the index keeps: a fact's typed value rendered by the fact table; the
    other keys' (contracts, reachability) text as stored."""
    value = json.loads(stored)
    fact = fact_table.BY_NAME.get(key)
    if fact is None:
        return str(value)
    rows = (
        [dict(zip(fact.columns, v)) for v in value]
        if value is not None
        else [dict.fromkeys(fact.columns)]
    )
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
        self.rebuilt: str | None = None
        try:
            make_dirs(self.path.parent, SHARED)
        except OSError as err:
            raise RunFolderError(
                f"cannot open the history index ({err})",
                where=str(self.path),
                fix="make the folder writable, or choose another with --index",
            ) from None
        refuse_index_links(self.path)
        self.lock = IndexLock(self.path)
        self.lock.acquire()
        self.db: sqlite3.Connection | None = None
        try:
            try:
                self._connect()
            except IndexDamaged as err:
                self.reset(str(err))
        except BaseException:
            self.close()
            raise

    def _connect(self) -> None:
        """Open the index, or raise IndexDamaged when the file is not a current sweep history
        index."""
        try:
            self.db = sqlite3.connect(self.path)
        except sqlite3.Error as err:
            raise RunFolderError(
                f"cannot open the history index ({err})",
                where=str(self.path),
                fix="make the folder writable, or choose another with --index",
            ) from None
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            signature, found = _signature(), self._signature()
            tables = self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if found is None and tables:
                raise IndexDamaged("it is not a sweep history index (another program's database?)")
            if found not in (None, signature):
                raise IndexDamaged("it was built by another sweep version or key table")
            self.db.executescript(_SCHEMA)
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('signature', ?)", (signature,))
            self.db.commit()
            self._ids = {
                t: dict(self.db.execute(f"SELECT {c}, id FROM {t}"))
                for t, c in (("hosts", "name"), ("keys", "name"), ("vals", "text"))
            }
        except sqlite3.Error as err:
            if damaged(err):
                raise IndexDamaged(f"it is damaged ({err})") from None
            raise RunFolderError(
                f"cannot use the history index ({err})",
                where=str(self.path),
                fix="make it writable, or choose another file with --index",
            ) from None

    def reset(self, why: str) -> None:
        """Throw the index away and start an empty one (the run folders are the truth): `rebuilt` =
        why."""
        if self.db is not None:
            self.db.close()
        remove_index(self.path)
        self.rebuilt = f"the history index {self.path} was rebuilt from the run folders: {why}"
        try:
            self._connect()
        except IndexDamaged as err:
            raise RunFolderError(
                f"the history index cannot be rebuilt ({err})",
                where=str(self.path),
                fix="choose another file with --index",
            ) from None

    def _signature(self) -> str | None:
        try:
            row = self.db.execute("SELECT value FROM meta WHERE name='signature'").fetchone()
        except sqlite3.Error:
            return None
        return row[0] if row else ""

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
        self.lock.release()

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
            got = self.db.execute(
                f"INSERT INTO {table}{columns} VALUES ({marks})", (name, *extra)
            ).lastrowid
            ids[name] = got
        return got

    # ------------------------------------------------------------ update

    def update(self, folders, workers: int | None = None, fleets=None) -> UpdateResult:
        """Read the run folders that are new or changed; forget indexed runs whose folder is gone.

        Runs indexed but not among `folders` stay while their folder exists: `sweep history RUN_A
        RUN_B` reads two runs without dropping the rest of the root's history.

        Many runs (a rebuild) are read by `workers` processes (default: one per usable CPU, at most
        MAX_WORKERS); this process alone writes the index. `fleets` (folder -> Fleet): runs whose
        records were already read (`sweep run` reads its run once for the report and the index).
        """
        folders = [Path(f).resolve() for f in folders]
        workers = min(usable_cpus(), MAX_WORKERS) if workers is None else workers
        known = {
            path: (rid, stamp, digest)
            for rid, path, stamp, digest in self.db.execute(
                "SELECT id, path, stamp, digest FROM runs"
            )
        }
        todo, kept, skipped, stamps = [], 0, [], {}
        for folder in folders:
            old = known.pop(self._key(folder), None)
            try:
                job = self._changed(folder, old)
            except OSError as err:
                job = Skipped(str(folder), f"{MANIFEST} cannot be read ({err.strerror or err})")
            if job is None:
                kept += 1
            elif isinstance(job, Skipped):
                skipped.append(self._skip(job, old))
            else:
                todo.append(job)
        read = []
        for (folder, stamp, digest, old_id), rows in _rows_of(todo, workers, fleets or {}):
            if isinstance(rows, Skipped):
                skipped.append(self._skip(rows, (old_id,) if old_id is not None else None))
                stamps[rows.where] = stamp
                continue
            with self.db:
                if old_id is not None:
                    self._forget(old_id)
                self._write(rows, folder, stamp, digest)
            read.append(str(folder))
        removed = []
        with self.db:
            for path, (rid, _, _) in known.items():
                if not (
                    self.path.parent / path / MANIFEST
                ).is_file():  # absolute paths stay absolute
                    self._forget(rid)
                    removed.append(path)
        fresh = self._told(skipped, stamps)
        self.db.commit()
        return UpdateResult(tuple(read), kept, tuple(removed), tuple(skipped), self.rebuilt, fresh)

    def _told(self, skipped: list[Skipped], stamps: dict[str, str]) -> tuple[Skipped, ...]:
        """The skipped runs not already named as they are now; each is remembered as named."""
        fresh = []
        with self.db:
            for skip in skipped:
                key, stamp = self._key(Path(skip.where)), stamps.get(skip.where, "")
                row = self.db.execute("SELECT stamp FROM told WHERE path=?", (key,)).fetchone()
                if row is None or row[0] != stamp:
                    fresh.append(skip)
                    self.db.execute("INSERT OR REPLACE INTO told VALUES (?, ?)", (key, stamp))
        return tuple(fresh)

    def _changed(self, folder: Path, old: tuple | None):
        """None when the indexed run `old` is current, else (folder, stamp, digest, old id) to
        read."""
        stamp = _stamp(folder)
        if old and old[1] == stamp:
            return None
        digest = hashlib.sha256((folder / MANIFEST).read_bytes()).hexdigest()
        hosts_same = old and old[1].rsplit(":", 1)[1] == stamp.rsplit(":", 1)[1]
        if old and old[2] == digest and hosts_same:  # touched, not changed
            self.db.execute("UPDATE runs SET stamp=? WHERE id=?", (stamp, old[0]))
            return None
        return folder, stamp, digest, old[0] if old else None

    def _skip(self, skipped: Skipped, old: tuple | None) -> Skipped:
        """A run that cannot be read is not in the index (its old rows are forgotten): read again
        next time."""
        if old is not None:
            with self.db:
                self._forget(old[0])
        return skipped

    def _write(self, rows: RunRows, folder: Path, stamp: str, digest: str) -> None:
        manifest = rows.manifest
        started = manifest.get("started_at")
        epoch = epoch_of(started)
        if epoch is None:
            epoch = (folder / MANIFEST).stat().st_mtime
        run_id = self.db.execute(
            "INSERT INTO runs(path, name, started_at, epoch, state, stamp, digest, hosts, skipped) "
            "VALUES (?,?,?,?,?,?,?,?,?)",
            (
                self._key(folder),
                folder.name,
                started,
                epoch,
                manifest.get("state"),
                stamp,
                digest,
                len(rows.hosts),
                json.dumps([s.as_dict() for s in rows.skipped]),
            ),
        ).lastrowid
        hosts = np.array([self._id("hosts", h) for h in rows.hosts] or [0], dtype=np.int64)
        keys = np.array([self._id("keys", k[0], k[1:]) for k in rows.keys] or [0], dtype=np.int64)
        vals = np.array([self._id("vals", v) for v in rows.vals] or [0], dtype=np.int64)
        f = rows.facts
        facts = np.column_stack([hosts[f[:, 0]], f[:, 1], keys[f[:, 2]], vals[f[:, 3]]]).astype(
            "<i4"
        )
        self.db.execute("INSERT INTO facts VALUES (?,?,?)", (run_id, len(facts), facts.tobytes()))
        load = np.array([(hosts[h], *rest) for h, *rest in rows.load], dtype="<f8").reshape(
            -1, len(LOAD_COLUMNS)
        )
        self.db.execute("INSERT INTO load VALUES (?,?,?)", (run_id, len(load), load.tobytes()))
        speed = np.array([(hosts[h], *rest) for h, *rest in rows.speed], dtype="<f8").reshape(
            -1, len(SPEED_COLUMNS)
        )
        self.db.execute("INSERT INTO speed VALUES (?,?,?)", (run_id, len(speed), speed.tobytes()))

    def _key(self, folder: Path) -> str:
        """A run's path as the index keeps it: relative to the index's folder when inside it, so
        that
        the folder of runs and its index can move together."""
        base = self.path.parent.resolve()
        return str(folder.relative_to(base)) if folder.is_relative_to(base) else str(folder)

    def _forget(self, run_id: int) -> None:
        for table in ("facts", "load", "speed"):
            self.db.execute(f"DELETE FROM {table} WHERE run=?", (run_id,))
        self.db.execute("DELETE FROM runs WHERE id=?", (run_id,))

    # ------------------------------------------------------------ reading

    def key_of(self, folder: str | Path) -> str:
        """How the index names a run folder (the `path` column of `runs`)."""
        return self._key(Path(folder).resolve())

    # Every reader checks what it returns, as a forged or damaged file could hold anything: ids that
    # name no row, values that are not JSON of their key's shape, text where numbers belong. What
    # does
    # not check out is IndexDamaged, and `sweep.history.build` rebuilds the index from the run
    # folders.

    def runs(self) -> pd.DataFrame:
        """One row per indexed run: id, path, name, started_at, epoch, state, hosts, skipped (a JSON
        list
        of the host records left out); oldest first."""
        rows = list(
            self.db.execute(
                "SELECT id, path, name, started_at, epoch, state, hosts, skipped FROM runs "
                "ORDER BY epoch, id"
            )
        )
        for row in rows:
            _check_run(row)
        return pd.DataFrame(
            rows, columns=["id", "path", "name", "started_at", "epoch", "state", "hosts", "skipped"]
        ).astype({"id": np.int64, "epoch": np.float64})

    def names(self, table: str) -> dict[int, str]:
        column = "text" if table == "vals" else "name"
        names = dict(self.db.execute(f"SELECT id, {column} FROM {table}"))
        if not all(type(k) is int and type(v) is str for k, v in names.items()):
            raise IndexDamaged(
                f"it is damaged ({table} holds a row that is not an id and its text)"
            )
        return names

    def key_table(self) -> pd.DataFrame:
        frame = pd.read_sql_query("SELECT id, name, label, scope FROM keys", self.db).set_index(
            "id"
        )
        if not all(isinstance(v, str) for column in ("name", "scope") for v in frame[column]):
            raise IndexDamaged("it is damaged (keys holds a name or scope that is not text)")
        return frame

    def facts(self, run_ids) -> pd.DataFrame:
        """run, host, gpu, key, val (ids) of the runs `run_ids`; every id names a row, every value
        reads."""
        frame = self._arrays("facts", run_ids, FACT_COLUMNS, "<i4").astype(np.int64)
        self._known(frame, {"host": "hosts", "key": "keys", "val": "vals"})
        keys, vals = self.names("keys"), self.names("vals")
        pairs = np.unique(frame[["key", "val"]].to_numpy(), axis=0) if len(frame) else ()
        for key, val in pairs:
            try:
                render_value(keys[int(key)], vals[int(val)])
            except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
                raise IndexDamaged(
                    f"it is damaged (value {int(val)} of {keys[int(key)]!r} does not read: "
                    f"{type(err).__name__})"
                ) from None
        return frame

    def load(self, run_ids) -> pd.DataFrame:
        """run, host, gpu, sm_mhz, power_w, limit_w, sw_power_cap, hw_slowdown of the runs
        `run_ids`."""
        frame = self._arrays("load", run_ids, LOAD_COLUMNS, "<f8")
        self._known(frame, {"host": "hosts"})
        return frame.astype({"run": np.int64, "host": np.int64, "gpu": np.int64})

    def speed(self, run_ids) -> pd.DataFrame:
        """run, host, gpu, figure, value of the runs `run_ids` (the speed tier's figures)."""
        frame = self._arrays("speed", run_ids, SPEED_COLUMNS, "<f8")
        self._known(frame, {"host": "hosts"})
        return frame.astype(
            {"run": np.int64, "host": np.int64, "gpu": np.int64, "figure": np.int64}
        )

    def _known(self, frame: pd.DataFrame, columns: dict[str, str]) -> None:
        """IndexDamaged when an id of `frame`'s columns names no row of its table (a dangling
        id)."""
        for column, table in columns.items():
            ids = frame[column].to_numpy()
            known = np.fromiter(self.names(table), dtype=np.int64)
            dangling = ids[~np.isin(ids, known)] if len(ids) else ids
            if len(dangling):
                raise IndexDamaged(
                    f"it is damaged ({column} id {dangling[0]:g} names no row of {table})"
                )

    def _arrays(self, table: str, run_ids, columns, dtype) -> pd.DataFrame:
        """A run's rows are one packed array (a blob): 2 million facts read in a blink, where as
        SQL rows they take seconds to become Python tuples."""
        wanted = {int(r) for r in run_ids}
        parts, runs = [], []
        for run, n, data in self.db.execute(f"SELECT run, rows, data FROM {table} ORDER BY run"):
            if run in wanted and n:
                if (
                    not isinstance(data, bytes)
                    or len(data) != n * len(columns) * np.dtype(dtype).itemsize
                ):
                    raise IndexDamaged(f"it is damaged (run {run}: {table} does not hold {n} rows)")
                parts.append(np.frombuffer(data, dtype=dtype).reshape(n, len(columns)))
                runs.append(np.full(n, run, dtype=np.int64))
        array = np.concatenate(parts) if parts else np.zeros((0, len(columns)), dtype=dtype)
        frame = pd.DataFrame(array, columns=list(columns))
        frame.insert(0, "run", np.concatenate(runs) if runs else np.zeros(0, dtype=np.int64))
        return frame


def _check_run(row: tuple) -> None:
    """IndexDamaged unless a `runs` row is typed as the index writes it (its `skipped` a JSON list
    of Skipped)."""
    run_id, path, name, started_at, epoch, state, hosts, skipped = row
    typed = (
        type(run_id) is int
        and isinstance(path, str)
        and isinstance(name, str)
        and isinstance(started_at, (str, type(None)))
        and isinstance(epoch, (int, float, type(None)))
        and isinstance(state, (str, type(None)))
        and isinstance(hosts, (int, type(None)))
        and isinstance(skipped, (str, type(None)))
    )
    try:
        listed = json.loads(skipped or "[]") if typed else None
        typed = (
            typed
            and isinstance(listed, list)
            and all(
                isinstance(s, dict)
                and set(s) == {"where", "why"}
                and all(isinstance(v, str) for v in s.values())
                for s in listed
            )
        )
    except ValueError:
        typed = False
    if not typed:
        raise IndexDamaged(f"it is damaged (run {run_id!r} is not a row the index writes)")


def default_index_path(root: str | Path) -> Path:
    return Path(root) / INDEX_NAME


def _rows_of(todo: list, workers: int, fleets: dict):
    """(job, RunRows or Skipped) of each job: the runs of `fleets` from the fleet already read, the
    others read from their folders."""
    fleets = {Path(folder).resolve(): fleet for folder, fleet in fleets.items()}
    for job in [t for t in todo if t[0] in fleets]:
        yield job, read_or_skip(job[0], fleets[job[0]])
    rest = [t for t in todo if t[0] not in fleets]
    yield from zip(rest, read_all([t[0] for t in rest], workers))
