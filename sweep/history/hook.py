"""What `sweep run` calls when it finishes: bring the history index of the run's root up to date."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sweep.errors import SweepError
from sweep.history.index import HistoryIndex, default_index_path, run_folders
from sweep.text import plural


def keep_index_current(run_dir: str | Path, fleet=None) -> str | None:
    """Update ``<root>/.sweep-history.sqlite`` for the folder that holds `run_dir`; a warning or
    None. `fleet`: the run's records as `load_fleet` read them for its report (read once for both).

    The run folder is the source of truth and is already complete: a failure here costs only
    the index, which the next `sweep history` rebuilds, so it is returned, never raised.
    """
    root = Path(run_dir).resolve().parent
    try:
        with HistoryIndex(default_index_path(root)) as index:
            result = index.update(
                run_folders([root]), fleets={run_dir: fleet} if fleet is not None else None
            )
    except (SweepError, OSError, ValueError, sqlite3.Error) as err:
        return (
            f"the history index of {root} was not updated ({err}); "
            f"`sweep history --root {root}` rebuilds it"
        )
    if result.fresh:  # each skipped run is named once, not at every later run
        return (
            f"{plural(len(result.fresh), 'run or record', 'runs or records')} under {root} "
            "cannot be read and are left out of its history, first "
            f"{result.fresh[0].where}: {result.fresh[0].why}; `sweep history --root {root}` "
            "names them all (said once)"
        )
    return None
