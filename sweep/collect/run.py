"""One `sweep run`: resolve the hosts, open the run folder, collect one record per host, finish the
manifest.

No terminal code here: `progress` is a callback, and the outcome is a `RunResult` whose
`exit_code` the CLI returns (0 every host swept, 1 some host failed or has no record,
130 interrupted; bad input raises a SweepError, exit 2).
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Mapping

from sweep import exitcodes
from sweep.collect.checks import (
    check_options,
    check_workers,
    wrap_and_args,
)
from sweep.collect.engines import create_engine
from sweep.collect.engines.base import Engine, EngineError, EngineJob, declared
from sweep.collect.resume import (
    OPTIONS,
    Resolved,
    check_foreign,
    dropped_vars,
    engine_of,
    foreign,
    resolve,
    retry_classes,
    to_retry,
)
from sweep.collect.options import AgentOptions, HostSelection, SSHOptions, SSHSettings
from sweep.collect.outcome import Outcome
from sweep.collect.selection import (
    check_before_contact,
    hosts_of_run,
    inventory_sources,
    planned_hosts,
    run_inventory,
    select_hosts,
)
from sweep.collect.signals import Gate, Held, sigterm_as_interrupt
from sweep.collect.tally import RunProgress, RunResult, Tally
from sweep.errors import RunFolderError, SweepError
from sweep.gcpolicy import fewer_collections
from sweep.inventory.command_line import is_inline
from sweep.inventory.model import (
    Host,
    Inventory,
    refuse_unrendered,
)
from sweep.collect.workers import WorkerPool, auto_workers, usable_cpus
from sweep.collect.wrap import WrapSpec, split_record
from sweep.store import RECORD_VERSION, RunFolder, default_run_dir, iso, new_manifest
from sweep.trust import canonical, signed
from sweep.text import visible

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

    `hosts` selects them (`HostSelection`: --limit, --shard, the inventory's reader and bounds),
    `ssh` says how they are reached (`SSHSettings`: its timeouts and retries win over a host's
    ``sweep_*`` settings, then the defaults: 10 s, 120 s, 3), `agent` what the agent does there
    (`AgentOptions`: its arguments, `wrap`'s benchmark, ssh engine only). `engine` is "ssh" (through
    ``ssh.transport``: "auto", "paramiko", or "openssh", the system ssh), "ansible", "slurm" or an
    Engine object. Before any host is contacted: key files (decrypted with ``ssh.key_passphrase`` or
    SWEEP_KEY_PASSPHRASE, written nowhere), every host's ssh settings, the inventory's bounds (alias
    bombs, host ranges). The run folder is locked for the sweep; SIGTERM ends it as Ctrl-C does.
    docs/engines.md and docs/ssh.md describe every option.

    The manifest keeps every option that shapes the run (`sweep.collect.resume.OPTIONS`, `report`'s
    reference, expect, baseline, no_report); `resume` reuses them but those named in `given` (None:
    those that differ from the defaults), which win and are recorded in the session. `retry_failed`
    (with `resume`): sweep again the hosts whose record failed with one of these classes (empty: the
    transient ones, `sweep.failures.TRANSIENT_CLASSES`), their old records kept as
    ``hosts/<name>~attempt-N.json``. From a manifest this user's sweep did not sign, the options
    that name programs, commands, files or ssh options (`Option.gated` in
    `sweep.collect.resume.OPTIONS`) and its inventory are taken only when given again, or with
    `trust_manifest` (each one named in a warning); else ManifestNotTrusted lists them
    (docs/security.md).
    """
    with _nothing_written_on_ctrl_c(out, resume):
        asked = _asked(hosts, ssh, agent, forks, workers, engine, report, resume, retry_failed)
        session, checked = _session(resume, inventory_path, given, asked, trust_manifest)
        return _run(
            session,
            inventory_path,
            (out, reports_dir),
            (resume, checked),
            agent.payload,
            progress,
            ssh.key_passphrase,
            retry_failed,
        )


