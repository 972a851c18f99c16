"""sweep's command line: parses, hands over, prints. The one place where errors become exit codes.

Exit codes (all commands): 0 success; 1 hosts unreachable or failed (run), not judged (audit); 2 bad
input (a message names the file, host or option and the fix); 3 hosts not comparable (report); 4 a
broken contract (probe, report); 5 off expectations or a baseline; 6 a wrapped benchmark failed on a
host, 7 it was refused on a host (run --wrap; docs/fleet-benchmark.md); 130 interrupted. `sweep
report --help` lists the report's precedence.

Each command is a module of its own (`sweep.cli.run`, `sweep.cli.report`, ...); this module adds
them to the one typer app (`sweep.cli.app`) in the order `sweep --help` lists them. Options several
commands share are declared once, in `sweep.cli.options`.
"""

from __future__ import annotations

import sys
from typing import Optional

import typer

from sweep import exitcodes
from sweep.cli import audit, baseline, bundle, demo, diff, export, history, probe, report, run, wrap
from sweep.cli import paths
from sweep.cli.app import app, command as sweep_command
from sweep.cli.output import console, say
from sweep.cli.run import retry_failed_argv
from sweep.errors import SweepError

__all__ = ["app", "command", "main", "retry_failed_argv"]

# the commands, in the order `sweep --help` lists them, then the groups of subcommands
for function in (
    probe.probe,
    bundle.bundle,
    diff.diff,
    wrap.wrap,
    run.run,
    report.report,
    audit.audit,
    demo.demo,
    history.history,
):
    sweep_command()(function)
app.add_typer(baseline.baseline_app, name="baseline")
app.add_typer(export.export_app, name="export")


def command():
    """The click command tree: every command, with usage lines and arguments as users write them."""
    return typer.main.get_command(app)


def main(argv: Optional[list] = None) -> int:
    """Entry point: the one place where a SweepError becomes a message and an exit code."""
    import warnings

    from sweep.errors import InventoryWarning, ReadBackWarning, SSHConfigNote

    def show(message, category, *args, **kwargs):
        if issubclass(category, SSHConfigNote):
            say("note", message)
        elif issubclass(category, (InventoryWarning, ReadBackWarning)):
            say("warning", message)
        else:
            previous(message, category, *args, **kwargs)

    previous = warnings.showwarning
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", InventoryWarning)
            warnings.simplefilter("always", ReadBackWarning)
            warnings.simplefilter("always", SSHConfigNote)
            warnings.showwarning = show
            args = retry_failed_argv(list(sys.argv[1:] if argv is None else argv))
            rv = command().main(args=args, prog_name="sweep", standalone_mode=False)
    except SweepError as exc:
        say("interrupted" if exc.exit_code == exitcodes.INTERRUPTED else "error", exc)
        return exc.exit_code
    # a local file or folder: the path, what failed and the fix, never a traceback
    except OSError as exc:
        err = paths.os_error(exc)
        say("error", err)
        return err.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        console.print("sweep: interrupted")
        return exitcodes.INTERRUPTED
    except Exception as exc:  # click's usage errors (typer may carry its own copy of click)
        names = {cls.__name__ for cls in type(exc).__mro__}
        if "ClickException" in names:
            exc.show()
            return exitcodes.BAD_INPUT
        if "Abort" in names:  # click's word for a Ctrl-C it caught
            console.print("sweep: interrupted")
            return exitcodes.INTERRUPTED
        raise
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
