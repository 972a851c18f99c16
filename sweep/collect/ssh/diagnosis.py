"""One host's SSH trouble named: the failure class of an attempt's exception (`classify`), of an
abort (the deadline, Ctrl-C), of a refused authentication with the keys and certificates offered
(`auth_failed`, `keys_tried`), each message naming the host and the fix."""

from __future__ import annotations

import base64
import errno
import os
import socket
from typing import Any

import paramiko

from sweep.collect.options import SSHOptions
from sweep.collect.outcome import timed_out
from sweep.collect.ssh.certs import Certificate, CertificateError, agent_certificates, read_file
from sweep.collect.ssh.config import Hop
from sweep.collect.ssh.proxy import ShellProxyCommand
from sweep.failures import HostFailure
from sweep.text import visible


def present_key_files(key_files: tuple[str, ...]) -> tuple[str, ...]:
    """The key files that exist: OpenSSH skips an IdentityFile that is not there."""
    return tuple(k for k in key_files if os.path.isfile(k))


def size_text(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n} bytes"


def aborted(host: Any, reason: str, opts: SSHOptions, phase: str) -> HostFailure:
    if reason == "interrupted":
        return HostFailure("interrupted", f"{host.name}: interrupted")
    return timed_out(
        host,
        opts.host_deadline,
        "before the SSH session was up" if phase == "connect" else "while the agent ran",
    )


def classify(
    name: str, exc: BaseException, phase: str, opts: SSHOptions, hop: Hop | None
) -> HostFailure:
    """Turn an exception of one attempt into a failure class; transient ones are retried."""
    text = visible(str(exc), keep="")  # may quote what the host sent (its banner)
    at = (
        f"{hop.user}@{hop.address}" + (f":{hop.port}" if hop.port != 22 else "")
        if hop
        else "the host"
    )
    unanswered = _not_answered(name, exc, text, at, phase, opts)
    if unanswered is not None:
        return unanswered
    return _session_failed(name, exc, text, at, phase)


def _not_answered(
    name: str, exc: BaseException, text: str, at: str, phase: str, opts: SSHOptions
) -> HostFailure | None:
    """The host did not answer as an SSH server: refused, no banner, timed out, no route; None
    when it did."""
    if isinstance(exc, ConnectionRefusedError):
        return HostFailure(
            "refused",
            (
                f"{name}: connection to {at} refused: no sshd listens there; check the host is up "
                "and the port (ansible_port) is right"
            ),
        )
    if text.startswith("Error reading SSH protocol banner"):
        return _no_banner(name, exc, opts)
    if _says_timeout(exc, text) or text == "No existing session":
        what = (
            "TCP connect"
            if phase == "connect" and not isinstance(exc, paramiko.SSHException)
            else ("SSH handshake" if phase == "connect" else "agent")
        )
        return HostFailure(
            "timeout",
            (
                f"{name}: {what} timed out after {opts.connect_timeout:g} s; check the host is up "
                "and reachable, or raise --connect-timeout"
            ),
        )
    if isinstance(exc, OSError) and exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return HostFailure(
            "timeout", f"{name}: no route to host ({exc.strerror}); check the host is up"
        )
    return None


def _says_timeout(exc: BaseException, text: str) -> bool:
    """Whether `exc` (its words `text`) is a timeout by its type or its words."""
    lowered = text.lower()
    return (
        isinstance(exc, (socket.timeout, TimeoutError))
        or "timed out" in lowered
        or "timeout" in lowered
    )


def _waited_too_long(exc: BaseException) -> bool:
    """Whether `exc` is a wait of ours that ran out (a socket's timeout, paramiko's wait for the
    banner or the handshake, which raises with the socket's timeout as its context), not something
    the other end did."""
    return _says_timeout(exc, str(exc)) or isinstance(
        exc.__context__, (socket.timeout, TimeoutError)
    )


