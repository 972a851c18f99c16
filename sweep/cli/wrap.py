"""`sweep wrap -- COMMAND`: run a command with the evidence of the machine it ran on
(provenance.json)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import typer

from sweep.cli import paths
from sweep.cli.options import SAMPLE_SECONDS, SECONDS, number


def wrap(
    command: List[str] = typer.Argument(
        ..., metavar="COMMAND", help="the command and its arguments, after --"
    ),
    interval: float = number(
        0.2,
        "--interval",
        metavar="SECONDS",
        bounds=SAMPLE_SECONDS,
        help="seconds between GPU samples while the command runs",
    ),
    out: Path = typer.Option(
        Path("results"), "--out", "-o", metavar="DIR", help="folder for provenance.json"
    ),
    replay: Optional[Path] = typer.Option(
        None,
        "--replay",
        metavar="FILE",
        help="GPU answers from a capture (env SWEEP_REPLAY); the command runs",
    ),
    deep: bool = typer.Option(
        False, "--deep", help="the probes import torch and ask CUDA (seconds)"
    ),
    deadline: float = number(
        30.0, "--deadline", metavar="SECONDS", bounds=SECONDS, help="seconds each probe may take"
    ),
):
    """Run COMMAND with the evidence of the machine it ran on: probe before, sample during, probe
    after, into OUT/provenance.json. The command's stdin, stdout, stderr and exit code pass through
    untouched (sweep wrap -- python3 bench.py --size 8192)."""
    args = [
        sys.executable,
        "-m",
        "probe_agent",
        "--wrap",
        "--out",
        str(out),
        "--interval",
        str(interval),
        "--deadline",
        str(deadline),
    ] + (["--deep"] if deep else [])
    paths.output_dir(out, "--out", "provenance.json")
    if replay:
        args += [
            "--replay",
            str(paths.input_file(replay, "--replay", "a capture (sweep probe --record FILE)")),
        ]
    import signal

    proc = subprocess.Popen(args + ["--"] + list(command))
    # Ctrl-C reaches the command; the agent still writes
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code = proc.wait()
    finally:
        signal.signal(signal.SIGINT, old)
    raise typer.Exit(code if code >= 0 else 128 - code)
