"""`sweep demo`: a local fleet of real sshd servers replaying GPU captures, swept and reported
(--speed: the speed tier's demo fleet, no sshd)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from sweep import exitcodes
from sweep.cli import paths
from sweep.cli.options import Bounds, number
from sweep.cli.output import console, results, say
from sweep.cli.report import print_report
from sweep.cli.run import run_with_progress
from sweep.errors import SweepError
from sweep.text import plural


# the options, as `sweep demo --help` lists them
HOSTS = number(
    40,
    "--hosts",
    metavar="N",
    bounds=Bounds(1, 1_000, unit="hosts"),
    help="hosts replaying captures (3 unreachable hosts are added)",
)
OUT = typer.Option(
    None,
    "--out",
    "-o",
    metavar="DIR",
    help="run folder (default: reports/demo/<UTC time>-demo under the current "
    "directory, apart from the runs of reports/ and their history)",
)
KEEP = typer.Option(
    False,
    "--keep",
    help="leave the fleet's temp folder (keys, configs) in place and print where",
)
SERVE = typer.Option(
    False,
    "--serve",
    help="after the report, leave the fleet running until Ctrl-C and "
    "print its inventory, known_hosts and the sweep run / --limit / sweep diff "
    "commands to try on it",
)
SPEED = typer.Option(
    False,
    "--speed",
    help="the speed tier's demo instead: 12 H200 hosts (replayed "
    "captures, with speed figures derived from the lent H200's) whose report shows a "
    "GPU with slow HBM, a host with half-rate PCIe and a slow 500 W class; no sshd",
)
HISTORY = typer.Option(
    False,
    "--history",
    help="the history's demo instead: six weeks of daily runs "
    "of 40 hosts (a power cap lowered in a change window, a driver changed, ECC "
    "switched off, a card sinking 1%/week, the demo's broken hosts broken in every "
    "run) written under --out (default reports/demo/<UTC time>-demo-history), then "
    "its history (sweep history --root); no sshd",
)


def demo(
    hosts: int = HOSTS,
    out: Optional[Path] = OUT,
    keep: bool = KEEP,
    serve: bool = SERVE,
    speed: bool = SPEED,
    history: bool = HISTORY,
):
    """Start a local fleet of real sshd servers replaying GPU captures, sweep it, report, tear down
    (with --serve: after Ctrl-C). Exit 0 when every host behaved as the demo fleet was built to (its
    unreachable and broken hosts are there on purpose); it also prints the exit code `sweep run`
    would give the same fleet, and why."""
    import shutil
    import tempfile

    from sweep.demo import run_demo
    from sweep.demo.fleet import off_design

    if hosts < 1:
        raise SweepError(f"--hosts is {hosts}; it must be 1 or more", fix="pass --hosts 40, say")
    paths.output_dir(out, "--out", "the run folder")
    if speed or history:
        raise typer.Exit(_other_demo(speed, history, out))
    work = Path(tempfile.mkdtemp(prefix="sweep-demo-"))
    codes = []
    try:
        result, fleet_hosts = run_demo(
            hosts,
            out,
            lambda options: run_with_progress(options, console),
            work,
            say=console.print,
            then=lambda res, fleet: codes.append(_demo_report(res, fleet, serve)),
        )
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            console.print(
                f"kept the demo fleet's keys, configs and inventory in {work}", soft_wrap=True
            )
    code = codes[0]
    odd = off_design(fleet_hosts, result)
    if odd or result.state != "complete":
        for line in odd:
            say("error", line)
        say(
            "error",
            "the demo fleet did not behave as designed"
            + (f" ({plural(len(odd), 'host')})" if odd else f" (the sweep was {result.state})"),
        )
        raise typer.Exit(code or exitcodes.INCOMPLETE)
    results.print(
        f"under `sweep run` this fleet would exit {code}: {exitcodes.MEANING[code]} "
        f"(its unreachable and broken hosts are there on purpose)",
        soft_wrap=True,
    )
    results.print("demo done: every host behaved as designed", soft_wrap=True)
    raise typer.Exit(exitcodes.OK)


def _other_demo(speed: bool, history: bool, out: Optional[Path]) -> int:
    if speed and history:
        raise SweepError("--speed and --history are two demos", fix="give one of them")
    return _speed_demo(out) if speed else _history_demo(out)


def _speed_demo(out: Optional[Path]) -> int:
    """`sweep demo --speed`: the speed demo fleet's run folder and report; 0 when it judged as
    designed."""
    import shutil
    import tempfile

    from sweep.demo import DEMO_REPORTS
    from sweep.demo.speed import off_design, speed_fleet, write_speed_run
    from sweep.store import default_run_dir

    work = Path(tempfile.mkdtemp(prefix="sweep-demo-speed-"))
    try:
        run_dir = write_speed_run(
            out or default_run_dir("demo-speed", DEMO_REPORTS), speed_fleet(work)
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    code = print_report([run_dir], run_dir / "report", None)
    odd = off_design(json.loads((run_dir / "report" / "summary.json").read_text()))
    for line in odd:
        say("error", line)
    if odd:
        return exitcodes.INCOMPLETE
    results.print(
        f"under `sweep report` this fleet exits {code}: {exitcodes.MEANING[code]} (its slow "
        "hosts and "
        "class are there on purpose)",
        soft_wrap=True,
    )
    results.print("speed demo done: every host was judged as designed", soft_wrap=True)
    return exitcodes.OK


def _history_demo(out: Optional[Path]) -> int:
    """`sweep demo --history`: six weeks of the demo fleet's runs and their history; 0 when the
    history found every change the demo made (the cap, the driver, ECC, the sinking card)."""
    from sweep.cli.history import print_history
    from sweep.demo import DEMO_REPORTS
    from sweep.demo.history import six_weeks
    from sweep.history import build_history
    from sweep.store import default_run_dir

    root = out or default_run_dir("demo-history", DEMO_REPORTS)
    console.print(
        f"writing six weeks of daily runs of the demo fleet under {root} ...", soft_wrap=True
    )
    story = six_weeks(root)
    result = build_history([root], root / "history")
    print_history(result, root / "history")
    missed = sorted(
        {d.host for d in story} - set(result.changed_hosts) - {d.host for d in result.drifted}
    )
    if missed:
        say("error", f"the history missed what the demo did to {', '.join(missed)}")
        return exitcodes.INCOMPLETE
    results.print(
        f"history demo done: every change the demo made was found ({plural(len(story), 'host')}); "
        f"try sweep history --root {root} --host 'gpu0*'",
        soft_wrap=True,
    )
    return exitcodes.OK


def _demo_report(result, fleet, serve: bool) -> int:
    """The demo run's report while its fleet still runs; with --serve, the fleet then serves until
    Ctrl-C."""
    code = print_report([result.run_dir], result.run_dir / "report", None)
    if serve:
        from sweep.demo.serve import by_hand, serve_until_interrupted

        for line in by_hand(fleet, result.run_dir.resolve()):
            results.print(line, markup=False, soft_wrap=True)
        results.file.flush()
        serve_until_interrupted()
        console.print("stopping the demo fleet", soft_wrap=True)
    return code
