"""The terminal face of a sweep: a live ok / failed / pending bar, and the summary table after it.

Kept apart from `sweep.collect.run`: run_sweep takes `SweepProgress` as its `progress` callback, and
`render_summary` prints a `RunResult`.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from sweep.analysis.names import fold_failures, fold_hosts
from sweep.collect.run import RunProgress, RunResult
from sweep.text import plural, visible


# the bar is redrawn this often, whatever the fleet: a fixed cost per second of the sweep (rich's
# default, 10 a second, took ~1 ms of controller CPU per host at 110 hosts/s); a host's arrival only
# updates counters
REFRESH_PER_S = 4


class SweepProgress:
    """A rich progress bar as a run_sweep `progress` callback; use it as a context manager."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self._progress = Progress(
            TextColumn("[bold]sweep"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TextColumn(
                "[green]{task.fields[ok]} ok[/]  [red]{task.fields[failed]} failed[/]  "
                "{task.fields[pending]} pending"
            ),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
            refresh_per_second=REFRESH_PER_S,
        )
        self._task = None

    def __enter__(self) -> "SweepProgress":
        if self.console.is_terminal:  # a pipe or a log file gets the summary only, no bar frames
            self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.console.is_terminal:
            self._progress.stop()

    def __call__(self, state: RunProgress) -> None:
        fields = {"ok": state.ok, "failed": state.failed, "pending": state.pending}
        done = state.ok + state.failed
        if self._task is None:
            self._task = self._progress.add_task(
                "sweep", total=state.total, completed=done, **fields
            )
        else:
            self._progress.update(self._task, completed=done, **fields)


def _shown(text) -> str:
    """Host text for the terminal, on one line: control characters as escapes; markup escaped."""
    return escape(visible(text, keep=""))


def retry_lines(result: RunResult, run_dir: str) -> list[str]:
    """--resume / --retry-failed: which hosts were swept again, that there was nothing to retry, and
    the failed hosts of earlier sessions left as they were (named, by class, with the command that
    retries them)."""
    lines = []
    if result.retry_classes is not None:
        asked = " ".join(result.retry_classes)
        if result.retried:
            lines.append(
                f"  retried {plural(len(result.retried), 'host')} that had failed with {asked}: "
                f"{_shown(fold_hosts(result.retried))} (their earlier records kept beside, as "
                f"hosts/<name>~attempt-N.json)"
            )
        else:
            lines.append(
                f"  [yellow]nothing to retry[/]: no host of this run had failed with {asked}"
            )
    unnamed = (
        result.failed - len({host for host, *_ in result.failures}) - len(result.earlier_failed)
    )
    if unnamed > 0 and not result.earlier_failed:  # a RunResult made without them (a library's)
        lines.append(
            f"  [red]{plural(unnamed, 'more failed host')}[/] from an earlier session of this run, "
            f"not swept again: their records are in {run_dir}/hosts/"
        )
    if result.earlier_failed:
        by_class: dict[str, list[str]] = {}
        for host, cls in result.earlier_failed:
            by_class.setdefault(cls, []).append(host)
        named = "; ".join(f"{_shown(fold_hosts(hosts))} ({cls})" for cls, hosts in by_class.items())
        lines.append(
            f"  [red]{plural(len(result.earlier_failed), 'more failed host')}[/] from an earlier "
            f"session of this run, not swept again: {named}; their records are in "
            f"{run_dir}/hosts/; sweep them again with: sweep run --resume {run_dir} --retry-failed "
            f"{' '.join(by_class)}"
        )
    return lines


def render_summary(result: RunResult, console: Console | None = None, *, shown: int = 10) -> None:
    """Counts by failure class, the first `shown` failures of this session, and the verdict."""
    console = console or Console()
    # absolute: the hints below still work after a cd
    run_dir = escape(str(Path(result.run_dir).resolve()))
    console.print(f"run folder: {run_dir}", highlight=False, soft_wrap=True)
    table = Table(show_edge=False)
    table.add_column("result")
    table.add_column("hosts", justify="right")
    table.add_row("[green]ok[/]", str(result.ok))
    for cls, count in sorted(result.by_class.items(), key=lambda kv: -kv[1]):
        table.add_row(f"[red]{cls}[/]", str(count))
    if result.pending:
        table.add_row("[yellow]no record (interrupted)[/]", str(result.pending))
    table.add_row("[bold]total[/]", str(result.total))
    console.print(table)
    # gpu[07-20]: host_key_unknown:
    folded = [
        f"{fold_hosts(row['hosts'])}: {row['failure_class']}: {row['message']}"
        for row in fold_failures(result.failures)
    ]
    for line in folded[:shown]:
        console.print(f"  [red]{_shown(line)}[/]", highlight=False, soft_wrap=True)
    if len(folded) > shown:
        console.print(
            f"  ... and {len(folded) - shown} more failure lines in {run_dir}/hosts/",
            soft_wrap=True,
        )
    for line in retry_lines(result, run_dir):
        console.print(line, soft_wrap=True, highlight=False)
    if result.state == "interrupted":
        console.print(
            f"[yellow]interrupted[/]: finish with: sweep run --resume {run_dir}", soft_wrap=True
        )
    elif result.fully_swept:
        console.print(f"[green]every host swept[/] ({result.ok} of {result.total})")
    else:
        missing = result.failed + result.pending
        console.print(
            f"[red]not fully swept[/]: {missing} of {plural(result.total, 'host')} "
            f"{'has' if missing == 1 else 'have'} no health.json"
        )
