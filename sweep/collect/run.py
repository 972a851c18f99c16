"""One `sweep run`: resolve the hosts, open the run folder, collect one record per host, finish the manifest.

No terminal code here: `progress` is a callback, and the outcome is a `RunResult` whose
`exit_code` the CLI returns (0 every host swept, 1 some host failed or has no record,
130 interrupted; bad input raises a SweepError, exit 2).
"""
from __future__ import annotations

import hashlib
import os
import signal
import threading
import warnings
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Sequence

from sweep import exitcodes
from sweep.collect.engines import create_engine
from sweep.collect.engines.base import Engine, EngineError, EngineJob, declared
from sweep.collect.resume import (OPTIONS, Resolved, check_foreign, dropped_vars, engine_of, foreign, resolve,
                                  retry_classes, to_retry)
from sweep.collect.shard import select_shard
from sweep.collect.options import AgentOptions, HostSelection, SSHOptions, SSHSettings
from sweep.collect.outcome import Outcome
from sweep.collect.ssh.prober import (KeyFileEncrypted, KeyFileError, KeyFileMissing, KeyFileWrongPassphrase,
                                      load_private_key)
from sweep.collect.ssh.transports import TRANSPORTS, make_prober
from sweep.errors import ConfigError, InventoryError, RunFolderError, SSHConfigNote, SweepError
from sweep.failures import FAILURE_CLASSES
from sweep.inventory.command_line import VarLayers, is_inline
from sweep.inventory.model import Host, Inventory, InventoryLimits, load_inventory, refuse_unrendered
from sweep.collect.workers import WorkerPool, auto_workers, usable_cpus
from sweep.collect.wrap import WrapSpec, split_record
from sweep.store import RECORD_VERSION, RunFolder, default_run_dir, iso, new_manifest
from sweep.trust import canonical, signed
from sweep.text import plural, visible

