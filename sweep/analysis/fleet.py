"""Load host records and health.json files into pandas: one frame per host, one per GPU.

`load_fleet(paths)` accepts run folders (``RUN/manifest.json`` + ``RUN/hosts/*.json``), host-record
files, plain health.json files, provenance files (``sweep wrap``: the probe before the command is
the host's health, the verdict's summary its ``provenance`` column), and folders of these. A host
that failed is a row like any other, with its failure class; a file that is none of these is a
HealthFileError. With `keep_health=True` the fleet also keeps each host's health.json as it was
read, and `records_of(fleet)` gives the hosts back as run-folder records (for audits), read once.

The frames keep raw facts only (what the host said; one file's rows: `sweep.analysis.rows`);
compare.py derives the comparability keys.
JSON is parsed one file at a time with the stdlib and reduced to row tuples at once, so memory holds
the frames, not the documents; from PARALLEL_FROM files on, worker processes parse chunks of the
files and send back typed frames, which are concatenated in file order.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
import threading
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sweep.analysis.columns import (
    CONTRACT_COLUMNS,
    CONTRACT_KEYS,
    CONTRACT_ROW,
    GPU_COLUMNS,
    HOST_COLUMNS,
    PROCESS_COLUMNS,
)
from sweep.analysis.frames import concat_frames, layout_frame, typed_frame
from sweep.analysis.load_record import load_summary
from sweep.analysis.rows import GPU_ROW, dig, foreign_processes, gpu_facts, host_facts, host_maps
from sweep.analysis.speed_record import gpu_view, read_speed
from sweep.errors import HealthFileError, SweepError
from sweep.inventory.formats import IMPLICIT_GROUPS
from sweep.schema import health_problem
from sweep.store import RECORD_VERSION, list_records, normalize_health, read_json

PROVENANCE_KIND = "sweep.provenance"
_EMPTY: dict = {}
# the failure message of a host the run's manifest lists and no record holds
_NOT_PROBED = (
    "listed in the run's manifest but without a record: the sweep stopped before this host"
)


@dataclass(frozen=True)
class Fleet:
    """The loaded fleet: `hosts` (one row per host), `gpus`, `contracts` (14 per probed host; 9 in
    schema 1.0), `processes` (the foreign ones: those the agent's own "processes" contract
    names)."""

    hosts: pd.DataFrame
    gpus: pd.DataFrame
    contracts: pd.DataFrame
    processes: pd.DataFrame
    sources: tuple[str, ...] = ()
    # per row of `hosts`, with load_fleet(keep_health=True)
    health: tuple = field(default=(), repr=False)
    # host -> its record's `wrap` section (sweep run --wrap)
    wraps: dict = field(default_factory=dict, repr=False)
    # host -> its kernel_log, for hosts with Xid / SXid events
    kernel: dict = field(default_factory=dict, repr=False)


def load_fleet(paths, workers: int | None = None, keep_health: bool = False) -> Fleet:
    """Read every host of `paths` (run folders, host records, health.json files) into a Fleet.

    Big inputs are parsed by `workers` processes (default: one per CPU, for 2,000 files or more).
    `keep_health` keeps each host's health.json as read (`Fleet.health`, for `records_of`).
    """
    sources, files, listed = [], [], []
    for path in (Path(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths)):
        sources.append(str(path))
        listing = list_records(path)
        where = probed_in(listing)
        files.extend(
            (file, listing.groups, listing.digests.get(file.name), where) for file in listing.files
        )
        listed.append(listing)
    if not files:
        raise HealthFileError(
            "no host record or health.json found",
            where=", ".join(sources) or "(no path)",
            fix="pass a run folder, host-record files or health.json files",
        )
    if workers is None:
        workers = min(usable_cpus(), 8) if len(files) >= PARALLEL_FROM else 1
    workers = max(1, min(workers, len(files)))
    size = -(-len(files) // (workers * 4))  # four chunks per worker even out slow files
    chunks = [
        (start, files[start : start + size], keep_health) for start in range(0, len(files), size)
    ]
    if workers > 1:
        # fork (no re-import) where it is safe: Linux, and no other thread that could hold a lock
        fork = sys.platform.startswith("linux") and threading.active_count() == 1
        context = multiprocessing.get_context("fork" if fork else "spawn")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            if fork:  # the workers inherit the chunks: each is sent as its number, not pickled
                _FORKED[:] = chunks
                try:
                    parts = list(pool.map(_load_forked, range(len(chunks))))
                finally:
                    _FORKED.clear()
            else:
                parts = list(pool.map(_load_chunk, chunks))
    else:
        parts = [_load_chunk((0, files, keep_health))]
    for part in parts:
        if isinstance(part, tuple):  # a SweepError from a worker, sent back as data
            kind, message, where, fix = part
            raise kind(message, where=where, fix=fix)
    unprobed = _unprobed(parts, listed, len(files), keep_health)
    return _assemble(parts + ([unprobed] if unprobed else []), tuple(sources))


def _unprobed(parts, listed, offset, keep_health):
    """Rows for hosts a run's manifest lists but that have no record (the sweep stopped first)."""
    recorded = {name for part in parts for name in part.hosts["host"].dropna().tolist()}
    builder = _Builder(offset, keep_health)
    for manifest in listed:
        for name in manifest.hosts:
            if name not in recorded:
                recorded.add(name)
                builder.add(
                    manifest.manifest_path,
                    {
                        "record_version": RECORD_VERSION,
                        "host": name,
                        "status": "failed",
                        "health": None,
                        "failure": {
                            "class": "not_probed",
                            "message": _NOT_PROBED,
                        },
                    },
                    manifest.groups,
                )
    return builder.typed() if builder.hosts else None


