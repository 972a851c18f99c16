"""The run folder: one record per host, written the moment the host is done, and a manifest.

Layout (record version 1)::

    reports/20261129T181223Z-inventory/
        manifest.json          format, versions, inventory path + snapshot, options, state, hosts
        hosts/gpu01.json       {"record_version": 1, "host": "gpu01", "status": "ok", "health": {...}, ...}
                               (`sweep run --wrap`: also "wrap": {status, why, figures, provenance})

Every file is written whole or not at all (a temporary file in the same folder, fsync, rename):
a controller killed with ``kill -9`` leaves at most a ``.tmp-*`` file, which `RunFolder.open`
removes. File names are made safe (`safe_name`); the real host name stays inside the record, and a
record is never written onto a file that holds another host's record.

One sweep at a time: `RunFolder.create` and `RunFolder.open` (``--resume``) hold an exclusive
``flock`` on ``.lock`` inside the folder until the sweep ends (the kernel drops it when the process
dies); a second sweep is refused with the holder's pid. Writes never follow a symbolic link: the
folder's parts (``hosts/``, ``report/``, every file written) are opened with ``O_NOFOLLOW``, and a
link planted there is refused (`refuse_links`) instead of written through.

``sweep run --resume RUN --retry-failed`` sets a failed record aside as ``hosts/<name>~attempt-N.json``
(`RunFolder.set_aside`) before the host is swept again; every reader here skips those files
(`is_attempt_file`): they are earlier attempts, not hosts.

Each record sweep writes is also listed, as it is written, in ``records.sha256`` (the format of
``sha256sum``, so ``sha256sum -c records.sha256`` checks a folder; the last line for a file wins), and
that line's HMAC with this user's key in ``records.mac`` (`sweep.trust`): a record was validated
strictly when it arrived, so a reader that finds the file's bytes unchanged under a line that verifies
reads it back with orjson's parse alone (`sweep.strictjson.loads_known`); any other file (no line,
another digest, a line that does not verify, a folder this user's sweep did not write) is read strictly
again and checked against the schema (`read_record`). Every file is read back through `read_bounded`:
no link, no FIFO or device, bounded in size (docs/security.md). The manifest is signed as it is written.

This module is the one reader of run folders too: `load_run` (a whole run: run diffs, baselines,
audits, the export), `RunFolder.read_records` (resume), `list_records` (the files a report reads, and
the hosts a manifest lists), `manifest_groups` and `read_json`.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import hmac
import os
import re
import secrets
import stat
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sweep.inventory.command_line import INLINE_NAME, is_inline
from probe_agent import xid
from sweep import __version__
from sweep.errors import HealthFileError, ReadBackWarning, RunFolderError, SweepError
from sweep.inventory.formats import IMPLICIT_GROUPS
from sweep.schema import manifest_problem, record_problem
from sweep.strictjson import dumps, loads, loads_known
from sweep.text import host_key
from sweep.trust import line_mac, sign

RECORD_VERSION = 1
RUN_FORMAT = "sweep-run"
MANIFEST = "manifest.json"
HOSTS = "hosts"
DIGESTS = "records.sha256"  # "<sha256>  hosts/<file>" per record written, appended as each one is
DIGESTS_MAX_BYTES = 64 * 2**20  # ~100 bytes a line: 600,000 records; a larger list is not read (all strict)
MACS = "records.mac"  # "<HMAC of the records.sha256 line>  hosts/<file>": the lines this user's sweep wrote
RECORD_MAX_BYTES = 64 * 2**20  # a host's output is cut at 16 MiB on arrival (SSHOptions.output_limit)
MANIFEST_MAX_BYTES = 256 * 2**20  # the inventory snapshot: ~300 bytes a host, 100,000 hosts in 30 MB
STATES = ("running", "complete", "interrupted")
RECORD_KEYS = ("record_version", "host", "address", "status", "failure", "attempts",
               "started_at", "ended_at", "duration_s", "health")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_TMP_PREFIX = ".tmp-"
_ATTEMPT = re.compile(r"~attempt-[0-9]+\.json$")
LOCK = ".lock"
_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_held: dict[str, int] = {}  # run folder (real path) -> fd of its .lock, held by this process


def is_attempt_file(name: str) -> bool:
    """Whether a file name in hosts/ is an earlier attempt set aside by ``--retry-failed``
    (``<name>~attempt-N.json``): kept, never read as a host. No `safe_name` holds ``~attempt-``."""
    return _ATTEMPT.search(name) is not None


def safe_name(name: str) -> str:
    """A file name for a host: the name itself when harmless, else a cleaned name plus a hash of it.

    ``gpu01.dc1`` stays as it is; ``../x`` becomes ``x~<sha256 of the name>``. Two different host
    names never share a file name: a cleaned name always carries ``~`` and the whole SHA-256 of the
    name (no shortened digest that a search could collide), which no kept name can; and
    `RunFolder.write_record` still refuses to write onto a file that holds another host's record.
    """
    cleaned = _UNSAFE.sub("_", name).lstrip(".")
    if cleaned == name and 0 < len(name) <= 120:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{cleaned[:48] or 'host'}~{digest}"


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def default_run_dir(inventory_path: str | Path, reports: str | Path = "reports",
                    now: datetime | None = None) -> Path:
    """``reports/<UTC timestamp>-<inventory stem>``, with ``-2``, ``-3``... if that one exists."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    stem = INLINE_NAME if is_inline(inventory_path) else Path(inventory_path).stem  # 'gpu01,gpu02,', -w
    base = Path(reports) / f"{stamp}-{safe_name(stem)}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def _fix_for(err: OSError) -> str:
    if err.errno == errno.ENOSPC or err.errno == errno.EDQUOT:
        return ("free space on that filesystem (or choose a folder elsewhere with --out), then finish "
                "the sweep with --resume RUN_DIR: the records already written are kept")
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "make the folder writable, or choose another with --out"
    if err.errno in (errno.ENOTDIR, errno.EEXIST):
        return "a file is in the way of the folder: choose another path with --out"
    return "check the path, or choose another folder with --out"


