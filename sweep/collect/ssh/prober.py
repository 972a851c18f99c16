"""One host, one SSH connection, one exec: push the agent on stdin, read health.json from stdout.

`Prober.probe()` never raises for a host's trouble: every host ends as one `Outcome`, its health or
a failure class (`sweep.failures.FailureClass`) with a message that names the host and the fix.

Where the connection settings of a host come from, highest first:
1. the inventory (``ansible_host``, ``ansible_port``, ``ansible_user``,
   ``ansible_ssh_private_key_file``, a ProxyJump in ``ansible_ssh_common_args``);
2. the ``~/.ssh/config`` Host blocks matching the address (HostName, User, Port, IdentityFile,
   ProxyJump, HostKeyAlias), read with paramiko's SSHConfig (`sweep.collect.ssh.config`);
3. OpenSSH's defaults: port 22, the local user name, ssh-agent and ``~/.ssh/id_*``.

Host keys are checked against ``~/.ssh/known_hosts`` and any ``--known-hosts`` file, as OpenSSH
does with ``StrictHostKeyChecking=yes`` (or ``accept-new``): a changed key is always refused
(`sweep.collect.ssh.hostkeys`).

Time: ``connect_timeout`` bounds the TCP connect, the banner and the authentication, each;
``host_deadline`` bounds the whole host, retries included. paramiko's own timeouts are per read, so
a `Watchdog` thread (`sweep.collect.ssh.watchdog`) shuts the socket of any attempt still running at
its deadline.
"""

from __future__ import annotations

import json
import logging
import random
import shlex
import socket
import threading
import time
from typing import Any, Callable

import orjson
import paramiko

from sweep.collect.bundle import become_user, host_agent_args, remote_command
from sweep.collect.ssh.keyfiles import KeyFileError, load_private_key
from sweep.collect.ssh.hostkeys import (
    HostKeyStore,
    KnownHostsPolicy,
    UnknownHostKey,
    known_hosts_name,
)
from sweep.collect.ssh.config import Hop, SSHConfigFile
from sweep.collect.ssh.diagnosis import (
    aborted,
    auth_failed,
    classify,
    hosts_named,
    present_key_files,
    proxy_failure,
    size_text,
)
from sweep.collect.ssh.packets import FastTransport
from sweep.collect.ssh.proxy import ShellProxyCommand
from sweep.collect.ssh.watchdog import Attempt, Watchdog
from sweep.collect.options import SSHOptions
from sweep.collect.outcome import Outcome, read_agent_output
from sweep.failures import HostFailure
from sweep.strictjson import NOT_PARSED

# paramiko logs each failed handshake with a traceback at ERROR; a failed host is already a record
logging.getLogger("paramiko").addHandler(logging.NullHandler())
_READ_CHUNK = 65536
_SETTLE_S = 0.2  # after the exit status: data still in flight comes within this (loopback, LAN)
_LINGER_S = 2.0  # after the exit status: no data for this long and the output is taken as it is


# --- one host -----------------------------------------------------------------------------------


