"""Engines that run the agent on hosts: SSH (built in), ansible and slurm behind one interface (`base.Engine`)."""
from __future__ import annotations

from typing import Any

from sweep.collect.engines.base import Engine
from sweep.errors import ConfigError

ENGINES = ("ssh", "ansible", "slurm")


def create_engine(name: str, **settings: Any) -> "Engine":
    """The engine called `name` ("ssh", "ansible" or "slurm"); `settings` go to its constructor."""
    if name == "ssh":
        from sweep.collect.engines.ssh import SSHEngine

        return SSHEngine(**settings)
    if name == "ansible":
        from sweep.collect.engines.ansible import AnsibleEngine

        return AnsibleEngine(**settings)
    if name == "slurm":
        from sweep.collect.engines.slurm import SlurmEngine

        return SlurmEngine(**settings)
    raise ConfigError(f"unknown engine {name!r}", fix=f"use one of {', '.join(ENGINES)}")


def engine_from_options(name: str, *, partition: str | None = None, nodelist: str | None = None) -> "str | Engine":
    """What `sweep run --engine NAME [--partition P] [--nodelist N]` asks for: "ssh" or an Engine."""
    if name not in ENGINES:
        raise ConfigError(f"--engine {name!r} is unknown", fix=f"use one of {', '.join(ENGINES)}")
    if (partition or nodelist) and name != "slurm":
        raise ConfigError("--partition and --nodelist belong to the slurm engine", fix="add --engine slurm")
    if name == "ssh":
        return "ssh"
    if name == "slurm":
        return create_engine("slurm", partition=partition, nodelist=nodelist)
    return create_engine(name)
