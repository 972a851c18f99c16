"""The engine interface: whatever runs the agent on hosts (ssh, ansible, slurm) hands back one
Outcome per host.

An engine is bound to an `EngineJob` (the agent, its arguments, the run's options), then takes the
hosts of a sweep and yields ``(host, outcome)`` as they finish (`run`); `stop()` on Ctrl-C;
`drain(timeout)` collects what finished after the stop. `run_sweep` records the outcomes into the
run folder the same way for every engine, so a run folder does not say (except in its manifest's
options) which engine filled it.

`ProcessEngine` is the base of the engines that drive one child process (``ansible``, ``srun``)
whose output a reader thread turns into outcomes; the child runs in its own session, so the
terminal's Ctrl-C reaches sweep alone and the engine stops the child in the way that child
understands.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from sweep.errors import SweepError
from sweep.collect.options import SSHOptions
from sweep.collect.outcome import Outcome, read_agent_output
from sweep.failures import HostFailure

_POLL_S = 0.2


class EngineError(SweepError):
    """The engine's own tool (ansible, srun) failed as a whole, not host by host."""


@dataclass(frozen=True)
class EngineJob:
    """What every engine needs: the agent, its arguments, the SSH options of the run, the
    fan-out."""

    payload: bytes
    forks: int  # the run's --forks (sweep.collect.resume.OPTIONS holds its default)
    agent_args: tuple[str, ...] = ()
    options: SSHOptions = SSHOptions()
    inventory_path: Path | None = None
    # command-line connect_timeout / host_deadline / retries (None: unset); they win over host
    # settings
    flags: Mapping[str, Any] = field(default_factory=dict)
    # a sweep.collect.wrap.WrapSpec: run the benchmark in the envelope (ssh engine only)
    wrap: Any = None
    # the command line's VarLayers (-u, --private-key, --become, -e): the ansible engine passes them
    # on
    variables: Any = None

    def given_flags(self, *, retries: bool = True) -> dict[str, Any]:
        """The flags that were set (`retries=False`: without the number of tries)."""
        return {
            k: v for k, v in self.flags.items() if v is not None and (retries or k != "retries")
        }


def outcome_of_output(
    host: Any,
    started: float,
    out: bytes,
    exit_status: int | None,
    stderr: str,
    host_deadline: float | None = None,
) -> Outcome:
    """The Outcome of one host from the agent's stdout and exit status, judged as the SSH engine
    does."""
    outcome = Outcome(
        host=host,
        status="ok",
        attempts=1,
        started_at=started,
        ended_at=time.time(),
        exit_status=exit_status,
        stderr=stderr,
    )
    try:
        outcome.health, outcome.unknown_numbers = read_agent_output(
            host, out, exit_status, stderr, host_deadline=host_deadline
        )
    except HostFailure as failure:
        outcome.status, outcome.failure_class, outcome.message = (
            "failed",
            failure.failure_class,
            failure.message,
        )
    return outcome


def failed(
    host: Any,
    started: float,
    failure_class: str,
    message: str,
    *,
    stderr: str = "",
    exit_status: int | None = None,
) -> Outcome:
    """A failed host's Outcome (one attempt)."""
    return Outcome(
        host=host,
        status="failed",
        failure_class=failure_class,
        message=message,
        attempts=1,
        started_at=started,
        ended_at=time.time(),
        exit_status=exit_status,
        stderr=stderr,
    )


class Engine:
    """What run_sweep needs of an engine: `bind` a job, `run` hosts, `stop` on Ctrl-C, `drain` after
    it.

    What an engine is, declared here and read by `sweep.collect.run` and the CLI (never its
    name):"""

    name = "engine"
    # the SSH client it connects with: "run" (the run's --transport), "openssh",
    transport: str | None = None
    # or None (no SSH from sweep: a scheduler or another tool reaches the hosts) hosts' SSH settings
    # (ssh_config, ansible_ssh_*) apply: held to `transport`'s rules
    reads_ssh_config = False
    become_applies = False  # --become / ansible_become is honoured (else refused before any host)
    one_inventory = False  # takes exactly one inventory source (its tool reads the file itself)
    wraps = False  # runs a --wrap benchmark in the agent's envelope
    lists_nodes = False  # lists its own hosts (`inventory()`): no inventory file needed
    # its hosts may be shared among worker processes, each running it (--workers)
    splits_hosts = False

    def check(self, hosts: Sequence[Any], options: SSHOptions, inventory_path: Path | None) -> None:
        """Before any host is contacted: refuse (a SweepError naming host, setting, file:line and
        fix) what the hosts' settings ask that this engine would not do safely. The SSH engine's
        transports check their own (`sweep.collect.run`); the others override this."""

    def keep_checks(self, checker: Any) -> None:
        """Before any host is contacted, `sweep.collect.checks` checked every host's ssh settings
        with `checker` (a transport's Prober): an engine that connects through the same transport
        keeps its answers rather than reading every host's ssh_config again."""

    def bind(self, job: EngineJob) -> "Engine":  # pragma: no cover - the engines implement these
        raise NotImplementedError

    def run(self, hosts: Sequence[Any]) -> Iterator[tuple[Any, Outcome]]:  # pragma: no cover
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def drain(self, timeout: float = 10.0) -> Iterator[tuple[Any, Outcome]]:  # pragma: no cover
        raise NotImplementedError