DEFAULTS = SSHOptions()
_RECORD_STDERR = 4096  # bytes of stderr kept in a record (the tail)
# what to do about a key file that cannot be used, by why (KeyFileError's class)
_KEY_FIXES = {
    KeyFileMissing: "fix ansible_ssh_private_key_file in the inventory, or create the key (ssh-keygen) and install it",
    KeyFileEncrypted: "set SWEEP_KEY_PASSPHRASE, or load the key into ssh-agent",
    KeyFileWrongPassphrase: "set SWEEP_KEY_PASSPHRASE to the key's passphrase",
    KeyFileError: "fix ansible_ssh_private_key_file in the inventory, or the key file",
}


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
    options: dict = field(default_factory=dict)  # the run's options as its manifest keeps them now
    earlier_failed: tuple[tuple[str, str], ...] = ()  # (host, class): failed in an earlier session, not swept now
    retry_classes: tuple[str, ...] | None = None  # --retry-failed: the classes asked for (None: not asked)
    retried: tuple[str, ...] = ()  # --retry-failed: the hosts swept again, their old records set aside

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
    hosts: HostSelection = HostSelection(),
    ssh: SSHSettings = SSHSettings(),
    agent: AgentOptions = AgentOptions(),
    forks: int = OPTIONS["forks"].default,
    workers: int = OPTIONS["workers"].default,
    engine: "str | Engine" = OPTIONS["engine"].default,
    out: str | Path | None = None,
    reports_dir: str | Path = "reports",
    resume: str | Path | None = None,
    retry_failed: Collection[str] | None = None,
    progress: Callable[[RunProgress], None] | None = None,
    report: Mapping[str, Any] | None = None,
    given: Collection[str] | None = None,
    trust_manifest: bool = False,
) -> RunResult:
    """Sweep the hosts of an inventory (or finish the run folder `resume`) and record each one.

    `hosts` selects them (`HostSelection`: --limit, --shard, the inventory's reader and bounds), `ssh` says how
    they are reached (`SSHSettings`: its timeouts and retries win over a host's ``sweep_*`` settings, then the
    defaults: 10 s, 120 s, 3), `agent` what the agent does there (`AgentOptions`: its arguments, `wrap`'s
    benchmark, ssh engine only). `engine` is "ssh" (through ``ssh.transport``: "auto", "paramiko", or "openssh", the
    system ssh), "ansible", "slurm" or an Engine object. Before any host is contacted: key files (decrypted
    with ``ssh.key_passphrase`` or SWEEP_KEY_PASSPHRASE, written nowhere), every host's ssh settings, the
    inventory's bounds (alias bombs, host ranges). The run folder is locked for the sweep; SIGTERM ends it
    as Ctrl-C does. docs/engines.md and docs/ssh.md describe every option.

    The manifest keeps every option that shapes the run (`sweep.collect.resume.OPTIONS`, `report`'s
    reference, expect, baseline, no_report); `resume` reuses them but those named in `given` (None: those
    that differ from the defaults), which win and are recorded in the session. `retry_failed` (with
    `resume`): sweep again the hosts whose record failed with one of these classes (empty: the transient
    ones, `sweep.failures.TRANSIENT_CLASSES`), their old records kept as ``hosts/<name>~attempt-N.json``.
    From a manifest this user's sweep did not sign, the options that name programs, commands, files or ssh
    options (`Option.gated` in `sweep.collect.resume.OPTIONS`) and its inventory are taken only when given again, or with
    `trust_manifest` (each one named in a warning); else ManifestNotTrusted lists them (docs/security.md).
    """
    asked = dict(limit=hosts.limit, forks=forks, workers=workers, accept_new_host_keys=ssh.accept_new_host_keys,
                 known_hosts=list(ssh.known_hosts), ssh_config=ssh.ssh_config, allow_agent=ssh.allow_agent,
                 look_for_keys=ssh.look_for_keys, **ssh.flags(), agent_args=list(agent.args), loader=hosts.loader,
                 engine=engine, engine_settings=engine, transport=ssh.transport,
                 shard=None if hosts.shard is None else (*hosts.shard, hosts.shard_by),
                 inventory_limits=hosts.inventory_limits, inventory_vars=hosts.variables, wrap=agent.wrap, **{**_REPORT_OPTIONS, **(report or {})})
    try:
        _check_options(forks, resume, hosts.limit, ssh.flags(), ssh.transport, retry_failed, hosts.shard, workers)
        stored, checked = (_stored(resume, inventory_path, given, asked, trust_manifest) if resume is not None
                           else (None, ""))
        session = resolve(asked, given, stored)
        return _run(session, inventory_path, (out, reports_dir), (resume, checked), agent.payload, progress,
                    ssh.key_passphrase, retry_failed)
    except KeyboardInterrupt:  # once the folder is open, a Ctrl-C ends the sweep as interrupted instead
        raise Interrupted.before_folder(out, resume) from None


class Interrupted(SweepError):
    """Ctrl-C before the run folder was made (or, --resume, reopened): nothing was written."""

    exit_code = exitcodes.INTERRUPTED

    @classmethod
    def before_folder(cls, out, resume) -> "Interrupted":
        if resume is not None:
            return cls(f"Ctrl-C before the run folder {resume} was reopened: it is as it was",
                       fix="run the same command again to finish it")
        named = f" {out}" if out is not None else ""
        return cls(f"Ctrl-C before the run folder{named} was made: no host was contacted and nothing was "
                   "written", fix="run the same command again")


