"""`sweep diff`: what changed between two probes, two wrapped runs or two run folders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from sweep.cli import paths
from sweep.cli.options import json_flag
from sweep.cli.output import console, print_lines, results, safe
from sweep.text import json_text, plural


def diff(
    before: Path = typer.Argument(
        ..., metavar="BEFORE", help="a health.json, host record or provenance.json, or a run folder"
    ),
    after: Path = typer.Argument(
        ..., metavar="AFTER", help="a health.json, host record or provenance.json, or a run folder"
    ),
    as_json: bool = json_flag("the changes"),
    html: Optional[Path] = typer.Option(
        None, "--html", metavar="FILE", help="two run folders: also write the diff as HTML to FILE"
    ),
):
    """What changed between two probes: the conclusion in a line or two, then the throttle evidence
    that proves it, then the rest; between two wrapped runs
    (provenance.json), the probes before them first, then what their samples saw. Between two run
    folders: hosts added, removed, newly unreachable, recovered, and each host's changes by kind
    (docs/audits.md)."""
    paths.input_path(before, "BEFORE", "a health.json, host record, provenance.json or run folder")
    paths.input_path(after, "AFTER", "a health.json, host record, provenance.json or run folder")
    paths.output_file(html, "--html", "the HTML diff")
    if before.is_dir() or after.is_dir():
        raise typer.Exit(_run_diff(before, after, as_json, html))
    from sweep.audit.diff import explain_files, probes_of
    from sweep.audit.rundiff import fold_probe_changes, probe_exit_code

    conclusion, changes = explain_files(before, after)
    code = probe_exit_code(*probes_of(before, after))
    folded = fold_probe_changes(changes)
    if as_json:
        print(
            json.dumps(
                {
                    "conclusion": conclusion,
                    "changes": [c.__dict__ for c in changes],
                    "folded": [c.as_dict() for c in folded],
                    "exit_code": code,
                },
                indent=1,
            )
        )
        raise typer.Exit(code)
    _probe_table(before, after, conclusion, changes, folded)
    raise typer.Exit(code)


def _probe_table(before: Path, after: Path, conclusion: list, changes: list, folded: list) -> None:
    """`sweep diff A B` of two probes on stdout: the conclusion, one row per change (kinds and GPUs
    as the run diff names and folds them), then the findings of rising link errors."""
    from rich.table import Table

    from sweep.audit.diff import rising_link_errors
    from sweep.audit.rundiff import show_field, show_gpus

    print_lines(conclusion)
    # the title on a line of its own, as the run diff's: a table's title wraps at the table's width
    results.print(
        f"{safe(before)} -> {safe(after)}: {plural(len(changes), 'change')}", soft_wrap=True
    )
    if not folded:
        return
    table = Table()
    for col in ("kind", "field", "GPUs", "before", "after"):
        table.add_column(col, overflow="fold")
    for c in folded:
        table.add_row(
            c.kind,
            safe(c.field),
            safe(show_gpus(c.gpus)),
            safe(show_field(c.field, c.before)),
            safe(show_field(c.field, c.after)),
        )
    results.print(table)
    for finding in rising_link_errors(changes):
        results.print("finding: " + safe(finding), soft_wrap=True)


def _run_diff(before: Path, after: Path, as_json: bool, html: Optional[Path]) -> int:
    from sweep.errors import ConfigError
    from sweep.audit.rundiff import diff_runs, render_html, render_terminal
    from sweep.store import load_run

    if not (before.is_dir() and after.is_dir()):
        raise ConfigError(
            "cannot compare a run folder with a file",
            where=f"{before} {after}",
            fix="give two run folders, or two health.json files",
        )
    result = diff_runs(load_run(before), load_run(after))
    if html is not None:
        from sweep.errors import RunFolderError
        from sweep.folders import SHARED, make_dirs
        from sweep.store import write_bytes_atomic

        try:
            make_dirs(html.parent, SHARED)
            write_bytes_atomic(html, render_html(result).encode("utf-8"))
        except RunFolderError as err:
            raise ConfigError(
                err.message, where=err.where, fix="choose a writable path with --html"
            ) from None
        console.print(f"wrote {safe(html)}")
    if as_json:
        print(json_text(result.as_dict()))
    else:
        render_terminal(result, results)
    return result.exit_code