class Prober:
    """Runs the agent on hosts; one per sweep, shared by the fan-out's threads."""

    def __init__(
        self,
        payload: bytes,
        agent_args: tuple[str, ...] | list[str] = (),
        options: SSHOptions = SSHOptions(),
        *,
        watchdog: Watchdog | None = None,
        wrap=None,
    ):
        self.payload = payload
        self.agent_args = list(agent_args)
        # a sweep.collect.wrap.WrapSpec: run the benchmark in the envelope, not a probe
        self.wrap = wrap
        self.options = options
        self.keys = HostKeyStore(options.known_hosts, accept_new=options.accept_new_host_keys)
        self._stores: dict[tuple[tuple[str, ...], bool], HostKeyStore] = {}
        self.config = SSHConfigFile(options.ssh_config)
        self.watchdog = watchdog or Watchdog()
        self.stopping = threading.Event()
        self._pkeys: dict[tuple[tuple[str, ...], tuple[str, ...]], paramiko.PKey | None] = {}
        self._lock = threading.Lock()

    def check(self, host: Any) -> None:
        """Refuse (SSHSettingRefused) what this host's ssh settings ask and this transport would not
        do."""
        self.config.check(host)

    def adopt(self, checked: "Prober") -> None:
        """Take the checks `checked` (a Prober of the same transport and options, with no agent)
        made of the hosts before any was contacted: its ssh_config reader and each host's route,
        read once a run instead of twice (0.09 ms a host)."""
        if type(checked) is type(self) and checked.options == self.options:
            self.config = checked.config

    def notes(self) -> list[str]:
        """One line per ssh_config keyword this run leaves unused (where first seen, which
        hosts)."""
        return [
            f"{where}: {why} ({hosts_named(sorted(hosts))})"
            for _, (why, where, hosts) in sorted(self.config.notes.items())
        ]

    def _store(self, hop: Hop) -> HostKeyStore:
        """The host keys a hop is checked against: the run's files, then the config's
        UserKnownHostsFile."""
        if not hop.known_hosts and not hop.accept_new:
            return self.keys
        key = (hop.known_hosts, hop.accept_new)
        with self._lock:
            if key not in self._stores:
                files = (
                    *self.options.known_hosts[:-1],
                    *(hop.known_hosts or self.options.known_hosts[-1:]),
                )
                self._stores[key] = HostKeyStore(
                    files, accept_new=self.options.accept_new_host_keys or hop.accept_new
                )
            return self._stores[key]

    def _pkey(self, hop: Hop) -> paramiko.PKey | None:
        """The one key file of a hop with its certificate (``-cert.pub`` beside it, or a
        CertificateFile), read once per sweep (None: let paramiko read and report it)."""
        present = present_key_files(hop.key_files)
        if len(present) != 1:
            return None
        index = (present, hop.cert_files)
        with self._lock:
            if index in self._pkeys:
                return self._pkeys[index]
        try:
            pkey = load_private_key(present[0], self.options.key_passphrase)
        except KeyFileError:
            pkey = None
        if pkey is not None:
            for cert in (*hop.cert_files, present[0] + "-cert.pub"):
                try:
                    pkey.load_certificate(cert)
                    break
                except (OSError, ValueError, paramiko.SSHException):
                    continue  # not this key's certificate: OpenSSH skips it too
        with self._lock:
            self._pkeys[index] = pkey
        return pkey

    def stop(self) -> None:
        """Ctrl-C: no new attempt starts, and every attempt in flight is shut now."""
        self.stopping.set()
        self.watchdog.abort_all("interrupted")

    def probe(self, host: Any) -> Outcome:
        """Connect, run the agent, read health.json; retry transient failures within the
        deadline."""
        opts = self.options.with_settings(getattr(host, "settings", None))
        started, start = time.time(), time.monotonic()
        deadline = start + opts.host_deadline
        outcome = Outcome(host=host, status="failed", started_at=started)
        for attempt in range(1, max(1, opts.retries) + 1):
            outcome.attempts = attempt
            if self.stopping.is_set():
                outcome.status = "interrupted"
                break
            try:
                (health, unknown), exit_status, stderr = self._attempt(host, opts, deadline)
            except HostFailure as failure:
                outcome.failure_class, outcome.message = failure.failure_class, failure.message
                outcome.exit_status, outcome.stderr = failure.exit_status, failure.stderr
                if failure.failure_class == "interrupted":
                    outcome.status = "interrupted"
                    break
                delay = opts.backoff_s * (2 ** (attempt - 1)) * random.uniform(0.5, 1.5)
                if (
                    not failure.transient
                    or attempt == opts.retries
                    or time.monotonic() + delay >= deadline
                ):
                    break
                if self.stopping.wait(delay):
                    outcome.status = "interrupted"
                    break
                continue
            outcome.status, outcome.health, outcome.unknown_numbers = "ok", health, unknown
            outcome.failure_class = outcome.message = None
            outcome.exit_status, outcome.stderr = exit_status, stderr
            break
        outcome.ended_at = started + (time.monotonic() - start)
        return outcome

    def _attempt(
        self, host: Any, opts: SSHOptions, deadline: float
    ) -> tuple[tuple[dict, list], int | None, str]:
        if host.address == "":  # ansible_host= in the inventory: ansible too has no address to use
            raise HostFailure(
                "dns",
                (
                    f"{host.name}: ansible_host is set but empty in the inventory, so there is no "
                    "address to connect to; set it to the host's address, or remove it to "
                    f"connect to '{host.name}'"
                ),
            )
        attempt = Attempt()
        token = self.watchdog.watch(deadline, attempt)
        phase, hop = "connect", None
        try:
            client = None
            sock = None
            for hop in self.config.route(host):
                if client is None and hop.proxy_command:
                    sock = ShellProxyCommand(hop.proxy_command)
                    attempt.add(sock)
                elif client is None:
                    sock = _tcp_connect(host.name, hop, opts, deadline, attempt)
                else:
                    sock = _open_tunnel(host.name, client, hop, deadline)
                client = self._ssh(host.name, hop, sock, opts, deadline, attempt)
            phase = "exec"
            return self._run_agent(host, client, opts, deadline)
        except HostFailure:
            if attempt.aborted:
                raise aborted(host, attempt.aborted, opts, phase) from None
            raise
        except Exception as exc:
            if attempt.aborted:
                raise aborted(host, attempt.aborted, opts, phase) from None
            raise classify(host.name, exc, phase, opts, hop) from None
        finally:
            self.watchdog.unwatch(token)
            attempt.close()

    def _ssh(
        self, name: str, hop: Hop, sock, opts: SSHOptions, deadline: float, attempt: Attempt
    ) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        attempt.add(client)
        keys = self._store(hop)
        key_name = known_hosts_name(hop.key_alias, hop.port)
        known, _ = keys.known(key_name)
        for keytype, key in known.items():
            client.get_host_keys().add(key_name, keytype, key)
        client.set_missing_host_key_policy(KnownHostsPolicy(keys))
        step = max(
            0.1, min(hop.connect_timeout or opts.connect_timeout, deadline - time.monotonic())
        )
        pkey = self._pkey(hop)
        try:
            client.connect(
                hostname=hop.key_alias,
                port=hop.port,
                username=hop.user,
                sock=sock,
                pkey=pkey,
                key_filename=None if pkey else list(present_key_files(hop.key_files)) or None,
                passphrase=None if pkey else opts.key_passphrase,
                allow_agent=opts.allow_agent and hop.agent,
                compress=hop.compression,
                look_for_keys=opts.look_for_keys and hop.agent,
                timeout=min(2 * step, max(0.1, deadline - time.monotonic())),
                banner_timeout=step,
                auth_timeout=step,
                channel_timeout=step,
                transport_factory=FastTransport if opts.fast_kex else None,
            )
        except UnknownHostKey:
            raise _unknown_key(name, hop, client, keys) from None
        except paramiko.BadHostKeyException as exc:
            raise _changed_key(name, hop, key_name, exc, keys) from None
        except paramiko.AuthenticationException as exc:
            raise auth_failed(name, hop, exc, pkey, opts) from None
        except Exception as exc:
            failure = proxy_failure(name, hop, sock, exc, step)
            if failure is not None:
                raise failure from exc
            raise
        if hop.keepalive_s:
            client.get_transport().set_keepalive(hop.keepalive_s)
        return client

    def _args(self, host: Any, opts: SSHOptions) -> list[str]:
        """The agent's arguments on `host`: the run's, the host's settings, and the wrapped
        benchmark's."""
        args = host_agent_args(host, self.agent_args)
        return args + self.wrap.agent_args(opts.host_deadline) if self.wrap is not None else args

    def _run_agent(
        self, host: Any, client: paramiko.SSHClient, opts: SSHOptions, deadline: float
    ) -> tuple[tuple[dict, list], int | None, str]:
        transport = client.get_transport()
        chan = self._start_agent(host, transport, opts, deadline)
        out, err, err_total = bytearray(), bytearray(), 0
        out_done = err_done = False
        heard = time.monotonic()  # when data last came
        parsed = NOT_PARSED  # what orjson made of `out`, once it was parsed to see it whole
        while not (out_done and err_done):
            if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                # the agent has exited, but a child it left (a daemon) may hold the channel open and
                # never send EOF: once what arrived is whole JSON, or nothing came for a while, it
                # is done
                quiet = time.monotonic() - heard
                if quiet >= _LINGER_S:
                    break
                if quiet >= _SETTLE_S:
                    whole, parsed = _whole_json(out)
                    if whole:
                        break
            chan.settimeout(
                max(
                    0.01,
                    min(
                        _SETTLE_S if chan.exit_status_ready() else 0.5, deadline - time.monotonic()
                    ),
                )
            )
            if chan.recv_stderr_ready() or (out_done and not err_done):
                data = _read_until(deadline, chan.recv_stderr, host, opts)
                if data == b"":
                    err_done = True
                elif data:
                    heard = time.monotonic()
                    err_total += len(data)
                    err += data
                    del err[: -opts.stderr_limit]
                continue
            data = _read_until(deadline, chan.recv, host, opts)
            if data is None:
                continue
            if not data:
                out_done = True
                continue
            heard = time.monotonic()
            out += data
            if len(out) > opts.output_limit:
                raise HostFailure(
                    "output_too_large",
                    (
                        f"{host.name}: the agent wrote more than {size_text(opts.output_limit)} on "
                        "stdout; the output was cut off and dropped; check what the host's "
                        "python3 runs at start (sitecustomize, PYTHONSTARTUP) or raise the "
                        "output limit"
                    ),
                )
        return self._exit_and_output(
            host, chan, transport, out, err, err_total, opts, deadline, parsed=parsed
        )

    def _start_agent(
        self, host: Any, transport: paramiko.Transport, opts: SSHOptions, deadline: float
    ) -> paramiko.Channel:
        """A session running the agent's bootstrap, the agent bundle sent on its stdin."""
        chan = transport.open_session(timeout=max(0.1, deadline - time.monotonic()))
        # the agent ends itself when this host's deadline has passed: nothing hung is left on the
        # host
        lifetime = max(1.0, deadline - time.monotonic())
        chan.exec_command(
            remote_command(
                host.python,
                len(self.payload),
                self._args(host, opts),
                lifetime=lifetime,
                become_user=become_user(host),
            )
        )
        try:
            chan.sendall(self.payload)
            if self.wrap is None:  # a wrapped command ends when our side of stdin closes (--tether)
                chan.shutdown_write()
        except (OSError, EOFError):
            pass  # the remote command ended without reading stdin: its exit status tells why
        return chan

    def _exit_and_output(
        self,
        host: Any,
        chan: paramiko.Channel,
        transport: paramiko.Transport,
        out: bytearray,
        err: bytearray,
        err_total: int,
        opts: SSHOptions,
        deadline: float,
        parsed: Any = NOT_PARSED,
    ) -> tuple[tuple[dict, list], int | None, str]:
        """The agent's exit status and what it wrote, judged: (health, unknown numbers), status,
        stderr. `parsed`: what orjson made of `out`, where `_whole_json` parsed it already."""
        if not chan.status_event.wait(max(0.01, deadline - time.monotonic())):
            raise aborted(host, "deadline", opts, "exec")
        exit_status = chan.exit_status
        if exit_status == -1 and time.monotonic() >= deadline:
            # the host's backstop alarm ended it, past ours
            raise aborted(host, "deadline", opts, "exec")
        if exit_status == -1 and not transport.is_active():
            raise HostFailure(
                "agent_error",
                (
                    f"{host.name}: the SSH connection was lost while the agent ran ({len(out)} "
                    "bytes of output read, no exit status): the host or the network dropped it; "
                    "check the host's sshd log and the network, then sweep the host again"
                ),
                transient=True,
                exit_status=None,
                stderr=err.decode("utf-8", "replace"),
            )
        stderr = err.decode("utf-8", "replace")
        if err_total > len(err):
            stderr = f"[first {err_total - len(err)} bytes of stderr cut]\n" + stderr
        try:
            return (
                read_agent_output(
                    host,
                    bytes(out),
                    exit_status,
                    stderr,
                    wrapped=self.wrap is not None,
                    host_deadline=opts.host_deadline,
                    parsed=parsed,
                ),
                exit_status,
                stderr,
            )
        except HostFailure as failure:
            failure.exit_status, failure.stderr = exit_status, stderr
            raise