class ProcessEngine(Engine):
    """One child process for the whole sweep; `_read` (in a thread) turns its output into
    outcomes."""

    def __init__(self) -> None:
        self.job: EngineJob | None = None
        self._proc: subprocess.Popen | None = None
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._reader: threading.Thread | None = None
        self._stopping = threading.Event()
        self._error: BaseException | None = None

    def bind(self, job: EngineJob) -> "ProcessEngine":
        """Give the engine the agent and the run's options, the command-line timeouts laid over
        them."""
        self.job = replace(job, options=replace(job.options, **job.given_flags(retries=False)))
        return self

    # --- FanOut's interface ------------------------------------------------------------------

    def run(self, hosts: Sequence[Any]) -> Iterator[tuple[Any, Outcome]]:
        """Yield (host, outcome) as hosts finish, until the child is done."""
        if self.job is None:
            raise ValueError("bind() the engine to a job first")
        if not hosts:
            return
        self._reader = threading.Thread(
            target=self._read_all, args=(list(hosts),), name=f"sweep-{self.name}", daemon=True
        )
        self._reader.start()
        yield from self._collect(None)
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """Stop the child (Ctrl-C): hosts that have not finished stay without a record."""
        self._stopping.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            self._interrupt(proc)

    def drain(self, timeout: float = 10.0) -> Iterator[tuple[Any, Outcome]]:
        """The outcomes that still arrive within `timeout` s after `stop()`; then the child is
        killed."""
        yield from self._collect(time.monotonic() + timeout)
        proc = self._proc
        if proc is not None and proc.poll() is None:
            kill_group(proc, signal.SIGKILL)
            proc.wait()

    # --- for the engines ---------------------------------------------------------------------

    def _start(
        self, argv: list[str], env: dict[str, str], stdin: bytes | None = None
    ) -> subprocess.Popen:
        # stderr to a file: a chatty child must not stall on a full pipe that nobody reads yet
        self._stderr = tempfile.TemporaryFile()
        try:
            proc = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                start_new_session=True,
            )
        except OSError as err:
            raise EngineError(
                f"cannot start {argv[0]} ({err.strerror or err})",
                fix=f"install {Path(argv[0]).name} or put it on PATH",
            ) from None
        self._proc = proc
        if stdin is not None:

            def feed() -> None:
                try:
                    proc.stdin.write(stdin)
                    proc.stdin.close()
                except OSError:
                    pass

            threading.Thread(target=feed, name=f"sweep-{self.name}-stdin", daemon=True).start()
        return proc

    def _stderr_text(self, limit: int = 1 << 20) -> str:
        """The last `limit` bytes of what the child wrote on stderr so far (a host's flood stays on
        disk)."""
        self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(0, self._stderr.tell() - limit))
        return self._stderr.read(limit).decode("utf-8", "replace")

    def _emit(self, host: Any, outcome: Outcome) -> None:
        self._done.put((host, outcome))

    def _read(self, hosts: list[Any]) -> None:  # pragma: no cover - engines override
        raise NotImplementedError

    def _interrupt(self, proc: subprocess.Popen) -> None:
        kill_group(proc, signal.SIGINT)

    def _read_all(self, hosts: list[Any]) -> None:
        try:
            self._read(hosts)
        except BaseException as exc:  # handed to the main thread by run()
            self._error = exc
        finally:
            self._done.put(None)

    def _collect(self, until: float | None) -> Iterator[tuple[Any, Outcome]]:
        while True:
            wait = _POLL_S if until is None else min(_POLL_S, until - time.monotonic())
            if wait <= 0:
                return
            try:
                item = self._done.get(timeout=wait)
            except queue.Empty:
                continue
            if item is None:
                return
            yield item


