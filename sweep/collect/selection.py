"""The hosts a run sweeps: the inventory (or the engine's own list of nodes), --limit and --shard,
what is checked of them before any is contacted, and the hosts of a run folder being resumed;
`planned_hosts` says which a run would contact (``sweep run --list-hosts``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Collection

from sweep.collect.checks import (
    check_become,
    check_key_files,
    check_options,
    check_ssh_settings,
    check_workers,
    no_check,
)
from sweep.collect.engines import create_engine
from sweep.collect.engines.base import Engine, declared
from sweep.collect.options import HostSelection, SSHOptions, SSHSettings
from sweep.collect.resume import check_foreign
from sweep.collect.shard import select_shard
from sweep.errors import ConfigError, InventoryError
from sweep.inventory.command_line import VarLayers, is_inline
from sweep.inventory.model import (
    Host,
    Inventory,
    InventoryLimits,
    load_inventory,
    refuse_unrendered,
)
from sweep.store import RunFolder
from sweep.text import plural
from sweep.trust import signed


def planned_hosts(
    inventory_path: str | Path | None,
    *,
    hosts: HostSelection = HostSelection(),
    resume: str | Path | None = None,
    engine: "str | Engine" = "ssh",
    forks: int = 1,
    ssh: SSHSettings = SSHSettings(),
    retry_failed: Collection[str] | None = None,
    trust: bool = False,
    workers: int = 0,
) -> list[Host]:
    """The hosts `run_sweep` with these arguments would contact, in the order it would; contacts
    none and writes nothing (``sweep run --list-hosts``, Ansible's ``--list-hosts``), after the same
    checks of `forks`, `ssh` and `retry_failed` as `run_sweep`. With `resume`: the run's hosts
    without a record; the inventory a manifest this user's sweep did not sign names is read only
    when `trust` (--trust-manifest) says so, as a resume does (`check_foreign`)."""
    check_options(
        forks, resume, hosts.limit, ssh.flags(), ssh.transport, retry_failed, hosts.shard, workers
    )
    runner = create_engine(engine) if isinstance(engine, str) else engine
    check_workers(runner, workers)
    if resume is not None:
        folder, manifest = RunFolder.existing(resume)
        named = inventory_sources(manifest.get("inventory") or {"path": None})
        if (
            inventory_path is None
            and not signed(manifest)
            and named is not None
            and not (isinstance(named, str) and is_inline(named))
        ):
            check_foreign({"inventory": named}, str(folder.manifest_path), trust)
        inventory = run_inventory(
            inventory_path or inventory_sources(manifest.get("inventory") or {"path": None}),
            hosts.loader,
            runner,
            hosts.inventory_limits,
            hosts.variables,
        )
        done = folder.read_records()
        return [host for host in hosts_of_run(inventory, manifest) if host.name not in done]
    selected = run_inventory(
        inventory_path, hosts.loader, runner, hosts.inventory_limits, hosts.variables
    ).select(hosts.limit)
    return (
        select_shard(selected, *hosts.shard, by=hosts.shard_by)
        if hosts.shard is not None
        else selected
    )


def inventory_sources(snapshot: dict):
    """The inventory sources a run's manifest names: its list of sources (several -i), else its
    path."""
    return snapshot.get("sources") or snapshot["path"]


def hosts_of_run(inventory: Inventory, manifest: dict) -> list[Host]:
    """The hosts a run folder's manifest lists, read from the inventory (all of them must still be
    there)."""
    by_name = {host.name: host for host in inventory.hosts}
    names = list(manifest.get("hosts") or [])
    gone = [name for name in names if name not in by_name]
    if gone:
        raise InventoryError(
            f"{plural(len(gone), 'host')} of the run {'is' if len(gone) == 1 else 'are'} no "
            f"longer in the inventory: {', '.join(gone[:5])}",
            where=str(inventory.path),
            fix="resume with the inventory the run started from",
        )
    return [by_name[name] for name in names]


def run_inventory(
    path: str | Path | None,
    loader: str,
    runner: Engine,
    limits: InventoryLimits = InventoryLimits(),
    variables: VarLayers = VarLayers(),
) -> Inventory:
    """The inventory file, or (engines that list their own nodes, as slurm) the engine's hosts."""
    own = getattr(runner, "inventory", None)
    if own is not None and (
        path is None
        or isinstance(path, (str, os.PathLike))
        and Path(path).name.startswith(getattr(runner, "SOURCE", "\0"))
    ):
        return own()
    if path is None:
        raise ConfigError("no inventory given", fix="sweep run INVENTORY.yml")
    return load_inventory(path, loader, limits=limits, layers=variables)


def select_hosts(
    inventory: Inventory,
    limit: str | None,
    shard: tuple[int, int, str] | None,
    options: SSHOptions,
    runner: Engine,
) -> list[Host]:
    """The hosts a new run sweeps (--limit, then --shard: index, count, by), key files and ssh
    settings checked."""
    hosts = inventory.select(limit)
    if shard is not None:
        hosts = select_shard(hosts, shard[0], shard[1], by=shard[2])
    # a Jinja template in a connection value: refused for the hosts contacted only
    refuse_unrendered(hosts)
    if declared(runner, "one_inventory") and len(inventory.sources) > 1:
        raise ConfigError(
            f"the {runner.name} engine takes one inventory source",
            where="--engine",
            fix="give one -i (a folder may hold the others), or sweep with --engine ssh",
        )
    check_before_contact(runner, hosts, inventory, options)
    return hosts


def check_before_contact(
    runner: Engine, hosts: list[Host], inventory: Inventory, options: SSHOptions
) -> None:
    """What is checked of the hosts to sweep before any is contacted: their key files, their ssh
    settings, the engine's own checks, become."""
    check_key_files(hosts, inventory.path, options.key_passphrase, options.allow_agent)
    check_ssh_settings(runner, hosts, options)
    # an engine without the hook checks nothing more
    getattr(runner, "check", no_check)(hosts, options, inventory.path)
    check_become(runner, hosts)
