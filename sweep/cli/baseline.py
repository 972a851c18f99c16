"""`sweep baseline set | show | check`: record each host's GPU stack from a run, list it, report
drift from it."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from sweep.cli import paths
from sweep.cli.app import command, group
from sweep.cli.options import BASELINE_DIR, HOSTS, json_flag, old_spelling
from sweep.cli.output import print_lines, results, safe
from sweep.text import json_text, plural

baseline_app = group(
    "Per-host baselines: record each host's GPU stack from a run, then report drift "
    "from it (exit 5 on drift; docs/audits.md)."
)


@command(baseline_app, "set")
def baseline_set(
    run_dir: Path = typer.Argument(
        ..., metavar="RUN_DIR", help="the run folder whose reachable hosts become the baseline"
    ),
    out: Path = typer.Option(
        Path("baseline"), "--out", "-o", metavar="DIR", help="baseline folder (one file per host)"
    ),
    update: bool = typer.Option(False, "--update", help="replace hosts the baseline already holds"),
    host: List[str] = HOSTS,
    unhealthy: bool = typer.Option(
        False,
        "--unhealthy",
        help="take the hosts the run's verdict does not call "
        "healthy too (broken, held out, cannot run, busy); default: each is named, not taken",
    ),
    directory: Optional[Path] = old_spelling("--dir"),
):
    """Record each healthy host's state from RUN_DIR (the pool and the other classes of its
    verdict): new hosts are added, existing ones kept unless --update; a host the verdict does not
    call healthy is named, not taken."""
    from sweep.audit.baseline import set_baseline

    paths.input_dir(run_dir, "RUN_DIR", "a run folder (sweep run)")
    paths.output_dir(directory, "--dir", "the baseline")
    directory = (
        directory if directory is not None else paths.output_dir(out, "--out", "the baseline")
    )

    print_lines(
        set_baseline(run_dir, directory, update=update, hosts=host, unhealthy=unhealthy).lines()
    )


@command(baseline_app, "show")
def baseline_show(
    baseline: Path = BASELINE_DIR,
    host: List[str] = HOSTS,
    as_json: bool = json_flag("the rows"),
    directory: Optional[Path] = old_spelling("--dir"),
):
    """One line per host of the baseline: driver, GPUs, ECC, power limit, MIG, worst link, when
    set."""
    from sweep.audit.baseline import show_rows

    directory = directory if directory is not None else baseline
    rows = show_rows(directory, host)
    if as_json:
        print(json_text(rows))
        return
    from rich.table import Table

    table = Table(title=f"baseline {safe(directory)}: {plural(len(rows), 'host')}")
    cols = (
        "host",
        "driver",
        "gpus",
        "models",
        "ecc",
        "power_limit_w",
        "mig_layout",
        "persistence",
        "worst_link",
        "set_at",
    )
    for col in cols:
        table.add_column(col)
    for row in rows:
        table.add_row(*(safe(row[c]) for c in cols))
    results.print(table)


@command(baseline_app, "check")
def baseline_check(
    run_dir: Path = typer.Argument(
        ..., metavar="RUN_DIR", help="the run folder to compare with the baseline"
    ),
    baseline: Path = BASELINE_DIR,
    as_json: bool = json_flag("the comparison"),
    directory: Optional[Path] = old_spelling("--dir"),
):
    """Drift of each host of RUN_DIR from its baseline (driver, ECC, power, MIG, topology, swapped
    or missing GPUs)."""
    from sweep.audit.baseline import compare_to_baseline

    paths.input_dir(run_dir, "RUN_DIR", "a run folder (sweep run)")
    result = compare_to_baseline(run_dir, directory if directory is not None else baseline)
    if as_json:
        print(json_text(result.as_dict()))
    else:
        from sweep.analysis.names import fold_messages

        print_lines(fold_messages((d.host, d.message) for d in result.drift))
        for label, names in (
            ("no baseline", result.no_baseline),
            ("in the baseline, not in the run", result.absent),
            ("not compared (failed in the run)", [u["host"] for u in result.unjudged]),
        ):
            if names:
                results.print(safe(f"{label}: {', '.join(names)}"), soft_wrap=True)
        results.print(
            safe(
                f"{plural(len(result.compared), 'host')} compared, "
                f"{len(result.drifted_hosts)} drifted"
            ),
            soft_wrap=True,
        )
    raise typer.Exit(result.exit_code)