PARALLEL_FROM = 2000
# the agent runs in a login session's environment (its mask, its python3)
LOGIN_ENGINES = ("ssh", "ansible")
# the agent runs as a task of a job step: the job's mask (gres), the job's environment
JOB_ENGINES = ("slurm",)


def probed_in(listing) -> str | None:
    """Where the agent of a run folder's records ran, from the engines its manifest names (the run's
    ``options.engine`` and each session's): "login" when every one is a login session's (ssh,
    ansible), "job" when one ran it in a Slurm job step, None when the manifest does not say (no
    manifest: a health.json or a record file read alone, which a prolog or a HealthCheckProgram may
    have written)."""
    engines = set(listing.engines)  # read with the manifest's hosts (`list_records`), not again
    if engines & set(JOB_ENGINES):
        return "job"
    return "login" if engines and engines <= set(LOGIN_ENGINES) else None


def usable_cpus() -> int:
    """CPUs this process may run on (taskset / cgroup cpusets included), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


_FORKED: list = []  # load_fleet's chunks, for the workers it forks (`_load_forked`)


def _load_forked(number: int):
    """`_load_chunk` of the chunk a forked worker inherited: 10,000 file paths are not pickled to
    the workers and rebuilt there (0.04 CPU-s at 10,000 records)."""
    return _load_chunk(_FORKED[number])


def _load_chunk(chunk):
    """Parse files[start:...] into a _Builder whose host positions start at `start`.

    The cyclic garbage collector is paused meanwhile: a parsed document holds no cycle (reference
    counts free it once its rows are taken), and each collection would walk the containers of the
    document being parsed again, and every row kept so far."""
    start, files, keep_health = chunk
    builder = _Builder(start, keep_health)
    collecting = gc.isenabled()
    gc.disable()
    try:
        # digest: the record's own as sweep wrote it (store.read_digests)
        for file, groups_of, digest, where in files:
            builder.add(file, _read_json(file, digest), groups_of, where)
        return builder.typed()  # still paused: each collection would walk every row
    except SweepError as err:
        return (type(err), err.message, err.where, err.fix)
    finally:
        if collecting:
            gc.enable()


def rows_at(frame: pd.DataFrame, positions) -> list[dict]:
    """The rows at `positions` as dicts of plain Python values, NA as None.

    Column by column (each one C-level conversion to Python objects), then zipped into rows: the
    frame-wide ``astype(object).where(...).to_dict("records")`` boxed every value through a
    Python call, 0.49 s for the 138,516 contract rows of a 10,000-host fleet, 0.12 s this way
    (issue 52)."""
    rows = frame.iloc[positions]
    names = list(rows.columns)
    columns = [
        rows.iloc[:, i].to_numpy(dtype=object, na_value=None).tolist() for i in range(len(names))
    ]
    return [dict(zip(names, values)) for values in zip(*columns)]


def records_of(fleet: Fleet) -> dict[str, dict]:
    """host -> a run-folder record of every host of the fleet, under the report's host names and
    groups.

    The health.json of each reachable host is the one the frames were made from (a record's, a plain
    health.json, a provenance file's probe before), as load_fleet(keep_health=True) kept it; a fleet
    loaded without it has each one read again from its source. For
    `sweep.audit.baseline.audit_section`.
    """
    columns = ["host", "groups", "source", "status", "failure_class", "failure_message"]
    kept = fleet.health if len(fleet.health) == len(fleet.hosts) else [None] * len(fleet.hosts)
    out = {}
    for row, health in zip(rows_at(fleet.hosts[columns], range(len(fleet.hosts))), kept):
        if row["status"] != "ok":
            health = None
        elif health is None:
            health = _health_of(_read_json(Path(row["source"])))
        out[row["host"]] = {
            "record_version": RECORD_VERSION,
            "host": row["host"],
            "groups": row["groups"].split(",") if row["groups"] else [],
            "status": row["status"],
            "failure": None
            if health
            else {"class": row["failure_class"], "message": row["failure_message"]},
            "health": health,
        }
    return out


def _health_of(doc: dict) -> dict:
    """The health.json in a document read again: a record's, a provenance file's probe before, or
    itself."""
    if "record_version" in doc:
        return doc["health"]
    return doc["before"] if doc.get("kind") == PROVENANCE_KIND else doc


class _Builder:
    """Collects rows as tuples while files are read; `typed` turns them into frames at the end."""

    def __init__(self, offset: int = 0, keep_health: bool = False):
        self.offset = offset  # position of this builder's first host in the whole fleet
        self.hosts, self.gpus, self.contracts, self.processes = [], [], [], []
        self.plain = []  # (row position, reported hostname, file stem) of plain health.json files
        self.health = [] if keep_health else None  # each host's health.json as read, when kept
        # (row position, a reachable host's `wrap` section, its file), as the records are read
        self.wraps = []
        self.kernel = []  # (row position, the kernel_log of a host with Xid / SXid events)

    def add(self, path: Path, doc, groups_of, where: str | None = None):
        """One file's document; `where`: where its run's agent ran (`probed_in`), for a run folder's
        record."""
        if isinstance(doc, dict) and "record_version" in doc:
            self._add_record(path, doc, groups_of, where)
        elif isinstance(doc, dict) and doc.get("kind") == "sweep.health":
            _check_health(path, doc, schema=True)
            self._add_plain(path, doc, path.stem)
        elif isinstance(doc, dict) and doc.get("kind") == PROVENANCE_KIND:
            health = _provenance_health(path, doc)
            verdict = doc.get("verdict") if isinstance(doc.get("verdict"), dict) else {}
            self._add_plain(
                path, health, _provenance_name(path), verdict.get("summary") or "no verdict"
            )
        else:
            raise HealthFileError(
                "is neither a sweep host record, a health.json (kind sweep.health) nor a "
                "provenance file (kind sweep.provenance)",
                where=str(path),
                fix="pass a run folder, host-record files, health.json or provenance.json files",
            )

    def _add_plain(self, path, health, stem, provenance=None):
        """A health.json (or a provenance file's probe before): named in _host_names, once all are
        read."""
        reported = dig(health, "host", "hostname")
        reported = reported if isinstance(reported, str) and reported else None
        self.plain.append((self.offset + len(self.hosts), reported, stem))
        self._add_host(path, "", None, health, status="ok", provenance=provenance)

    def _add_record(self, path, rec, groups_of, where=None):
        if rec.get("record_version") != RECORD_VERSION:
            raise HealthFileError(
                f"has record version {rec.get('record_version')!r}; this sweep reads "
                f"version {RECORD_VERSION}",
                where=str(path),
                fix="report it with the sweep version that wrote it",
            )
        name = rec.get("host")
        if not isinstance(name, str) or not name:
            raise HealthFileError(
                "host record without a host name",
                where=str(path),
                fix="pass the files a sweep run wrote",
            )
        health, status, failure = rec.get("health"), rec.get("status"), rec.get("failure") or {}
        if status == "ok" and not isinstance(health, dict):
            status, failure = (
                "failed",
                {"class": "bad_output", "message": "record says ok but holds no health.json"},
            )
        if isinstance(health, dict):
            _check_health(path, health)
        groups = rec.get("groups")
        if groups is None:
            groups = groups_of.get(name)
        if isinstance(groups, str):
            groups = [groups]
        if status == "ok" and isinstance(rec.get("wrap"), dict):
            self.wraps.append((self.offset + len(self.hosts), rec["wrap"], str(path)))
        record = (
            ",".join(g for g in groups or () if g not in IMPLICIT_GROUPS) or None,
            failure.get("class"),
            failure.get("message"),
            rec.get("attempts"),
            rec.get("duration_s"),
            rec.get("address"),
        )
        self._add_host(
            path,
            name,
            record,
            health if isinstance(health, dict) else None,
            status="ok" if status == "ok" else "failed",
            where=where,
        )

    def _add_host(self, path, name, record, health, status, provenance=None, where=None):
        if self.health is not None:
            self.health.append(health)
        groups, failure_class, failure_message, attempts, duration, address = record or (None,) * 6
        row = {
            "host": name,
            "groups": groups,
            "source": str(path),
            "status": status,
            "failure_class": failure_class if status == "failed" or health is None else None,
            "failure_message": failure_message,
            "attempts": attempts,
            "duration_s": duration,
            "address": address,
        }
        if health is None:
            row["failure_class"] = failure_class or "agent_error"
            self.hosts.append(row)
            return
        position = self.offset + len(self.hosts)
        contracts = health.get("contracts") or []
        gpus = health.get("gpus") or []
        mask = health.get("mask")
        if isinstance(mask, dict):
            picked = {s.get("physical_index") for s in mask.get("selected") or ()}
        else:  # no mask read: CUDA sees what NVML sees
            picked = {g.get("index") for g in gpus}
        row.update(
            host_facts(health, contracts, gpus, picked), provenance=provenance, probed_in=where
        )
        self.hosts.append(row)
        log = health.get("kernel_log")
        if isinstance(log, dict) and (log.get("xid") or log.get("sxid")):
            self.kernel.append((position, log))
        self._add_gpus(position, health, gpus, picked, foreign_processes(health, contracts))
        self.contracts.extend(
            (position, i, *map(c.get, CONTRACT_KEYS)) for i, c in enumerate(contracts)
        )

    def _add_gpus(self, position: int, health: dict, gpus: list, picked: set, foreign: set) -> None:
        """One row per GPU, and per process the agent counts as foreign; each carries its host's
        position."""
        under_load = {
            gpu: row
            for gpu, row in load_summary(health).items()
            if type(row.get("sm_mhz_median")) in (int, float)
        }
        speed = read_speed(health) if health.get("speed") is not None else None
        maps = host_maps(health)
        rows = self.gpus
        for g in gpus:
            index = g.get("index")
            rows.append(
                gpu_facts(
                    g if speed is None else gpu_view(g, speed),
                    under_load.get(index) or _EMPTY,
                    position,
                    index in picked,
                    maps,
                )
            )
            if not foreign:  # most hosts: no process to look at
                continue
            for p in (p for p in g.get("processes") or () if (index, p.get("pid")) in foreign):
                job = p.get("job") if isinstance(p.get("job"), dict) else {}
                self.processes.append(
                    {
                        "host": position,
                        "gpu": index,
                        "pid": p.get("pid"),
                        "name": p.get("name"),
                        "used_memory_bytes": p.get("used_memory_bytes"),
                        "user": p.get("user"),
                        "job": job.get("id"),
                        "job_user": job.get("user"),
                    }
                )

    def typed(self) -> "_TypedRows":
        """This chunk's rows as typed frames (their host column still the host's position)."""
        return _TypedRows(
            typed_frame(self.hosts, HOST_COLUMNS, "host"),
            layout_frame(self.gpus, GPU_ROW, GPU_COLUMNS, "GPU"),
            layout_frame(self.contracts, CONTRACT_ROW, CONTRACT_COLUMNS, "contract"),
            typed_frame(self.processes, PROCESS_COLUMNS, "process"),
            self.plain,
            self.health,
            self.wraps,
            self.kernel,
        )


@dataclass
class _TypedRows:
    """One chunk of records as typed frames (host column: the position), and what rides beside
    them."""

    hosts: pd.DataFrame
    gpus: pd.DataFrame
    contracts: pd.DataFrame
    processes: pd.DataFrame
    plain: list
    health: list | None
    wraps: list
    kernel: list = field(default_factory=list)


def _assemble(chunks, sources) -> Fleet:
    """One Fleet from the typed chunks, in file order, host positions turned into host names."""
    hosts, gpus, contracts, processes = (
        concat_frames([getattr(c, t) for c in chunks])
        for t in ("hosts", "gpus", "contracts", "processes")
    )
    names = _host_names(hosts["host"].tolist(), [p for c in chunks for p in c.plain])
    hosts["host"] = pd.array(names, dtype="string")
    categories = pd.CategoricalDtype(pd.Index(names, dtype="string"))
    for frame in (gpus, contracts, processes):
        frame["host"] = pd.Categorical.from_codes(
            frame["host"].to_numpy(dtype="int64"), dtype=categories
        )
    health = () if chunks[0].health is None else tuple(h for c in chunks for h in c.health)
    wraps = {
        names[position]: dict(wrap, source=path) for c in chunks for position, wrap, path in c.wraps
    }
    kernel = {names[position]: log for c in chunks for position, log in c.kernel}
    return Fleet(hosts, gpus, contracts, processes, sources, health, wraps, kernel)


def _host_names(names, plain) -> list[str]:
    """Names of plain health.json files: their hostname, or the file stem when missing or taken."""
    taken = Counter(name for name in names if name)
    reported = Counter(hostname for _, hostname, _ in plain if hostname)
    for position, hostname, stem in plain:
        names[position] = (
            hostname if hostname and reported[hostname] == 1 and not taken[hostname] else stem
        )
    seen = Counter()
    for i, name in enumerate(names):  # the same name twice (two runs, two copies): keep both
        seen[name] += 1
        if seen[name] > 1:
            names[i] = f"{name}#{seen[name]}"
    return names


def _provenance_health(path, doc) -> dict:
    """The probe before the command of a provenance file (schema provenance-1), checked as a
    health.json."""
    version = str(doc.get("schema_version") or "")
    if not version.startswith("1."):
        newer = version.split(".")[0].isdigit() and int(version.split(".")[0]) > 1
        raise HealthFileError(
            f"provenance file of schema version {version or '?'}; this sweep reads 1.x",
            where=str(path),
            fix="upgrade sweep to read it"
            if newer
            else "wrap the run with this sweep (sweep wrap)",
        )
    health = doc.get("before")
    if not isinstance(health, dict):
        raise HealthFileError(
            "provenance file without its probe before the command",
            where=str(path),
            fix="pass a provenance.json written by sweep wrap",
        )
    _check_health(path, health, schema=True)
    return health


def _provenance_name(path: Path) -> str:
    """A provenance file's name for its host when the hostname is missing or taken:
    runs/r17/provenance.json is r17, bench/a100.provenance.json is a100."""
    stem = path.stem[: -len(".provenance")] if path.stem.endswith(".provenance") else path.stem
    if stem == "provenance":  # sweep wrap's own file name: the folder names the run
        return path.resolve().parent.name or stem
    return stem


def _check_health(path, health, schema: bool = False):
    """A health.json of schema 1.x, normalized; `schema`: checked against the published schema too
    (a plain file or a provenance file's probe; a record's health.json was checked as the store read
    it back)."""
    version = str(health.get("schema_version") or "")
    if health.get("kind") != "sweep.health" or not version.startswith("1."):
        newer = version.split(".")[0].isdigit() and int(version.split(".")[0]) > 1
        raise HealthFileError(
            f"health.json of schema version {version or '?'} (kind {health.get('kind')!r}); "
            "this sweep reads 1.x",
            where=str(path),
            fix="upgrade sweep to read it" if newer else "probe the host with this sweep's agent",
        )
    problem = health_problem(health) if schema else None
    if problem:
        raise HealthFileError(
            f"is not a health.json sweep can read ({problem})",
            where=str(path),
            fix="pass health.json as the agent printed it",
        )
    normalize_health(health)


def _read_json(path: Path, digest: str | None = None):
    return read_json(
        path,
        HealthFileError,
        "pass health.json as the agent printed it, or a run folder's host record",
        digest,
    )
