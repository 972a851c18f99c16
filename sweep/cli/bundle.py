"""`sweep bundle`: write the self-contained agent (agent.pyz)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from sweep.cli import paths
from sweep.cli.options import old_spelling
from sweep.cli.output import results


def bundle(
    out: Path = typer.Option(
        Path("agent.pyz"), "--out", "-o", metavar="FILE", help="where to write the zipapp"
    ),
    output: Optional[Path] = old_spelling("--output"),
):
    """Write the self-contained agent (runs with a bare python3 3.8+: python3 agent.pyz --help)."""
    from sweep.collect.bundle import build_bundle

    name, target = ("--out", out) if output is None else ("--output", output)
    path = build_bundle(paths.output_file(target, name, "the agent bundle"))
    results.print(
        f"wrote {path} ({path.stat().st_size // 1024} KiB); run it with: python3 {path} --out DIR",
        # one line, whatever the terminal's width: it is copied and pasted
        soft_wrap=True,
    )
