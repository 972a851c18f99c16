"""The history's own files: never written through a link, and one writer of an index at a time.

A history root is often a folder sweep did not make (a share, a copy from another team): a
symbolic link planted at ``ROOT/.sweep-history.sqlite``, its ``-wal`` / ``-shm`` / ``-journal``
files, its lock or ``ROOT/history/history.html`` would make sweep write into the file it points
at (a dangling link's target would be created). Each of them is checked before anything is
written, and refused with the path and the fix (exit 2), as the run folder refuses links
(`sweep.store`). The page and the CSVs are then written by `sweep.store.write_bytes_atomic`, which
opens the folder and the file with ``O_NOFOLLOW``.

`IndexLock` is an exclusive ``flock`` on ``INDEX.lock`` beside the index, held while the index
is updated and read: two `sweep history` processes (or a `sweep run` finishing meanwhile) take
turns instead of inserting the same run twice. The kernel drops it when its holder dies.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
from pathlib import Path

from sweep.errors import RunFolderError

SIDE_FILES = ("-wal", "-shm", "-journal")  # what SQLite writes beside the index, by name
LOCK_SUFFIX = ".lock"
INDEX_FIX = (
    "remove it (the index is a cache: `sweep history` rebuilds it), "
    "or choose another file with --index"
)


def refuse_link(path: Path, what: str, fix: str) -> None:
    """RunFolderError when `path` is a symbolic link, a hard link, or something other than a
    file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError:
        return  # an unreadable parent: the write itself reports it
    if stat.S_ISLNK(st.st_mode):
        raise RunFolderError(
            f"{what} is a symbolic link; sweep never writes through a link",
            where=str(path),
            fix=fix,
        )
    if not stat.S_ISREG(st.st_mode):
        raise RunFolderError(f"{what} is not a regular file", where=str(path), fix=fix)
    if st.st_nlink > 1:
        raise RunFolderError(
            f"{what} is a hard link ({st.st_nlink} names for one file); sweep never writes "
            "through a link",
            where=str(path),
            fix=fix,
        )


def index_files(index: Path) -> list[Path]:
    """The index and the files SQLite and sweep keep beside it."""
    return [index, *(Path(f"{index}{s}") for s in SIDE_FILES), Path(f"{index}{LOCK_SUFFIX}")]


def refuse_index_links(index: Path) -> None:
    for path in index_files(index):
        refuse_link(
            path,
            "the history index" if path == index else f"the history index's {path.name}",
            INDEX_FIX,
        )


def remove_index(index: Path) -> None:
    """Delete the index and its SQLite side files (not the lock, which the caller holds)."""
    for path in index_files(index)[:-1]:
        try:
            path.unlink(missing_ok=True)
        except OSError as err:
            raise RunFolderError(
                f"cannot remove the broken history index ({err.strerror or err})",
                where=str(path),
                fix="remove it by hand, or choose another file with --index",
            ) from None


def refuse_output_links(out: Path, names) -> None:
    """The history folder and the files sweep writes into it: none may be a link."""
    try:
        if stat.S_ISLNK(os.lstat(out).st_mode):
            raise RunFolderError(
                "the history folder is a symbolic link; sweep never writes through a link",
                where=str(out),
                fix="remove the link, or choose another folder with --out",
            )
    except FileNotFoundError:
        return
    for name in names:
        refuse_link(out / name, name, "remove it, or choose another folder with --out")


class IndexLock:
    """The exclusive lock of one index (``INDEX.lock``); a second holder waits, saying for whom."""

    def __init__(self, index: Path):
        self.path = Path(f"{index}{LOCK_SUFFIX}")
        self.fd: int | None = None

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as err:
            what = (
                "is a symbolic link; sweep never writes through a link"
                if err.errno == errno.ELOOP
                else (f"cannot be opened ({err.strerror or err})")
            )
            raise RunFolderError(
                f"the history index's lock {what}", where=str(self.path), fix=INDEX_FIX
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            sys.stderr.write(
                f"sweep: waiting for the history index {self.path.name[: -len(LOCK_SUFFIX)]}: "
                f"pid {holder} is updating it ({self.path})\n"
            )
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