def proxy_failure(
    name: str, hop: Hop, sock, exc: BaseException, waited: float
) -> HostFailure | None:
    """Why an SSH session through a ProxyCommand (`sock`, a `ShellProxyCommand`) failed, where the
    command is the cause; None: `exc` is classified as for any connection.

    A wait of ours that ran out is a timeout: paramiko then closes the transport, which kills the
    command, so the command's exit (-9) says nothing of it (under load paramiko's wait for the
    banner can end just before the host's deadline). A command that ended, or complained on stderr,
    before that is refused, with what it said."""
    if not isinstance(sock, ShellProxyCommand):
        return None
    command = visible(hop.proxy_command[:200], keep="")
    if _waited_too_long(exc):
        return HostFailure(
            "timeout",
            (
                f"{name}: no SSH session through the ProxyCommand for {hop.address} ({command}) "
                f"within {waited:g} s (sweep ended the command); check the ProxyCommand and the "
                "host behind it, or raise --connect-timeout"
            ),
        )
    if sock.closed or sock.said():
        said = sock.said() or f"exit {sock.process.poll()}, nothing on stderr"
        return HostFailure(
            "refused",
            (
                f"{name}: the ProxyCommand for {hop.address} ({command}) ended before an SSH "
                f"session was up ({said}); check the ProxyCommand and the host behind it"
            ),
        )
    return None


def _no_banner(name: str, exc: BaseException, opts: SSHOptions) -> HostFailure:
    """No SSH banner came: none within the connect timeout, or the host closed the connection
    first (transient: retried)."""
    if isinstance(exc.__context__, (socket.timeout, TimeoutError)):
        return HostFailure(
            "timeout",
            (
                f"{name}: no SSH banner within {opts.connect_timeout:g} s: something accepts "
                "TCP connections there but does not answer as an SSH server; check the host "
                "and its sshd"
            ),
        )
    return HostFailure(
        "refused",
        (
            f"{name}: the host closed the connection before the SSH banner: its sshd dropped "
            "it (MaxStartups reached?) or something else listens on that port"
        ),
        transient=True,
    )


def _session_failed(name: str, exc: BaseException, text: str, at: str, phase: str) -> HostFailure:
    """An SSH server answered, then the session failed: authentication, the handshake, setting
    it up (`phase` "connect"), or the agent's run."""
    if isinstance(exc, paramiko.AuthenticationException) or "No authentication methods" in text:
        return HostFailure(
            "auth",
            (
                f"{name}: authentication as {at} failed ({text or type(exc).__name__}); check "
                "ansible_user and ansible_ssh_private_key_file, and that the key is in the "
                "host's authorized_keys (ssh-copy-id)"
            ),
        )
    if phase == "connect" and (
        isinstance(exc, (EOFError, ConnectionResetError, BrokenPipeError))
        or "reset by peer" in text
    ):
        return HostFailure(
            "refused",
            (
                f"{name}: the host closed the connection during the SSH handshake "
                f"({text or type(exc).__name__}); the sshd may be overloaded (MaxStartups) or "
                "block this client"
            ),
            transient=True,
        )
    if phase == "connect":
        return HostFailure(
            "refused",
            (
                f"{name}: no SSH session could be set up ({type(exc).__name__}: {text}); check "
                "the host's sshd"
            ),
        )
    return HostFailure(
        "agent_error",
        (
            f"{name}: the session broke while the agent ran ({type(exc).__name__}: {text}); sweep "
            "the host again"
        ),
    )


def _certificates(hop: Hop, pkey: paramiko.PKey | None, opts: SSHOptions) -> list[Certificate]:
    """The certificates this hop offered: its key's (or the files beside its keys and its
    CertificateFiles), and the agent's."""
    found: list[Certificate] = []
    candidates = [
        c
        for c in (*hop.cert_files, *(k + "-cert.pub" for k in present_key_files(hop.key_files)))
        if os.path.isfile(c)
    ]
    blob = pkey.public_blob.key_blob if pkey is not None and pkey.public_blob is not None else None
    for path in candidates:
        try:
            if blob is None or base64.b64decode(open(path, "rb").read().split()[1]) == blob:
                found.append(read_file(path))
        except (CertificateError, OSError, IndexError, ValueError):
            continue
    if opts.allow_agent and hop.agent:
        found += agent_certificates()
    return found


