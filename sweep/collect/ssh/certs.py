"""OpenSSH user certificates (PROTOCOL.certkeys): read one, and say why a server would refuse it.

The server's refusal is the truth; `problem()` only explains it from the certificate itself
(validity window, principals), so that an `auth` record names the certificate and the reason.
"""

from __future__ import annotations

import base64
import struct
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from sweep.errors import SweepError
from sweep.text import noun

# the public key fields after the nonce, per key type (PROTOCOL.certkeys)
_KEY_FIELDS = {
    "ssh-rsa": 2,
    "ssh-dss": 4,
    "ecdsa-sha2-nistp256": 2,
    "ecdsa-sha2-nistp384": 2,
    "ecdsa-sha2-nistp521": 2,
    "ssh-ed25519": 1,
    "sk-ssh-ed25519@openssh.com": 2,
    "sk-ecdsa-sha2-nistp256@openssh.com": 3,
}
FOREVER = 0xFFFFFFFFFFFFFFFF


class CertificateError(SweepError, ValueError):
    """Bytes that are not an OpenSSH certificate."""


@dataclass(frozen=True)
class Certificate:
    """What a certificate says about itself."""

    source: str  # its file, or "agent: <comment>"
    key_id: str
    principals: tuple[str, ...]
    valid_after: int
    valid_before: int
    user_cert: bool

    def problem(self, user: str, now: float | None = None) -> str | None:
        """Why a server would refuse this certificate for `user`, read from the certificate; None if
        it looks valid."""
        now = time.time() if now is None else now
        if not self.user_cert:
            return "is a host certificate, not a user certificate"
        if now < self.valid_after:
            return f"is not valid before {_when(self.valid_after)}"
        if self.valid_before != FOREVER and now >= self.valid_before:
            return f"expired at {_when(self.valid_before)}"
        if self.principals and user not in self.principals:
            return (
                f"is for the {noun(len(self.principals), 'principal')} "
                f"{', '.join(self.principals)}, not the user {user!r} logged in as"
            )
        return None

    def describe(self) -> str:
        return f"certificate {self.source} (key id {self.key_id!r})"


def _when(stamp: int) -> str:
    return datetime.fromtimestamp(stamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def _take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise CertificateError("truncated")
        chunk = self.data[self.at : self.at + n]
        self.at += n
        return chunk

    def string(self) -> bytes:
        return self._take(struct.unpack(">I", self._take(4))[0])

    def uint32(self) -> int:
        return struct.unpack(">I", self._take(4))[0]

    def uint64(self) -> int:
        return struct.unpack(">Q", self._take(8))[0]


def parse_blob(blob: bytes, source: str) -> Certificate:
    """A certificate from its wire form (what the -cert.pub file holds in base64, or the agent hands
    out)."""
    reader = _Reader(blob)
    cert_type = reader.string().decode("ascii", "replace")
    base = cert_type.replace("-cert-v01@openssh.com", "")
    if base == cert_type or base not in _KEY_FIELDS:
        raise CertificateError(f"{cert_type!r} is not a certificate type sweep reads")
    reader.string()  # nonce
    for _ in range(_KEY_FIELDS[base]):
        reader.string()
    reader.uint64()  # serial
    kind = reader.uint32()
    key_id = reader.string().decode("utf-8", "replace")
    names = _Reader(reader.string())
    principals = []
    while names.at < len(names.data):
        principals.append(names.string().decode("utf-8", "replace"))
    after, before = reader.uint64(), reader.uint64()
    return Certificate(source, key_id, tuple(principals), after, before, kind == 1)


def read_file(path: str | Path) -> Certificate:
    """A ``-cert.pub`` file; CertificateError says why it is not one."""
    try:
        words = Path(path).read_text(encoding="ascii", errors="replace").split()
    except OSError as exc:
        raise CertificateError(f"cannot be read ({exc.strerror})") from None
    if len(words) < 2 or not words[0].endswith("-cert-v01@openssh.com"):
        raise CertificateError("is not an OpenSSH certificate (-cert.pub)")
    try:
        blob = base64.b64decode(words[1], validate=True)
    except ValueError:
        raise CertificateError("is not base64") from None
    return parse_blob(blob, str(path))


def agent_certificates() -> list[Certificate]:
    """The certificates the ssh-agent of SSH_AUTH_SOCK holds (none when there is no agent)."""
    import paramiko

    found = []
    try:
        for key in paramiko.Agent().get_keys():
            if key.get_name().endswith("-cert-v01@openssh.com"):
                try:
                    found.append(
                        parse_blob(key.asbytes(), f"in ssh-agent ({key.comment or 'no comment'})")
                    )
                except CertificateError:
                    continue
    except (paramiko.SSHException, OSError):
        pass
    return found
