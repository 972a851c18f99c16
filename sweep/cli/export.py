"""`sweep export prometheus`: a run as node_exporter textfile metrics, or the alerting rules that
judge them."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from sweep.cli import paths
from sweep.cli.app import command, group
from sweep.cli.options import MHZ, STALE_HOURS, number
from sweep.cli.output import console, safe
from sweep.errors import ConfigError

export_app = group("Hand a run to the systems operators already watch (Prometheus).")


@command(export_app, "prometheus")
def prometheus(
    run_dir: Optional[Path] = typer.Argument(
        None, metavar="[RUN_DIR]", help="the run folder to export"
    ),
    out: Optional[Path] = typer.Option(
        None,
        "--out",
        "-o",
        metavar="FILE",
        help="file to write, atomically (default: stdout); e.g. "
        "/var/lib/prometheus/node-exporter/sweep.prom",
    ),
    rules: bool = typer.Option(
        False, "--rules", help="write the alerting rules instead of the metrics"
    ),
    expect: Optional[Path] = typer.Option(
        None,
        "--expect",
        metavar="FILE",
        help="with --rules: expectations file (intended power limits, approved "
        "drivers, SM clock floors; docs/expectations.md)",
    ),
    floor: float = number(
        1200.0,
        "--floor",
        metavar="MHZ",
        bounds=MHZ,
        help="with --rules, where --expect sets no floor: SM clock floor under load",
    ),
    stale_hours: float = number(
        24.0,
        "--stale-hours",
        metavar="HOURS",
        bounds=STALE_HOURS,
        help="with --rules: SweepFleetNotSwept fires when the newest export is older",
    ),
    output: Optional[Path] = typer.Option(None, "--output", hidden=True),
):
    """Write a run as node_exporter textfile-collector metrics, or (--rules) the alerting rules that
    judge them: power limit not the intended one, HW slowdown / thermal / power brake, an ECC mode
    change, a driver not approved, SM clock under load below the floor, a host broken (to drain), an
    Xid that needs a repair, a host unreachable, no sweep for --stale-hours; never SW power cap
    alone."""
    from sweep.export.textfile import write_output

    paths.input_file(expect, "--expect", "an expectations file (docs/expectations.md)")
    paths.output_file(output, "--output", "the metrics or rules file")
    output = (
        output
        if output is not None
        else paths.output_file(out, "--out", "the metrics or rules file")
    )
    text = _text(run_dir, rules, expect, floor, stale_hours)
    write_output(text, output)
    if output is not None:
        console.print(f"wrote {safe(output)}")


def _text(run_dir: Optional[Path], rules: bool, expect, floor: float, stale_hours: float) -> str:
    """The alerting rules (--rules), else the run's metrics: a run folder is needed, --expect is
    refused (the metrics are what the hosts said)."""
    if rules:
        from sweep.export.rules import rules_text

        return rules_text(expect, floor_mhz=floor, stale_hours=stale_hours)
    if run_dir is None:
        raise ConfigError("no run folder given", fix="sweep export prometheus RUN_DIR -o FILE")
    paths.input_dir(run_dir, "RUN_DIR", "a run folder (sweep run)")
    if expect is not None:
        raise ConfigError(
            f"--expect {expect} belongs to --rules: the metrics are what the hosts said",
            fix="sweep export prometheus --rules --expect FILE -o sweep.rules.yml",
        )
    from sweep.export.prometheus import metrics_text

    return metrics_text(run_dir)
