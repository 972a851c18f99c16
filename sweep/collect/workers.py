"""Worker processes inside one `sweep run`: the hosts spread over processes forked after the engine
is bound.

One Python process spends ~3-10 ms of CPU per host (SSH handshake, decrypting the answer, parsing
and checking it, writing the record), so it tops out near 110-300 hosts/s whatever the machine has.
`WorkerPool` forks `n` workers once, after every import and after `Engine.bind` (the agent bundle,
the keys, the known_hosts read once, shared copy-on-write); each worker runs the same engine over
its share of the hosts with its share of ``--forks``, writes each host's record into the run folder
itself (the file, its fsync, its digest line, as `sweep.collect.run.keep_record` does in one
process), then tells the parent in one line what it kept. The parent keeps the one progress view,
the tally, the manifest, Ctrl-C and the exit code: it reads the workers' lines like an engine's
outcomes (`run`, `stop`, `drain`).

- **Shares**: hosts of one address and port go to one worker (a --wrap benchmark runs once per
  machine at a time, whatever its aliases: `SSHEngine` serialises them inside one process), shares
  balanced by count.
- **Ctrl-C / SIGTERM**: the terminal's Ctrl-C reaches the whole process group; workers ignore SIGINT
  and wait for the parent, whose `stop()` sends them SIGTERM: each stops its engine and drains it as
  one process does (the hosts in flight still get their records), then exits.
- **kill -9 of the parent**: each worker asked the kernel for SIGTERM at its parent's death
  (PR_SET_PDEATHSIG), so it ends as at Ctrl-C; the run folder's lock (a shared open file
  description) stays held until the last worker is gone, and `--resume` finishes the run.
- **A worker that dies** (OOM killer, a bug): its hosts without a record stay pending, the others go
  on; a warning names the worker and `--resume`.
- **How many** (`auto_workers`): the CPUs this process may use (affinity and the cgroup's quota, as
  `usable_cpus` reads them) less one for the parent, at most one per 8 forks and per 32 hosts; 1 (no
  fork, the one-process path) on 2 CPUs or fewer.
"""

from __future__ import annotations

import collections
import ctypes
import math
import os
import selectors
import signal
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import orjson

from sweep.collect.engines.base import EngineError
from sweep.collect.outcome import Outcome
from sweep.collect.signals import Gate
from sweep.errors import RunFolderError, SweepError

_PR_SET_PDEATHSIG = 1
_CHILD_DRAIN_S = 8.0  # a worker's drain after SIGTERM: within the parent's (run.py drains 10 s)
# characters of a failure message carried to the parent (the record keeps it whole)
_MESSAGE_MAX = 4096
_SIGNALS = {signal.SIGINT, signal.SIGTERM}
HOSTS_PER_WORKER = 32  # fewer hosts than this a worker: forking costs more than it saves
FORKS_PER_WORKER = 8


class WorkerLost(SweepError, UserWarning):
    """A worker process ended before its hosts did: they have no record (`--resume` sweeps them)."""


def usable_cpus(cgroup: str | Path = "/sys/fs/cgroup", affinity: int | None = None) -> int:
    """The CPUs this process may use: its affinity (taskset, cpusets) bounded by the cgroup's CPU
    quota (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``), rounded up; at least
    1."""
    if affinity is None:
        affinity = (
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else (os.cpu_count() or 1)
        )
    root = Path(cgroup)
    quota = _cgroup_quota(
        _read(root / "cpu.max"), _read(root / "cpu.cfs_quota_us"), _read(root / "cpu.cfs_period_us")
    )
    return max(1, min(affinity, math.ceil(quota)) if quota is not None else affinity)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace")[:200]
    except OSError:
        return None


def _cgroup_quota(v2: str | None, v1_quota: str | None, v1_period: str | None) -> float | None:
    """CPUs of quota (None: no limit, or unreadable): v2 "200000 100000" is 2.0, "max 100000"
    none."""
    try:
        if v2 is not None:
            quota, period = v2.split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        if v1_quota is not None and v1_period is not None:
            quota = int(v1_quota)
            return None if quota <= 0 else quota / int(v1_period)
    except (ValueError, ZeroDivisionError):
        return None
    return None


