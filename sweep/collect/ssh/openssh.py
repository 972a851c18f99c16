"""``--transport openssh``: the same prober (deadline, retries, failure classes, records) driving
ssh(1).

Each attempt is one ``ssh`` process in BatchMode, in a session of its own, killed (with its
ProxyCommand and ``ssh -W`` children) by the watchdog at the host's deadline. OpenSSH reads the
operator's ssh_config itself, so GSSAPI, smart cards, FIDO keys and every other keyword that decides
how the host is reached work unchanged; what only an interactive session wants (agent and X11
forwarding, forwardings, ControlMaster, a RemoteCommand) is overridden on the command line
(`PROBE_OPTIONS`), as sweep's own transport leaves it unused. Host keys are checked as strictly as
by sweep's own transport: ``StrictHostKeyChecking=yes`` (``accept-new`` only with
``--accept-new-host-keys`` or the config's own ``accept-new``, or its ``no``, taken as
``accept-new``) against the run's known_hosts files first; no global file, no KnownHostsCommand, no
key rewriting. curve25519 is put first unless the config or the inventory chooses KexAlgorithms.
"""

from __future__ import annotations

import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from typing import Any

from sweep.collect.bundle import become_user, host_agent_args, remote_command
from sweep.collect.ssh.certs import Certificate, CertificateError, agent_certificates, read_file
from sweep.collect.ssh.config import SSHSettingRefused, inventory_settings, user_known_hosts
from sweep.errors import SSHConfigError
from sweep.collect.ssh.config_words import dollar_expand, expand, tilde
from sweep.collect.ssh.openssh_config import (
    ConfigReader,
    Resolved,
    SSHConfigRejected,
    local_tokens,
)
from sweep.collect.ssh.policy import KEYWORDS
from sweep.collect.outcome import read_agent_output
from sweep.collect.ssh.prober import HostFailure, Prober, SSHOptions
from sweep.collect.ssh.watchdog import Attempt
from sweep.text import visible

SSH = os.environ.get("SWEEP_SSH", "ssh")
# on ssh's command line (which wins over the config): the probe runs its agent, forwards nothing,
# shares no connection and leaves nothing running, whatever the config asks (docs/ssh.md: "left
# unused")
PROBE_OPTIONS = (
    "RemoteCommand=none",
    "SessionType=default",
    "StdinNull=no",
    "ForkAfterAuthentication=no",
    "ForwardAgent=no",
    "ForwardX11=no",
    "ClearAllForwardings=yes",
    "PermitLocalCommand=no",
    "Tunnel=no",
    "ControlMaster=no",
    "ControlPath=none",
    "ControlPersist=no",
)
_RELAXED = ("no", "off", "false")  # StrictHostKeyChecking values taken as accept-new
PREFER_KEX = "^curve25519-sha256,curve25519-sha256@libssh.org"
_CHUNK = 65536


