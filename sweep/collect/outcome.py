"""What became of one host (`Outcome`), and the agent's output judged: its health.json, or the
failure why not.

Every engine (ssh, ansible, slurm) judges the agent's stdout, exit status and stderr here, so a
host's record does not depend on the engine that reached it; the module imports no transport.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sweep.collect.become import refusal as sudo_refusal
from sweep.collect.bundle import DEADLINE_EXIT, DEADLINE_MARK, TOO_OLD_MARK
from sweep.schema import health_problem
from sweep.schema_depth import health_fits
from sweep.failures import HostFailure
from sweep.strictjson import NOT_PARSED, DepthError, loads as strict_loads
from sweep.text import visible


@dataclass
class Outcome:
    """What became of one host: status "ok" (health set), "failed" (failure set) or
    "interrupted"."""

    host: Any  # sweep.inventory.model.Host
    status: str
    health: dict | None = None
    failure_class: str | None = None
    message: str | None = None
    attempts: int = 0
    started_at: float = 0.0
    ended_at: float = 0.0
    exit_status: int | None = None
    stderr: str = ""
    # numbers the host wrote that a double cannot hold
    unknown_numbers: list = field(default_factory=list)


def _check_document(host: Any, health: dict, wrapped: bool) -> None:
    """Refuse (`bad_output`) a JSON object that is not the document the agent writes: a
    provenance.json of schema 1.x with the command's output for a wrapped run, else a health.json of
    schema 1.x."""
    if wrapped:
        from sweep.collect.wrap import provenance_problem

        broken, what, action = (
            provenance_problem(health),
            "a provenance.json of schema 1.x with the command's output",
            "run it",
        )
    else:
        broken, what, action = health_problem(health), "a health.json of schema 1.x", "sweep it"
    if broken is not None:  # what it is: the schema it does not match, and how
        raise HostFailure(
            "bad_output",
            (
                f"{host.name}: the agent's output is JSON but not {what}: it does not match the "
                f"schema this sweep reads ({visible(broken, keep='')[:200]}); the host runs "
                f"another or a modified agent: {action} with this sweep's agent"
            ),
        )


def read_agent_output(
    host: Any,
    out: bytes,
    exit_status: int | None,
    stderr: str,
    wrapped: bool = False,
    host_deadline: float | None = None,
    parsed: Any = NOT_PARSED,
) -> tuple[dict, list[dict]]:
    """health.json (`wrapped`: provenance.json) from stdout and the numbers in it a double cannot
    hold (now null; `sweep.strictjson`), or the HostFailure why there is none (ended at
    `host_deadline`: timeout). `parsed`: what orjson made of `out`, where the transport parsed it
    already (`strictjson.loads`)."""
    health, unknown, problem = _parse_output(host, out, exit_status, wrapped, parsed)
    if problem is None:
        return health, unknown
    raise _why_no_document(host, out, problem, exit_status, stderr, host_deadline)


def _parse_output(
    host: Any, out: bytes, exit_status: int | None, wrapped: bool, parsed: Any = NOT_PARSED
) -> tuple[Any, list[dict], str | None]:
    """The document on stdout, its numbers a double cannot hold, and what makes it no agent
    document (None when it is one); output nested past the parser's bound is the agent's error."""
    problem, unknown = None, []
    try:
        # a valid health.json no deeper than the bound is taken in one check (sweep.schema_depth)
        loaded = strict_loads(out, fits=None if wrapped else health_fits(), parsed=parsed)
        health, unknown = loaded.document, loaded.unknown_numbers
    except DepthError as exc:
        status = "no exit status" if exit_status in (None, -1) else f"exit {exit_status}"
        raise HostFailure(
            "agent_error",
            (
                f"{host.name}: the agent's output ({status}) {exc}; the host runs another or a "
                "modified agent, or its python prints something else: sweep it with this sweep's "
                "agent"
            ),
        ) from None
    except ValueError as exc:
        health, problem = None, f"is not JSON ({visible(exc, keep='')[:200]})"
    if health is not None and not isinstance(health, dict):
        problem = f"is JSON but not an object ({type(health).__name__})"
    elif health is not None and "schema_version" not in health:
        problem = "is a JSON object without schema_version"
    elif health is not None and not loaded.fitted:
        _check_document(host, health, wrapped)
    return health, unknown, problem


def _why_no_document(
    host: Any,
    out: bytes,
    problem: str,
    exit_status: int | None,
    stderr: str,
    host_deadline: float | None,
) -> Exception:
    """The failure to raise for a host whose stdout is no agent document (`problem` says how),
    read from the exit status and stderr: the deadline, sudo, the python, the agent, the output."""
    # the bootstrap ended it at the deadline
    if exit_status == DEADLINE_EXIT and DEADLINE_MARK in stderr:
        return timed_out(host, host_deadline)
    last = _last_line(stderr)
    refused = sudo_refusal(host, exit_status, stderr)
    if refused is not None:
        return refused
    if exit_status == 2 and NO_ISOLATED in stderr:  # python 2.x, 3.0-3.3: too old to know -I
        last = NO_ISOLATED
    python = _python_failure(host, exit_status, stderr, last)
    if python is not None:
        return python
    if exit_status != 0:
        status = "no exit status (killed?)" if exit_status in (None, -1) else f"exit {exit_status}"
        return HostFailure(
            "agent_error",
            (
                f"{host.name}: the agent failed ({status}){': ' + last if last else ''}; "
                "the record's stderr holds the rest"
            ),
        )
    shown = out[:80].decode("utf-8", "replace").strip()
    return HostFailure(
        "bad_output",
        (
            f"{host.name}: the agent's output "
            f"{problem}{': ' + repr(shown) if shown else ' (empty)'}; check what the host's shell "
            "or python prints at start (motd in .bashrc, sitecustomize)"
        ),
    )


def _python_failure(
    host: Any, exit_status: int | None, stderr: str, last: str
) -> HostFailure | None:
    """The host's python is too old for the agent, or cannot be run at all; None: neither."""
    if (
        TOO_OLD_MARK in stderr
        or (exit_status == 1 and _python_syntax_error(stderr))
        or last == NO_ISOLATED
    ):
        found = _old_version(stderr)
        return HostFailure(
            "python_too_old",
            (
                f"{host.name}: '{host.python}' is {'Python ' + found if found else 'a python'} "
                f"older than the 3.8 the agent needs{' (' + last + ')' if last else ''}; install "
                "python3 >= 3.8 or set ansible_python_interpreter to one"
            ),
        )
    if exit_status in (126, 127):
        return HostFailure(
            "no_python",
            (
                f"{host.name}: cannot run '{host.python}' on the host (exit {exit_status}"
                f"{': ' + last if last else ''}); install python3 (3.8+) there or set "
                "ansible_python_interpreter to its path"
            ),
        )
    return None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return visible(lines[-1][:300], keep="") if lines else ""


# what a python too old for the bootstrap's -I says (2.7's and 3.3's Modules/main.c), with exit 2
NO_ISOLATED = "Unknown option: -I"


def _python_syntax_error(stderr: str) -> bool:
    """Python 2 (or 3 before 3.8) failing to compile the bootstrap given with -c."""
    return 'File "<string>"' in stderr and "SyntaxError" in stderr


def _old_version(stderr: str) -> str:
    import re

    found = re.search(r"[Pp]ython (\d+\.\d+(?:\.\d+)?)", stderr)
    return found.group(1) if found else ""


def timed_out(
    host: Any, host_deadline: float | None, where: str = "while the agent ran"
) -> HostFailure:
    """The timeout of a host that did not answer within its deadline: the controller cut the
    session, or the bootstrap ended the agent on the host (`DEADLINE_MARK`); the same record
    whichever came first."""
    within = (
        "the host deadline"
        if host_deadline is None
        else f"the host deadline of {host_deadline:g} s"
    )
    return HostFailure(
        "timeout",
        (
            f"{host.name}: no answer within {within} ({where}); "
            "check the host, or raise --host-deadline (sweep_host_deadline)"
        ),
    )