def auth_failed(
    name: str, hop: Hop, exc: Exception, pkey: paramiko.PKey | None, opts: SSHOptions
) -> HostFailure:
    """`auth`, naming the certificates offered and why each would be refused (the server has the
    last word)."""
    at = f"{hop.user}@{hop.address}" + (f":{hop.port}" if hop.port != 22 else "")
    text = visible(str(exc), keep="") or type(exc).__name__
    certs = _certificates(hop, pkey, opts)
    reasons = [
        f"{cert.describe()} {cert.problem(hop.user)}" for cert in certs if cert.problem(hop.user)
    ]
    if reasons:
        return HostFailure(
            "auth",
            f"{name}: authentication as {at} failed: {'; '.join(reasons)}; "
            "get a certificate valid for this user now from your CA",
        )
    if certs:
        listed = ", ".join(cert.describe() for cert in certs)
        return HostFailure(
            "auth",
            f"{name}: authentication as {at} failed ({text}): the host refused "
            f"{listed}, valid for {hop.user!r} now; check that the host's "
            "TrustedUserCAKeys holds the CA that signed it",
        )
    return HostFailure(
        "auth",
        (
            f"{name}: authentication as {at} failed ({text}); {keys_tried(hop, opts)}; check "
            "ansible_user and ansible_ssh_private_key_file, and that the key is in the host's "
            "authorized_keys (ssh-copy-id)"
        ),
    )


# what paramiko's look_for_keys reads in ~/.ssh
DEFAULT_KEYS = ("id_rsa", "id_dsa", "id_ecdsa", "id_ed25519")


def keys_tried(hop: Hop, opts: SSHOptions) -> str:
    """The keys offered to a hop, each with where it was set: the key files (a missing one skipped,
    as OpenSSH skips it), the default files of ~/.ssh, the ssh-agent's keys."""
    sources = (
        hop.key_sources
        if len(hop.key_sources) == len(hop.key_files)
        else ("",) * len(hop.key_files)
    )
    tried = [
        f"{key} ({where or 'the inventory'}"
        + ("" if os.path.isfile(key) else ": no such file, skipped")
        + ")"
        for key, where in zip(hop.key_files, sources)
    ]
    if opts.look_for_keys and hop.agent:
        home = os.path.expanduser("~/.ssh")
        found = [
            os.path.join(home, k) for k in DEFAULT_KEYS if os.path.isfile(os.path.join(home, k))
        ]
        tried += [f"{k} (a default key file)" for k in found] or [f"no default key file in {home}"]
    if opts.allow_agent and hop.agent:
        tried.append(
            "the ssh-agent's keys (SSH_AUTH_SOCK)"
            if os.environ.get("SSH_AUTH_SOCK")
            else "no ssh-agent (SSH_AUTH_SOCK is not set)"
        )
    elif not hop.agent:
        tried.append("no agent or default keys (IdentitiesOnly / IdentityAgent none)")
    if not hop.key_files and not any(
        "(a default key file)" in t or "(SSH_AUTH_SOCK)" in t for t in tried
    ):
        return "no key was offered: " + ", ".join(
            ["no key file set (ansible_ssh_private_key_file, --private-key, IdentityFile)", *tried]
        )
    return "keys tried: " + ", ".join(tried)


def hosts_named(names: list[str], shown: int = 5) -> str:
    """``gpu01, gpu02`` or ``gpu01, ... gpu05 and 295 more hosts``: hosts named on one line."""
    more = f" and {len(names) - shown} more hosts" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