def _asked(
    hosts: HostSelection,
    ssh: SSHSettings,
    agent: AgentOptions,
    forks: int,
    workers: int,
    engine: "str | Engine",
    report: Mapping[str, Any] | None,
    resume: str | Path | None,
    retry_failed: Collection[str] | None,
) -> dict:
    """The options this command asks for, under the names the manifest keeps them by, once they
    are checked together (`check_options`, after they are gathered)."""
    asked = dict(
        limit=hosts.limit,
        forks=forks,
        workers=workers,
        accept_new_host_keys=ssh.accept_new_host_keys,
        known_hosts=list(ssh.known_hosts),
        ssh_config=ssh.ssh_config,
        allow_agent=ssh.allow_agent,
        look_for_keys=ssh.look_for_keys,
        **ssh.flags(),
        agent_args=list(agent.args),
        loader=hosts.loader,
        engine=engine,
        engine_settings=engine,
        transport=ssh.transport,
        shard=None if hosts.shard is None else (*hosts.shard, hosts.shard_by),
        inventory_limits=hosts.inventory_limits,
        inventory_vars=hosts.variables,
        wrap=agent.wrap,
        **{**_REPORT_OPTIONS, **(report or {})},
    )
    check_options(
        forks, resume, hosts.limit, ssh.flags(), ssh.transport, retry_failed, hosts.shard, workers
    )
    return asked


def _session(
    resume: str | Path | None,
    inventory_path,
    given: Collection[str] | None,
    asked: dict,
    trust_manifest: bool,
) -> tuple[Resolved, str]:
    """The session's options resolved (those `given` over a resumed run's stored ones over the
    defaults), and the digest of the manifest they were read from ("" for a new run)."""
    stored, checked = (
        _stored(resume, inventory_path, given, asked, trust_manifest)
        if resume is not None
        else (None, "")
    )
    return resolve(asked, given, stored), checked


@contextmanager
def _nothing_written_on_ctrl_c(out, resume) -> Iterator[None]:
    """A Ctrl-C before the run folder is open ends the sweep as Interrupted (nothing written);
    once the folder is open, the sweep itself ends it as interrupted instead."""
    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted.before_folder(out, resume) from None


class Interrupted(SweepError):
    """Ctrl-C before the run folder was made (or, --resume, reopened): nothing was written."""

    exit_code = exitcodes.INTERRUPTED

    @classmethod
    def before_folder(cls, out, resume) -> "Interrupted":
        if resume is not None:
            return cls(
                f"Ctrl-C before the run folder {resume} was reopened: it is as it was",
                fix="run the same command again to finish it",
            )
        named = f" {out}" if out is not None else ""
        return cls(
            f"Ctrl-C before the run folder{named} was made: no host was contacted and nothing was "
            "written",
            fix="run the same command again",
        )


def _run(
    session: Resolved,
    inventory_path,
    out: tuple,
    resumed: tuple,
    payload: bytes | None,
    progress: Callable[[RunProgress], None] | None,
    key_passphrase: str | None,
    retry_failed: Collection[str] | None,
) -> RunResult:
    """run_sweep with the session's options resolved; `out`: (--out or None, the reports folder);
    `resumed`: (the run folder to resume or None, the digest of the manifest its options were
    checked in)."""
    resume, checked = resumed
    run = session.live
    runner = _runner(run, resume is None or "engine" in session.set_now)
    options = _ssh_options(run, key_passphrase)
    session.kept["transport"] = (
        options.transport if declared(runner, "transport") == "run" else None
    )
    wrap, agent_args = wrap_and_args(run["wrap"], runner, run["agent_args"], run["host_deadline"])
    if resume is None:  # 1. resolve the hosts (a new run: before its folder exists)
        inventory = _run_inventory(inventory_path, run, runner)
        hosts = select_hosts(inventory, run["limit"], run["shard"], options, runner)
    check_workers(runner, run["workers"])
    with sigterm_as_interrupt():
        hold = Held()  # 2. open the run folder (locked), 3. collect, 4. finish in _sweep_hosts
        try:
            if resume is not None:
                folder, manifest, inventory, hosts, done, retried = _reopen(
                    resume,
                    inventory_path,
                    runner,
                    options,
                    run,
                    retry_classes(retry_failed),
                    checked,
                )
                manifest["options"] = session.kept
            else:
                folder, manifest = _create(
                    out[0] if out[0] is not None else default_run_dir(inventory.path, out[1]),
                    inventory,
                    hosts,
                    session.kept,
                )
                done, retried = {}, {}
        except BaseException:
            hold.release()
            raise
        about = {
            "options_set": session.set_now,
            **({"retried": retried} if retry_failed is not None else {}),
        }
        job = _job(payload, agent_args, options, inventory, run, wrap)
        fan = _Fan(runner, job, run["forks"], run["workers"], wrap)
        result = _sweep_hosts(folder, manifest, hosts, done, fan, progress, about, hold)
    if retry_failed is None:
        return result
    return replace(result, retry_classes=retry_classes(retry_failed), retried=tuple(retried))


