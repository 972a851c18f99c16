"""How a sweep reaches its hosts: `SSHOptions`, one frozen object for the whole sweep (every engine reads it)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

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
    transport: str = "paramiko"  # or "openssh": the system ssh binary (sweep.collect.ssh.openssh)
    backoff_s: float = 0.5
    # for encrypted key files (SWEEP_KEY_PASSPHRASE); never written anywhere, kept out of repr
    key_passphrase: str | None = field(default=None, repr=False)

    def with_settings(self, settings: Any) -> "SSHOptions":
        """These options with a host's ``sweep_connect_timeout`` / ``sweep_host_deadline`` / ``sweep_retries``."""
        changes = {}
        for key, kind in (("connect_timeout", float), ("host_deadline", float), ("retries", int)):
            if settings and settings.get(key) is not None:
                changes[key] = kind(settings[key])
        return self if not changes else dataclasses.replace(self, **changes)