def _read_until(
    deadline: float, recv: Callable[[int], bytes], host: Any, opts: SSHOptions
) -> bytes | None:
    """One read of the channel (b"": its end); None when nothing came within the read's timeout,
    and the host aborted once its deadline has passed."""
    try:
        return recv(_READ_CHUNK)
    except socket.timeout:
        if time.monotonic() >= deadline:
            raise aborted(host, "deadline", opts, "exec") from None
        return None


def _whole_json(out: bytes | bytearray) -> tuple[bool, Any]:
    """Whether `out` is already one whole JSON text (the judge decides whether it is a good one),
    and orjson's document of it (`NOT_PARSED` where orjson refuses it), which the judge then takes
    instead of a second parse. orjson first (a 44 KiB health.json: 0.11 ms against json's 0.26);
    json's parser for what orjson refuses (NaN, Infinity, too deep)."""
    try:
        return True, orjson.loads(out)
    except orjson.JSONDecodeError:
        pass
    try:
        json.loads(out)
    except RecursionError:
        return True, NOT_PARSED
    except ValueError:
        return False, NOT_PARSED
    return True, NOT_PARSED


_FAMILIES = {"any": socket.AF_UNSPEC, "inet": socket.AF_INET, "inet6": socket.AF_INET6}


def _tcp_connect(
    name: str, hop: Hop, opts: SSHOptions, deadline: float, attempt: Attempt
) -> socket.socket:
    try:
        infos = socket.getaddrinfo(
            hop.address, hop.port, _FAMILIES.get(hop.family, 0), socket.SOCK_STREAM
        )
    except socket.gaierror as exc:
        raise HostFailure(
            "dns",
            (
                f"{name}: cannot resolve '{hop.address}' ({exc.strerror}); fix the name or set "
                "ansible_host to its address in the inventory"
            ),
        ) from None
    last: OSError | None = None
    for family, kind, proto, _, addr in infos:
        sock = socket.socket(family, kind, proto)
        attempt.add(sock)
        sock.settimeout(
            max(0.05, min(hop.connect_timeout or opts.connect_timeout, deadline - time.monotonic()))
        )
        try:
            if hop.bind_address:
                sock.bind((hop.bind_address, 0))
            sock.connect(addr)
        except OSError as exc:
            last = exc
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1 if hop.tcp_keepalive else 0)
        sock.settimeout(None)
        return sock
    assert last is not None
    raise last