class ProcessCloser:
    """An ssh process group, shut by the watchdog like a socket."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _local_user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:
        return "root"


class OpenSSHProber(Prober):
    """A Prober whose attempts run the system ``ssh`` binary."""

    def __init__(self, payload: bytes, agent_args=(), options: SSHOptions = SSHOptions(), **kwargs):
        super().__init__(payload, agent_args, options, **kwargs)
        self.ssh = shutil.which(SSH) or SSH
        self.config_path = tilde(options.ssh_config) if options.ssh_config else None
        if self.config_path and not os.path.isfile(self.config_path):
            self.config_path = None
        self.reader = ConfigReader(self.config_path, local_user=_local_user(), known=KEYWORDS)
        self.run_config = self._write_run_config(options)
        self._resolved: dict[str, Resolved | None] = {}

    def _resolve(self, host: Any) -> Resolved | None:
        """What sweep's reader makes of the host's settings (once per sweep: Match exec runs once);
        None where it does not follow the config, which ssh then reads alone."""
        if host.name not in self._resolved:
            # SSHSettingRefused: the inventory's own args are refused
            settings = inventory_settings(host)
            try:
                found = self.reader.resolve(host.address, settings)
            # ssh refuses the whole file: said before any host is contacted
            except SSHConfigRejected as exc:
                raise SSHSettingRefused(
                    f"{host.name}: ssh_config {exc.message}",
                    exc.where,
                    fix="fix that line: ssh refuses the file as it is",
                ) from None
            except SSHConfigError:
                found = None
            self._resolved[host.name] = found
        return self._resolved[host.name]

    def _write_run_config(self, options: SSHOptions) -> str:
        """The file given to ssh with -F: sweep's strict settings first, so that they hold for every
        hop (ssh hands -F, not -o, to the ssh it runs for a ProxyJump), then the operator's config,
        then curve25519 first where nothing chose the key exchange."""
        folder = tempfile.mkdtemp(prefix="sweep-openssh-")
        weakref.finalize(self, shutil.rmtree, folder, True)
        strict = "accept-new" if options.accept_new_host_keys else "yes"
        known = " ".join(_quote(tilde(p)) for p in options.known_hosts)
        lines = [
            "# written by sweep for one run (--transport openssh)",
            "BatchMode yes",
            f"StrictHostKeyChecking {strict}",
            f"UserKnownHostsFile {known}",
            "GlobalKnownHostsFile none",
            "KnownHostsCommand none",
            "UpdateHostKeys no",
            "VerifyHostKeyDNS no",
            "HashKnownHosts yes",
            "LogLevel ERROR",
        ]
        if not options.allow_agent:
            lines.append("IdentityAgent none")
        if self.config_path:
            lines.append(f"Include {_quote(os.path.abspath(self.config_path))}")
        lines += ["Host *", f"  KexAlgorithms {PREFER_KEX}"]
        path = os.path.join(folder, "ssh_config")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as fh:
            fh.write("\n".join(lines) + "\n")
        return path

    def check(self, host: Any) -> None:
        """Refuse what would break the sweep even through OpenSSH: ssh arguments that are not
        settings (``-W``, ``-F``, a host name), a config file ssh itself refuses."""
        self._resolve(host)

    def argv(self, host: Any, opts: SSHOptions, deadline: float | None = None) -> list[str]:
        """The ssh command line for one host (the remote command last)."""
        strict = "accept-new" if opts.accept_new_host_keys else "yes"
        configured: list[str] = []
        resolved = self._resolve(host)
        if resolved is not None:
            if (resolved.get("stricthostkeychecking") or "").lower() in ("accept-new", *_RELAXED):
                strict = "accept-new"
            tokens = local_tokens(resolved, resolved.user(_local_user()), _local_user())
            configured = list(user_known_hosts(resolved.first("userknownhostsfile"), tokens))
        known = [tilde(p) for p in [*opts.known_hosts[:-1], *(configured or opts.known_hosts[-1:])]]
        argv = [
            self.ssh,
            "-F",
            self.run_config,
            "-T",
            "-o",
            f"StrictHostKeyChecking={strict}",
            "-o",
            "UserKnownHostsFile=" + " ".join(_quote(p) for p in known),
            "-o",
            "ConnectionAttempts=1",
            "-o",
            f"ConnectTimeout={max(1, int(opts.connect_timeout + 0.999))}",
        ]
        for option in PROBE_OPTIONS:
            argv += ["-o", option]
        if host.port:
            argv += ["-p", str(host.port)]
        if host.user:
            argv += ["-l", host.user]
        if host.key_file:
            argv += ["-i", host.key_file]
        argv += shlex.split(getattr(host, "ssh_common_args", None) or "")
        argv += shlex.split(getattr(host, "ssh_extra_args", None) or "")
        # as the paramiko transport: the agent (and a become guard) ends itself at this host's
        # deadline
        lifetime = None if deadline is None else max(1.0, deadline - time.monotonic())
        command = remote_command(
            host.python,
            len(self.payload),
            host_agent_args(host, self.agent_args),
            lifetime=lifetime,
            become_user=become_user(host),
        )
        return [*argv, "--", host.address, command]

    def _attempt(
        self, host: Any, opts: SSHOptions, deadline: float
    ) -> tuple[dict, int | None, str]:
        attempt = Attempt()
        token = self.watchdog.watch(deadline, attempt)
        try:
            proc = subprocess.Popen(
                self.argv(host, opts, deadline),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            self.watchdog.unwatch(token)
            raise HostFailure(
                "refused",
                f"{host.name}: cannot run {self.ssh} ({exc.strerror}); install "
                "openssh-client or sweep with --transport paramiko",
            ) from None
        attempt.add(ProcessCloser(proc))
        try:
            out, err, err_total = self._exchange(host, proc, opts)
            exit_status = proc.wait()
        finally:
            self.watchdog.unwatch(token)
            ProcessCloser(proc).kill()  # a ProxyCommand left behind dies with the attempt
            proc.wait()
            attempt.close()
        stderr = err.decode("utf-8", "replace")
        if err_total > len(err):
            stderr = f"[first {err_total - len(err)} bytes of stderr cut]\n" + stderr
        if attempt.aborted:
            raise self._aborted(host, attempt.aborted, opts, bool(out))
        if exit_status == 255:
            resolved = self._resolve(host)
            user = host.user or (
                resolved.user(_local_user()) if resolved is not None else _local_user()
            )
            denied = "Permission denied" in stderr
            reasons = (
                certificate_reasons(offered_certificates(resolved, host, opts.allow_agent), user)
                if denied
                else ""
            )
            raise classify_ssh_error(
                host, stderr, opts, reasons, identity_files(resolved, host) if denied else ""
            )
        try:
            answer = read_agent_output(
                host, bytes(out), exit_status, stderr, host_deadline=opts.host_deadline
            )
            return answer, exit_status, stderr
        except HostFailure as failure:
            failure.exit_status, failure.stderr = exit_status, stderr
            raise

    def _exchange(
        self, host: Any, proc: subprocess.Popen, opts: SSHOptions
    ) -> tuple[bytearray, bytearray, int]:
        def feed() -> None:
            try:
                proc.stdin.write(self.payload)
                proc.stdin.close()
            except OSError:
                pass  # the remote command ended without reading stdin: its exit status tells why

        threading.Thread(target=feed, name="sweep-openssh-stdin", daemon=True).start()
        out, err, err_total = bytearray(), bytearray(), 0
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ, "out")
            sel.register(proc.stderr, selectors.EVENT_READ, "err")
            while sel.get_map():
                for key, _ in sel.select():
                    data = os.read(key.fileobj.fileno(), _CHUNK)
                    if not data:
                        sel.unregister(key.fileobj)
                    elif key.data == "err":
                        err_total += len(data)
                        err += data
                        del err[: -opts.stderr_limit]
                    else:
                        out += data
                        if len(out) > opts.output_limit:
                            ProcessCloser(proc).kill()
                            raise HostFailure(
                                "output_too_large",
                                (
                                    f"{host.name}: the agent wrote more than "
                                    f"{opts.output_limit // (1024 * 1024)} MiB on stdout; the "
                                    "output was cut off and dropped; check what the host's "
                                    "python3 runs at start (sitecustomize, PYTHONSTARTUP) or "
                                    "raise the output limit"
                                ),
                            )
        return out, err, err_total

    @staticmethod
    def _aborted(host: Any, reason: str, opts: SSHOptions, started_output: bool) -> HostFailure:
        if reason == "interrupted":
            return HostFailure("interrupted", f"{host.name}: interrupted")
        return HostFailure(
            "timeout",
            (
                f"{host.name}: no answer within the host deadline of {opts.host_deadline:g} s "
                "(ssh was killed "
                f"{'while the agent ran' if started_output else 'before the agent answered'}); "
                "check the host, or raise --host-deadline (sweep_host_deadline)"
            ),
        )


def _quote(path: str) -> str:
    return f'"{path}"' if " " in path else path


# ssh(1)'s own words (exit 255) -> failure class, transient, what to say
_SSH_ERRORS = (
    (
        r"Could not resolve hostname (\S+?):",
        "dns",
        False,
        "cannot resolve the host name; fix the name or set ansible_host",
    ),
    (
        r"REMOTE HOST IDENTIFICATION HAS CHANGED",
        "host_key_changed",
        False,
        "HOST KEY CHANGED: someone may be intercepting the connection (man-in-the-middle), or "
        "the host was reinstalled; if the change is expected, remove the old key with ssh-keygen "
        "-R",
    ),
    (
        r"No \S+ host key is known for|Host key verification failed",
        "host_key_unknown",
        False,
        "the host key is not in the run's known_hosts; check it and add it (ssh-keyscan -H "
        "ADDRESS >> ~/.ssh/known_hosts), or sweep with --accept-new-host-keys",
    ),
    (
        r"Permission denied \(",
        "auth",
        False,
        "check ansible_user and ansible_ssh_private_key_file, and that the key is in the host's "
        "authorized_keys",
    ),
    (
        r"Connection refused",
        "refused",
        False,
        "no sshd listens there; check the host is up and the port",
    ),
    (
        r"timed out|Connection timed out during banner exchange",
        "timeout",
        False,
        "check the host is up and reachable, or raise --connect-timeout",
    ),
    (r"No route to host|Network is unreachable", "timeout", False, "check the host is up"),
    (
        r"kex_exchange_identification|Connection closed by|Connection reset by peer",
        "refused",
        True,
        "the host closed the connection during the SSH handshake: its sshd may be overloaded "
        "(MaxStartups)",
    ),
)


def classify_ssh_error(
    host: Any, stderr: str, opts: SSHOptions, certificates: str = "", keys: str = ""
) -> HostFailure:
    """An ssh exit 255 as a failure class, from what ssh wrote on stderr; `certificates` says why
    the certificates offered would be refused, `keys` which key files were set and where (an auth
    failure)."""
    lines = [visible(line.strip(), keep="") for line in stderr.splitlines() if line.strip()]
    for pattern, failure_class, transient, fix in _SSH_ERRORS:
        hit = next((line for line in lines if re.search(pattern, line)), None)
        if hit is not None:
            why = f" ({certificates})" if failure_class == "auth" and certificates else ""
            why += f"; {keys}" if failure_class == "auth" and keys else ""
            return HostFailure(
                failure_class,
                f"{host.name}: ssh: {hit[:300].rstrip('.')}{why}; {fix}",
                transient=transient,
                exit_status=255,
                stderr=stderr,
            )
    last = lines[-1][:300] if lines else "no message"
    return HostFailure(
        "refused",
        f"{host.name}: ssh failed (exit 255: {last}); run the ssh command by hand "
        "with -v to see why",
        exit_status=255,
        stderr=stderr,
    )


def identity_files(resolved: Resolved | None, host: Any) -> str:
    """The key files ssh was given for `host`, each with where it was set (the inventory variable
    and its file:line, the ssh_config line), a missing one as skipped; none: ssh's own default
    files."""
    var, at = (getattr(host, "origins", None) or {}).get("key_file") or (
        "ansible_ssh_private_key_file",
        "",
    )
    keys = (
        [(host.key_file, f"{host.name}: {var}" + (f" at {at}" if at else ""))]
        if host.key_file
        else []
    )
    if resolved is not None:  # it holds the inventory's key file too, where the inventory set it
        keys = []
        tokens = local_tokens(resolved, resolved.user(_local_user()), _local_user())
        try:
            keys += [
                (tilde(expand(s.value, tokens, s.name, s.where)), s.where)
                for s in resolved.all("identityfile")
                if s.value.lower() != "none"
            ]
        except SSHConfigError:
            pass
    if not keys:
        return (
            "keys tried: ssh's default key files (~/.ssh/id_*) and its agent's keys; no key "
            "file was set"
        )
    return "keys tried: " + ", ".join(
        f"{key} ({where}" + ("" if os.path.isfile(key) else ": no such file, skipped") + ")"
        for key, where in keys
    )


def offered_certificates(
    resolved: Resolved | None, host: Any, allow_agent: bool
) -> list[Certificate]:
    """The certificates ssh would offer: beside each identity file, the CertificateFiles, the
    agent's."""
    keys = [host.key_file] if host.key_file else []
    files: list[str] = []
    if resolved is not None:
        tokens = local_tokens(resolved, resolved.user(_local_user()), _local_user())
        try:
            keys += [
                tilde(expand(dollar_expand(s.value, s.name, s.where), tokens, s.name, s.where))
                for s in resolved.all("identityfile")
            ]
            files = [
                tilde(expand(dollar_expand(s.value, s.name, s.where), tokens, s.name, s.where))
                for s in resolved.all("certificatefile")
            ]
        except SSHConfigError:
            pass
    found = []
    for path in dict.fromkeys([*(k + "-cert.pub" for k in keys), *files]):
        try:
            found.append(read_file(path))
        except CertificateError:
            continue
    if allow_agent and os.environ.get("SSH_AUTH_SOCK"):
        found += agent_certificates()
    return found


def certificate_reasons(certs: list[Certificate], user: str) -> str:
    """Why each certificate would be refused for `user`, read from the certificate itself."""
    return "; ".join(
        f"{cert.describe()} {cert.problem(user)}" for cert in certs if cert.problem(user)
    )
