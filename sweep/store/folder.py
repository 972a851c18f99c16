"""The run folder itself (`RunFolder`: created, locked, resumed; manifest and records written).
What readers of a run folder get from it is `sweep.store.reading`'s."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import time
import weakref
from pathlib import Path
from typing import Any

from sweep.inventory.command_line import is_inline, without_secrets
from sweep import __version__
from sweep.errors import RunFolderError
from sweep.schema import manifest_problem
from sweep.strictjson import indented, loads, record_bytes
from sweep.folders import SHARED, make_dirs
from sweep.trust import line_mac, sign
from sweep.store.files import (
    DIGESTS,
    HOSTS,
    LOCK,
    MACS,
    MANIFEST,
    MANIFEST_MAX_BYTES,
    NOFOLLOW_DIR,
    RECORD_KEYS,
    RECORD_MAX_BYTES,
    RECORD_VERSION,
    RUN_FORMAT,
    STATES,
    TMP_PREFIX,
    fix_for,
    is_attempt_file,
    read_bounded,
    refuse_links,
    safe_name,
    utc_now,
    why_unreadable,
    write_bytes_atomic,
    write_error,
)
from sweep.store.records import left_out, normalize_health, read_digests, read_record

_held: dict[str, int] = {}  # run folder (real path) -> fd of its .lock, held by this process


def _close_fds(fds: dict[str, int]) -> None:
    """Close and forget the descriptors a run folder kept open (`RunFolder._open`)."""
    while fds:
        os.close(fds.popitem()[1])


def _without_secrets(manifest: dict) -> dict:
    """`manifest` (changed in place) with no value under a secret's name (`without_secrets`) in what
    holds variables: the options, each session's options, the snapshot's per-host settings."""
    manifest["options"] = without_secrets(manifest.get("options") or {})
    for session in manifest.get("sessions") or ():
        if isinstance(session, dict) and isinstance(session.get("options_set"), dict):
            session["options_set"] = without_secrets(session["options_set"])
    snapshot = (manifest.get("inventory") or {}).get("snapshot")
    for host in (snapshot.get("hosts") or ()) if isinstance(snapshot, dict) else ():
        if isinstance(host, dict) and "settings" in host:
            host["settings"] = without_secrets(host["settings"])
    return manifest


def new_manifest(
    inventory_path: str | Path, snapshot: dict, hosts: list[str], options: dict
) -> dict:
    """The manifest of a new run: format and versions, the inventory and its snapshot, the options,
    the hosts."""
    return {
        "format": RUN_FORMAT,
        "record_version": RECORD_VERSION,
        "sweep_version": __version__,
        "inventory": {
            "path": os.fspath(inventory_path)
            if is_inline(inventory_path)
            else str(Path(inventory_path).resolve()),
            "snapshot": snapshot,
        },
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
        # what the record writes keep open: name (HOSTS, DIGESTS, MACS) -> fd; see `_open`. Closed
        # by `close`, or when the folder object is collected (a writer that never closes it)
        self._open_fds: dict[str, int] = {}
        weakref.finalize(self, _close_fds, self._open_fds)

    @classmethod
    def create(cls, path: str | Path) -> "RunFolder":
        """Make a new, empty run folder (its parents too) and lock it; refuse one that already holds
        files."""
        folder = cls(path)
        if folder.path.is_symlink():
            raise RunFolderError(
                "is a symbolic link; sweep never writes through one",
                where=str(folder.path),
                fix="choose another path with --out, or remove the link",
            )
        if folder.path.exists() and not folder.path.is_dir():
            raise RunFolderError(
                "is a file, not a folder",
                where=str(folder.path),
                fix="choose another path with --out",
            )
        try:
            make_dirs(folder.path, SHARED)
        except OSError as err:
            raise RunFolderError(
                f"cannot create the run folder ({err.strerror or err})",
                where=str(folder.path),
                fix=fix_for(err),
            ) from None
        folder.lock()
        try:
            if folder.manifest_path.exists():
                raise RunFolderError(
                    "already holds a sweep run",
                    where=str(folder.path),
                    fix=f"resume it with --resume {folder.path.absolute()}, or choose another "
                    "--out",
                )
            if any(entry.name != LOCK for entry in os.scandir(folder.path)):
                raise RunFolderError(
                    "is not empty",
                    where=str(folder.path),
                    fix="choose a new or empty folder with --out",
                )
            os.mkdir(folder.hosts_dir, SHARED)
        except OSError as err:
            folder.close()
            raise RunFolderError(
                f"cannot create the run folder ({err.strerror or err})",
                where=str(folder.path),
                fix=fix_for(err),
            ) from None
        except RunFolderError:
            folder.close()
            raise
        return folder

    def lock(self) -> None:
        """Hold the folder's lock until `close` or the end of the process; RunFolderError names its
        holder."""
        key = os.path.realpath(self.path)
        if key in _held:
            return
        try:
            fd = os.open(
                self.path / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
            )
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise RunFolderError(
                    f"{LOCK} is a symbolic link; sweep never writes through a link in a run folder",
                    where=str(self.path),
                    fix="remove the link",
                ) from None
            raise RunFolderError(
                f"cannot lock the run folder ({err.strerror or err})",
                where=str(self.path),
                fix=fix_for(err),
            ) from None
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
                f"is in use by another sweep (pid {holder.decode('ascii', 'replace') or '?'}, "
                f"which holds {self.path / LOCK})",
                where=str(self.path),
                fix="wait for it to end, or choose another --out",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held[key] = fd

    def close(self) -> None:
        """Let go of the folder's lock (a sweep that ends does this; so does the end of the
        process)."""
        _close_fds(self._open_fds)
        fd = _held.pop(os.path.realpath(self.path), None)
        if fd is not None:
            os.close(fd)

    def _open(self, name: str) -> int:
        """The descriptor of hosts/ (a folder, for the records' dir_fd) or of records.sha256 /
        records.mac (appended to), opened on the first write and kept until `close`: three opens
        and closes fewer per record. Each is opened as a write did before: no link followed
        (O_NOFOLLOW), the digest lists regular files only; a link put in their place later changes
        nothing, since what was opened is what is written. A worker forked from the writer shares
        them (O_APPEND: each line lands whole, at the end, from either process)."""
        fd = self._open_fds.get(name)
        if fd is not None:
            return fd
        if name == HOSTS:
            fd = os.open(self.hosts_dir, NOFOLLOW_DIR)
        else:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
            fd = os.open(self.path / name, flags | os.O_CLOEXEC, 0o644)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise OSError(errno.EEXIST, "it is not a regular file")
        self._open_fds[name] = fd
        return fd

    @classmethod
    def existing(cls, path: str | Path) -> tuple["RunFolder", dict]:
        """A run folder that exists and has a sweep manifest, and that manifest; nothing is
        written."""
        folder = cls(path)
        if not folder.path.is_dir():
            raise RunFolderError(
                "no such run folder",
                where=str(folder.path),
                fix="pass the folder a sweep run wrote (it holds manifest.json)",
            )
        manifest = folder.read_manifest()
        if manifest.get("format") != RUN_FORMAT:
            raise RunFolderError(
                f"is not a sweep run folder (manifest format {manifest.get('format')!r})",
                where=str(folder.path),
                fix="pass the folder a sweep run wrote",
            )
        return folder, manifest

    @classmethod
    def open(cls, path: str | Path) -> "RunFolder":
        """An existing run folder of this record version, locked, its ``.tmp-*`` leftovers
        removed."""
        folder, manifest = cls.existing(path)
        version = manifest.get("record_version")
        if version != RECORD_VERSION:
            raise RunFolderError(
                f"was written with record version {version!r}; this sweep reads version "
                f"{RECORD_VERSION}",
                where=str(folder.path),
                fix="resume it with the sweep version that started it, or start a new run "
                "without --resume",
            )
        refuse_links(folder.path, [HOSTS, MANIFEST], fix="remove the link, or start a new run")
        folder.lock()
        try:
            if not os.path.isdir(folder.hosts_dir):
                os.mkdir(folder.hosts_dir, SHARED)
            for where in (folder.hosts_dir, folder.path):
                dir_fd = os.open(where, NOFOLLOW_DIR)
                try:
                    for entry in os.scandir(dir_fd):
                        if entry.name.startswith(TMP_PREFIX) and entry.is_file(
                            follow_symlinks=False
                        ):
                            os.unlink(entry.name, dir_fd=dir_fd)
                finally:
                    os.close(dir_fd)
        except OSError as err:
            folder.close()
            raise RunFolderError(
                f"cannot tidy the run folder ({err.strerror or err})",
                where=str(folder.path),
                fix=fix_for(err),
            ) from None
        return folder

    def read_manifest(self, fix: str = "start a new run without --resume") -> dict:
        """The run's manifest.json as a dict: the one reader of manifests (the controller's resume,
        run diffs, history, reports): a regular file (no link, no FIFO), bounded, parsed strictly
        and checked against `sweep.schema.MANIFEST`; RunFolderError with `fix` says what is wrong
        with the file."""
        try:
            blob = read_bounded(self.manifest_path, MANIFEST_MAX_BYTES)
        except FileNotFoundError:
            raise RunFolderError(
                "is not a sweep run folder (no manifest.json)",
                where=str(self.path),
                fix="pass the folder a sweep run wrote",
            ) from None
        except OSError as err:
            raise RunFolderError(
                f"{MANIFEST} cannot be read ({err.strerror or err})", where=str(self.path), fix=fix
            ) from None
        try:
            data = loads(blob).document
        except UnicodeDecodeError as err:
            raise RunFolderError(
                f"{MANIFEST} is not UTF-8 ({err})", where=str(self.path), fix=fix
            ) from None
        except ValueError as err:  # DepthError included
            raise RunFolderError(
                f"{MANIFEST} is not valid JSON, cut short or garbled ({err})",
                where=str(self.path),
                fix=fix,
            ) from None
        if not isinstance(data, dict):
            raise RunFolderError(
                f"is not a sweep run folder ({MANIFEST} is not a JSON object)",
                where=str(self.path),
                fix="pass the folder a sweep run wrote",
            )
        problem = manifest_problem(data, MANIFEST) if data.get("format") == RUN_FORMAT else None
        if problem:
            raise RunFolderError(
                f"{MANIFEST} is not a run manifest sweep can read ({problem})",
                where=str(self.path),
                fix=fix,
            )
        return data

    def write_manifest(self, manifest: dict) -> None:
        if manifest.get("state") not in STATES:
            raise ValueError(f"manifest state must be one of {STATES}")
        write_bytes_atomic(
            self.manifest_path, indented(sign(_without_secrets(manifest))), sync_dir=True
        )

    def begin_session(self, manifest: dict, **about: Any) -> dict:
        """Mark the run running again with a new session (written now; `about` goes into it: the
        options it set, the records it set aside); the session is returned."""
        session = {
            "started_at": utc_now(),
            "ended_at": None,
            "state": "running",
            "hosts_swept": 0,
            **about,
        }
        manifest["sessions"].append(session)
        manifest["state"], manifest["ended_at"] = "running", None
        self.write_manifest(manifest)
        return session

    def end_session(
        self, manifest: dict, session: dict, state: str, counts: dict, *, quiet: bool = False
    ) -> None:
        """Write the run's end: its state, the time and the host counts; `quiet`: a write error is
        dropped."""
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
        blob = record_bytes(record)
        try:
            hosts_fd = self._open(HOSTS)
        except OSError as err:
            raise write_error(path, err, folder=True) from None
        write_bytes_atomic(path, blob, dir_fd=hosts_fd)
        self._list_digest(path.name, blob)
        return path

    def _list_digest(self, name: str, blob: bytes) -> None:
        """Append the record's digest line to records.sha256 (after the record is in place: a crash
        between leaves a record without its line, read strictly, never a line for other bytes)."""
        line = f"{hashlib.sha256(blob).hexdigest()}  {HOSTS}/{name}".encode("utf-8")
        mac = line_mac(line)
        self._append(DIGESTS, line + b"\n")
        # after the digest line: a crash between leaves a line without its MAC (read strictly)
        if mac is not None:
            self._append(MACS, f"{mac}  {HOSTS}/{name}\n".encode("utf-8"))

    def _append(self, name: str, line: bytes) -> None:
        try:
            os.write(self._open(name), line)
        except OSError as err:
            if err.errno == errno.ELOOP:
                err = OSError(errno.ELOOP, "it is a symbolic link; sweep never writes through one")
            raise RunFolderError(
                f"cannot write {name} ({err.strerror or err})",
                where=str(self.path),
                fix=fix_for(err),
            ) from None

    def set_aside(self, host_name: str) -> str:
        """Rename `host_name`'s record to the next free ``<name>~attempt-N.json``
        (``--retry-failed``); its name."""
        base = safe_name(host_name)
        dir_fd = os.open(self.hosts_dir, NOFOLLOW_DIR)
        try:
            n = 1
            while True:
                name = f"{base}~attempt-{n}.json"
                try:
                    os.lstat(name, dir_fd=dir_fd)
                except FileNotFoundError:
                    break
                n += 1
            os.link(
                f"{base}.json", name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False
            )
            # linked first: a crash between leaves both, never neither
            os.unlink(f"{base}.json", dir_fd=dir_fd)
            os.fsync(dir_fd)
        except OSError as err:
            raise RunFolderError(
                f"cannot set aside {base}.json ({err.strerror or err})",
                where=str(self.hosts_dir),
                fix=fix_for(err),
            ) from None
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
                raise RunFolderError(
                    f"{path.name} is a symbolic link; sweep never writes through a link in a run "
                    "folder",
                    where=str(path.parent),
                    fix="remove the link, or start a new run",
                ) from None
            # an unreadable file (a FIFO, a device, too large) is no record: the rename replaces it
            return
        except ValueError:
            return  # a torn or invalid file is no record: it may be replaced
        other = head.get("host") if isinstance(head, dict) else None
        if isinstance(other, str) and other != host:
            raise RunFolderError(
                f"{path.name} holds the record of host '{other}', not of '{host}': sweep never "
                "writes one host's record onto another's",
                where=str(path.parent),
                fix="move that file out of the run folder, or start a new run",
            )

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
                left_out(
                    path,
                    why_unreadable(err),
                    "it counts as no record (a resume sweeps its host again)",
                )
                continue
            if not isinstance(record, dict) or not isinstance(record.get("host"), str):
                left_out(
                    path,
                    "it is no host record",
                    "it counts as no record (a resume sweeps its host again)",
                )
                continue
            if record.get("record_version") != RECORD_VERSION:
                raise RunFolderError(
                    f"{path.name} has record version {record.get('record_version')!r}; this sweep "
                    f"reads version {RECORD_VERSION}",
                    where=str(self.path),
                    fix="start a new run without --resume",
                )
            if path.name != f"{safe_name(record['host'])}.json":
                continue  # not where this sweep would write it: not ours
            normalize_health(record.get("health"))
            records[record["host"]] = record
        return records
