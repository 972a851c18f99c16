"""One `sweep run`: resolve the hosts, open the run folder, collect one record per host, finish the manifest.

No terminal code here: `progress` is a callback, and the outcome is a `RunResult` whose
`exit_code` the CLI returns (0 every host swept, 1 some host failed or has no record,
130 interrupted; bad input raises a SweepError, exit 2).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Collection, Mapping

from sweep import exitcodes
from sweep.collect.checks import (check_become, check_key_files, check_options, check_ssh_settings, check_workers,
                                  no_check, wrap_and_args)
from sweep.collect.engines import create_engine
from sweep.collect.engines.base import Engine, EngineError, EngineJob, declared
from sweep.collect.resume import (OPTIONS, Resolved, check_foreign, dropped_vars, engine_of, foreign, resolve,
                                  retry_classes, to_retry)
from sweep.collect.shard import select_shard
from sweep.collect.options import AgentOptions, HostSelection, SSHOptions, SSHSettings
from sweep.collect.outcome import Outcome
from sweep.collect.signals import Held, sigterm_as_interrupt
from sweep.collect.tally import RunProgress, RunResult, Tally
from sweep.errors import ConfigError, InventoryError, RunFolderError, SweepError
from sweep.inventory.command_line import VarLayers, is_inline
from sweep.inventory.model import Host, Inventory, InventoryLimits, load_inventory, refuse_unrendered
from sweep.collect.workers import WorkerPool, auto_workers, usable_cpus
from sweep.collect.wrap import WrapSpec, split_record
from sweep.store import RECORD_VERSION, RunFolder, default_run_dir, iso, new_manifest
from sweep.trust import canonical, signed
from sweep.text import plural, visible

__all__ = ["RunProgress", "RunResult", "run_sweep", "planned_hosts", "keep_record", "Interrupted"]

_RECORD_STDERR = 4096  # bytes of stderr kept in a record (the tail)


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
        check_options(forks, resume, hosts.limit, ssh.flags(), ssh.transport, retry_failed, hosts.shard, workers)
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
    wrap, agent_args = wrap_and_args(run["wrap"], runner, run["agent_args"], run["host_deadline"])
    if resume is None:  # 1. resolve the hosts (a new run: before its folder exists)
        inventory = _inventory(inventory_path, run["loader"], runner, run["inventory_limits"], run["inventory_vars"])
        hosts = _select(inventory, run["limit"], run["shard"], options, runner)
    check_workers(runner, run["workers"])
    job = lambda forks: EngineJob(  # noqa: E731
        payload=payload if payload is not None else _bundle(), agent_args=tuple(agent_args), forks=forks,
        options=options, inventory_path=inventory.path, flags={key: run[key] for key in _FLAGS}, wrap=wrap,
        variables=run["inventory_vars"])
    with sigterm_as_interrupt():
        hold = Held()  # 2. open the run folder (locked), 3. collect, 4. finish in _sweep_hosts
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
            n = min(self.workers or auto_workers(usable_cpus(), self.forks, len(todo)), len(todo), self.forks)
        bound = self.runner.bind(self.job(max(1, -(-self.forks // n))))
        if n <= 1:
            return bound
        return WorkerPool(bound, n, lambda outcome: keep_record(folder, outcome, self.wrap))


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
    """A new run folder (locked) and its manifest, written at once (under `Held`: Ctrl-C never leaves a folder
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
                 progress: Callable[[RunProgress], None] | None, about: dict, hold: "Held") -> RunResult:
    """3. collect the hosts without a record with the engine `fan` binds, 4. finish the session; the
    folder's lock is released at the end, whatever happens. Signals are `hold`-en until the session is
    written: from then on a Ctrl-C at any moment ends it as interrupted, which --resume finishes."""
    try:
        tally = Tally(hosts, done, set(manifest["hosts"]), progress, folder.begin_session(manifest, **about))
        state = "interrupted"
        try:
            hold.release()  # a Ctrl-C that came meanwhile is raised here
            todo = [host for host in hosts if host.name not in done]
            state = _collect(fan.engine(todo, folder), todo, folder, manifest, tally, fan.wrap)
        except KeyboardInterrupt:
            pass  # before the engine ran: nothing to stop
        with Held():
            folder.end_session(manifest, tally.session, state, tally.counts(len(manifest["hosts"])))
        return tally.result(folder.path, state, manifest["options"])
    finally:
        hold.release()
        folder.close()


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
    check_key_files(hosts, inventory.path, options.key_passphrase, options.allow_agent)
    check_ssh_settings(runner, hosts, options)
    getattr(runner, "check", no_check)(hosts, options, inventory.path)  # an engine without the hook checks nothing more
    check_become(runner, hosts)
    return hosts


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
        check_key_files(hosts, inventory.path, options.key_passphrase, options.allow_agent)
        check_ssh_settings(runner, hosts, options)
        getattr(runner, "check", no_check)(hosts, options, inventory.path)  # an engine without the hook checks nothing more
        check_become(runner, hosts)
        done = folder.read_records()
        retried = {}
        for name in to_retry(done, retry or (), manifest["hosts"]):  # kept beside, never lost
            retried[name] = folder.set_aside(name)  # under run_sweep's Held
            del done[name]
        for host in hosts:  # before any host is contacted: no record goes onto another host's file
            if host.name not in done:
                folder.check_record_file(host.name)
    except BaseException:
        folder.close()
        raise
    return folder, manifest, inventory, hosts, done, retried


def _collect(runner: Engine, todo: list[Host], folder: RunFolder, manifest: dict, tally: Tally,
             wrap: "WrapSpec | None" = None) -> str:
    """Run the engine over `todo`, writing each host's record as it arrives; the run's state at the end."""

    kept = getattr(runner, "records_kept", False)  # worker processes write their hosts' records themselves

    def record(outcome: Outcome) -> None:
        if outcome.status != "interrupted":
            with Held():  # a Ctrl-C now waits until the record on disk is counted too: the manifest's
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


def planned_hosts(inventory_path: str | Path | None, *, hosts: HostSelection = HostSelection(),
                  resume: str | Path | None = None, engine: "str | Engine" = "ssh", forks: int = 1,
                  ssh: SSHSettings = SSHSettings(), retry_failed: Collection[str] | None = None,
                  trust: bool = False, workers: int = 0) -> list[Host]:
    """The hosts `run_sweep` with these arguments would contact, in the order it would; contacts none and
    writes nothing (``sweep run --list-hosts``, Ansible's ``--list-hosts``), after the same checks of
    `forks`, `ssh` and `retry_failed` as `run_sweep`. With `resume`: the run's hosts without a record; the
    inventory a manifest this user's sweep did not sign names is read only when `trust` (--trust-manifest)
    says so, as a resume does (`check_foreign`)."""
    check_options(forks, resume, hosts.limit, ssh.flags(), ssh.transport, retry_failed, hosts.shard, workers)
    runner = create_engine(engine) if isinstance(engine, str) else engine
    check_workers(runner, workers)
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