def write_json_atomic(path: Path, data: Any, *, sync_dir: bool = False, indent: int | None = None) -> None:
    """Write `data` as strict JSON to `path` whole or not at all; OSError becomes RunFolderError.

    Records are written without indent: json's C encoder does not indent, and the pure-Python
    one costs ~0.6 ms per health.json, a tenth of the controller's CPU per host. NaN, infinity or
    nesting too deep for the encoder raise ValueError / RecursionError before anything is written.
    """
    write_bytes_atomic(path, (dumps(data, indent=indent) + "\n").encode("utf-8"), sync_dir=sync_dir)


def write_bytes_atomic(path: Path, blob: bytes, *, sync_dir: bool = False) -> None:
    """`blob` into `path` whole or not at all, never through a symbolic link (the folder or the file).

    The folder is opened with O_NOFOLLOW and the file created beside it with O_EXCL | O_NOFOLLOW,
    then renamed over `path`; a link already at `path` is refused, not replaced or followed.
    """
    path = Path(path)
    tmp = dir_fd = None
    try:
        dir_fd = os.open(path.parent, _NOFOLLOW_DIR)
        try:
            if stat.S_ISLNK(os.lstat(path.name, dir_fd=dir_fd).st_mode):
                raise OSError(errno.ELOOP, "it is a symbolic link; sweep never writes through one")
        except FileNotFoundError:
            pass
        tmp = f"{_TMP_PREFIX}{secrets.token_hex(8)}{path.suffix}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                     dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        tmp = None
        if sync_dir:
            os.fsync(dir_fd)
    except OSError as err:
        if err.errno == errno.ELOOP and tmp is None:
            err = OSError(errno.ELOOP, "the folder is a symbolic link; sweep never writes through one")
        raise RunFolderError(f"cannot write {path.name} ({err.strerror or err})", where=str(path.parent),
                             fix=_fix_for(err)) from None
    finally:
        if tmp is not None and dir_fd is not None:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
        if dir_fd is not None:
            os.close(dir_fd)


def refuse_links(root: Path, parts: list[str], fix: str) -> None:
    """RunFolderError when any of `parts` (paths relative to `root`, a folder sweep writes in) is a link."""
    for part in parts:
        try:
            mode = os.lstat(Path(root) / part).st_mode
        except FileNotFoundError:
            continue
        except OSError:
            continue  # a missing or unreadable parent: the write itself reports it
        if stat.S_ISLNK(mode):
            raise RunFolderError(f"{part} is a symbolic link; sweep never writes through a link in a run folder",
                                 where=str(root), fix=fix)


