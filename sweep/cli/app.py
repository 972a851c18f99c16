"""The typer app every command module adds its command to, and the one command class they share.

typer (0.29) writes a required argument as ``{RUN_DIR}`` in the usage line and adds its type to the
argument's help (``RUN_DIR <path>``, ``[RUN_DIR]... <list[Path]>``). `SweepCommand` names arguments
as users type them (``RUN_DIR``, ``PATH...``, ``[RUN_DIR]...``) through click's public ``Command``
hooks, `collect_usage_pieces` and `format_options`: nothing of click's or typer's private API is
patched. Typer runs with completion and rich markup off (`add_completion=False`,
`rich_markup_mode=None`).
"""

from __future__ import annotations

import typer
from typer.core import TyperCommand

from sweep import __version__, exitcodes
from sweep.cli.output import results

HELP = "Is this GPU fleet the fleet you think it is? Probe hosts, sweep a fleet, compare it."
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None, help=HELP)


def argument_name(param) -> str:
    """An argument as its help lists it: its metavar (RUN_DIR, PATH..., [RUN_DIR]...)."""
    return param.metavar or param.name.upper()


def argument_usage(param) -> str:
    """An argument as the usage line shows it: RUN_DIR, [RUN_DIR] when optional, PATH... when
    repeated."""
    name = argument_name(param)
    shown = name if param.required else f"[{name}]"
    return shown + ("..." if param.nargs != 1 and not name.endswith("...") else "")


class SweepCommand(TyperCommand):
    """A typer command whose usage line and argument list read as users write the command."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            is_argument = param.param_type_name == "argument"
            pieces += [argument_usage(param)] if is_argument else param.get_usage_pieces(ctx)
        return pieces

    def format_options(self, ctx, formatter) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((argument_name(param), record[1]))  # without typer's <path>
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)

    def format_epilog(self, ctx, formatter) -> None:
        """The command's exit codes, from the one table (`sweep.exitcodes.help_rows`), under its
        options."""
        super().format_epilog(ctx, formatter)
        rows = exitcodes.help_rows(" ".join(ctx.command_path.split()[1:]))
        if rows:
            with formatter.section("Exit codes"):
                formatter.write_dl(rows)


def group(help: str) -> typer.Typer:
    """A command group (`sweep baseline`, `sweep export`), added to `app` by `sweep.cli`."""
    return typer.Typer(no_args_is_help=True, rich_markup_mode=None, help=help)


def command(under: typer.Typer | None = None, name: str | None = None):
    """The decorator of a sweep command (`@command()`, `@command(baseline, "set")`): a
    `SweepCommand`."""
    return (under or app).command(name, cls=SweepCommand)


def _version(value: bool) -> None:
    if value:
        results.print(f"sweep {__version__}", soft_wrap=True)
        raise typer.Exit(exitcodes.OK)


@app.callback()
def _top(
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_version, help="print sweep's version and exit"
    ),
):
    """Is this GPU fleet the fleet you think it is? Probe hosts, sweep a fleet, compare it."""
