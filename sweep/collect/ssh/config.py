"""``~/.ssh/config``: which address, port, user, keys and ProxyJump hops reach an inventory host.

Inventory values win over the config's Host blocks, which win over OpenSSH's defaults.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paramiko


@dataclass(frozen=True)
class Hop:
    """One SSH endpoint: where to connect, as whom, with which keys, under which known_hosts name."""

    address: str
    port: int
    user: str
    key_files: tuple[str, ...]
    key_alias: str


class SSHConfigFile:
    """``~/.ssh/config`` read once (paramiko.SSHConfig); an absent file answers nothing."""

    def __init__(self, path: str | None):
        self.config = None
        if path:
            full = Path(os.path.expanduser(path))
            if full.is_file():
                self.config = paramiko.SSHConfig.from_path(str(full))

    def lookup(self, name: str) -> dict:
        return dict(self.config.lookup(name)) if self.config is not None else {}


def _local_user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # no USER and no passwd entry (some containers)
        return "root"


def _hop(name: str, config: SSHConfigFile, *, port: int | None = None, user: str | None = None,
         key_file: str | None = None) -> tuple[Hop, str | None]:
    """A Hop for `name`, inventory values over ssh config over defaults; and its config ProxyJump."""
    found = config.lookup(name)
    address = found.get("hostname") or name
    port = port or int(found.get("port") or 22)
    keys = [key_file] if key_file else []
    keys += [os.path.expanduser(k) for k in found.get("identityfile") or [] if not key_file]
    alias = found.get("hostkeyalias") or address
    hop = Hop(address, port, user or found.get("user") or _local_user(),
              tuple(os.path.expanduser(k) for k in keys), alias)
    jump = found.get("proxyjump")
    return hop, None if not jump or jump.lower() == "none" else jump


def _parse_jump(spec: str) -> tuple[str, int | None, str | None]:
    """``[user@]host[:port]`` (or ``ssh://user@host:port``) of one ProxyJump entry."""
    spec = spec.strip()
    if spec.startswith("ssh://"):
        spec = spec[len("ssh://"):]
    user, _, rest = spec.rpartition("@")
    port = None
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        port = int(tail[1:]) if tail.startswith(":") else None
    elif rest.count(":") == 1:
        host, _, port_text = rest.partition(":")
        port = int(port_text)
    else:
        host = rest
    return host, port, user or None


def route(host: Any, config: SSHConfigFile) -> tuple[list[Hop], Hop]:
    """The jump hops (in order) and the final hop that reach an inventory host."""
    target, config_jump = _hop(host.address, config, port=host.port, user=host.user, key_file=host.key_file)
    jump = host.proxy_jump or config_jump
    hops = []
    if jump and jump.lower() != "none":
        for spec in jump.split(","):
            name, port, user = _parse_jump(spec)
            hops.append(_hop(name, config, port=port, user=user)[0])
    return hops, target