def new_manifest(inventory_path: str | Path, snapshot: dict, hosts: list[str], options: dict) -> dict:
    """The manifest of a new run: format and versions, the inventory and its snapshot, the options, the hosts."""
    return {
        "format": RUN_FORMAT,
        "record_version": RECORD_VERSION,
        "sweep_version": __version__,
        "inventory": {"path": os.fspath(inventory_path) if is_inline(inventory_path) else str(Path(inventory_path).resolve()),
                      "snapshot": snapshot},
        "options": options,
        "started_at": utc_now(),
        "ended_at": None,
        "state": "running",
        "hosts": hosts,
        "sessions": [],
    }


class RunFolder:
    """A run folder on disk: `create` a new one, or `open` one to resume."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.hosts_dir = self.path / HOSTS
        self.manifest_path = self.path / MANIFEST

    @classmethod
    def create(cls, path: str | Path) -> "RunFolder":
        """Make a new, empty run folder (its parents too) and lock it; refuse one that already holds files."""
        folder = cls(path)
        if folder.path.exists() and not folder.path.is_dir():
            raise RunFolderError("is a file, not a folder", where=str(folder.path),
                                 fix="choose another path with --out")
        try:
            folder.path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RunFolderError(f"cannot create the run folder ({err.strerror or err})",
                                 where=str(folder.path), fix=_fix_for(err)) from None
        folder.lock()
        try:
            if folder.manifest_path.exists():
                raise RunFolderError("already holds a sweep run", where=str(folder.path),
                                     fix=f"resume it with --resume {folder.path.absolute()}, or choose another --out")
            if any(entry.name != LOCK for entry in os.scandir(folder.path)):
                raise RunFolderError("is not empty", where=str(folder.path),
                                     fix="choose a new or empty folder with --out")
            os.mkdir(folder.hosts_dir)
        except OSError as err:
            folder.close()
            raise RunFolderError(f"cannot create the run folder ({err.strerror or err})",
                                 where=str(folder.path), fix=_fix_for(err)) from None
        except RunFolderError:
            folder.close()
            raise
        return folder

    def lock(self) -> None:
        """Hold the folder's lock until `close` or the end of the process; RunFolderError names its holder."""
        key = os.path.realpath(self.path)
        if key in _held:
            return
        try:
            fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise RunFolderError(f"{LOCK} is a symbolic link; sweep never writes through a link in a run "
                                     "folder", where=str(self.path), fix="remove the link") from None
            raise RunFolderError(f"cannot lock the run folder ({err.strerror or err})", where=str(self.path),
                                 fix=_fix_for(err)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = b""
            for _ in range(20):  # the holder writes its pid just after it takes the lock
                holder = os.pread(fd, 32, 0).strip()
                if holder:
                    break
                time.sleep(0.025)
            os.close(fd)
            raise RunFolderError(
                f"is in use by another sweep (pid {holder.decode('ascii', 'replace') or '?'}, which holds "
                f"{self.path / LOCK})", where=str(self.path),
                fix="wait for it to end, or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held[key] = fd

    def close(self) -> None:
        """Let go of the folder's lock (a sweep that ends does this; so does the end of the process)."""
        fd = _held.pop(os.path.realpath(self.path), None)
        if fd is not None:
            os.close(fd)

    @classmethod
    def existing(cls, path: str | Path) -> tuple["RunFolder", dict]:
        """A run folder that exists and has a sweep manifest, and that manifest; nothing is written."""
        folder = cls(path)
        if not folder.path.is_dir():
            raise RunFolderError("no such run folder", where=str(folder.path),
                                 fix="pass the folder a sweep run wrote (it holds manifest.json)")
        manifest = folder.read_manifest()
        if manifest.get("format") != RUN_FORMAT:
            raise RunFolderError(f"is not a sweep run folder (manifest format {manifest.get('format')!r})",
                                 where=str(folder.path), fix="pass the folder a sweep run wrote")
        return folder, manifest

    @classmethod
    def open(cls, path: str | Path) -> "RunFolder":
        """An existing run folder of this record version, locked, its ``.tmp-*`` leftovers removed."""
        folder, manifest = cls.existing(path)
        version = manifest.get("record_version")
        if version != RECORD_VERSION:
            raise RunFolderError(
                f"was written with record version {version!r}; this sweep reads version {RECORD_VERSION}",
                where=str(folder.path),
                fix="resume it with the sweep version that started it, or start a new run without --resume")
        refuse_links(folder.path, [HOSTS, MANIFEST], fix="remove the link, or start a new run")
        folder.lock()
        try:
            if not os.path.isdir(folder.hosts_dir):
                os.mkdir(folder.hosts_dir)
            for where in (folder.hosts_dir, folder.path):
                dir_fd = os.open(where, _NOFOLLOW_DIR)
                try:
                    for entry in os.scandir(dir_fd):
                        if entry.name.startswith(_TMP_PREFIX) and entry.is_file(follow_symlinks=False):
                            os.unlink(entry.name, dir_fd=dir_fd)
                finally:
                    os.close(dir_fd)
        except OSError as err:
            folder.close()
            raise RunFolderError(f"cannot tidy the run folder ({err.strerror or err})",
                                 where=str(folder.path), fix=_fix_for(err)) from None
        return folder

    def read_manifest(self, fix: str = "start a new run without --resume") -> dict:
        """The run's manifest.json as a dict: the one reader of manifests (the controller's resume, run
        diffs, history, reports): a regular file (no link, no FIFO), bounded, parsed strictly and checked
        against `sweep.schema.MANIFEST`; RunFolderError with `fix` says what is wrong with the file."""
        try:
            blob = read_bounded(self.manifest_path, MANIFEST_MAX_BYTES)
        except FileNotFoundError:
            raise RunFolderError("is not a sweep run folder (no manifest.json)", where=str(self.path),
                                 fix="pass the folder a sweep run wrote") from None
        except OSError as err:
            raise RunFolderError(f"{MANIFEST} cannot be read ({err.strerror or err})", where=str(self.path),
                                 fix=fix) from None
        try:
            data = loads(blob).document
        except UnicodeDecodeError as err:
            raise RunFolderError(f"{MANIFEST} is not UTF-8 ({err})", where=str(self.path), fix=fix) from None
        except ValueError as err:  # DepthError included
            raise RunFolderError(f"{MANIFEST} is not valid JSON, cut short or garbled ({err})", where=str(self.path),
                                 fix=fix) from None
        if not isinstance(data, dict):
            raise RunFolderError(f"is not a sweep run folder ({MANIFEST} is not a JSON object)", where=str(self.path),
                                 fix="pass the folder a sweep run wrote")
        problem = manifest_problem(data, MANIFEST) if data.get("format") == RUN_FORMAT else None
        if problem:
            raise RunFolderError(f"{MANIFEST} is not a run manifest sweep can read ({problem})", where=str(self.path),
                                 fix=fix)
        return data

    def write_manifest(self, manifest: dict) -> None:
        if manifest.get("state") not in STATES:
            raise ValueError(f"manifest state must be one of {STATES}")
        write_json_atomic(self.manifest_path, sign(manifest), sync_dir=True, indent=1)

    def begin_session(self, manifest: dict, **about: Any) -> dict:
        """Mark the run running again with a new session (written now; `about` goes into it: the options it
        set, the records it set aside); the session is returned."""
        session = {"started_at": utc_now(), "ended_at": None, "state": "running", "hosts_swept": 0, **about}
        manifest["sessions"].append(session)
        manifest["state"], manifest["ended_at"] = "running", None
        self.write_manifest(manifest)
        return session

    def end_session(self, manifest: dict, session: dict, state: str, counts: dict, *, quiet: bool = False) -> None:
        """Write the run's end: its state, the time and the host counts; `quiet`: a write error is dropped."""
        now = utc_now()
        session["ended_at"], session["state"] = now, state
        manifest.update(state=state, ended_at=now, counts=counts)
        try:
            self.write_manifest(manifest)
        except RunFolderError:
            if not quiet:
                raise

    def record_path(self, host_name: str) -> Path:
        return self.hosts_dir / f"{safe_name(host_name)}.json"

    def write_record(self, record: dict) -> Path:
        """Write one host's record whole; the file is named after `safe_name` of record["host"]."""
        missing = [key for key in RECORD_KEYS if key not in record]
        if missing:
            raise ValueError(f"record lacks {', '.join(missing)}")
        if record["status"] not in ("ok", "failed"):
            raise ValueError("record status must be 'ok' or 'failed'")
        path = self.record_path(record["host"])
        self.check_record_file(record["host"], path)
        blob = (dumps(record) + "\n").encode("utf-8")
        write_bytes_atomic(path, blob)
        self._list_digest(path.name, blob)
        return path

    def _list_digest(self, name: str, blob: bytes) -> None:
        """Append the record's digest line to records.sha256 (after the record is in place: a crash
        between leaves a record without its line, read strictly, never a line for other bytes)."""
        line = f"{hashlib.sha256(blob).hexdigest()}  {HOSTS}/{name}".encode("utf-8")
        mac = line_mac(line)
        self._append(DIGESTS, line + b"\n")
        if mac is not None:  # after the digest line: a crash between leaves a line without its MAC (read strictly)
            self._append(MACS, f"{mac}  {HOSTS}/{name}\n".encode("utf-8"))

    def _append(self, name: str, line: bytes) -> None:
        try:
            fd = os.open(self.path / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                         | os.O_CLOEXEC, 0o644)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise OSError(errno.EEXIST, "it is not a regular file")
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as err:
            if err.errno == errno.ELOOP:
                err = OSError(errno.ELOOP, "it is a symbolic link; sweep never writes through one")
            raise RunFolderError(f"cannot write {name} ({err.strerror or err})", where=str(self.path),
                                 fix=_fix_for(err)) from None

    def set_aside(self, host_name: str) -> str:
        """Rename `host_name`'s record to the next free ``<name>~attempt-N.json`` (``--retry-failed``); its name."""
        base = safe_name(host_name)
        dir_fd = os.open(self.hosts_dir, _NOFOLLOW_DIR)
        try:
            n = 1
            while True:
                name = f"{base}~attempt-{n}.json"
                try:
                    os.lstat(name, dir_fd=dir_fd)
                except FileNotFoundError:
                    break
                n += 1
            os.link(f"{base}.json", name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            os.unlink(f"{base}.json", dir_fd=dir_fd)  # linked first: a crash between leaves both, never neither
            os.fsync(dir_fd)
        except OSError as err:
            raise RunFolderError(f"cannot set aside {base}.json ({err.strerror or err})", where=str(self.hosts_dir),
                                 fix=_fix_for(err)) from None
        finally:
            os.close(dir_fd)
        return name

    def check_record_file(self, host: str, path: Path | None = None) -> None:
        """RunFolderError when the file `host`'s record goes to holds the record of another host."""
        path = path or self.record_path(host)
        try:
            head = loads(read_bounded(path, RECORD_MAX_BYTES)).document
        except FileNotFoundError:
            return
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise RunFolderError(f"{path.name} is a symbolic link; sweep never writes through a link in a run "
                                     "folder", where=str(path.parent), fix="remove the link, or start a new run") from None
            return  # an unreadable file (a FIFO, a device, too large) is no record: the rename replaces it
        except ValueError:
            return  # a torn or invalid file is no record: it may be replaced
        other = head.get("host") if isinstance(head, dict) else None
        if isinstance(other, str) and other != host:
            raise RunFolderError(
                f"{path.name} holds the record of host '{other}', not of '{host}': sweep never writes one "
                "host's record onto another's", where=str(path.parent),
                fix="move that file out of the run folder, or start a new run")

    def read_records(self) -> dict[str, dict]:
        """host name -> record, for every readable record file (an unreadable one counts as absent);
        read as `read_json` reads them: strictly, unless records.sha256 knows the file's bytes."""
        records: dict[str, dict] = {}
        if not self.hosts_dir.is_dir():
            return records
        digests = read_digests(self.path)
        for path in sorted(self.hosts_dir.glob("*.json")):
            if path.name.startswith(".") or is_attempt_file(path.name):
                continue
            try:
                record = read_record(path, digests.get(path.name))
            except (OSError, ValueError) as err:
                _left_out(path, _why(err), "it counts as no record (a resume sweeps its host again)")
                continue
            if not isinstance(record, dict) or not isinstance(record.get("host"), str):
                _left_out(path, "it is no host record", "it counts as no record (a resume sweeps its host again)")
                continue
            if record.get("record_version") != RECORD_VERSION:
                raise RunFolderError(
                    f"{path.name} has record version {record.get('record_version')!r}; this sweep reads "
                    f"version {RECORD_VERSION}", where=str(self.path),
                    fix="start a new run without --resume")
            if path.name != f"{safe_name(record['host'])}.json":
                continue  # not where this sweep would write it: not ours
            normalize_health(record.get("health"))
            records[record["host"]] = record
        return records


@dataclass(frozen=True)
class Run:
    """One run folder, read: host -> record (each with its inventory groups), and the manifest."""

    path: Path
    manifest: dict
    records: dict[str, dict]

    @property
    def listed(self) -> list[str]:
        """The hosts the run set out to sweep (the manifest's list, else the records')."""
        hosts = self.manifest.get("hosts")
        return list(hosts) if isinstance(hosts, list) else list(self.records)


def load_run(path: str | Path) -> Run:
    """Read a run folder without writing to it (records by host, in natural order); each record gains "groups"
    from the manifest if it has none. The reader of a whole run: sweep diff, baselines, audits, the export."""
    folder, manifest = RunFolder.existing(path)
    groups = manifest_groups(manifest)
    records = {}
    for name, rec in folder.read_records().items():
        if rec.get("groups") is None and name in groups:
            rec = dict(rec, groups=groups[name])
        records[name] = rec
    return Run(folder.path, manifest, dict(sorted(records.items(), key=lambda kv: host_key(kv[0]))))


def read_json(path: Path, error: type[SweepError], fix: str, digest: str | None = None) -> Any:
    """The JSON document in the file `path`, read back as `read_record` reads it; a missing, unreadable
    (a link, a FIFO, a device, too large) or invalid file raises `error` with `fix`, naming the file."""
    try:
        return read_record(path, digest)
    except FileNotFoundError:
        raise error("no such file", where=str(path), fix=fix) from None
    except OSError as err:
        raise error(f"cannot be read ({_why(err)})", where=str(path), fix=fix) from None
    except ValueError as err:  # UnicodeDecodeError included
        raise error(f"is not valid JSON ({err})", where=str(path), fix=fix) from None


def read_bounded(path: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file `path`, at most `max_bytes`: opened without following a link
    (O_NOFOLLOW) and without waiting (O_NONBLOCK: a FIFO cannot hang the open), checked with fstat
    before a byte is read; OSError says why not (`_why` words it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"it is {_KINDS.get(stat.S_IFMT(info.st_mode), 'no regular file')}, "
                                        "not a regular file")
        if info.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"it is {info.st_size:,} bytes, more than the {max_bytes:,} sweep reads")
        with os.fdopen(os.dup(fd), "rb") as fh:
            blob = fh.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(blob) > max_bytes:
        raise OSError(errno.EFBIG, f"it grew past the {max_bytes:,} bytes sweep reads")
    return blob


_KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFDIR: "a folder", stat.S_IFSOCK: "a socket"}


def _why(err: BaseException) -> str:
    if isinstance(err, OSError) and err.errno == errno.ELOOP:
        return "it is a symbolic link; sweep reads no link in a run folder"
    return (err.strerror or str(err)) if isinstance(err, OSError) else str(err)


def read_record(path: Path, digest: str | None = None) -> Any:
    """A file of a run folder (or a health.json) as the readers get it: `read_bounded`, then parsed.

    `digest`: the SHA-256 this user's sweep listed for the file (`read_digests`: verified lines only);
    when the bytes have it, they are the record sweep validated on arrival, read with orjson alone.
    Any other file is parsed strictly (nesting bounded) and, when it is a host record, checked against
    `sweep.schema.RECORD` and the published health.json schema: a record that does not fit becomes its
    host's failed record (``bad_output``, the message naming the file and the fault), which every
    reader already handles; what is no record is returned as it is, for the caller to refuse."""
    blob = read_bounded(path, RECORD_MAX_BYTES)
    if digest is not None and hashlib.sha256(blob).hexdigest() == digest:
        return loads_known(blob).document
    document = loads(blob).document
    if isinstance(document, dict) and "record_version" in document:
        problem = record_problem(document, "record")
        if problem is not None and isinstance(document.get("host"), str):
            return _bad_record(path, document, problem)
    return document


def _bad_record(path: Path, record: dict, problem: str) -> dict:
    """The failed record read in place of a host record that does not fit the schema."""
    return {"record_version": record.get("record_version"), "host": record["host"], "status": "failed",
            "failure": {"class": "bad_output",
                        "message": f"{path}: not a host record sweep can read ({problem[:300]}); the file was "
                                   "changed after the sweep, or written by another program: sweep the host again"},
            "attempts": None, "started_at": None, "ended_at": None, "duration_s": None, "health": None,
            **({"groups": record["groups"]} if isinstance(record.get("groups"), list) else {})}


def _left_out(path: Path, why: str, then: str) -> None:
    warnings.warn(ReadBackWarning(f"{path}: left out ({why}); {then}"), stacklevel=3)


def manifest_groups(manifest: Any) -> dict[str, list[str]]:
    """host -> its inventory groups, from a manifest's inventory snapshot ({} without one)."""
    inv = manifest.get("inventory") if isinstance(manifest, dict) else None
    snap = inv.get("snapshot", inv) if isinstance(inv, dict) else None
    hosts = snap.get("hosts") if isinstance(snap, dict) else None
    out = {}
    for entry in hosts if isinstance(hosts, list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            out[entry["name"]] = [g for g in entry.get("groups") or () if g not in IMPLICIT_GROUPS]
    return out


@dataclass(frozen=True)
class Listing:
    """The JSON files a path stands for and, for a run folder, the hosts its manifest lists and their groups."""

    manifest_path: Path
    files: list[Path] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    groups: dict[str, list[str]] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)  # file name in hosts/ -> the SHA-256 sweep wrote it with


def list_records(path: Path) -> Listing:
    """What a reader of `path` reads: a file itself, a run folder's hosts/*.json, or a folder's *.json."""
    if path.is_file():  # a file the operator names: a link there is theirs, resolved once
        return Listing(Path(os.path.realpath(path)), [Path(os.path.realpath(path))])
    if not path.is_dir():
        raise HealthFileError("no such file or folder", where=str(path),
                         fix="pass a run folder, a host-record file or a health.json file")
    folder = RunFolder(path)
    listing = Listing(path)
    if folder.manifest_path.is_file() or folder.hosts_dir.is_dir():
        listing = _listed(folder.manifest_path)
        if not folder.hosts_dir.is_dir():
            raise RunFolderError("run folder without a hosts/ folder", where=str(path),
                                 fix="pass the folder a sweep run wrote")
        path = folder.hosts_dir
    files = sorted(e.path for e in os.scandir(path) if e.name.endswith(".json") and not e.name.startswith(".")
                   and not is_attempt_file(e.name) and not e.is_dir(follow_symlinks=False))
    digests = read_digests(folder.path) if path == folder.hosts_dir else {}
    return Listing(listing.manifest_path, [Path(f) for f in files], listing.hosts, listing.groups, digests)


def read_digests(run: Path) -> dict[str, str]:
    """file name in hosts/ -> the SHA-256 its record was written with, for the lines of the run's
    records.sha256 that this user's sweep wrote (each one's HMAC in records.mac verifies with this user's
    key, `sweep.trust`; the last line for a file wins); {} without a key, or when either file is absent,
    a link, not a regular file or too large. A line that does not verify is no digest: that record is
    read strictly and checked, as a file of a folder sweep did not write."""
    lines, macs = _lines(Path(run) / DIGESTS), _lines(Path(run) / MACS)
    out = {}
    for name, line in lines.items():
        mac = macs.get(name)
        if mac is not None and hmac.compare_digest(mac[:64], (line_mac(line) or "").encode()):
            out[name] = line[:64].decode("ascii", "replace")
    return out


def _lines(path: Path) -> dict[str, bytes]:
    """file name -> its last "<hex>  hosts/<name>" line in a list, {} when it cannot be read."""
    try:
        blob = read_bounded(path, DIGESTS_MAX_BYTES)
    except OSError:
        return {}
    out = {}
    prefix = f"  {HOSTS}/".encode()
    for line in blob.split(b"\n"):
        digest, sep, name = line.partition(prefix)
        if sep and len(digest) == 64 and b"/" not in name:
            out[name.decode("utf-8", "replace")] = line
    return out


def _listed(path: Path) -> Listing:
    """The hosts a run selected, and each host's groups (from the inventory snapshot); empty if absent."""
    if not os.path.lexists(path):
        return Listing(path)
    manifest = RunFolder(path.parent).read_manifest(fix="pass the folder a sweep run wrote")
    hosts = [h for h in manifest.get("hosts") or () if isinstance(h, str)]
    return Listing(path, [], hosts, manifest_groups(manifest))


def normalize_health(health: Any) -> Any:
    """A health.json of any schema 1.x as the newest minor version names it, in place (and returned):
    the one place that knows the older names. Schema 1.0 called each GPU's ECC mode after reset
    `ecc.pending`; 1.1 named it `ecc.pending_mode` (the agent writes both until schema 2). Before 1.5
    an Xid group had no `type`, NVIDIA bucket or action: they are judged here from its code, by the
    catalogue this sweep carries, and its times are "not recorded" (null)."""
    for gpu in (health.get("gpus") if isinstance(health, dict) else None) or ():
        ecc = gpu.get("ecc") if isinstance(gpu, dict) else None
        if isinstance(ecc, dict) and "pending" in ecc and "pending_mode" not in ecc:
            ecc["pending_mode"] = ecc["pending"]
    log = health.get("kernel_log") if isinstance(health, dict) else None
    for group in (log.get("xid") if isinstance(log, dict) else None) or ():
        if isinstance(group, dict) and "action" not in group and isinstance(group.get("code"), int):
            judged = xid.judged("xid", group["code"], str(group.get("last") or ""))  # the agent's own judgment
            group.update(type="xid", bucket=judged["bucket"], action=judged["action"], kind=judged["kind"],
                         meaning=group.get("meaning") or judged["meaning"])
            for key in ("first_s", "last_s", "first_at", "last_at"):
                group.setdefault(key, None)
    return health


def earlier_runs(run_dir: Path) -> list[tuple[str, Path]]:
    """The run folders beside `run_dir` (its parent, as `sweep run` puts them under reports/) that started
    before it: (started_at, folder), the newest first. A folder whose manifest cannot be read (the one
    reader, `RunFolder.read_manifest`: no link, no FIFO, bounded, checked) is left out, and named."""
    def started(folder: Path, name: bool = True) -> str | None:
        try:
            value = RunFolder(folder).read_manifest().get("started_at")
        except RunFolderError as err:
            if name:
                warnings.warn(ReadBackWarning(f"{err.where}: left out of the previous-sweep comparison "
                                              f"({err.message})"), stacklevel=3)
            return None
        return value if isinstance(value, str) else None
    mine = started(run_dir, name=False)
    if mine is None:
        return []
    try:
        siblings = [p for p in run_dir.parent.iterdir() if p != run_dir and os.path.lexists(p / MANIFEST)]
    except OSError:
        return []
    runs = [(at, p) for p, at in ((p, started(p)) for p in siblings) if at is not None and at < mine]
    return sorted(runs, reverse=True)


def previous_health(runs: list[tuple[str, Path]], host: str) -> tuple[dict, Path] | None:
    """The health.json of `host` in the newest of `runs` (`earlier_runs`) that holds one, and that run;
    a record that cannot be read back (`read_record`) is left out, and named."""
    for _, run in runs:
        path = run / HOSTS / f"{safe_name(host)}.json"
        if not os.path.lexists(path):
            continue
        try:
            record = read_record(path)  # strictly and checked: a sibling's bytes are nobody's word
        except (OSError, ValueError) as err:
            _left_out(path, _why(err), "the previous-sweep comparison does not read it")
            continue
        if not isinstance(record, dict) or record.get("host") != host:
            continue
        health = record.get("health")
        if record.get("status") == "ok" and isinstance(health, dict):
            return normalize_health(health), run
    return None