def _run(session: Resolved, inventory_path, out: tuple, resumed: tuple, payload: bytes | None,
         progress: Callable[[RunProgress], None] | None, key_passphrase: str | None,
         retry_failed: Collection[str] | None) -> RunResult:
    """run_sweep with the session's options resolved; `out`: (--out or None, the reports folder); `resumed`:
    (the run folder to resume or None, the digest of the manifest its options were checked in)."""
    resume, checked = resumed
    run = session.live
    runner = _runner(run, resume is None or "engine" in session.set_now)
    options = SSHSettings(known_hosts=run["known_hosts"], accept_new_host_keys=run["accept_new_host_keys"],
                          ssh_config=run["ssh_config"], allow_agent=run["allow_agent"],
                          look_for_keys=run["look_for_keys"], transport=run["transport"],
                          key_passphrase=key_passphrase).resolved()
    session.kept["transport"] = options.transport if declared(runner,
                                                              "transport") == "run" else None
    wrap, agent_args = _wrapped(run["wrap"], runner, run["agent_args"], run["host_deadline"])
    if resume is None:  # 1. resolve the hosts (a new run: before its folder exists)
        inventory = _inventory(inventory_path, run["loader"], runner, run["inventory_limits"], run["inventory_vars"])
        hosts = _select(inventory, run["limit"], run["shard"], options, runner)
    _check_workers(runner, run["workers"])
    job = lambda forks: EngineJob(  # noqa: E731
        payload=payload if payload is not None else _bundle(), agent_args=tuple(agent_args), forks=forks,
        options=options, inventory_path=inventory.path, flags={key: run[key] for key in _FLAGS}, wrap=wrap,
        variables=run["inventory_vars"])
    with _sigterm_as_interrupt():
        hold = _Held()  # 2. open the run folder (locked), 3. collect, 4. finish in _sweep_hosts
        try:
            if resume is not None:
                folder, manifest, inventory, hosts, done, retried = _reopen(
                    resume, inventory_path, runner, options, run, retry_classes(retry_failed), checked)
                manifest["options"] = session.kept
            else:
                folder, manifest = _create(out[0] if out[0] is not None else default_run_dir(inventory.path, out[1]),
                                           inventory, hosts, session.kept)
                done, retried = {}, {}
        except BaseException:
            hold.release()
            raise
        about = {"options_set": session.set_now, **({"retried": retried} if retry_failed is not None else {})}
        fan = _Fan(runner, job, run["forks"], run["workers"], wrap)
        result = _sweep_hosts(folder, manifest, hosts, done, fan, progress, about, hold)
    if retry_failed is None:
        return result
    return replace(result, retry_classes=retry_classes(retry_failed), retried=tuple(retried))


_FLAGS = ("connect_timeout", "host_deadline", "retries")