def _open_tunnel(name: str, client: paramiko.SSHClient, hop: Hop, deadline: float):
    """A direct-tcpip channel of the previous hop to the next (OpenSSH's ProxyJump)."""
    try:
        return client.get_transport().open_channel(
            "direct-tcpip",
            (hop.address, hop.port),
            ("127.0.0.1", 0),
            timeout=max(0.1, deadline - time.monotonic()),
        )
    except paramiko.ChannelException as exc:
        raise HostFailure(
            "refused",
            (
                f"{name}: the jump host could not reach {hop.address}:{hop.port} ({exc.text}); "
                "check the ProxyJump setting and that the jump host allows TCP forwarding"
            ),
        ) from None


# --- host keys refused ----------------------------------------------------------------------------


def _unknown_key(
    name: str, hop: Hop, client: paramiko.SSHClient, keys: HostKeyStore
) -> HostFailure:
    transport = client.get_transport()
    key = transport.get_remote_server_key() if transport else None
    seen = f" (its {key.get_name()} key is {key.fingerprint})" if key is not None else ""
    port = f" -p {hop.port}" if hop.port != 22 else ""
    files = ", ".join(str(p) for p in keys.paths) or "no known_hosts file"
    return HostFailure(
        "host_key_unknown",
        (
            f"{name}: the host key of {hop.key_alias}{seen} is not in {files}; check it and add "
            f"it: ssh-keyscan -H{port} {shlex.quote(hop.address)} >> ~/.ssh/known_hosts, or sweep "
            "with --accept-new-host-keys"
        ),
    )


def _changed_key(
    name: str, hop: Hop, key_name: str, exc: paramiko.BadHostKeyException, keys: HostKeyStore
) -> HostFailure:
    _, path = keys.known(key_name)
    where = str(path) if path else "known_hosts"
    return HostFailure(
        "host_key_changed",
        (
            f"{name}: HOST KEY CHANGED for {key_name}: it offers {exc.key.get_name()} "
            f"{exc.key.fingerprint}, but {where} records {exc.expected_key.fingerprint}; someone "
            "may be intercepting the connection (man-in-the-middle), or the host was "
            "reinstalled; if you know the change is expected, remove the old key with: "
            f"ssh-keygen -R {shlex.quote(key_name)} -f {shlex.quote(where)}"
        ),
    )
