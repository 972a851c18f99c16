"""`sweep probe`: probe this host with the agent, write health.json and health-report.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import typer

from sweep import exitcodes
from sweep.cli import paths
from sweep.cli.options import LOAD_SECONDS, SECONDS, number
from sweep.cli.output import console
from sweep.errors import SweepError


def probe(
    out: Path = typer.Option(
        Path("results"),
        "--out",
        "-o",
        metavar="DIR",
        help="folder for health.json and health-report.md",
    ),
    deep: bool = typer.Option(False, "--deep", help="import torch and ask CUDA (seconds)"),
    interpreter: List[str] = typer.Option(
        [], "--interpreter", metavar="PYTHON", help="python whose torch build to check (repeatable)"
    ),
    load: float = number(
        0.0,
        "--load",
        metavar="SECONDS",
        bounds=LOAD_SECONDS,
        help="run a GPU load for SECONDS and sample clocks and power",
    ),
    force: bool = typer.Option(
        False, "--force", help="--load even when other processes use the GPUs"
    ),
    record: Optional[Path] = typer.Option(
        None, "--record", metavar="FILE", help="save every raw answer into this capture file"
    ),
    replay: Optional[Path] = typer.Option(
        None, "--replay", metavar="FILE", help="answer from a capture file instead of the driver"
    ),
    deadline: float = number(
        30.0,
        "--deadline",
        metavar="SECONDS",
        bounds=SECONDS,
        help="emit what was read after SECONDS, marked incomplete",
    ),
):
    """Probe this host with the agent: write DIR/health.json and DIR/health-report.md."""
    _check_inputs(out, interpreter, record, replay)
    args = _agent_argv(out, deadline, deep, interpreter, (load, force), record, replay)
    proc = subprocess.run(args, stdout=subprocess.PIPE, text=True)
    # the agent's own line (on stderr) names the path and the fix
    if proc.returncode == exitcodes.BAD_INPUT:
        raise typer.Exit(exitcodes.BAD_INPUT)
    if proc.returncode != 0:
        raise SweepError(
            f"the agent failed (exit {proc.returncode})",
            fix="run python3 -m probe_agent --no-json to see its error",
        )
    health = json.loads(proc.stdout)
    print((out / "health-report.md").read_text())
    console.print(
        f"wrote {(out / 'health.json').resolve()} and {(out / 'health-report.md').resolve()}",
        soft_wrap=True,
    )
    raise typer.Exit(exitcodes.BROKEN if health["lowest_broken"] else exitcodes.OK)


def _check_inputs(out: Path, interpreter: List[str], record, replay) -> None:
    """The output folder and capture file writable, the replayed capture readable, and every
    --interpreter a python that exists: refused (exit 2) before the agent starts."""
    import shutil

    paths.output_dir(out, "--out", "health.json and health-report.md")
    paths.output_file(record, "--record", "the capture")
    paths.input_file(replay, "--replay", "a capture (sweep probe --record FILE)")
    for interp in interpreter:
        if shutil.which(interp) is None:
            raise SweepError(
                "--interpreter: no such python",
                where=interp,
                fix="give the path of the python whose torch to check (or a name on PATH)",
            )


def _agent_argv(out: Path, deadline: float, deep: bool, interpreter, load: tuple, record, replay):
    """The agent's command line for these options (`load`: the seconds and --force)."""
    args = [sys.executable, "-m", "probe_agent", "--out", str(out), "--deadline", str(deadline)]
    args += ["--deep"] if deep else []
    for interp in interpreter:
        args += ["--interpreter", interp]
    seconds, force = load
    if seconds:
        args += ["--load", str(seconds)] + (["--force"] if force else [])
    if record:
        args += ["--record", str(record)]
    if replay:
        args += ["--replay", str(replay)]
    return args
