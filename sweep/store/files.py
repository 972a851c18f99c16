"""The run folder's names and its file-level rules: safe host file names, whole-or-nothing writes
that never follow a link, and bounded reads that refuse a link, a FIFO or a device
(docs/security.md)."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import stat
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sweep.inventory.command_line import INLINE_NAME, is_inline
from sweep.errors import RunFolderError
from sweep.strictjson import dumps

RECORD_VERSION = 1
RUN_FORMAT = "sweep-run"
MANIFEST = "manifest.json"
HOSTS = "hosts"
DIGESTS = "records.sha256"  # "<sha256>  hosts/<file>" per record written, appended as each one is
# ~100 bytes a line: 600,000 records; a larger list is not read (all strict)
DIGESTS_MAX_BYTES = 64 * 2**20
# "<HMAC of the records.sha256 line>  hosts/<file>": the lines this user's sweep wrote
MACS = "records.mac"
# a host's output is cut at 16 MiB on arrival (SSHOptions.output_limit)
RECORD_MAX_BYTES = 64 * 2**20
# the inventory snapshot: ~300 bytes a host, 100,000 hosts in 30 MB
MANIFEST_MAX_BYTES = 256 * 2**20
STATES = ("running", "complete", "interrupted")
RECORD_KEYS = (
    "record_version",
    "host",
    "address",
    "status",
    "failure",
    "attempts",
    "started_at",
    "ended_at",
    "duration_s",
    "health",
)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
TMP_PREFIX = ".tmp-"
_ATTEMPT = re.compile(r"~attempt-[0-9]+\.json$")
LOCK = ".lock"
NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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
    return (
        datetime.fromtimestamp(epoch, timezone.utc)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def default_run_dir(
    inventory_path: str | Path, reports: str | Path = "reports", now: datetime | None = None
) -> Path:
    """``reports/<UTC timestamp>-<inventory stem>``, with ``-2``, ``-3``... if that one exists."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    # 'gpu01,gpu02,', -w
    stem = INLINE_NAME if is_inline(inventory_path) else Path(inventory_path).stem
    base = Path(reports) / f"{stamp}-{safe_name(stem)}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def fix_for(err: OSError) -> str:
    if err.errno == errno.ENOSPC or err.errno == errno.EDQUOT:
        return (
            "free space on that filesystem (or choose a folder elsewhere with --out), then finish "
            "the sweep with --resume RUN_DIR: the records already written are kept"
        )
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "make the folder writable, or choose another with --out"
    if err.errno in (errno.ENOTDIR, errno.EEXIST):
        return "a file is in the way of the folder: choose another path with --out"
    return "check the path, or choose another folder with --out"


def write_json_atomic(
    path: Path, data: Any, *, sync_dir: bool = False, indent: int | None = None
) -> None:
    """Write `data` as strict JSON to `path` whole or not at all; OSError becomes RunFolderError.

    Records are written without indent: json's C encoder does not indent, and the pure-Python
    one costs ~0.6 ms per health.json, a tenth of the controller's CPU per host. NaN, infinity or
    nesting too deep for the encoder raise ValueError / RecursionError before anything is written.
    """
    write_bytes_atomic(path, (dumps(data, indent=indent) + "\n").encode("utf-8"), sync_dir=sync_dir)


def write_error(path: Path, err: OSError, folder: bool = False) -> RunFolderError:
    """What a failed write of `path` tells the operator; `folder`: the error came before the file
    was created (ELOOP there: the folder is the link)."""
    if err.errno == errno.ELOOP and folder:
        err = OSError(errno.ELOOP, "the folder is a symbolic link; sweep never writes through one")
    return RunFolderError(
        f"cannot write {path.name} ({err.strerror or err})",
        where=str(path.parent),
        fix=fix_for(err),
    )