@dataclass(frozen=True)
class _Fan:
    """How a session's hosts are fanned out: the engine `runner`, bound by `job(forks)`, in this process or in
    worker processes (`sweep.collect.workers`; `workers` 0: as many as `auto_workers` says)."""

    runner: Engine
    job: Callable[[int], EngineJob]
    forks: int
    workers: int
    wrap: "WrapSpec | None"

    def engine(self, todo: list[Host], folder: RunFolder) -> Any:
        """The bound engine over `todo`, or a WorkerPool running it in `n` processes with `forks` shared out."""
        n = 1
        if declared(self.runner, "splits_hosts") and todo:
            n = min(self.workers or auto_workers(usable_cpus(), self.forks, len(todo)), len(todo))
        bound = self.runner.bind(self.job(max(1, -(-self.forks // n))))
        if n <= 1:
            return bound
        return WorkerPool(bound, n, lambda outcome: keep_record(folder, outcome, self.wrap))


def _check_workers(runner: Engine, workers: int) -> None:
    if workers > 1 and not declared(runner, "splits_hosts"):
        raise ConfigError(f"--workers {workers} spreads sweep's own fan-out over processes; the {runner.name} "
                          "engine hands its hosts to one tool", where="--workers",
                          fix="drop --workers, or sweep with --engine ssh")
_REPORT_OPTIONS = {"reference": None, "expect": None, "baseline": None, "no_report": False}


def _runner(run: dict, asked: bool) -> Engine:
    """The engine object: the one asked for, or (resumed, not given again) the one the manifest names."""
    engine = run["engine"] if asked else engine_of(run["engine"], run["engine_settings"])
    return create_engine(engine) if isinstance(engine, str) else engine


def _stored(resume: str | Path, inventory_path, given: Collection[str] | None, asked: dict,
            trust: bool) -> tuple[dict, str]:
    """The options a run folder's manifest keeps ({} when it cannot be read: opening the folder says why),
    and the digest of that manifest (`_reopen` resumes only the manifest checked here); a manifest this
    user's sweep did not sign gives its gated options (and inventory) only as `check_foreign` lets it."""
    try:
        manifest = RunFolder(resume).read_manifest()
    except RunFolderError:
        return {}, ""
    if manifest.get("record_version") != RECORD_VERSION:
        return {}, ""  # opening the folder refuses it, naming the version
    options = manifest.get("options") if isinstance(manifest.get("options"), dict) else {}
    now = resolve(asked, given, None).set_now
    names = {*now, *(("inventory",) if inventory_path is not None else ())}
    if not signed(manifest):
        path = (manifest.get("inventory") or {}).get("path")
        check_foreign(foreign(options, None if path is None or is_inline(path) else path, names),
                      str(Path(resume) / "manifest.json"), trust)
    dropped_vars(options, names)
    return options, _digest(manifest)


def _digest(manifest: dict) -> str:
    return hashlib.sha256(canonical(manifest)).hexdigest()


def _create(path: str | Path, inventory: Inventory, hosts: list[Host], options: dict) -> tuple[RunFolder, dict]:
    """A new run folder (locked) and its manifest, written at once (under `_Held`: Ctrl-C never leaves a folder
    without a manifest, which could then be neither resumed nor reused)."""
    folder = RunFolder.create(path)
    try:
        manifest = new_manifest(inventory.path, inventory.snapshot(), [host.name for host in hosts], options)
        folder.write_manifest(manifest)
    except BaseException:
        folder.close()
        raise
    return folder, manifest


def _sweep_hosts(folder: RunFolder, manifest: dict, hosts: list[Host], done: dict[str, dict], fan: "_Fan",
                 progress: Callable[[RunProgress], None] | None, about: dict, hold: "_Held") -> RunResult:
    """3. collect the hosts without a record with the engine `fan` binds, 4. finish the session; the
    folder's lock is released at the end, whatever happens. Signals are `hold`-en until the session is
    written: from then on a Ctrl-C at any moment ends it as interrupted, which --resume finishes."""
    try:
        tally = _Tally(hosts, done, set(manifest["hosts"]), progress, folder.begin_session(manifest, **about))
        state = "interrupted"
        try:
            hold.release()  # a Ctrl-C that came meanwhile is raised here
            todo = [host for host in hosts if host.name not in done]
            state = _collect(fan.engine(todo, folder), todo, folder, manifest, tally, fan.wrap)
        except KeyboardInterrupt:
            pass  # before the engine ran: nothing to stop
        with _Held():
            folder.end_session(manifest, tally.session, state, tally.counts(len(manifest["hosts"])))
        return tally.result(folder.path, state, manifest["options"])
    finally:
        hold.release()
        folder.close()


def _check_ssh_settings(runner: Engine, hosts: Sequence[Host], options: SSHOptions) -> None:
    """Before any host is contacted: every host's ssh settings (inventory args, ssh_config) honoured by
    the run's transport (the ansible engine's: OpenSSH), or a ConfigError naming the first refused one,
    where it is set and the fix."""
    if not declared(runner, "reads_ssh_config"):
        return
    # the ansible engine runs OpenSSH's ssh: its hosts' settings are held to --transport openssh's rules
    transport = declared(runner, "transport")
    checker = make_prober(options.transport if transport == "run" else transport, b"", (), options)
    for host in hosts:
        checker.check(host)  # an SSHConfigError names the host, the setting, where it is and the fix
    for note in checker.notes() if transport == "run" else ():  # once per run: left unused, through ssh
        warnings.warn(SSHConfigNote(note))


def _select(inventory: Inventory, limit: str | None, shard: tuple[int, int, str] | None,
            options: SSHOptions, runner: Engine) -> list[Host]:
    """The hosts a new run sweeps (--limit, then --shard: index, count, by), key files and ssh settings checked."""
    hosts = inventory.select(limit)
    if shard is not None:
        hosts = select_shard(hosts, shard[0], shard[1], by=shard[2])
    refuse_unrendered(hosts)  # a Jinja template in a connection value: refused for the hosts contacted only
    if declared(runner, "one_inventory") and len(inventory.sources) > 1:
        raise ConfigError(f"the {runner.name} engine takes one inventory source", where="--engine",
                          fix="give one -i (a folder may hold the others), or sweep with --engine ssh")
    _check_key_files(hosts, inventory.path, options.key_passphrase, options.allow_agent)
    _check_ssh_settings(runner, hosts, options)
    getattr(runner, "check", _no_check)(hosts, options, inventory.path)  # an engine without the hook checks nothing more
    _check_become(runner, hosts)
    return hosts


def _check_become(runner: Engine, hosts: Sequence[Host]) -> None:
    """Become (--become, ansible_become) is sweep's own SSH transport's and ansible's: Slurm runs the job's user."""
    becoming = [host.name for host in hosts if host.become]
    if becoming and not declared(runner, "become_applies"):
        raise ConfigError(f"{becoming[0]}: become (--become, ansible_become) runs the agent through sudo over SSH; "
                          f"the {runner.name} engine runs it as the job's user", where="--engine",
                          fix="drop --become (or set ansible_become: false), or sweep with --engine ssh")


def _reopen(resume: str | Path, inventory_path: str | Path | None, runner: Engine, options: SSHOptions,
            run: dict, retry: tuple[str, ...] | None, checked: str = ""
            ) -> tuple[RunFolder, dict, Inventory, list[Host], dict, dict[str, str]]:
    """An interrupted run's folder (locked), manifest, inventory, hosts (as the inventory describes them
    now), the records kept (less those of the `retry` classes, set aside: host -> attempt file, also
    returned); the lock is released again when any of it is refused."""
    folder = RunFolder.open(resume)
    try:
        manifest = folder.read_manifest()
        if _digest(manifest) != checked:  # swapped after its options were checked, before the lock
            raise RunFolderError("manifest.json changed while the resume started", where=str(folder.path),
                                 fix="check who else writes the folder, then resume again")
        inventory = _inventory(inventory_path or _sources(manifest.get("inventory") or {"path": None}), run["loader"], runner,
                               run["inventory_limits"], run["inventory_vars"])
        hosts = _hosts_of_run(inventory, manifest)
        refuse_unrendered(hosts)
        _check_key_files(hosts, inventory.path, options.key_passphrase, options.allow_agent)
        _check_ssh_settings(runner, hosts, options)
        getattr(runner, "check", _no_check)(hosts, options, inventory.path)  # an engine without the hook checks nothing more
        _check_become(runner, hosts)
        done = folder.read_records()
        retried = {}
        for name in to_retry(done, retry or (), manifest["hosts"]):  # kept beside, never lost
            retried[name] = folder.set_aside(name)  # under run_sweep's _Held
            del done[name]
        for host in hosts:  # before any host is contacted: no record goes onto another host's file
            if host.name not in done:
                folder.check_record_file(host.name)
    except BaseException:
        folder.close()
        raise
    return folder, manifest, inventory, hosts, done, retried


class _Tally:
    """The hosts' states as records arrive: the progress callback's figures and the RunResult.

    Counters, kept as each record comes: a host's arrival costs the same at 100,000 hosts as at 10
    (rescanning every host's state per arrival made a sweep quadratic: ~270 s at 100,000 hosts)."""

    def __init__(self, hosts: list[Host], done: dict[str, dict], listed: set[str],
                 progress: Callable[[RunProgress], None] | None, session: dict):
        self.total, self.resumed, self.progress = len(hosts), len(done), progress
        self.status: dict[str, tuple] = {}
        self.ok = 0
        self.by_class: Counter = Counter()  # failed hosts by failure class
        for name, rec in done.items():
            if name in listed:
                self._set(name, (rec.get("status"), (rec.get("failure") or {}).get("class")))
        self.failures: list[tuple[str, str, str]] = []
        self.session = session  # the manifest's entry for this session (its hosts_swept is counted here)

    def _set(self, name: str, state: tuple) -> None:
        old = self.status.get(name)
        if old is not None:  # a host recorded twice: its last record counts
            self.ok -= old[0] == "ok"
            self.by_class[old[1]] -= old[0] == "failed"
        self.status[name] = state
        self.ok += state[0] == "ok"
        self.by_class[state[1]] += state[0] == "failed"

    def add(self, outcome: Outcome) -> None:
        self._set(outcome.host.name, (outcome.status, outcome.failure_class))
        self.session["hosts_swept"] += 1
        if outcome.status == "failed":
            self.failures.append((outcome.host.name, outcome.failure_class, outcome.message))
        self.report(outcome)

    def report(self, last: Outcome | None) -> None:
        if self.progress is not None:
            self.progress(RunProgress(total=self.total, ok=self.ok, failed=len(self.status) - self.ok,
                                      pending=self.total - len(self.status), last=last))

    def counts(self, listed: int) -> dict[str, int]:
        return {"total": listed, "ok": self.ok, "failed": len(self.status) - self.ok,
                "pending": listed - len(self.status)}

    def result(self, run_dir: Path, state: str, options: dict) -> RunResult:
        by_class = {cls: self.by_class[cls] for cls in FAILURE_CLASSES if self.by_class[cls]}
        now = {host for host, *_ in self.failures}
        earlier = tuple((name, cls) for name, (s, cls) in self.status.items() if s == "failed" and name not in now)
        return RunResult(
            run_dir=run_dir, state=state, total=self.total, ok=self.ok, failed=len(self.status) - self.ok,
            pending=self.total - len(self.status), resumed=self.resumed, by_class=by_class,
            failures=tuple(self.failures), options=options, earlier_failed=earlier)


def _collect(runner: Engine, todo: list[Host], folder: RunFolder, manifest: dict, tally: _Tally,
             wrap: "WrapSpec | None" = None) -> str:
    """Run the engine over `todo`, writing each host's record as it arrives; the run's state at the end."""

    kept = getattr(runner, "records_kept", False)  # worker processes write their hosts' records themselves

    def record(outcome: Outcome) -> None:
        if outcome.status != "interrupted":
            with _Held():  # a Ctrl-C now waits until the record on disk is counted too: the manifest's
                tally.add(outcome if kept else keep_record(folder, outcome, wrap))  # counts say what it holds

    tally.report(None)
    try:
        try:
            for _, outcome in runner.run(todo):
                record(outcome)
        except KeyboardInterrupt:
            runner.stop()
            for _, outcome in runner.drain(timeout=10.0):
                record(outcome)
            return "interrupted"
    except (RunFolderError, EngineError):
        runner.stop()
        runner.drain(timeout=5.0)
        folder.end_session(manifest, tally.session, "interrupted", tally.counts(len(manifest["hosts"])), quiet=True)
        raise
    return "complete"


def _check_options(forks: int, resume: Any, limit: str | None, flags: dict[str, Any], transport: str | None,
                   retry_failed: Collection[str] | None = None, shard: Any = None, workers: int = 0) -> None:
    if retry_failed is not None and resume is None:
        raise ConfigError("--retry-failed belongs to --resume: it sweeps again the failed hosts of a run",
                          fix="sweep run --resume RUN_DIR --retry-failed [CLASS...]")
    if transport not in (None, *TRANSPORTS):
        raise ConfigError(f"--transport {transport!r} is unknown", fix=f"use one of {', '.join(TRANSPORTS)}")
    if forks < 1:
        raise ConfigError(f"--forks is {forks}; it must be 1 or more", fix="pass --forks 32, say")
    if workers < 0:
        raise ConfigError(f"--workers is {workers}; it must be 0 (as many as the CPUs allow) or more",
                          fix="pass --workers 0, or leave it out")
    if resume is not None and (limit or shard is not None):
        raise ConfigError(f"{'--limit' if limit else '--shard'} cannot be used with --resume: the run folder fixes "
                          "its hosts", fix=f"drop {'--limit' if limit else '--shard'}, or start a new run")
    for key, value in flags.items():
        if value is not None and value <= 0:
            raise ConfigError(f"--{key.replace('_', '-')} is {value}; it must be above 0")


def _agent_args(agent_args: Sequence[str], host_deadline: float | None) -> list[str]:
    agent_args = list(agent_args)
    deadline_flag = host_deadline or DEFAULTS.host_deadline
    if "--deadline" not in agent_args and deadline_flag < 50:
        # the agent emits what it has read at its own deadline, before ours cuts the session
        agent_args += ["--deadline", f"{max(1.0, deadline_flag * 0.6):g}"]
    return agent_args


def _check_key_files(hosts: Sequence[Host], inventory: Path, passphrase: str | None, allow_agent: bool) -> None:
    """Fail before connecting anywhere when a host's key file is missing or cannot be used."""
    checked: dict[str, KeyFileError | None] = {}
    bad: list[tuple[Host, KeyFileError]] = []
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
                checked[host.key_file] = None if agent and isinstance(problem, KeyFileEncrypted) else problem
        if checked[host.key_file] is not None:
            bad.append((host, checked[host.key_file]))
    if not bad:
        return
    host, problem = bad[0]
    others = f" (and {len(bad) - 1} more {'host' if len(bad) == 2 else 'hosts'})" if len(bad) > 1 else ""
    text = "is encrypted and no passphrase was given" if isinstance(problem, KeyFileEncrypted) else str(problem)
    raise ConfigError(f"{host.name}{others}: private key file {host.key_file} {text}",
                      where=_key_file_where(host) or str(inventory), fix=_KEY_FIXES[type(problem)])


def _key_file_where(host: Host) -> str | None:
    """The file:line that set the host's key file (its host_vars file, a group_vars file, the inventory)."""
    where = getattr(host, "ssh_args_where", None) or {}
    return next((where[var] for var in ("ansible_ssh_private_key_file", "ansible_private_key_file")
                 if where.get(var)), None)


def _no_check(hosts, options, inventory_path) -> None:
    """The check of an engine written before `Engine.check` existed (duck-typed engines): nothing more to refuse."""


def planned_hosts(inventory_path: str | Path | None, *, hosts: HostSelection = HostSelection(),
                  resume: str | Path | None = None, engine: "str | Engine" = "ssh", forks: int = 1,
                  ssh: SSHSettings = SSHSettings(), retry_failed: Collection[str] | None = None,
                  trust: bool = False, workers: int = 0) -> list[Host]:
    """The hosts `run_sweep` with these arguments would contact, in the order it would; contacts none and
    writes nothing (``sweep run --list-hosts``, Ansible's ``--list-hosts``), after the same checks of
    `forks`, `ssh` and `retry_failed` as `run_sweep`. With `resume`: the run's hosts without a record; the
    inventory a manifest this user's sweep did not sign names is read only when `trust` (--trust-manifest)
    says so, as a resume does (`check_foreign`)."""
    _check_options(forks, resume, hosts.limit, ssh.flags(), ssh.transport, retry_failed, hosts.shard, workers)
    runner = create_engine(engine) if isinstance(engine, str) else engine
    _check_workers(runner, workers)
    if resume is not None:
        folder, manifest = RunFolder.existing(resume)
        named = _sources(manifest.get("inventory") or {"path": None})
        if inventory_path is None and not signed(manifest) and named is not None and not (
                isinstance(named, str) and is_inline(named)):
            check_foreign({"inventory": named}, str(folder.manifest_path), trust)
        inventory = _inventory(inventory_path or _sources(manifest.get("inventory") or {"path": None}), hosts.loader, runner,
                               hosts.inventory_limits, hosts.variables)
        done = folder.read_records()
        return [host for host in _hosts_of_run(inventory, manifest) if host.name not in done]
    selected = _inventory(inventory_path, hosts.loader, runner, hosts.inventory_limits, hosts.variables).select(hosts.limit)
    return select_shard(selected, *hosts.shard, by=hosts.shard_by) if hosts.shard is not None else selected


def _sources(snapshot: dict):
    """The inventory sources a run's manifest names: its list of sources (several -i), else its path."""
    return snapshot.get("sources") or snapshot["path"]


def _hosts_of_run(inventory: Inventory, manifest: dict) -> list[Host]:
    """The hosts a run folder's manifest lists, read from the inventory (all of them must still be there)."""
    by_name = {host.name: host for host in inventory.hosts}
    names = list(manifest.get("hosts") or [])
    gone = [name for name in names if name not in by_name]
    if gone:
        raise InventoryError(
            f"{plural(len(gone), 'host')} of the run {'is' if len(gone) == 1 else 'are'} no longer in the "
            f"inventory: {', '.join(gone[:5])}",
            where=str(inventory.path), fix="resume with the inventory the run started from")
    return [by_name[name] for name in names]


def _inventory(path: str | Path | None, loader: str, runner: Engine,
               limits: InventoryLimits = InventoryLimits(), variables: VarLayers = VarLayers()) -> Inventory:
    """The inventory file, or (engines that list their own nodes, as slurm) the engine's hosts."""
    own = getattr(runner, "inventory", None)
    if own is not None and (path is None or isinstance(path, (str, os.PathLike))
                            and Path(path).name.startswith(getattr(runner, "SOURCE", "\0"))):
        return own()
    if path is None:
        raise ConfigError("no inventory given", fix="sweep run INVENTORY.yml")
    return load_inventory(path, loader, limits=limits, layers=variables)


def _bundle() -> bytes:
    from sweep.collect.bundle import bundle_bytes

    return bundle_bytes()


def keep_record(folder: RunFolder, outcome: Outcome, wrap: "WrapSpec | None" = None) -> Outcome:
    """Write one host's record; the Outcome that was recorded comes back.

    A record that cannot be written as strict JSON (a value no encoder takes, nesting the encoder
    cannot follow) becomes that host's failure record, ``bad_output``: one host's data never stops
    the sweep. A full disk or a refused folder (RunFolderError) does stop it: nothing could be kept.
    """
    try:
        folder.write_record(_record(outcome, wrap))
        return outcome
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:
        problem = f"{type(exc).__name__}: {visible(exc, keep='')[:200]}"
    failed = replace(outcome, status="failed", health=None, unknown_numbers=[], failure_class="bad_output",
                     message=(f"{outcome.host.name}: the agent's output passed the checks but its record cannot be "
                              f"written as JSON ({problem}); the host runs another or a modified agent: sweep it "
                              "with this sweep's agent"))
    folder.write_record(_record(failed, wrap))
    return failed


class _Held:
    """Ctrl-C and SIGTERM wait while a run folder is between two whole states (the folder and its manifest,
    a record set aside, a session's end): a signal that comes meanwhile is delivered, by its own handler,
    at `release` (or at the end of a ``with`` block). Only in the main thread, where Python runs handlers."""

    _SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.caught: list[int] = []
        self.previous: dict | None = None
        if threading.current_thread() is threading.main_thread():
            self.previous = {sig: signal.signal(sig, lambda signum, frame: self.caught.append(signum))
                             for sig in self._SIGNALS}

    def release(self) -> None:
        if self.previous is None:
            return
        previous, self.previous = self.previous, None
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in self.caught[:1]:
            if callable(previous[sig]):
                previous[sig](sig, None)  # KeyboardInterrupt, from Python's or _sigterm_as_interrupt's handler
            elif previous[sig] == signal.SIG_DFL:
                signal.raise_signal(sig)

    def __enter__(self) -> "_Held":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


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


def _wrapped(wrap: "WrapSpec | None", runner: Engine, agent_args: Sequence[str],
             host_deadline: float | None) -> tuple["WrapSpec | None", list[str]]:
    """(the benchmark to wrap, if any; the agent's arguments)."""
    if wrap is None:
        return None, _agent_args(agent_args, host_deadline)
    if not declared(runner, "wraps"):
        raise ConfigError("--wrap runs over sweep's own SSH transport only", where="--engine",
                          fix="drop --engine, or run the agent's --wrap through your engine (docs/provenance.md)")
    wrap.agent_args(host_deadline or DEFAULTS.host_deadline)  # too short for the probes and the command: now
    return wrap, list(agent_args)  # the probes' deadline comes from the host deadline (WrapSpec.agent_args)


def _record(outcome: Outcome, wrap: "WrapSpec | None" = None) -> dict:
    host = outcome.host
    failure = None
    if outcome.status != "ok":
        failure = {"class": outcome.failure_class, "message": outcome.message}
    health, wrapped = outcome.health, None
    if wrap is not None and outcome.status == "ok":
        health, wrapped = split_record(outcome.health, wrap, outcome.ended_at - outcome.started_at)
    record = {
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
        "health": health,
        "unknown_numbers": outcome.unknown_numbers,
    }
    if wrap is not None:
        record["wrap"] = wrapped
    return record
