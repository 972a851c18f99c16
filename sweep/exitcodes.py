"""The one table of sweep's exit codes: every command's code comes from a name here.

Precedence when several apply (the first wins): BAD_INPUT, INTERRUPTED, INCOMPLETE,
BENCH_FAILED, REFUSED, NOT_COMPARABLE, BROKEN, OFF, OK (BENCH_FAILED and REFUSED only come from
`sweep run --wrap` and the report of such a run). `sweep diff RUN_A RUN_B` exits OFF when anything changed,
like diff(1); `sweep wrap` exits with the wrapped command's own code.
"""
from __future__ import annotations

OK = 0
INCOMPLETE = 1  # some hosts unreachable or failed, or a tier asked for (--speed, --load) not measured on a host
#                (or, `sweep audit`, not judged): the verdict covers only the rest
BAD_INPUT = 2  # a SweepError: the message names the file, host or option and the fix
NOT_COMPARABLE = 3  # the hosts fall into more than one comparability class
BROKEN = 4  # one class, but a host is broken (a contract, a speed figure, an Xid repair), cannot run, or is held
#            out of the pool for its health (a foreign process, an incomplete probe); `sweep probe`: this host
#            has a broken contract
OFF = 5  # drift from a baseline, an expectations violation, a change between two runs
BENCH_FAILED = 6  # --wrap: the benchmark itself failed on a host (non-zero exit, timed out, no figure)
REFUSED = 7  # --wrap: the agent refused to start it on a host (broken contract, another process; --force)
INTERRUPTED = 130  # Ctrl-C: the run folder is marked interrupted; --resume finishes it

MEANING = {
    OK: "every host reachable, no broken contract, all in one comparability class",
    INCOMPLETE: "some hosts are unreachable: the verdict covers only the hosts that answered",
    BAD_INPUT: "bad input: the message names the file, host or option, and the fix",
    NOT_COMPARABLE: "the hosts fall into more than one comparability class: not one pool",
    BROKEN: "one comparability class, but some host has a broken contract or is held out of the pool for its health",
    OFF: "one healthy comparability class, but some host is off its expectations or drifted from its baseline",
    BENCH_FAILED: "the benchmark failed on some host (its own exit code, a timeout, or no figure in its output)",
    REFUSED: "the benchmark was not started on some host: a broken contract or another process on its GPUs",
    INTERRUPTED: "interrupted: what was collected is kept; --resume finishes the run",
}