def write_bytes_atomic(
    path: Path, blob: bytes, *, sync_dir: bool = False, mode: int = 0o644, dir_fd: int | None = None
) -> None:
    """`blob` into `path` whole or not at all, never through a symbolic link (the folder or the
    file): the one writer of every file sweep writes (run folders, report, history, export,
    baseline, bundle).

    The folder is opened with O_NOFOLLOW and the file created beside it with O_EXCL | O_NOFOLLOW and
    `mode` (0755 for the agent bundle; the umask can take bits away, never add them: no chmod
    after), then renamed over `path`; a link already at `path` is refused, not replaced or followed.
    `dir_fd`: the folder, opened so by the caller and kept open (a run folder's hosts/: one open
    fewer per record), else opened here.
    """
    path = Path(path)
    tmp = None
    own_fd = dir_fd is None
    try:
        if own_fd:
            dir_fd = os.open(path.parent, NOFOLLOW_DIR)
        try:
            if stat.S_ISLNK(os.lstat(path.name, dir_fd=dir_fd).st_mode):
                raise OSError(errno.ELOOP, "it is a symbolic link; sweep never writes through one")
        except FileNotFoundError:
            pass
        tmp = f"{TMP_PREFIX}{secrets.token_hex(8)}{path.suffix}"
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            mode,
            dir_fd=dir_fd,
        )
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        tmp = None
        if sync_dir:
            os.fsync(dir_fd)
    except OSError as err:
        raise write_error(path, err, folder=tmp is None) from None
    finally:
        if tmp is not None and dir_fd is not None:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
        if own_fd and dir_fd is not None:
            os.close(dir_fd)


def refuse_links(root: Path, parts: list[str], fix: str) -> None:
    """RunFolderError when any of `parts` (paths relative to `root`, a folder sweep writes in) is a
    link."""
    for part in parts:
        try:
            mode = os.lstat(Path(root) / part).st_mode
        except FileNotFoundError:
            continue
        except OSError:
            continue  # a missing or unreadable parent: the write itself reports it
        if stat.S_ISLNK(mode):
            raise RunFolderError(
                f"{part} is a symbolic link; sweep never writes through a link in a run folder",
                where=str(root),
                fix=fix,
            )


def read_bounded(path: Path, max_bytes: int) -> bytes:
    """The bytes of the regular file `path`, at most `max_bytes`: opened without following a link
    (O_NOFOLLOW) and without waiting (O_NONBLOCK: a FIFO cannot hang the open), checked with fstat
    before a byte is read; OSError says why not (`why_unreadable` words it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(
                errno.EINVAL,
                f"it is {_KINDS.get(stat.S_IFMT(info.st_mode), 'no regular file')}, "
                "not a regular file",
            )
        if info.st_size > max_bytes:
            raise OSError(
                errno.EFBIG,
                f"it is {info.st_size:,} bytes, more than the {max_bytes:,} sweep reads",
            )
        blob = _read_to_end(fd, info.st_size, max_bytes + 1)
    finally:
        os.close(fd)
    if len(blob) > max_bytes:
        raise OSError(errno.EFBIG, f"it grew past the {max_bytes:,} bytes sweep reads")
    return blob


def _read_to_end(fd: int, size: int, limit: int) -> bytes:
    """At most `limit` bytes of `fd` up to its end, in reads of the size fstat gave (one read and
    the one that finds the end, for a file that does not change meanwhile): a buffered read of
    `limit` (64 MiB for a record) cost 3 times as much for a 44 KB record."""
    parts, total = [], 0
    while total < limit:
        chunk = os.read(fd, min(limit - total, max(size + 1 - total, 1 << 16)))
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
    stat.S_IFSOCK: "a socket",
}


def why_unreadable(err: BaseException) -> str:
    if isinstance(err, OSError) and err.errno == errno.ELOOP:
        return "it is a symbolic link; sweep reads no link in a run folder"
    return (err.strerror or str(err)) if isinstance(err, OSError) else str(err)
