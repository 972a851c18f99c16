"""The one table of sweep's exit codes: every command's code comes from a name here.

Precedence when several apply (the first wins): BAD_INPUT, INTERRUPTED, INCOMPLETE,
BENCH_FAILED, REFUSED, NOT_COMPARABLE, BROKEN, OFF, OK (BENCH_FAILED and REFUSED only come from
`sweep run --wrap` and the report of such a run). `sweep diff RUN_A RUN_B` exits OFF when anything
changed, like diff(1); `sweep wrap` exits with the wrapped command's own code.
"""

from __future__ import annotations

OK = 0
# some hosts unreachable or failed, or a tier asked for (--speed, --load) not measured on a host
INCOMPLETE = 1
#                (or, `sweep audit`, not judged): the verdict covers only the rest
BAD_INPUT = 2  # a SweepError: the message names the file, host or option and the fix
NOT_COMPARABLE = 3  # the hosts fall into more than one comparability class
# one class, but a host is broken (a contract, a speed figure, an Xid repair), cannot run, or is
# held
BROKEN = 4
#            out of the pool for its health (a foreign process, an incomplete probe); `sweep probe`:
#            this host has a broken contract
OFF = 5  # drift from a baseline, an expectations violation, a change between two runs
# --wrap: the benchmark itself failed on a host (non-zero exit, timed out, no figure)
BENCH_FAILED = 6
# --wrap: the agent refused to start it on a host (broken contract, another process; --force)
REFUSED = 7
INTERRUPTED = 130  # Ctrl-C: the run folder is marked interrupted; --resume finishes it

PRECEDENCE = (
    BAD_INPUT,
    INTERRUPTED,
    INCOMPLETE,
    BENCH_FAILED,
    REFUSED,
    NOT_COMPARABLE,
    BROKEN,
    OFF,
    OK,
)

# code -> (its meaning in a line: summary.json's exit_meaning and every command's --help; the
# README's row)
TABLE = {
    OK: (
        "every host reachable, no broken contract, all in one comparability class",
        "success: every host reachable, no broken contract, one comparability class",
    ),
    INCOMPLETE: (
        "some hosts are unreachable: the verdict covers only the hosts that answered",
        "incomplete: some hosts unreachable or failed, or a tier asked for (`--speed`, "
        "`--load`) not "
        "measured on a host (failed, refused, partial, a figure skipped for a reason other "
        'than "not '
        'applicable"; the terminal and the top box name each with its reason); `sweep '
        "audit`: some host "
        "the run lists was not judged (no record, no health.json, no baseline), each named",
    ),
    BAD_INPUT: (
        "bad input: the message names the file, host or option, and the fix",
        "bad input: the message names the file (and line), host or option, and the fix; "
        "nothing collected "
        "is lost",
    ),
    NOT_COMPARABLE: (
        "the hosts fall into more than one comparability class: not one pool",
        "the hosts fall into more than one comparability class: not one benchmark pool",
    ),
    BROKEN: (
        "one comparability class, but some host has a broken contract or is held out of the "
        "pool for its health",
        "one class, but a host is broken (a broken contract, a speed figure below 75% of its "
        "reference, an Xid "
        "that needs a repair), cannot run a benchmark, or is held out of the pool for its "
        "health: a foreign "
        "process on its GPUs, an incomplete probe (`sweep probe`: this host has a broken contract)",
    ),
    OFF: (
        "one healthy comparability class, but some host is off its expectations or drifted "
        "from its baseline",
        "drift from a baseline or an expectations violation",
    ),
    BENCH_FAILED: (
        "the benchmark failed on some host (its own exit code, a timeout, or no figure in "
        "its output)",
        "`--wrap`: the benchmark itself failed on a host (non-zero exit, ended at its "
        "timeout, no figure)",
    ),
    REFUSED: (
        "the benchmark was not started on some host: a broken contract or another process on "
        "its GPUs",
        "`--wrap`: the benchmark was refused on a host (broken contract, another process on "
        "its GPUs; "
        "`--force` overrides)",
    ),
    INTERRUPTED: (
        "interrupted: what was collected is kept; --resume finishes the run",
        "interrupted (Ctrl-C, SIGTERM): the run folder is marked interrupted and the last "
        "line is the "
        "command that finishes it (`sweep run --resume RUN_DIR`, with the run's own "
        "options); a Ctrl-C "
        "before the run folder exists leaves nothing to resume",
    ),
}
MEANING = {code: line for code, (line, _) in TABLE.items()}

# the codes each command can exit with, as its --help lists them (`help_rows`); a command not named
# here
# exits 0, or 2 on bad input
_VERDICT = (OK, INCOMPLETE, BAD_INPUT, NOT_COMPARABLE, BROKEN, OFF, BENCH_FAILED, REFUSED)
COMMANDS = {
    "run": (*_VERDICT, INTERRUPTED),
    "report": _VERDICT,
    "audit": (OK, INCOMPLETE, BAD_INPUT, OFF),
    "diff": (OK, BAD_INPUT, OFF),
    "baseline check": (OK, BAD_INPUT, OFF),
    "probe": (OK, BAD_INPUT, BROKEN),
}
# where a command gives a code a meaning of its own
OWN_MEANING = {
    (
        "audit",
        INCOMPLETE,
    ): "a host the run lists was not judged by every audit asked for (each is named)",
    ("audit", OFF): "a host is off its expectations or drifted from its baseline",
    (
        "diff",
        OFF,
    ): "the machine changed (two probes) or anything changed (two run folders), like diff(1)",
    ("diff", OK): "nothing changed",
    ("baseline check", OFF): "a host drifted from its baseline",
    ("baseline check", OK): "no host drifted",
    ("probe", BROKEN): "this host has a broken contract",
    ("probe", OK): "no broken contract on this host",
}


def first(codes) -> int:
    """The code that wins among `codes` (a run's and its report's), by `PRECEDENCE`."""
    return min(codes, key=PRECEDENCE.index)


def help_rows(command: str) -> list[tuple[str, str]]:
    """(code, meaning) of each code `command` ("report", "baseline check") exits with, for its
    --help."""
    return [
        (str(code), OWN_MEANING.get((command, code), MEANING[code]))
        for code in COMMANDS.get(command, ())
    ]
