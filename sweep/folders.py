"""Folders sweep makes for itself, each one with its mode from the moment it exists, parents
included.

``os.makedirs(path, mode=0o700)`` gives the mode to the last folder only: the parents it makes get
``0o777`` less the umask, so under ``umask 000`` making ``~/.local/state/sweep`` left ``~/.local``
and ``~/.local/state`` world-writable (issue 53). `make_dirs` makes every missing folder of the path
with ``mkdir(mode)``: the umask can then only take bits away, never add them, so a folder is never
looser than the mode asked for, whatever the umask (the XDG base directory spec asks 0700 of the
state folders it makes). A folder that already exists is left as it is; a link where a folder is to
be made is not followed.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

PRIVATE = 0o700  # the run key's folder, the template cache, known_hosts' folder
SHARED = 0o755  # run folders, reports, history, baselines: readable, never writable by others


def make_dirs(path: str | os.PathLike, mode: int = PRIVATE) -> Path:
    """Make `path` and each missing parent with `mode` (less what the umask takes away, never more);
    return `path`. OSError as os.mkdir raises it; a link at the path itself is refused (ELOOP)."""
    path = Path(path)
    missing = []
    probe = path.absolute()
    while True:
        try:
            info = os.lstat(probe)
        except FileNotFoundError:
            missing.append(probe)
            if probe.parent == probe:
                break
            probe = probe.parent
            continue
        if probe == path.absolute() and stat.S_ISLNK(info.st_mode):
            raise OSError(
                errno.ELOOP,
                "it is a symbolic link; sweep never makes a folder through one",
                str(path),
            )
        break
    for folder in reversed(missing):
        try:
            os.mkdir(folder, mode)
        except FileExistsError:
            if not folder.is_dir():
                raise
    return path
