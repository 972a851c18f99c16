"""Paths a user gives on the command line, checked before any work: one line naming the option, the
path and the fix (exit 2), never a traceback from deep inside a command.

`output_dir` and `output_file` are for what sweep writes (created when missing); `input_file`,
`input_dir` and `input_path` for what it reads. `os_error` turns an OSError that still escapes a
command (a disk that fills, a folder made read-only meanwhile) into the same kind of line.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from sweep.errors import ConfigError


def _first_existing_parent(path: Path) -> Path:
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent


def _not_a_link(path: Path, option: str, what: str) -> None:
    """Refuse an output path that is a symbolic link: sweep never writes through one
    (docs/security.md)."""
    if path.is_symlink():
        raise ConfigError(
            f"is a symbolic link; sweep never writes through one ({option})",
            where=str(path),
            fix=f"give another path for {what}, or remove the link",
        )


def output_dir(path: Path | None, option: str, what: str) -> Path | None:
    """A folder sweep will create (or write into): not a link, not a file, and creatable under a
    folder it can write."""
    if path is None:
        return None
    _not_a_link(path, option, what)
    if path.exists():
        if not path.is_dir():
            raise ConfigError(
                f"is a file, not a folder ({option})",
                where=str(path),
                fix=f"give a folder for {what} (it is created if missing)",
            )
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(
                f"is not writable ({option})",
                where=str(path),
                fix=f"choose a writable folder for {what}",
            )
        return path
    parent = _first_existing_parent(path)
    if not parent.is_dir():
        raise ConfigError(
            f"cannot be created: {parent} is a file, not a folder ({option})",
            where=str(path),
            fix=f"give a folder for {what} (it is created if missing)",
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(
            f"cannot be created: {parent} is not writable ({option})",
            where=str(path),
            fix=f"choose a writable folder for {what}",
        )
    return path


def output_file(path: Path | None, option: str, what: str) -> Path | None:
    """A file sweep will write: not a link, not a folder, in a folder that exists (or can be made)
    and can be written."""
    if path is None:
        return None
    _not_a_link(path, option, what)
    if path.is_dir():
        raise ConfigError(
            f"is a folder, not a file ({option})",
            where=str(path),
            fix=f"give a file path for {what}",
        )
    parent = _first_existing_parent(path)
    if not parent.is_dir():
        raise ConfigError(
            f"cannot be written: {parent} is a file, not a folder ({option})",
            where=str(path),
            fix=f"give a file path for {what} in a writable folder",
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(
            f"cannot be written: {parent} is not writable ({option})",
            where=str(path),
            fix=f"give a file path for {what} in a writable folder",
        )
    return path


def input_file(path: Path | None, option: str, what: str) -> Path | None:
    """A file sweep reads: it exists and is a file."""
    if path is None:
        return None
    if not path.exists():
        raise ConfigError(
            f"no such file ({option})", where=str(path), fix=f"give the path of {what}"
        )
    if path.is_dir():
        raise ConfigError(
            f"is a folder, not a file ({option})", where=str(path), fix=f"give the path of {what}"
        )
    return path


def input_dir(path: Path | None, option: str, what: str) -> Path | None:
    """A folder sweep reads: it exists and is a folder."""
    if path is None:
        return None
    if not path.exists():
        raise ConfigError(
            f"no such folder ({option})", where=str(path), fix=f"give the path of {what}"
        )
    if not path.is_dir():
        raise ConfigError(
            f"is a file, not a folder ({option})", where=str(path), fix=f"give the path of {what}"
        )
    return path


def input_path(path: Path, option: str, what: str) -> Path:
    """A file or a folder sweep reads: it exists."""
    if not path.exists():
        raise ConfigError(
            f"no such file or folder ({option})", where=str(path), fix=f"give the path of {what}"
        )
    return path


_OS_FIX = {
    errno.ENOSPC: "free space on that file system, or write elsewhere",
    errno.EDQUOT: "free space on that file system, or write elsewhere",
    errno.EROFS: "write to a file system that is not read-only",
    errno.EACCES: "choose a path this user can write, or fix its permissions",
    errno.EPERM: "choose a path this user can write, or fix its permissions",
    errno.EISDIR: "give a file path, not a folder",
    errno.ENOTDIR: "a part of the path is a file, not a folder: give another path",
    errno.ENOENT: "check the path",
}


def os_error(exc: OSError) -> ConfigError:
    """An OSError about a local file as the one line a user reads: the path, what failed, the
    fix."""
    where = exc.filename if exc.filename is not None else None
    return ConfigError(
        exc.strerror or str(exc),
        where=None if where is None else str(where),
        fix=_OS_FIX.get(exc.errno, "check the path and the file system"),
    )
