"""docs/cli.md, the command-line reference, generated from the CLI's own help (as sqlite-utils
generates its docs/cli-reference.rst): every command and subcommand, its ``--help`` as a user sees
it at a fixed width. ``python -m sweep.cli.reference > docs/cli.md`` writes it;
tests/unit/test_docs.py fails when the file is not what this prints, so the reference cannot drift
from the options.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

# the terminal width the help is rendered for (click then wraps at its own 78 columns), fixed
WIDTH = 100
# so that the reference is the same text whatever terminal regenerates it


def command_paths() -> list[list[str]]:
    """Every command as argv words (["run"], ["baseline", "set"], ...), in the order the tree lists
    them."""
    from sweep.cli import command

    out: list[list[str]] = []

    def walk(cmd, path: list[str]) -> None:
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            if not getattr(sub, "hidden", False):
                out.append([*path, name])
                walk(sub, [*path, name])

    walk(command(), [])
    return out


def help_text(path: list[str]) -> str:
    """`sweep PATH --help` as printed at `WIDTH` columns."""
    from sweep.cli import main

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH)
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            main([*path, "--help"])
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()).strip("\n")


def reference() -> str:
    """The text of docs/cli.md."""
    parts = [
        "# Command-line reference",
        "",
        "Generated from the CLI's own help by `python -m sweep.cli.reference > docs/cli.md`; "
        "`tests/unit/test_docs.py` checks that it is current. Do not edit by hand.",
        "",
        "## sweep",
        "",
        "```",
        help_text([]),
        "```",
    ]
    for path in command_paths():
        parts += ["", f"## sweep {' '.join(path)}", "", "```", help_text(path), "```"]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference())
