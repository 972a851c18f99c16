"""`sweep report`: compare hosts, write the report's files, print its headline and findings."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import List, Optional

import typer

from sweep.cli import paths
from sweep.cli.options import BASELINE, DRAIN_CONFIG, EXPECT, REFERENCE
from sweep.cli.output import results, safe, say
from sweep.errors import SweepError
from sweep.text import plural


def print_report(
    inputs,
    out_dir: Path,
    reference: Optional[str],
    expect: Optional[Path] = None,
    baseline: Optional[Path] = None,
    details: bool = False,
    drain_config: bool = False,
    fleet=None,
) -> int:
    """Build the report of `inputs` into `out_dir` and print the verdict (`sweep report`, and after
    `sweep run` and `sweep demo`): at a glance, a few short lines (the headline, each state's hosts,
    each cause with its fix); with `details`, every finding in full; then whose cause keeps each
    host out undrained, and the commands that act next (`fleet`: build_report's). Its exit code."""
    from sweep.report.build import build_report
    from sweep.report.glance import glance, load_line, terminal_lines

    result = build_report(
        [Path(p) for p in inputs],
        out_dir,
        reference=reference,
        expect=expect,
        baseline=baseline,
        drain_config=drain_config,
        fleet=fleet,
    )
    summary = result.summary
    if details:
        results.print(safe(result.headline), soft_wrap=True)
    else:
        more = (
            f"sweep report {' '.join(shlex.quote(str(Path(p).resolve())) for p in inputs)} "
            "--details"
        )
        for line in terminal_lines(glance(result.verdict, summary["classes"], summary["headline"])):
            results.print(safe(line), soft_wrap=True)
        # the audit's, the benchmark's and the speed tier's verdicts
        for line in result.headline.splitlines()[1:]:
            results.print(safe(line), soft_wrap=True)
    notes = result.notes if details else [n["text"] for n in summary["verdict_model"]["notes"]]
    for line in notes:  # what was asked for and not measured, not read (details: and the host sets)
        results.print(safe(line), soft_wrap=True)
    if details:
        for line in result.findings_lines:  # the health findings, folded across hosts (clubak -b)
            results.print(f"- {safe(line)}", soft_wrap=True)
    run = (
        Path(inputs[0])
        if len(inputs) == 1 and (Path(inputs[0]) / "manifest.json").is_file()
        else None
    )
    said = load_line(result.fleet.gpus, _load_seconds(run))
    if said:
        results.print(safe(said), soft_wrap=True)
    # whose cause keeps each host out undrained, then the commands that act next
    for line in result.next_lines:
        results.print(safe(line), soft_wrap=True)
    if not details:
        results.print(f"details: {more}", soft_wrap=True)
    results.print(f"report: {(out_dir / 'report.html').resolve()}", soft_wrap=True)
    return result.exit_code


def _load_seconds(run: Optional[Path]) -> Optional[float]:
    """The seconds of the run's --load, as its manifest keeps the agent's arguments (None: no load,
    no run)."""
    from sweep.store import RunFolder

    if run is None:
        return None
    try:
        args = (RunFolder(run).read_manifest().get("options") or {}).get("agent_args") or []
        return float(args[args.index("--load") + 1]) if "--load" in args else None
    except (SweepError, ValueError, IndexError, TypeError, AttributeError):
        return None


def report(
    inputs: List[Path] = typer.Argument(
        ...,
        metavar="PATH...",
        help="run folders, host records, health.json or provenance.json files",
    ),
    out: Optional[Path] = typer.Option(
        None,
        "--out",
        "-o",
        metavar="DIR",
        help="output folder (default: PATH/report for one run folder, else "
        "reports/report under the current directory)",
    ),
    reference: Optional[str] = REFERENCE,
    expect: Optional[Path] = EXPECT,
    baseline: Optional[Path] = BASELINE,
    drain_config: bool = DRAIN_CONFIG,
    details: bool = typer.Option(
        False,
        "--details",
        help="print every finding in full, the Xid repairs and "
        "the host sets, instead of the verdict at a glance",
    ),
):
    """Compare hosts: which cannot be benchmarked together, and why (HTML, CSV, JSON, Markdown)."""
    for path in inputs:
        paths.input_path(path, "PATH", "a run folder, host record, health.json or provenance.json")
    paths.output_dir(out, "--out", "the report")
    paths.input_file(expect, "--expect", "an expectations file (docs/expectations.md)")
    paths.input_dir(baseline, "--baseline", "a baseline folder (sweep baseline set)")
    if out is None:
        out = (
            inputs[0] / "report"
            if len(inputs) == 1 and inputs[0].is_dir()
            else Path("reports/report")
        )
    _warn_doubled([p for p in inputs if (p / "manifest.json").is_file()])
    raise typer.Exit(
        print_report(
            inputs, out, reference, expect, baseline, details=details, drain_config=drain_config
        )
    )


def _warn_doubled(run_dirs: List[Path]) -> None:
    """Run folders of the same hosts reported together: each such host is counted once per run
    (gpu01, gpu01#2); comparing two runs of one fleet is `sweep diff`'s work. Said once, on
    stderr."""
    from sweep.analysis.names import fold_hosts
    from sweep.store import load_run

    seen: dict = {}
    try:
        for run_dir in run_dirs if len(run_dirs) > 1 else ():
            for host in load_run(run_dir).records:
                seen.setdefault(host, []).append(run_dir)
    except SweepError:
        return  # a folder it cannot read: the report says why, with its own message
    doubled = [host for host, where in seen.items() if len(where) > 1]
    if doubled:
        first = seen[doubled[0]]
        say(
            "warning",
            f"{plural(len(doubled), 'host')} ({fold_hosts(doubled)}) "
            f"{'is' if len(doubled) == 1 else 'are'} "
            f"in more than one of these run folders: the report counts each once per run "
            f"({doubled[0]}, {doubled[0]}#2); to see what changed between two runs of the "
            "same hosts, "
            f"use sweep diff {first[0]} {first[1]}",
        )
