"""One `sweep run`: inventory -> hosts -> fan-out -> one record per host on disk -> manifest.

No terminal code here: `progress` is a callback, and the outcome is a `RunResult` whose
`exit_code` the CLI returns (0 every host swept, 1 some host failed or has no record,
130 interrupted; bad input raises a SweepError, exit 2).
"""
from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from sweep import exitcodes
import sweep
from sweep.errors import ConfigError, InventoryError, RunFolderError
from sweep.collect.fanout import FanOut
from sweep.collect.engines import create_engine
from sweep.collect.engines.base import Engine, EngineError, EngineJob
from sweep.inventory.model import Host, Inventory, InventoryLimits, load_inventory
from sweep.collect.shard import select_shard
from sweep.store import RECORD_VERSION, RUN_FORMAT, RunFolder, default_run_dir, iso, utc_now
from sweep.text import visible
from sweep.collect.ssh.prober import FAILURE_CLASSES, KeyFileError, Outcome, Prober, SSHOptions, load_private_key
from sweep.text import plural

DEFAULTS = SSHOptions()
PASSPHRASE_ENV = "SWEEP_KEY_PASSPHRASE"  # the passphrase of encrypted key files; never recorded
_RECORD_STDERR = 4096  # bytes of stderr kept in a record (the tail)


@dataclass(frozen=True)
class RunProgress:
    """Where a sweep stands; handed to the `progress` callback after each host is recorded."""

    total: int
    ok: int
    failed: int
    pending: int
    last: Outcome | None = None


@dataclass(frozen=True)
class RunResult:
    """The run folder and what it holds now (records of earlier sessions included, on --resume)."""

    run_dir: Path
    state: str  # "complete" or "interrupted"
    total: int
    ok: int
    failed: int
    pending: int  # hosts without a record (interrupted before they finished)
    resumed: int  # hosts already recorded before this session
    by_class: dict[str, int] = field(default_factory=dict)
    failures: tuple[tuple[str, str, str], ...] = ()  # (host, class, message) of this session

    @property
    def fully_swept(self) -> bool:
        return self.state == "complete" and self.failed == 0 and self.pending == 0

    @property
    def exit_code(self) -> int:
        if self.state == "interrupted":
            return exitcodes.INTERRUPTED
        return exitcodes.OK if self.fully_swept else exitcodes.INCOMPLETE


