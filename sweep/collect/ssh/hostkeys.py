"""known_hosts: the host keys a sweep trusts, checked as OpenSSH does with
``StrictHostKeyChecking=yes``.

With ``accept-new`` (`HostKeyStore.accept_new`) a first-seen key is written, hashed, to the first
known_hosts file; a changed key is always refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import threading
from pathlib import Path

import paramiko
from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

from sweep.errors import SweepError
from sweep.folders import PRIVATE, make_dirs


class UnknownHostKey(SweepError):
    """A host offered a key no known_hosts file records, and new keys are not accepted."""


class HostKeyStore:
    """known_hosts files, read once per sweep and shared by every thread; adds keys under a lock.

    Plain names are indexed; hashed (``|1|salt|hash``) entries are checked one by one, as OpenSSH
    does. ``@cert-authority`` and ``@revoked`` lines are skipped (paramiko reads neither).
    """

    def __init__(self, paths: tuple[str, ...] | list[str], *, accept_new: bool = False):
        self.paths = [Path(os.path.expanduser(p)) for p in paths]
        self.accept_new = accept_new
        self._lock = threading.Lock()
        self._plain: dict[str, list[tuple[Path, paramiko.PKey]]] = {}
        self._hashed: list[tuple[bytes, bytes, Path, paramiko.PKey]] = []
        for path in self.paths:
            if path.is_file():
                self._load(path)
        # OpenSSH writes new keys to the first UserKnownHostsFile; so do we.
        self.write_to = self.paths[0] if self.paths else None

    def _load(self, path: Path) -> None:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh, 1):
                line = line.strip()
                if not line or line.startswith(("#", "@")):
                    continue
                try:
                    entry = HostKeyEntry.from_line(line, number)
                except (InvalidHostKey, paramiko.SSHException, ValueError, TypeError):
                    entry = None
                if entry is None or not entry.valid:
                    continue
                for name in entry.hostnames:
                    self._index(name, path, entry.key)

    def _index(self, name: str, path: Path, key: paramiko.PKey) -> None:
        if name.startswith("|1|"):
            _, _, salt, digest = name.split("|")[:4]
            self._hashed.append((base64.b64decode(salt), base64.b64decode(digest), path, key))
        else:
            self._plain.setdefault(name, []).append((path, key))

    def known(self, name: str) -> tuple[dict[str, paramiko.PKey], Path | None]:
        """The keys recorded for `name` (``addr`` or ``[addr]:port``) and the file that has them."""
        with self._lock:
            found = list(self._plain.get(name, ()))
            hashed = list(self._hashed)
        data = name.encode()
        found += [
            (path, key)
            for salt, digest, path, key in hashed
            if hmac.compare_digest(hmac.new(salt, data, hashlib.sha1).digest(), digest)
        ]
        if not found:
            return {}, None
        first = found[0][0]
        keys: dict[str, paramiko.PKey] = {}
        for path, key in found:
            if path == first:
                keys.setdefault(key.get_name(), key)
        return keys, first

    def add(self, name: str, key: paramiko.PKey) -> None:
        """Record a first-seen key (accept-new); refuses if another thread recorded a different
        one."""
        with self._lock:
            same = [k for _, k in self._plain.get(name, ()) if k.get_name() == key.get_name()]
            same += [
                k
                for salt, digest, _, k in self._hashed
                if k.get_name() == key.get_name()
                and hmac.compare_digest(
                    hmac.new(salt, name.encode(), hashlib.sha1).digest(), digest
                )
            ]
            if same:
                if same[0] != key:
                    raise paramiko.BadHostKeyException(name, key, same[0])
                return
            if self.write_to is None:
                raise UnknownHostKey(name)
            salt = os.urandom(20)
            digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
            hashed = f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"
            make_dirs(self.write_to.parent, PRIVATE)
            with open(self.write_to, "a", encoding="ascii") as fh:
                fh.write(f"{hashed} {key.get_name()} {key.get_base64()}\n")
            self._hashed.append((salt, digest, self.write_to, key))


class KnownHostsPolicy(paramiko.MissingHostKeyPolicy):
    """paramiko's hook for a key not in known_hosts: refuse it, or record it under accept-new."""

    def __init__(self, store: HostKeyStore):
        self.store = store

    def missing_host_key(self, client, hostname, key):
        if not self.store.accept_new:
            raise UnknownHostKey(hostname)
        self.store.add(hostname, key)


def known_hosts_name(host: str, port: int) -> str:
    """The name known_hosts records a host under: ``host``, or ``[host]:port`` off port 22."""
    return host if port == 22 else f"[{host}]:{port}"
