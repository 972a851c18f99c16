"""The CLI faces of the history and the exports: `sweep history`, `sweep export prometheus`.
Parse, check the paths, hand over, print; `sweep.cli.main` turns errors into exit codes."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from sweep import exitcodes
from sweep.cli import paths
from sweep.errors import ConfigError
from sweep.text import plural

export_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                         help="Hand a run to the systems operators already watch (Prometheus).")


def register(app: typer.Typer) -> None:
    """Add `history` and `export` to the sweep app."""
    app.command()(history)
    export_app.command("prometheus")(prometheus)
    app.add_typer(export_app, name="export")


def keep_history(run_dir: Path) -> None:
    """After `sweep run`: bring the history index of the run's root up to date; a failure is a warning."""
    from sweep.cli import console, safe
    from sweep.history.hook import keep_index_current

    warning = keep_index_current(run_dir)
    if warning:
        console.print(f"sweep: warning: {safe(warning)}", soft_wrap=True)


def history(
    runs: List[Path] = typer.Argument(None, metavar="[RUN_DIR]...",
                                      help="run folders (default: every run folder under --root)"),
    root: Path = typer.Option(Path("reports"), "--root", metavar="DIR",
                              help="the folder that holds the run folders"),
    since: Optional[str] = typer.Option(None, "--since", metavar="AGE",
                                        help="only runs of the last AGE: 6w, 30d, 12h"),
    host: Optional[str] = typer.Option(None, "--host", metavar="PATTERN", help="only hosts matching this glob (gpu0*)"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", metavar="DIR", help="output folder (default ROOT/history)"),
    index: Optional[Path] = typer.Option(None, "--index", metavar="FILE",
                                         help="history index file (default ROOT/.sweep-history.sqlite)"),
    threshold: float = typer.Option(3.0, "--threshold", metavar="PERCENT",
                                    help="how far the SM clock under load may fall since a host's last "
                                         "configuration change before the host counts as drifted"),
    floor: Optional[float] = typer.Option(None, "--floor", metavar="MHZ",
                                          help="fixed SM clock floor under load, shown beside the drift"),
):
    """Per host and GPU, the timeline of every comparability key and health fact with its change
    points, and drift of the SM clock under load against each host's own first runs (drifted hosts
    ranked first). Writes history.html, changes.csv, timeline.csv, drift.csv, load.csv, history.json.
    Exit 5 when a host drifted or changed, like sweep diff."""
    from sweep.cli import console, results, safe
    from sweep.history import build_history
    from sweep.history.build import parse_since

    for run in runs or ():
        paths.input_dir(run, "RUN_DIR", "a run folder (sweep run)")
    if not runs:
        paths.input_dir(root, "--root", "the folder that holds the run folders (reports/)")
    parse_since(since)
    base = root if not runs else (runs[0] if not (runs[0] / "manifest.json").is_file() else runs[0].parent)
    out_dir = paths.output_dir(out if out is not None else base / "history", "--out", "the history files")
    paths.output_file(index, "--index", "the history index")
    result = build_history(list(runs) if runs else [root], out_dir, index_path=index, since=since, host=host,
                           threshold_pct=threshold, floor_mhz=floor)
    if result.update.rebuilt:
        console.print(safe(f"sweep: {result.update.rebuilt}"), soft_wrap=True)
    for skipped in result.skipped:
        console.print(safe(f"sweep: warning: {skipped.where}: skipped: {skipped.why}"), soft_wrap=True)
    for line in result.lines():
        results.print(safe(line), soft_wrap=True)
    results.print(safe(f"{plural(len(result.selection.runs), 'run')}, {result.drift_text(short=True)}, "
                   f"{plural(len(result.changed_hosts), 'host')} changed; index: "
                   f"{plural(len(result.update.read), 'run')} read, {result.update.kept} unchanged"), soft_wrap=True)
    results.print(f"history: {safe((out_dir / 'history.html').resolve())}", soft_wrap=True)
    raise typer.Exit(exitcodes.OFF if result.drifted or result.speed_drifted or result.changes else exitcodes.OK)


def prometheus(
    run_dir: Optional[Path] = typer.Argument(None, metavar="[RUN_DIR]", help="the run folder to export"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", metavar="FILE",
                                       help="file to write, atomically (default: stdout); e.g. "
                                            "/var/lib/prometheus/node-exporter/sweep.prom"),
    rules: bool = typer.Option(False, "--rules", help="write the alerting rules instead of the metrics"),
    expect: Optional[Path] = typer.Option(None, "--expect", metavar="FILE",
                                          help="with --rules: expectations file (intended power limits, approved "
                                               "drivers, SM clock floors; docs/expectations.md)"),
    floor: float = typer.Option(1200.0, "--floor", metavar="MHZ",
                                help="with --rules, where --expect sets no floor: SM clock floor under load"),
    output: Optional[Path] = typer.Option(None, "--output", hidden=True),
):
    """Write a run as node_exporter textfile-collector metrics, or (--rules) the alerting rules that
    judge them: power limit not the intended one, HW slowdown / thermal / power brake, an ECC mode
    change, a driver not approved, SM clock under load below the floor; never SW power cap alone."""
    from sweep.cli import console, safe
    from sweep.export.textfile import write_output

    paths.input_file(expect, "--expect", "an expectations file (docs/expectations.md)")
    paths.output_file(output, "--output", "the metrics or rules file")
    output = output if output is not None else paths.output_file(out, "--out", "the metrics or rules file")
    if rules:
        from sweep.export.rules import rules_text

        text = rules_text(expect, floor_mhz=floor)
    else:
        if run_dir is None:
            raise ConfigError("no run folder given", fix="sweep export prometheus RUN_DIR -o FILE")
        paths.input_dir(run_dir, "RUN_DIR", "a run folder (sweep run)")
        if expect is not None:
            raise ConfigError(f"--expect {expect} belongs to --rules: the metrics are what the hosts said",
                              fix="sweep export prometheus --rules --expect FILE -o sweep.rules.yml")
        from sweep.export.prometheus import metrics_text

        text = metrics_text(run_dir)
    write_output(text, output)
    if output is not None:
        console.print(f"wrote {safe(output)}")
