"""Engines that run the agent on hosts: SSH (built in), ansible and slurm behind one interface
(`base.Engine`).

An engine is one module and one line of `ENGINES` (its name -> "module:Class"): what it is (its SSH
client, whether hosts' SSH settings and --become apply, whether it lists its own nodes...) is
declared by its class's attributes (`base.Engine`), and nothing outside the engines asks an engine's
name.
"""

from __future__ import annotations

import importlib
from typing import Any

from sweep.collect.engines.base import Engine
from sweep.errors import ConfigError

ENGINES = {  # the registration: name -> its class, imported on first use
    "ssh": "sweep.collect.engines.ssh:SSHEngine",
    "ansible": "sweep.collect.engines.ansible:AnsibleEngine",
    "slurm": "sweep.collect.engines.slurm:SlurmEngine",
}


def engine_class(name: str) -> type[Engine]:
    """The class of the engine called `name`, or a ConfigError naming the engines there are."""
    if name not in ENGINES:
        raise ConfigError(f"unknown engine {name!r}", fix=f"use one of {', '.join(ENGINES)}")
    module, _, cls = ENGINES[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def create_engine(name: str, **settings: Any) -> "Engine":
    """The engine called `name` (a key of `ENGINES`); `settings` go to its constructor."""
    return engine_class(name)(**settings)


def engine_from_options(
    name: str, *, partition: str | None = None, nodelist: str | None = None
) -> "str | Engine":
    """What `sweep run --engine NAME [--partition P] [--nodelist N]` asks for: "ssh" or an
    Engine."""
    if name not in ENGINES:
        raise ConfigError(f"--engine {name!r} is unknown", fix=f"use one of {', '.join(ENGINES)}")
    if (partition or nodelist) and name != "slurm":
        raise ConfigError(
            "--partition and --nodelist belong to the slurm engine", fix="add --engine slurm"
        )
    if name == "ssh":
        return "ssh"
    if name == "slurm":
        return create_engine("slurm", partition=partition, nodelist=nodelist)
    return create_engine(name)