def _ssh_options(run: dict, key_passphrase: str | None) -> SSHOptions:
    """How the session's hosts are reached: its ssh settings, resolved."""
    return SSHSettings(
        known_hosts=run["known_hosts"],
        accept_new_host_keys=run["accept_new_host_keys"],
        ssh_config=run["ssh_config"],
        allow_agent=run["allow_agent"],
        look_for_keys=run["look_for_keys"],
        transport=run["transport"],
        key_passphrase=key_passphrase,
    ).resolved()


def _job(
    payload: bytes | None,
    agent_args: list,
    options: SSHOptions,
    inventory: Inventory,
    run: dict,
    wrap: "WrapSpec | None",
) -> Callable[[int], EngineJob]:
    """The engine's job for `forks` hosts at once: the agent and its arguments, the ssh options,
    the inventory, the session's timeouts and retries, the benchmark to wrap."""
    return lambda forks: EngineJob(
        payload=payload if payload is not None else _bundle(),
        agent_args=tuple(agent_args),
        forks=forks,
        options=options,
        inventory_path=inventory.path,
        flags={key: run[key] for key in _FLAGS},
        wrap=wrap,
        variables=run["inventory_vars"],
    )


def _run_inventory(path, run: dict, runner: Engine) -> Inventory:
    """The session's inventory (`run_inventory`), read with its loader, bounds and variables."""
    return run_inventory(
        path, run["loader"], runner, run["inventory_limits"], run["inventory_vars"]
    )


_FLAGS = ("connect_timeout", "host_deadline", "retries")


