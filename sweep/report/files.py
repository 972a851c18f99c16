"""A report file written whole (never through a symbolic link), and the --limit files of host
names."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from sweep.errors import InventoryWarning
from sweep.store import write_bytes_atomic
from sweep.text import visible


def write_text(path: Path, text: str) -> None:
    """A report file whole, never through a symbolic link (`sweep.store.write_bytes_atomic`)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_limit_file(path: Path, hosts) -> Path:
    """Host names one per line, read back by ``--limit @FILE`` (sweep run, ansible) as those very
    hosts.

    A name that would read as a pattern (``!``, ``&``, ``~`` or ``@`` first, a glob character,
    blanks at an end, a control character) cannot be written so: it is left out with an
    `InventoryWarning`.
    """
    names = list(hosts)
    kept = [n for n in names if _LIMIT_LINE.match(n) and n.isprintable()]
    # a set: the pool of 10,000 hosts is 10,000 lookups, not 50 million comparisons
    shown = set(kept)
    for name in names:
        if name not in shown:
            warnings.warn(
                f"{path}: host {visible(name)!r} left out: as a line of a --limit file it "
                "would read as "
                "a pattern, not as its name; name it in --limit by hand",
                InventoryWarning,
                stacklevel=2,
            )
    write_text(path, "".join(f"{name}\n" for name in kept))
    return path


_LIMIT_LINE = re.compile(r"^[^\s!&~@*?\[](?:[^*?\[]*[^\s*?\[])?$")