class FanOutEngine(Engine):
    """An engine whose hosts go through a `sweep.collect.fanout.FanOut` (`_fan`, made by `bind`):
    `forks` hosts at a time, Ctrl-C stops starting more, the ones in flight are drained."""

    _fan: Any = None
    # each host's work is this process's: worker processes share it out (--workers)
    splits_hosts = True

    def run(self, hosts: Sequence[Any]) -> Iterator[tuple[Any, Outcome]]:
        """Yield (host, outcome) as hosts finish."""
        if self._fan is None:
            raise ValueError("bind() the engine to a job first")
        return self._fan.run(hosts)

    def stop(self) -> None:
        """Ctrl-C: start no host more and end the ones in flight."""
        self._fan.stop()

    def drain(self, timeout: float = 10.0) -> Iterator[tuple[Any, Outcome]]:
        """The outcomes of the hosts that were in flight at `stop()`."""
        return self._fan.drain(timeout=timeout)


class HostProcessEngine(FanOutEngine):
    """One child process per host (``kubectl exec``, ``docker exec``, a local runner): `argv(host)`
    is the command that runs `remote(host)` (the bootstrap, reading the agent on its stdin) where
    the host is; `forks` hosts at a time, each ended with its process group at the host deadline,
    each child's stdout read up to the run's output limit. A subclass declares what it is
    (`Engine`'s attributes) and `argv`."""

    def __init__(self) -> None:
        self.job: EngineJob | None = None
        self._fan: Any = None
        self._children: dict[int, subprocess.Popen] = {}
        self._lock = threading.Lock()

    def argv(self, host: Any) -> list[str]:  # pragma: no cover - the engines implement it
        raise NotImplementedError

    def remote(self, host: Any) -> str:
        """The shell command that runs the agent on `host` from stdin
        (`sweep.collect.bundle.remote_command`)."""
        from sweep.collect.bundle import host_agent_args, remote_command

        job = self.job
        return remote_command(
            host.python,
            len(job.payload),
            host_agent_args(host, list(job.agent_args)),
            lifetime=job.options.host_deadline,
        )

    def bind(self, job: EngineJob) -> "HostProcessEngine":
        from sweep.collect.fanout import FanOut

        self.job = replace(job, options=replace(job.options, **job.given_flags(retries=False)))
        self._fan = FanOut(self._probe, forks=job.forks, on_stop=self._kill_all)
        return self

    def _probe(self, host: Any) -> Outcome:
        started, options = time.time(), self.job.options
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            try:
                proc = subprocess.Popen(
                    self.argv(host),
                    stdin=subprocess.PIPE,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
            except OSError as exc:
                return failed(
                    host,
                    started,
                    "agent_error",
                    f"{host.name}: cannot start the {self.name} "
                    f"engine's command ({exc.strerror or exc})",
                )
            with self._lock:
                self._children[proc.pid] = proc
            try:
                proc.communicate(self.job.payload, timeout=options.host_deadline)
            except subprocess.TimeoutExpired:
                kill_group(proc, signal.SIGKILL)
                proc.wait()
                return failed(
                    host,
                    started,
                    "timeout",
                    f"{host.name}: no answer within the host deadline "
                    f"({options.host_deadline:g} s)",
                )
            finally:
                with self._lock:
                    self._children.pop(proc.pid, None)
            return self._outcome_of_files(host, started, out, err, proc.returncode)

    def _outcome_of_files(
        self, host: Any, started: float, out: Any, err: Any, code: int | None
    ) -> Outcome:
        limit = self.job.options.output_limit
        out.seek(0)
        stdout = out.read(limit + 1)
        err.seek(0, os.SEEK_END)
        err.seek(max(0, err.tell() - 65536))
        stderr = err.read().decode("utf-8", "replace")
        if len(stdout) > limit:
            return failed(
                host,
                started,
                "output_too_large",
                f"{host.name}: the agent's output is over {limit} bytes",
                stderr=stderr,
                exit_status=code,
            )
        return outcome_of_output(
            host, started, stdout, code, stderr, self.job.options.host_deadline
        )

    def _kill_all(self) -> None:
        with self._lock:
            children = list(self._children.values())
        for proc in children:
            kill_group(proc, signal.SIGTERM)


def declared(engine: Any, what: str) -> Any:
    """What `engine` declares (`Engine`'s attributes), the base's answer for one that does not
    subclass it."""
    return getattr(engine, what, getattr(Engine, what))


def kill_group(proc: subprocess.Popen, sig: int) -> None:
    """Send `sig` to the child's process group (it runs in a session of its own)."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def tail(text: str | bytes, limit: int = 4096) -> str:
    """The last `limit` characters of a tool's output, as text."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return text[-limit:]