def run_sweep(
    inventory_path: str | Path | None,
    *,
    limit: str | None = None,
    out: str | Path | None = None,
    reports_dir: str | Path = "reports",
    resume: str | Path | None = None,
    forks: int = 32,
    accept_new_host_keys: bool = False,
    known_hosts: str | Path | Sequence[str | Path] | None = None,
    ssh_config: str | None = "~/.ssh/config",
    connect_timeout: float | None = None,
    host_deadline: float | None = None,
    retries: int | None = None,
    agent_args: Sequence[str] = (),
    allow_agent: bool = True,
    look_for_keys: bool = True,
    loader: str = "auto",
    payload: bytes | None = None,
    progress: Callable[[RunProgress], None] | None = None,
    key_passphrase: str | None = None,
    engine: "str | Engine" = "ssh",
    shard: tuple[int, int] | None = None,
    shard_by: str = "hash",
    inventory_limits: InventoryLimits = InventoryLimits(),
) -> RunResult:
    """Sweep the hosts of an inventory (or finish the run folder `resume`) and record each one.

    Timeouts and retries given here win over a host's ``sweep_connect_timeout``,
    ``sweep_host_deadline`` and ``sweep_retries``; those win over the defaults (10 s, 120 s, 3).
    `known_hosts` files are read before ``~/.ssh/known_hosts``, and accepted new keys go to the
    first of them. `payload` replaces the agent bundle (tests). `key_passphrase` (default: the
    environment's SWEEP_KEY_PASSPHRASE) decrypts encrypted key files; it is written nowhere.
    Every host's key file is read before any host is connected: a missing, unreadable or
    undecryptable key is a ConfigError that names the host and the file.

    `engine` runs the agent through "ssh" (sweep's own transport), "ansible" or "slurm", or an
    engine object (`sweep.collect.engines.base`); the records are the same. `shard` (i, n) sweeps only the i-th
    of n shares of the selected hosts (`sweep.collect.shard`). `inventory_limits` bound YAML alias
    expansion and host ranges (``--max-yaml-values``, ``--max-range-hosts``).

    The run folder is locked for the whole sweep (a second sweep on it is refused); SIGTERM ends
    the sweep as Ctrl-C does (state "interrupted", ``--resume`` finishes it). No host can stop the
    sweep: a record that cannot be written as JSON becomes that host's failure record.
    """
    if forks < 1:
        raise ConfigError(f"--forks is {forks}; it must be 1 or more", fix="pass --forks 32, say")
    if resume is not None and limit:
        raise ConfigError("--limit cannot be used with --resume: the run folder fixes its hosts",
                          fix="drop --limit, or start a new run")
    extra = [known_hosts] if isinstance(known_hosts, (str, Path)) else list(known_hosts or [])
    if key_passphrase is None:
        key_passphrase = os.environ.get(PASSPHRASE_ENV) or None
    options = SSHOptions(
        known_hosts=(*(str(p) for p in extra), "~/.ssh/known_hosts"),
        accept_new_host_keys=accept_new_host_keys, ssh_config=ssh_config,
        allow_agent=allow_agent, look_for_keys=look_for_keys, key_passphrase=key_passphrase,
    )
    flags = {"connect_timeout": connect_timeout, "host_deadline": host_deadline, "retries": retries}
    for key, value in flags.items():
        if value is not None and value <= 0:
            raise ConfigError(f"--{key.replace('_', '-')} is {value}; it must be above 0")
    agent_args = list(agent_args)
    deadline_flag = host_deadline or DEFAULTS.host_deadline
    if "--deadline" not in agent_args and deadline_flag < 50:
        # the agent emits what it has read at its own deadline, before ours cuts the session
        agent_args += ["--deadline", f"{max(1.0, deadline_flag * 0.6):g}"]

    runner = None if engine == "ssh" else (create_engine(engine) if isinstance(engine, str) else engine)
    engine_name = "ssh" if runner is None else runner.name
    if resume is not None:
        folder = RunFolder.open(resume)
        manifest = folder.read_manifest()
        try:
            inventory = _inventory(inventory_path or manifest["inventory"]["path"], loader, runner,
                                   inventory_limits)
        except BaseException:
            folder.close()
            raise
        by_name = {host.name: host for host in inventory.hosts}
        names = list(manifest.get("hosts") or [])
        gone = [name for name in names if name not in by_name]
        if gone:
            raise InventoryError(
                f"{plural(len(gone), 'host')} of the run {'is' if len(gone) == 1 else 'are'} no longer in the inventory: {', '.join(gone[:5])}",
                where=str(inventory.path), fix="resume with the inventory the run started from")
        hosts = [by_name[name] for name in names]
        try:
            _check_key_files(hosts, inventory.path, key_passphrase, allow_agent)
            done = folder.read_records()
            for host in hosts:  # before any host is contacted: no record goes onto another host's file
                if host.name not in done:
                    folder.check_record_file(host.name)
        except BaseException:
            folder.close()
            raise
    else:
        inventory = _inventory(inventory_path, loader, runner, inventory_limits)
        hosts = inventory.select(limit)
        if shard is not None:
            hosts = select_shard(hosts, *shard, by=shard_by)
        _check_key_files(hosts, inventory.path, key_passphrase, allow_agent)
        folder = RunFolder.create(out if out is not None else default_run_dir(inventory.path, reports_dir))
        manifest = {
            "format": RUN_FORMAT,
            "record_version": RECORD_VERSION,
            "sweep_version": sweep.__version__,
            "inventory": {"path": str(Path(inventory.path).resolve()), "snapshot": inventory.snapshot()},
            "options": {
                "limit": limit, "forks": forks, "accept_new_host_keys": accept_new_host_keys,
                "known_hosts": [str(p) for p in extra], "connect_timeout": connect_timeout,
                "host_deadline": host_deadline, "retries": retries, "agent_args": agent_args,
                "loader": loader, "engine": engine_name,
                "shard": None if shard is None else {"index": shard[0], "count": shard[1], "by": shard_by},
            },
            "started_at": utc_now(),
            "ended_at": None,
            "state": "running",
            "hosts": [host.name for host in hosts],
            "sessions": [],
        }
        done = {}
    try:
        with _sigterm_as_interrupt():
            return _sweep(folder, manifest, hosts, done, runner, payload, agent_args, options, flags, forks,
                          inventory, progress)
    finally:
        folder.close()