def auto_workers(cpus: int, forks: int, hosts: int) -> int:
    """Workers for `hosts` hosts, `forks` at once, on `cpus` CPUs: one CPU is the parent's."""
    if cpus <= 2:
        return 1
    return max(1, min(cpus - 1, forks // FORKS_PER_WORKER, hosts // HOSTS_PER_WORKER))


def shares(hosts: Sequence[Any], n: int) -> list[list[Any]]:
    """`hosts` in `n` shares: each address:port whole in one share, the largest groups placed first
    on the least loaded share; the order of hosts within a share is theirs in `hosts`."""
    groups: dict[tuple, list[int]] = {}
    for i, host in enumerate(hosts):
        groups.setdefault(
            (getattr(host, "address", None) or host.name, getattr(host, "port", None)), []
        ).append(i)
    load = [0] * n
    placed: list[list[int]] = [[] for _ in range(n)]
    for members in sorted(groups.values(), key=len, reverse=True):
        k = load.index(min(load))
        placed[k].extend(members)
        load[k] += len(members)
    return [[hosts[i] for i in sorted(share)] for share in placed if share]


class WorkerPool:
    """The engine `bound` (already bound, forks per worker) run by `n` forked workers; an engine to
    `_collect`: `run(hosts)` yields (host, outcome) of hosts whose record a worker has written
    (`records_kept`)."""

    records_kept = True

    def __init__(self, bound: Any, n: int, keep: Callable[[Outcome], Outcome]):
        self.bound, self.n, self.keep = bound, n, keep
        self._by_name: dict[str, Any] = {}
        self._children: dict[int, tuple[int, int]] = {}  # read fd -> (pid, worker number)
        self._buffers: dict[int, bytearray] = {}
        self._finished: set[int] = set()  # read fds of workers that said "done"
        # (read fd, line) read from a pipe and not yet handed out: a Ctrl-C between two lines of one
        # read leaves the rest here for drain(), not in a generator's frame
        self._pending: collections.deque[tuple[int, bytes]] = collections.deque()
        self._selector = selectors.DefaultSelector()
        self._stopped = False
        self._gate: Gate | None = None  # see `_read`; made by the first read, closed by run / drain

    def run(self, hosts: Sequence[Any]) -> Iterator[tuple[Any, Outcome]]:
        self._by_name = {host.name: host for host in hosts}
        self._start(shares(hosts, self.n))
        try:
            while self._children or self._pending:
                yield from self._read(0.25)
        finally:
            self._close_gate()

    def _close_gate(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.close()

    def stop(self) -> None:
        """Ctrl-C: every worker stops its engine and drains it (SIGTERM; idempotent)."""
        self._stopped = True
        for pid, _ in list(self._children.values()):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def drain(self, timeout: float = 10.0) -> list[tuple[Any, Outcome]]:
        """After `stop()`: what the workers kept while draining, waiting at most `timeout` s; then
        the ones still there are killed."""
        end, got = time.monotonic() + timeout, []
        while (self._children or self._pending) and time.monotonic() < end:
            got.extend(self._read(min(0.25, max(0.0, end - time.monotonic()))))
        for fd, (pid, _) in list(self._children.items()):
            os.kill(pid, signal.SIGKILL)
            self._close(fd, lost=False)
        while self._pending:  # read before the kill: their records are on disk
            got.extend(self._read(0.0))
        self._close_gate()
        return got

    def _start(self, parts: list[list[Any]]) -> None:
        """Fork one worker per share, SIGINT and SIGTERM blocked meanwhile (a worker sets its own
        handlers before it takes them; the parent records every pid before a signal can interrupt
        it)."""
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        parent = os.getpid()
        try:
            for number, part in enumerate(parts):
                rfd, wfd = os.pipe()
                sys.stdout.flush(), sys.stderr.flush()
                # Python 3.12 warns of a fork beside threads (the progress bar's): the worker
                # touches none of their state
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    pid = os.fork()
                if pid == 0:
                    os.close(rfd)
                    _worker(self.bound, part, self.keep, wfd, [*self._children], (parent, blocked))
                os.close(wfd)
                os.set_blocking(rfd, False)
                self._children[rfd] = (pid, number)
                self._buffers[rfd] = bytearray()
                self._selector.register(rfd, selectors.EVENT_READ)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def _read(self, timeout: float) -> Iterator[tuple[Any, Outcome]]:
        if not self._pending:
            self._fill(timeout)
        if self._gate is None:
            self._gate = Gate()
        while self._pending:
            # Ctrl-C waits from taking a line to the caller's tally of it (its own gate nests in
            # this one): a record a worker kept is counted, or still pending for drain(), never
            # dropped (a whole-suite run beside stress-ng lost one: 4 counted, 5 on disk)
            with self._gate:
                fd, line = self._pending.popleft()
                got = self._message(fd, orjson.loads(line))
                if got is not None:
                    yield got

    def _fill(self, timeout: float) -> None:
        """The lines the workers wrote meanwhile into `_pending`; a pipe at its end is closed."""
        for key, _ in self._selector.select(timeout):
            fd = key.fd
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                self._close(fd, lost=fd not in self._finished)
                continue
            buf = self._buffers[fd]
            buf += chunk
            *lines, rest = buf.split(b"\n")
            self._buffers[fd] = bytearray(rest)
            self._pending.extend((fd, line) for line in lines)

    def _message(self, fd: int, message: list) -> tuple[Any, Outcome] | None:
        kind = message[0]
        if kind == "outcome":
            name, status, cls, text, attempts, started, ended, code = message[1:]
            host = self._by_name[name]
            return host, Outcome(
                host=host,
                status=status,
                failure_class=cls,
                message=text,
                attempts=attempts,
                started_at=started,
                ended_at=ended,
                exit_status=code,
            )
        if kind == "done":
            self._finished.add(fd)
            return None
        error = RunFolderError if kind == "folder" else EngineError
        raise error(message[1], where=message[2], fix=message[3])

    def _close(self, fd: int, lost: bool) -> None:
        pid, number = self._children.pop(fd)
        self._selector.unregister(fd)
        os.close(fd)
        _, status = os.waitpid(pid, 0)
        if lost and not self._stopped:
            how = (
                f"signal {os.WTERMSIG(status)}"
                if os.WIFSIGNALED(status)
                else f"exit status {os.waitstatus_to_exitcode(status)}"
            )
            warnings.warn(
                WorkerLost(
                    f"worker process {number + 1} (pid {pid}) ended ({how}) before its hosts "
                    "did: those without a record are left pending",
                    fix="sweep run --resume RUN_DIR sweeps them",
                )
            )


def _worker(
    bound: Any,
    hosts: list[Any],
    keep: Callable[[Outcome], Outcome],
    wfd: int,
    inherited: list[int],
    parent: tuple[int, set],
) -> None:
    """A forked worker's whole life: never returns (os._exit), so nothing of the parent's runs here
    again. `parent`: (its pid, the signal mask it had before the fork)."""
    code, (parent_pid, blocked) = 0, parent
    try:
        _take_over(inherited, parent_pid, blocked)
        _sweep_share(bound, hosts, lambda outcome: _keep_and_tell(keep, outcome, wfd, blocked), wfd)
    except BrokenPipeError:
        code = 3  # the parent is gone: nothing more to tell
    except BaseException:  # sweep's own bug: the parent names the worker; its hosts stay pending
        traceback.print_exc()
        code = 70
    finally:
        os._exit(code)


def _take_over(inherited: list[int], parent_pid: int, blocked: set) -> None:
    """The forked process made a worker: only its own pipe, streams and signal handling, and it
    dies with the parent."""
    for fd in inherited:  # the other workers' pipes: theirs alone
        os.close(fd)
    _own_streams()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C: the parent decides
    signal.signal(signal.SIGTERM, _stop_on_term)
    _die_with_parent(parent_pid)
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _send(wfd: int, *fields: Any) -> None:
    """One message to the parent: a JSON list on a line of the worker's pipe, written whole."""
    data = orjson.dumps(list(fields)) + b"\n"
    while data:
        data = data[os.write(wfd, data) :]


def _keep_and_tell(
    keep: Callable[[Outcome], Outcome], outcome: Outcome, wfd: int, blocked: set
) -> None:
    """A finished host's record kept on disk and told to the parent, with SIGTERM held off between
    the two; an interrupted host is neither."""
    if outcome.status == "interrupted":
        return
    # a SIGTERM now waits until the record on disk is told to the parent too: the parent's counts
    # then say what the folder holds
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        done = keep(outcome)
        _send(
            wfd,
            "outcome",
            done.host.name,
            done.status,
            done.failure_class,
            (done.message or "")[:_MESSAGE_MAX],
            done.attempts,
            done.started_at,
            done.ended_at,
            done.exit_status,
        )
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _sweep_share(bound: Any, hosts: list[Any], kept: Callable[[Outcome], None], wfd: int) -> None:
    """The worker's share of hosts swept, each outcome kept as it comes (on Ctrl-C, those the
    engine drains); then "done", or the run folder's or the engine's error, to the parent."""
    try:
        try:
            for _, outcome in bound.run(hosts):
                kept(outcome)
        except KeyboardInterrupt:
            bound.stop()
            for _, outcome in bound.drain(timeout=_CHILD_DRAIN_S):
                kept(outcome)
        _send(wfd, "done")
    except RunFolderError as err:
        _send(wfd, "folder", err.message, err.where, err.fix)
    except EngineError as err:
        _send(wfd, "engine", err.message, err.where, err.fix)


def _stop_on_term(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second one must not cut the drain short
    raise KeyboardInterrupt


def _own_streams() -> None:
    """stdout and stderr as new objects on the same descriptors: a lock the parent's other threads
    (the progress bar) held at the fork stays held in their copies, never in these."""
    sys.stdout = open(os.dup(1), "w", buffering=1, encoding="utf-8", errors="replace", closefd=True)
    sys.stderr = open(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace", closefd=True)


def _die_with_parent(parent: int) -> None:
    """SIGTERM when the parent dies (kill -9 included), where the kernel offers it (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the request
        os.kill(os.getpid(), signal.SIGTERM)
