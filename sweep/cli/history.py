"""`sweep history`: per host and GPU, the timeline of every fact and the drift of the SM clock under
load; and the index kept current after `sweep run`."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from sweep import exitcodes
from sweep.cli import paths
from sweep.cli.options import MHZ, Bounds, number
from sweep.cli.output import console, print_lines, results, safe
from sweep.text import plural


def keep_history(run_dir: Path, fleet=None) -> None:
    """After `sweep run`: bring the history index of the run's root up to date (`fleet`: the run's
    records, already read for its report); a failure is a warning."""
    from sweep.history.hook import keep_index_current

    warning = keep_index_current(run_dir, fleet)
    if warning:
        console.print(f"sweep: warning: {safe(warning)}", soft_wrap=True)


def history(
    runs: List[Path] = typer.Argument(
        None, metavar="[RUN_DIR]...", help="run folders (default: every run folder under --root)"
    ),
    root: Path = typer.Option(
        Path("reports"), "--root", metavar="DIR", help="the folder that holds the run folders"
    ),
    since: Optional[str] = typer.Option(
        None, "--since", metavar="AGE", help="only runs of the last AGE: 6w, 30d, 12h"
    ),
    host: Optional[str] = typer.Option(
        None, "--host", metavar="PATTERN", help="only hosts matching this glob (gpu0*)"
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", metavar="DIR", help="output folder (default ROOT/history)"
    ),
    index: Optional[Path] = typer.Option(
        None,
        "--index",
        metavar="FILE",
        help="history index file (default ROOT/.sweep-history.sqlite)",
    ),
    threshold: float = number(
        3.0,
        "--threshold",
        metavar="PERCENT",
        bounds=Bounds(0, 100, above=True, unit="%"),
        help="how far the SM clock under load may fall since a host's last "
        "configuration change before the host counts as drifted",
    ),
    floor: Optional[float] = number(
        None,
        "--floor",
        metavar="MHZ",
        bounds=MHZ,
        help="fixed SM clock floor under load, shown beside the drift",
    ),
):
    """Per host and GPU, the timeline of every comparability key and health fact with its change
    points, and drift of the SM clock under load against each host's own first runs (drifted hosts
    ranked first). Writes history.html, changes.csv, timeline.csv, drift.csv, load.csv,
    history.json. Exit 5 when a host drifted or changed, like sweep diff."""
    from sweep.history import build_history
    from sweep.history.build import parse_since

    _check_runs(runs, root)
    parse_since(since)
    out_dir = paths.output_dir(_out_dir(runs, root, out), "--out", "the history files")
    paths.output_file(index, "--index", "the history index")
    result = build_history(
        list(runs) if runs else [root],
        out_dir,
        index_path=index,
        since=since,
        host=host,
        threshold_pct=threshold,
        floor_mhz=floor,
    )
    raise typer.Exit(print_history(result, out_dir))


def _check_runs(runs: List[Path], root: Path) -> None:
    """Each run folder given, else --root, a folder that exists (exit 2 naming it otherwise)."""
    for run in runs or ():
        paths.input_dir(run, "RUN_DIR", "a run folder (sweep run)")
    if not runs:
        paths.input_dir(root, "--root", "the folder that holds the run folders (reports/)")


def _out_dir(runs: List[Path], root: Path, out: Optional[Path]) -> Path:
    """--out, else history/ beside the runs: under --root, or the first run folder's parent (the
    folder itself when it is a folder of runs, with no manifest.json of its own)."""
    if out is not None:
        return out
    if not runs:
        return root / "history"
    return (runs[0] if not (runs[0] / "manifest.json").is_file() else runs[0].parent) / "history"


def print_history(result, out_dir: Path) -> int:
    """What `sweep history` prints of a history it wrote to `out_dir`; its exit code."""
    if result.update.rebuilt:
        console.print(safe(f"sweep: {result.update.rebuilt}"), soft_wrap=True)
    for skipped in result.skipped:
        console.print(
            safe(f"sweep: warning: {skipped.where}: skipped: {skipped.why}"), soft_wrap=True
        )
    print_lines(result.lines())
    results.print(
        safe(
            f"{plural(len(result.selection.runs), 'run')}, {result.drift_text(short=True)}, "
            f"{plural(len(result.changed_hosts), 'host')} changed, "
            f"{plural(len({f.host for f in result.faults if f.every_run}), 'host')} faulty "
            "in every run; index: "
            f"{plural(len(result.update.read), 'run')} read, {result.update.kept} unchanged"
        ),
        soft_wrap=True,
    )
    results.print(f"history: {safe((out_dir / 'history.html').resolve())}", soft_wrap=True)
    return (
        exitcodes.OFF if result.drifted or result.speed_drifted or result.changes else exitcodes.OK
    )