def _sweep(folder: RunFolder, manifest: dict, hosts: list[Host], done: dict, runner: "Engine | None",
           payload: bytes | None, agent_args: list[str], options: SSHOptions, flags: dict, forks: int,
           inventory: Inventory, progress: Callable[[RunProgress], None] | None) -> RunResult:
    """Probe the hosts without a record, keep each record as it comes, finish the manifest."""
    session = {"started_at": utc_now(), "ended_at": None, "state": "running", "hosts_swept": 0}
    manifest["sessions"].append(session)
    manifest["state"], manifest["ended_at"] = "running", None
    folder.write_manifest(manifest)

    todo = [host for host in hosts if host.name not in done]
    listed = set(manifest["hosts"])
    status = {name: (rec.get("status"), (rec.get("failure") or {}).get("class")) for name, rec in done.items()
              if name in listed}
    failures: list[tuple[str, str, str]] = []
    agent = payload if payload is not None else _bundle()
    if runner is None:
        prober = Prober(agent, agent_args, options)

        def probe(host: Host) -> Outcome:
            try:
                return prober.probe(_with_flags(host, flags))
            except Exception as exc:  # sweep's own bug, met on one host's data: that host's failure
                now = time.time()
                return Outcome(host=host, status="failed", failure_class="agent_error", started_at=now,
                               ended_at=now, message=(
                                   f"{host.name}: sweep failed while probing this host ({type(exc).__name__}: "
                                   f"{visible(exc, keep='')[:200]}); the other hosts are unaffected; please "
                                   "report this as a sweep bug"))

    def report(last: Outcome | None) -> None:
        if progress is not None:
            ok = sum(1 for s, _ in status.values() if s == "ok")
            progress(RunProgress(total=len(hosts), ok=ok, failed=len(status) - ok,
                                 pending=len(hosts) - len(status), last=last))

    def record(outcome: Outcome) -> None:
        outcome = keep_record(folder, outcome)
        status[outcome.host.name] = (outcome.status, outcome.failure_class)
        session["hosts_swept"] += 1
        if outcome.status == "failed":
            failures.append((outcome.host.name, outcome.failure_class, outcome.message))
        report(outcome)

    report(None)
    if runner is None:
        fan = FanOut(probe, forks=forks, on_stop=prober.stop)
    else:
        given = {key: value for key, value in flags.items() if value is not None and key != "retries"}
        fan = runner.bind(EngineJob(payload=agent, agent_args=tuple(agent_args), forks=forks,
                                    options=replace(options, **given), inventory_path=inventory.path))
    state = "complete"
    try:
        try:
            for _, outcome in fan.run(todo):
                if outcome.status != "interrupted":
                    record(outcome)
        except KeyboardInterrupt:
            state = "interrupted"
            fan.stop()
            for _, outcome in fan.drain(timeout=10.0):
                if outcome.status != "interrupted":
                    record(outcome)
    except (RunFolderError, EngineError):
        fan.stop()
        fan.drain(timeout=5.0)
        _finish(folder, manifest, session, "interrupted", status, quiet=True)
        raise
    _finish(folder, manifest, session, state, status)

    by_class = {cls: 0 for cls in FAILURE_CLASSES}
    for s, cls in status.values():
        if s == "failed" and cls in by_class:
            by_class[cls] += 1
    ok = sum(1 for s, _ in status.values() if s == "ok")
    return RunResult(
        run_dir=folder.path, state=state, total=len(hosts), ok=ok, failed=len(status) - ok,
        pending=len(hosts) - len(status), resumed=len(done),
        by_class={cls: n for cls, n in by_class.items() if n}, failures=tuple(failures),
    )


