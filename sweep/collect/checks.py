"""Before any host is contacted: the run's options, every host's key file and ssh settings, become
and --workers against the engine, the agent's arguments and a --wrap benchmark, each refused with
where and the fix."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Sequence

from sweep.collect.engines.base import Engine, declared
from sweep.collect.options import SSHOptions
from sweep.collect.ssh.keyfiles import (
    KeyFileEncrypted,
    KeyFileError,
    KeyFileMissing,
    KeyFileWrongPassphrase,
    load_private_key,
)
from sweep.collect.ssh.transports import TRANSPORTS, make_prober
from sweep.errors import ConfigError, SSHConfigNote
from sweep.inventory.model import Host

if TYPE_CHECKING:
    from sweep.collect.wrap import WrapSpec

DEFAULTS = SSHOptions()

# what to do about a key file that cannot be used, by why (KeyFileError's class)
KEY_FIXES = {
    KeyFileMissing: "fix ansible_ssh_private_key_file in the inventory, or create the key "
    "(ssh-keygen) and install it",
    KeyFileEncrypted: "set SWEEP_KEY_PASSPHRASE, or load the key into ssh-agent",
    KeyFileWrongPassphrase: "set SWEEP_KEY_PASSPHRASE to the key's passphrase",
    KeyFileError: "fix ansible_ssh_private_key_file in the inventory, or the key file",
}


def check_ssh_settings(runner: Engine, hosts: Sequence[Host], options: SSHOptions) -> None:
    """Before any host is contacted: every host's ssh settings (inventory args, ssh_config) honoured
    by the run's transport (the ansible engine's: OpenSSH), or a ConfigError naming the first
    refused one, where it is set and the fix."""
    if not declared(runner, "reads_ssh_config"):
        return
    # the ansible engine runs OpenSSH's ssh: its hosts' settings are held to --transport openssh's
    # rules
    transport = declared(runner, "transport")
    checker = make_prober(options.transport if transport == "run" else transport, b"", (), options)
    for host in hosts:
        # an SSHConfigError names the host, the setting, where it is and the fix
        checker.check(host)
    keep = getattr(runner, "keep_checks", None)
    if transport == "run" and keep is not None:  # it probes with what was read here
        keep(checker)
    # once per run: left unused, through ssh
    for note in checker.notes() if transport == "run" else ():
        warnings.warn(SSHConfigNote(note))


def check_become(runner: Engine, hosts: Sequence[Host]) -> None:
    """Become (--become, ansible_become) is sweep's own SSH transport's and ansible's: Slurm runs
    the job's user."""
    becoming = [host.name for host in hosts if host.become]
    if becoming and not declared(runner, "become_applies"):
        raise ConfigError(
            f"{becoming[0]}: become (--become, ansible_become) runs the agent through sudo over "
            f"SSH; the {runner.name} engine runs it as the job's user",
            where="--engine",
            fix="drop --become (or set ansible_become: false), or sweep with --engine ssh",
        )


def check_workers(runner: Engine, workers: int) -> None:
    if workers > 1 and not declared(runner, "splits_hosts"):
        raise ConfigError(
            f"--workers {workers} spreads sweep's own fan-out over processes; the {runner.name} "
            "engine hands its hosts to one tool",
            where="--workers",
            fix="drop --workers, or sweep with --engine ssh",
        )


def check_options(
    forks: int,
    resume: Any,
    limit: str | None,
    flags: dict[str, Any],
    transport: str | None,
    retry_failed: Collection[str] | None = None,
    shard: Any = None,
    workers: int = 0,
) -> None:
    if retry_failed is not None and resume is None:
        raise ConfigError(
            "--retry-failed belongs to --resume: it sweeps again the failed hosts of a run",
            fix="sweep run --resume RUN_DIR --retry-failed [CLASS...]",
        )
    if transport not in (None, *TRANSPORTS):
        raise ConfigError(
            f"--transport {transport!r} is unknown", fix=f"use one of {', '.join(TRANSPORTS)}"
        )
    if forks < 1:
        raise ConfigError(f"--forks is {forks}; it must be 1 or more", fix="pass --forks 32, say")
    if workers < 0:
        raise ConfigError(
            f"--workers is {workers}; it must be 0 (as many as the CPUs allow) or more",
            fix="pass --workers 0, or leave it out",
        )
    if resume is not None and (limit or shard is not None):
        raise ConfigError(
            f"{'--limit' if limit else '--shard'} cannot be used with --resume: the run folder "
            "fixes its hosts",
            fix=f"drop {'--limit' if limit else '--shard'}, or start a new run",
        )
    for key, value in flags.items():
        if value is not None and value <= 0:
            raise ConfigError(f"--{key.replace('_', '-')} is {value}; it must be above 0")


def deadline_args(agent_args: Sequence[str], host_deadline: float | None) -> list[str]:
    agent_args = list(agent_args)
    deadline_flag = host_deadline or DEFAULTS.host_deadline
    if "--deadline" not in agent_args and deadline_flag < 50:
        # the agent emits what it has read at its own deadline, before ours cuts the session
        agent_args += ["--deadline", f"{max(1.0, deadline_flag * 0.6):g}"]
    return agent_args


def check_key_files(
    hosts: Sequence[Host], inventory: Path, passphrase: str | None, allow_agent: bool
) -> None:
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
                checked[host.key_file] = (
                    None if agent and isinstance(problem, KeyFileEncrypted) else problem
                )
        if checked[host.key_file] is not None:
            bad.append((host, checked[host.key_file]))
    if not bad:
        return
    host, problem = bad[0]
    others = (
        f" (and {len(bad) - 1} more {'host' if len(bad) == 2 else 'hosts'})" if len(bad) > 1 else ""
    )
    text = (
        "is encrypted and no passphrase was given"
        if isinstance(problem, KeyFileEncrypted)
        else str(problem)
    )
    raise ConfigError(
        f"{host.name}{others}: private key file {host.key_file} {text}",
        where=key_file_where(host) or str(inventory),
        fix=KEY_FIXES[type(problem)],
    )


def key_file_where(host: Host) -> str | None:
    """The file:line that set the host's key file (its host_vars file, a group_vars file, the
    inventory)."""
    where = getattr(host, "ssh_args_where", None) or {}
    return next(
        (
            where[var]
            for var in ("ansible_ssh_private_key_file", "ansible_private_key_file")
            if where.get(var)
        ),
        None,
    )


def no_check(hosts, options, inventory_path) -> None:
    """The check of an engine written before `Engine.check` existed (duck-typed engines): nothing
    more to refuse."""


def wrap_and_args(
    wrap: "WrapSpec | None", runner: Engine, agent_args: Sequence[str], host_deadline: float | None
) -> tuple["WrapSpec | None", list[str]]:
    """(the benchmark to wrap, if any; the agent's arguments)."""
    if wrap is None:
        return None, deadline_args(agent_args, host_deadline)
    if not declared(runner, "wraps"):
        raise ConfigError(
            "--wrap runs over sweep's own SSH transport only",
            where="--engine",
            fix="drop --engine, or run the agent's --wrap through your engine (docs/provenance.md)",
        )
    # too short for the probes and the command: now
    wrap.agent_args(host_deadline or DEFAULTS.host_deadline)
    # the probes' deadline comes from the host deadline (WrapSpec.agent_args)
    return wrap, list(agent_args)
