"""Reading an inventory's files: regular files only, each within `InventoryLimits.file_bytes`.

An inventory and its ``group_vars``/``host_vars`` are often generated, or checked out from a shared
repository: a link to ``/dev/zero`` or ``/dev/urandom``, or a FIFO, would make the read endless (and
``--list-hosts`` with it). The path is checked with stat() before it is opened, and the open file
again with fstat() (opened with O_NONBLOCK, so that nothing waits for a FIFO's writer), and at most
the bound plus one byte is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sweep.errors import InventoryError

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a plain file")


def _refuse_special(path: Path, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    link = f" (a link to {os.path.realpath(path)})" if os.path.islink(path) else ""
    raise InventoryError(
        f"is {_kind(mode)}{link}, not a regular file: sweep reads only regular files in an "
        f"inventory",
        where=str(path),
        fix="replace it with a YAML (or INI) file, or remove it",
    )


def _too_big(path: Path, size: str, max_bytes: int) -> InventoryError:
    return InventoryError(
        f"is {size} bytes, more than the limit of {max_bytes:,} bytes for one inventory file",
        where=str(path),
        fix="split it (group_vars/NAME/ may hold several files), or shorten it",
    )


def read_bytes(path: Path, max_bytes: int) -> bytes:
    """The content of the regular file `path`, at most `max_bytes` long, or an
    InventoryError naming it."""
    try:
        _refuse_special(path, os.stat(path).st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except OSError as err:
        raise InventoryError(
            f"cannot be read ({err.strerror})",
            where=str(path),
            fix="check the path and its permissions",
        ) from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        _refuse_special(path, info.st_mode)  # replaced between stat() and open()
        if info.st_size > max_bytes:
            raise _too_big(path, f"{info.st_size:,}", max_bytes)
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise _too_big(path, f"more than {max_bytes:,}", max_bytes)
    return data


def read_text(path: Path, max_bytes: int) -> str:
    """`read_bytes` as UTF-8 text; a vault-encrypted file is refused (sweep cannot decrypt it)."""
    try:
        text = read_bytes(path, max_bytes).decode("utf-8")
    except UnicodeDecodeError:
        raise InventoryError(
            "is not UTF-8 text", where=str(path), fix="save the file as UTF-8"
        ) from None
    if text.startswith("$ANSIBLE_VAULT"):
        raise InventoryError(
            "is vault-encrypted and sweep cannot decrypt it",
            where=str(path),
            fix="keep connection details in a plain file; encrypt single values with !vault",
        )
    return text