def _check_key_files(hosts: Sequence[Host], inventory: Path, passphrase: str | None, allow_agent: bool) -> None:
    """Fail before connecting anywhere when a host's key file is missing or cannot be used."""
    checked: dict[str, str | None] = {}
    bad: list[tuple[Host, str]] = []
    for host in hosts:
        if not host.key_file:
            continue
        if host.key_file not in checked:
            try:
                load_private_key(host.key_file, passphrase)
                checked[host.key_file] = None
            except KeyFileError as problem:
                agent = allow_agent and os.environ.get("SSH_AUTH_SOCK")
                # an encrypted key may be loaded in ssh-agent, which paramiko asks first
                checked[host.key_file] = None if agent and "no passphrase" in str(problem) else str(problem)
        if checked[host.key_file] is not None:
            bad.append((host, checked[host.key_file]))
    if not bad:
        return
    host, problem = bad[0]
    others = f" (and {len(bad) - 1} more {'host' if len(bad) == 2 else 'hosts'})" if len(bad) > 1 else ""
    if problem == "does not exist":
        fix = "fix ansible_ssh_private_key_file in the inventory, or create the key (ssh-keygen) and install it"
    elif "no passphrase" in problem:
        problem, fix = problem.partition(": ")[0], "set SWEEP_KEY_PASSPHRASE, or load the key into ssh-agent"
    elif "SWEEP_KEY_PASSPHRASE" in problem:
        fix = "set SWEEP_KEY_PASSPHRASE to the key's passphrase"
    else:
        fix = "fix ansible_ssh_private_key_file in the inventory, or the key file"
    raise ConfigError(f"{host.name}{others}: private key file {host.key_file} {problem}",
                      where=str(inventory), fix=fix)


def _inventory(path: str | Path | None, loader: str, runner: "Engine | None",
               limits: InventoryLimits = InventoryLimits()) -> Inventory:
    """The inventory file, or (engines that list their own nodes, as slurm) the engine's hosts."""
    own = getattr(runner, "inventory", None)
    if own is not None and (path is None or Path(path).name.startswith(getattr(runner, "SOURCE", "\0"))):
        return own()
    if path is None:
        raise ConfigError("no inventory given", fix="sweep run INVENTORY.yml")
    return load_inventory(path, loader, limits=limits)


def _bundle() -> bytes:
    from sweep.collect.bundle import bundle_bytes

    return bundle_bytes()


def _with_flags(host: Host, flags: dict[str, Any]) -> Host:
    """The host with command-line timeouts laid over its sweep_* settings (flags win)."""
    given = {key: value for key, value in flags.items() if value is not None}
    if not given:
        return host
    from dataclasses import replace
    from types import MappingProxyType

    return replace(host, settings=MappingProxyType({**dict(host.settings or {}), **given}))


def keep_record(folder: RunFolder, outcome: Outcome) -> Outcome:
    """Write one host's record; the Outcome that was recorded comes back.

    A record that cannot be written as strict JSON (a value no encoder takes, nesting the encoder
    cannot follow) becomes that host's failure record, ``bad_output``: one host's data never stops
    the sweep. A full disk or a refused folder (RunFolderError) does stop it: nothing could be kept.
    """
    try:
        folder.write_record(_record(outcome))
        return outcome
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:
        problem = f"{type(exc).__name__}: {visible(exc, keep='')[:200]}"
    failed = replace(outcome, status="failed", health=None, unknown_numbers=[], failure_class="bad_output",
                     message=(f"{outcome.host.name}: the agent's output passed the checks but its record cannot be "
                              f"written as JSON ({problem}); the host runs another or a modified agent: sweep it "
                              "with this sweep's agent"))
    folder.write_record(_record(failed))
    return failed


@contextmanager
def _sigterm_as_interrupt():
    """SIGTERM (kill, systemd, a scheduler) ends the sweep as Ctrl-C does; only in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second one must not cut the drain short
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _record(outcome: Outcome) -> dict:
    host = outcome.host
    failure = None
    if outcome.status != "ok":
        failure = {"class": outcome.failure_class, "message": outcome.message}
    return {
        "record_version": RECORD_VERSION,
        "host": host.name,
        "address": host.address,
        "port": host.port,
        "status": outcome.status,
        "failure": failure,
        "attempts": outcome.attempts,
        "started_at": iso(outcome.started_at),
        "ended_at": iso(outcome.ended_at),
        "duration_s": round(outcome.ended_at - outcome.started_at, 3),
        "exit_status": outcome.exit_status,
        "stderr": outcome.stderr[-_RECORD_STDERR:] if outcome.stderr else "",
        "health": outcome.health,
        "unknown_numbers": outcome.unknown_numbers,
    }


def _finish(folder: RunFolder, manifest: dict, session: dict, state: str, status: dict,
            quiet: bool = False) -> None:
    now = utc_now()
    session["ended_at"], session["state"] = now, state
    ok = sum(1 for s, _ in status.values() if s == "ok")
    manifest.update(state=state, ended_at=now, counts={
        "total": len(manifest["hosts"]), "ok": ok, "failed": len(status) - ok,
        "pending": len(manifest["hosts"]) - len(status)})
    try:
        folder.write_manifest(manifest)
    except RunFolderError:
        if not quiet:
            raise