@dataclass(frozen=True)
class _Fan:
    """How a session's hosts are fanned out: the engine `runner`, bound by `job(forks)`, in this
    process or in worker processes (`sweep.collect.workers`; `workers` 0: as many as `auto_workers`
    says)."""

    runner: Engine
    job: Callable[[int], EngineJob]
    forks: int
    workers: int
    wrap: "WrapSpec | None"

    def engine(self, todo: list[Host], folder: RunFolder) -> Any:
        """The bound engine over `todo`, or a WorkerPool running it in `n` processes with `forks`
        shared out."""
        n = 1
        if declared(self.runner, "splits_hosts") and todo:
            n = min(
                self.workers or auto_workers(usable_cpus(), self.forks, len(todo)),
                len(todo),
                self.forks,
            )
        bound = self.runner.bind(self.job(max(1, -(-self.forks // n))))
        if n <= 1:
            return bound
        return WorkerPool(bound, n, lambda outcome: keep_record(folder, outcome, self.wrap))


_REPORT_OPTIONS = {"reference": None, "expect": None, "baseline": None, "no_report": False}


def _runner(run: dict, asked: bool) -> Engine:
    """The engine object: the one asked for, or (resumed, not given again) the one the manifest
    names."""
    engine = run["engine"] if asked else engine_of(run["engine"], run["engine_settings"])
    return create_engine(engine) if isinstance(engine, str) else engine


def _stored(
    resume: str | Path, inventory_path, given: Collection[str] | None, asked: dict, trust: bool
) -> tuple[dict, str]:
    """The options a run folder's manifest keeps ({} when it cannot be read: opening the folder says
    why), and the digest of that manifest (`_reopen` resumes only the manifest checked here); a
    manifest this user's sweep did not sign gives its gated options (and inventory) only as
    `check_foreign` lets it."""
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
        check_foreign(
            foreign(options, None if path is None or is_inline(path) else path, names),
            str(Path(resume) / "manifest.json"),
            trust,
        )
    dropped_vars(options, names)
    return options, _digest(manifest)


def _digest(manifest: dict) -> str:
    return hashlib.sha256(canonical(manifest)).hexdigest()


def _create(
    path: str | Path, inventory: Inventory, hosts: list[Host], options: dict
) -> tuple[RunFolder, dict]:
    """A new run folder (locked) and its manifest, written at once (under `Held`: Ctrl-C never
    leaves a folder without a manifest, which could then be neither resumed nor reused)."""
    folder = RunFolder.create(path)
    try:
        manifest = new_manifest(
            inventory.path, inventory.snapshot(), [host.name for host in hosts], options
        )
        folder.write_manifest(manifest)
    except BaseException:
        folder.close()
        raise
    return folder, manifest


def _sweep_hosts(
    folder: RunFolder,
    manifest: dict,
    hosts: list[Host],
    done: dict[str, dict],
    fan: "_Fan",
    progress: Callable[[RunProgress], None] | None,
    about: dict,
    hold: "Held",
) -> RunResult:
    """3. collect the hosts without a record with the engine `fan` binds, 4. finish the session; the
    folder's lock is released at the end, whatever happens. Signals are `hold`-en until the session
    is written: from then on a Ctrl-C at any moment ends it as interrupted, which --resume
    finishes."""
    try:
        tally = Tally(
            hosts, done, set(manifest["hosts"]), progress, folder.begin_session(manifest, **about)
        )
        state = "interrupted"
        try:
            hold.release()  # a Ctrl-C that came meanwhile is raised here
            todo = [host for host in hosts if host.name not in done]
            with fewer_collections():  # workers fork inside: they inherit it
                state = _collect(fan.engine(todo, folder), todo, folder, manifest, tally, fan.wrap)
        except KeyboardInterrupt:
            pass  # before the engine ran: nothing to stop
        with Held():
            folder.end_session(manifest, tally.session, state, tally.counts(len(manifest["hosts"])))
        return tally.result(folder.path, state, manifest["options"])
    finally:
        hold.release()
        folder.close()


def _reopen(
    resume: str | Path,
    inventory_path: str | Path | None,
    runner: Engine,
    options: SSHOptions,
    run: dict,
    retry: tuple[str, ...] | None,
    checked: str = "",
) -> tuple[RunFolder, dict, Inventory, list[Host], dict, dict[str, str]]:
    """An interrupted run's folder (locked), manifest, inventory, hosts (as the inventory describes
    them now), the records kept (less those of the `retry` classes, set aside: host -> attempt file,
    also returned); the lock is released again when any of it is refused."""
    folder = RunFolder.open(resume)
    try:
        manifest = folder.read_manifest()
        if _digest(manifest) != checked:  # swapped after its options were checked, before the lock
            raise RunFolderError(
                "manifest.json changed while the resume started",
                where=str(folder.path),
                fix="check who else writes the folder, then resume again",
            )
        inventory = _run_inventory(
            inventory_path or inventory_sources(manifest.get("inventory") or {"path": None}),
            run,
            runner,
        )
        hosts = hosts_of_run(inventory, manifest)
        refuse_unrendered(hosts)
        check_before_contact(runner, hosts, inventory, options)
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


def _collect(
    runner: Engine,
    todo: list[Host],
    folder: RunFolder,
    manifest: dict,
    tally: Tally,
    wrap: "WrapSpec | None" = None,
) -> str:
    """Run the engine over `todo`, writing each host's record as it arrives; the run's state at the
    end."""

    # worker processes write their hosts' records themselves
    kept = getattr(runner, "records_kept", False)
    gate = Gate()

    def record(outcome: Outcome) -> None:
        if outcome.status != "interrupted":
            # a Ctrl-C now waits until the record on disk is counted too: the manifest's counts say
            # what it holds
            with gate:
                tally.add(outcome if kept else keep_record(folder, outcome, wrap))

    try:
        return _collect_through(runner, todo, folder, manifest, tally, record)
    finally:
        gate.close()


def _collect_through(runner, todo, folder, manifest, tally, record) -> str:
    """`_collect`'s loop: each outcome to `record` as it arrives; on Ctrl-C, the engine stopped and
    what it drains recorded."""
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
        folder.end_session(
            manifest, tally.session, "interrupted", tally.counts(len(manifest["hosts"])), quiet=True
        )
        raise
    return "complete"


def _bundle() -> bytes:
    from sweep.collect.bundle import wire_bytes

    return wire_bytes()


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
    failed = replace(
        outcome,
        status="failed",
        health=None,
        unknown_numbers=[],
        failure_class="bad_output",
        message=(
            f"{outcome.host.name}: the agent's output passed the checks but its record cannot be "
            f"written as JSON ({problem}); the host runs another or a modified agent: sweep it "
            "with this sweep's agent"
        ),
    )
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
