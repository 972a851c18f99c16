"""A sweep's options as a few small frozen objects, as httpx passes `Timeout` and `Limits`.

What a caller (the CLI, a script) hands to `run_sweep`:

* `HostSelection`: which hosts of the inventory (``--limit``, ``--shard``) and how it is read;
* `SSHSettings`: how hosts are reached, as asked (None: unset, so a host's ``sweep_*`` setting or
  the default applies: flags, then host settings, then the defaults);
* `AgentOptions`: what the agent does on each host (its arguments, ``--wrap``'s benchmark).

`SSHOptions` is what the engines read: the run's SSH settings resolved once (defaults filled,
``~/.ssh/known_hosts`` last, the key passphrase from SWEEP_KEY_PASSPHRASE), per host with
`with_settings`.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence, Union

from sweep.inventory.command_line import VarLayers
from sweep.inventory.formats import InventoryLimits

if TYPE_CHECKING:
    from sweep.collect.wrap import WrapSpec

PASSPHRASE_ENV = "SWEEP_KEY_PASSPHRASE"  # the passphrase of encrypted key files; never recorded

FAST_KEX = "curve25519-sha256@libssh.org"
FAST_CIPHER = "aes128-gcm@openssh.com"


@dataclass(frozen=True)
class SSHOptions:
    """How hosts are reached; one object serves the whole sweep (`with_settings` per host)."""

    connect_timeout: float = 10.0
    host_deadline: float = 120.0
    retries: int = 3  # tries in all, for transient failures only
    known_hosts: tuple[str, ...] = ("~/.ssh/known_hosts",)
    accept_new_host_keys: bool = False
    ssh_config: str | None = "~/.ssh/config"
    allow_agent: bool = True
    look_for_keys: bool = True
    output_limit: int = 16 * 1024 * 1024
    stderr_limit: int = 64 * 1024
    fast_kex: bool = True
    # "paramiko" (sweep's own only), "openssh" (the system ssh), "auto": ssh where needed
    transport: str = "auto"
    backoff_s: float = 0.5
    # for encrypted key files (SWEEP_KEY_PASSPHRASE); never written anywhere, kept out of repr
    key_passphrase: str | None = field(default=None, repr=False)

    def with_settings(self, settings: Any) -> "SSHOptions":
        """These options with a host's ``sweep_connect_timeout`` / ``sweep_host_deadline`` /
        ``sweep_retries``."""
        changes = {}
        for key, kind in (("connect_timeout", float), ("host_deadline", float), ("retries", int)):
            if settings and settings.get(key) is not None:
                changes[key] = kind(settings[key])
        return self if not changes else dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class HostSelection:
    """Which hosts of the inventory a run sweeps, and the bounds on reading it."""

    limit: str | None = None  # an ansible pattern (--limit)
    # (index, count): this run's share of the hosts (--shard 2/8)
    shard: tuple[int, int] | None = None
    shard_by: str = "hash"  # or "order"
    loader: str = "auto"  # the inventory reader: auto, yaml, ini, ansible
    inventory_limits: InventoryLimits = InventoryLimits()
    # the command line's variables: -u, --private-key, --become, --become-user under the
    # inventory's, -e over
    variables: VarLayers = VarLayers()


PathLike = Union[str, Path]


@dataclass(frozen=True)
class SSHSettings:
    """How the run reaches its hosts, as asked; None leaves a host's sweep_* setting or the
    default."""

    # per TCP connect, banner and authentication (default 10 s)
    connect_timeout: float | None = None
    host_deadline: float | None = None  # per host, retries included (default 120 s)
    retries: int | None = None  # tries in all, for transient failures (default 3)
    # extra known_hosts files, read before ~/.ssh/known_hosts
    known_hosts: Sequence[PathLike] | PathLike = ()
    accept_new_host_keys: bool = False
    ssh_config: str | None = "~/.ssh/config"  # None: no ssh_config at all
    allow_agent: bool = True
    look_for_keys: bool = True
    transport: str | None = None  # "auto" (None), "paramiko" or "openssh", the system ssh
    # for encrypted key files (else SWEEP_KEY_PASSPHRASE); never written anywhere, kept out of repr
    key_passphrase: str | None = field(default=None, repr=False)

    def __post_init__(self):
        extra = self.known_hosts
        paths = [extra] if isinstance(extra, (str, os.PathLike)) else list(extra or ())
        object.__setattr__(self, "known_hosts", tuple(os.fspath(p) for p in paths))

    def flags(self) -> dict[str, Any]:
        """The timeouts and tries set here (None: unset), which win over each host's sweep_*
        settings."""
        return {
            "connect_timeout": self.connect_timeout,
            "host_deadline": self.host_deadline,
            "retries": self.retries,
        }

    def resolved(self) -> SSHOptions:
        """The SSHOptions the engines read: extra known_hosts first; the passphrase from the
        environment if not given. The timeouts stay at their defaults here: they reach each host
        through its flags."""
        passphrase = (
            self.key_passphrase
            if self.key_passphrase is not None
            else os.environ.get(PASSPHRASE_ENV) or None
        )
        return SSHOptions(
            known_hosts=(*self.known_hosts, "~/.ssh/known_hosts"),
            accept_new_host_keys=self.accept_new_host_keys,
            ssh_config=self.ssh_config,
            allow_agent=self.allow_agent,
            look_for_keys=self.look_for_keys,
            key_passphrase=passphrase,
            transport=self.transport or "auto",
        )


@dataclass(frozen=True)
class AgentOptions:
    """What the agent does on every host."""

    args: tuple[str, ...] = ()  # the agent's own arguments: --deep, --load S, --deadline S
    wrap: "WrapSpec | None" = None  # --wrap: a benchmark run in the agent's envelope (ssh engine)
    # the agent bundle; None: built from probe_agent/
    payload: bytes | None = field(default=None, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "args", tuple(self.args))
