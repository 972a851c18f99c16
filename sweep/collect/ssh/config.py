"""Which hops reach an inventory host, from the inventory and ssh_config as OpenSSH would read them.

The inventory's ``ansible_port``, ``ansible_user`` and ``ansible_ssh_private_key_file`` stand where
Ansible puts them on ssh's command line (``-o Port=``, ``-o User=``, ``-o IdentityFile=``), then
``ansible_ssh_common_args`` and ``ansible_ssh_extra_args``; all of them come before the config file,
so they win (OpenSSH keeps a keyword's first value). ProxyJump is followed as OpenSSH follows it:
``-J a,b`` reaches ``b`` through ``a``, and the first hop's own ProxyJump or ProxyCommand applies.

`SSHConfigFile.check(host)` reads everything that applies to a host and each of its hops, before
any host is contacted: what ssh itself refuses is `SSHSettingRefused`; what only OpenSSH's ssh
does (`policy.KEYWORDS`: a cipher list, an agent socket, GSSAPI, ...) is `NeedsOpenSSH`, which the
default transport answers by sending that host through ssh and ``--transport paramiko`` refuses;
what sweep leaves unused (ForwardAgent, ControlMaster, ...) is kept in `notes`, said once per run.
"""

from __future__ import annotations

import os
import shlex
import threading
from dataclasses import dataclass, replace
from typing import Any

from sweep.collect.ssh.config_words import dollar_expand, expand, pattern_list_match, tilde
from sweep.collect.ssh.openssh_config import (
    ConfigReader,
    Resolved,
    Setting,
    SSHArgsError,
    SSHConfigRejected,
    command_line,
    local_tokens,
)
from sweep.collect.ssh.policy import KEYWORDS, check, seconds
from sweep.errors import SSHConfigError
from sweep.inventory.names import RULE_FIX, RULE_WHY, hostname_problem, ruser_problem

MAX_JUMPS = 8
# and the files, in _hop; the forwardings: config_grammar
DOLLAR_EXPANDED = {"controlpath", "identityagent"}
FIX = (
    "drop it for these hosts, or sweep without --transport paramiko (the host then goes through "
    "OpenSSH's ssh); docs/ssh.md lists what sweep's own transport honours"
)


class SSHSettingRefused(SSHConfigError):
    """An ssh setting, config line or argument a host's connection cannot honour; the message names
    the host."""


class NeedsOpenSSH(SSHSettingRefused):
    """A host whose ssh settings ask for what only OpenSSH's ssh does; `why` says which setting,
    where."""

    def __init__(self, message: str, where: str | None, why: str):
        super().__init__(message, where)
        self.why = why


@dataclass(frozen=True)
class Hop:
    """One SSH endpoint: where to connect, as whom, with which keys, under which known_hosts
    name."""

    address: str
    port: int
    user: str
    key_files: tuple[str, ...]
    key_alias: str
    # where each of key_files was set (file:line, or the inventory variable)
    key_sources: tuple[str, ...] = ()
    cert_files: tuple[str, ...] = ()
    # tokens expanded; run by the shell as the connection (first hop only)
    proxy_command: str | None = None
    agent: bool = True  # IdentityAgent none / IdentitiesOnly yes: no agent keys
    known_hosts: tuple[str, ...] = ()  # UserKnownHostsFile, expanded; () = the run's default
    accept_new: bool = False  # StrictHostKeyChecking accept-new
    connect_timeout: float | None = None
    compression: bool = False
    keepalive_s: int = 0
    bind_address: str | None = None
    family: str = "any"
    tcp_keepalive: bool = True


def _local_user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # no USER and no passwd entry (some containers)
        return "root"


def inventory_settings(host: Any) -> list[Setting]:
    """The host's connection variables and ssh arguments, as the command-line settings they are."""
    where = getattr(host, "ssh_args_where", None) or {}
    out = []
    if host.port:
        out.append(Setting("port", (str(host.port),), f"{host.name}: ansible_port", "ansible_port"))
    if host.key_file:
        var, at = (getattr(host, "origins", None) or {}).get("key_file") or (
            "ansible_ssh_private_key_file",
            "",
        )
        out.append(
            Setting(
                "identityfile",
                (host.key_file,),
                f"{host.name}: {var}" + (f" at {at}" if at else ""),
                "ansible_ssh_private_key_file",
            )
        )
    if host.user:
        out.append(Setting("user", (host.user,), f"{host.name}: ansible_user", "ansible_user"))
    for var, text in (
        ("ansible_ssh_common_args", host.ssh_common_args),
        ("ansible_ssh_extra_args", getattr(host, "ssh_extra_args", None)),
    ):
        origin = where.get(var) or "the inventory"
        try:
            out += [replace(s, spelled=f"{var} {s.spelled}") for s in command_line(text, origin)]
        except SSHArgsError as exc:
            raise SSHSettingRefused(f"{host.name}: {var} {exc}", origin) from None
    return out


class SSHConfigFile:
    """An ssh_config file (``~/.ssh/config`` by default) read as OpenSSH reads it; absent: nothing
    applies.

    Routes are worked out once per host (Match exec runs once) and kept for the sweep.
    """

    def __init__(self, path: str | None, *, local_user: str | None = None):
        full = tilde(path) if path else None
        self.path = full if full and os.path.isfile(full) else None
        self.local_user = local_user or _local_user()
        self.reader = ConfigReader(self.path, local_user=self.local_user, known=KEYWORDS)
        self._routes: dict[str, list[Hop]] = {}
        self._lock = threading.Lock()
        self.notes: dict[str, tuple[str, str, set[str]]] = {}  # keyword -> (why, where, host names)

    def route(self, host: Any) -> list[Hop]:
        """The hops that reach `host`, first to last (the last is the host itself)."""
        with self._lock:
            found = self._routes.get(host.name)
        if found is None:
            found = self.check(host)
        return found

    def check(self, host: Any) -> list[Hop]:
        """Read and check everything that applies to `host`; SSHSettingRefused names the first
        refusal."""
        try:
            hops = self._chain(host.address, inventory_settings(host), 0, host.name)
        except SSHSettingRefused:
            raise
        except SSHConfigRejected as exc:  # ssh refuses the file too
            raise SSHSettingRefused(
                f"{host.name}: ssh_config {exc.message}",
                exc.where,
                fix="fix that line: ssh refuses the file as it is",
            ) from None
        # what sweep cannot expand or run as ssh would: ssh itself can
        except SSHConfigError as exc:
            raise NeedsOpenSSH(
                f"{host.name}: ssh_config {exc.message}; {FIX}",
                exc.where,
                f"{exc.message} ({exc.where})",
            ) from None
        with self._lock:
            self._routes[host.name] = hops
        return hops

    def _chain(self, name: str, given: list[Setting], depth: int, host_name: str) -> list[Hop]:
        if depth > MAX_JUMPS:
            raise SSHSettingRefused(
                f"{host_name}: ProxyJump goes more than {MAX_JUMPS} hops deep (a loop?)",
                self.path or "the inventory",
            )
        resolved = self.reader.resolve(name, given)
        ignore = (resolved.get("ignoreunknown") or "").lower()
        needs: NeedsOpenSSH | None = None
        for setting in resolved.settings:
            if setting.keyword not in KEYWORDS:
                if ignore and pattern_list_match(setting.keyword, ignore):
                    continue  # OpenSSH skips an unknown keyword that IgnoreUnknown names
                raise SSHSettingRefused(
                    f"{host_name}: {setting.name} is not an ssh_config keyword OpenSSH 9.2 "
                    "knows (ssh refuses it too)",
                    setting.where,
                )
            if setting.keyword in DOLLAR_EXPANDED and setting.value.lower() != "none":
                # ssh expands ${NAME} in these before it connects, and refuses the host without NAME
                try:
                    dollar_expand(setting.value, setting.name, setting.where)
                except SSHConfigError as exc:
                    raise SSHSettingRefused(f"{host_name}: {exc.message}", exc.where) from None
            # every setting's note; then the first need, raised
            found = self._needs_openssh(setting, host_name)
            needs = needs or found
        if needs is not None:
            raise needs
        hop = self._hop(resolved)
        jump = resolved.first("proxyjump")
        if jump is None or jump.value.lower() == "none":
            return [hop]
        specs = [s.strip() for s in jump.value.split(",") if s.strip()]
        last_name, port, user = parse_jump(specs[-1], jump.where, host_name)
        _check_jump(jump, last_name, user, host_name)
        if (
            last_name.lower() == name.lower()
            and int(port or resolved.port) == resolved.port
            and (user or self.local_user) == resolved.user(self.local_user)
        ):
            raise SSHSettingRefused(
                f"{host_name}: ProxyJump {jump.value} makes {name} jump via itself (OpenSSH: "
                "jumphost loop); fix the ProxyJump for this host",
                jump.where,
            )
        via = [
            Setting(key, (value,), jump.where, key)
            for key, value in (("port", port), ("user", user))
            if value
        ]
        if len(specs) > 1:
            via.append(Setting("proxyjump", (",".join(specs[:-1]),), jump.where, "ProxyJump"))
        return [*self._chain(last_name, via, depth + 1, host_name), hop]

    def _needs_openssh(self, setting: Setting, host_name: str) -> NeedsOpenSSH | None:
        """A note kept for the run, or what sends the host through ssh (None: honoured)."""
        finding = check(setting)
        if finding is None:
            return None
        if finding.kind == "openssh":
            return NeedsOpenSSH(
                f"{host_name}: {finding.why}; {FIX}",
                setting.where,
                f"{finding.why} ({setting.where})",
            )
        with self._lock:
            why, where, hosts = self.notes.setdefault(
                setting.keyword, (finding.why, setting.where, set())
            )
            hosts.add(host_name)
        return None

    def _hop(self, resolved: Resolved) -> Hop:
        user = resolved.user(self.local_user)
        tokens = local_tokens(resolved, user, self.local_user)

        def files(keyword: str) -> tuple[str, ...]:
            return tuple(
                tilde(expand(dollar_expand(s.value, s.name, s.where), tokens, s.name, s.where))
                for s in resolved.all(keyword)
                if s.value.lower() != "none"
            )

        sources = tuple(s.where for s in resolved.all("identityfile") if s.value.lower() != "none")

        proxy = resolved.first("proxycommand")
        command = None
        if proxy is not None and proxy.value.lower() != "none":
            command = expand(
                proxy.value,
                {
                    "h": resolved.hostname,
                    "p": str(resolved.port),
                    "r": user,
                    "n": resolved.original,
                },
                "ProxyCommand",
                proxy.where,
                shell=True,
            )
        known_files = user_known_hosts(resolved.first("userknownhostsfile"), tokens)
        agent = (resolved.get("identityagent") or "").lower() != "none" and (
            resolved.get("identitiesonly") or "no"
        ).lower() not in ("yes", "true")
        timeout = resolved.get("connecttimeout")
        return Hop(
            address=resolved.hostname,
            port=resolved.port,
            user=user,
            key_files=files("identityfile"),
            key_alias=resolved.host_key_alias or resolved.hostname,
            key_sources=sources,
            cert_files=files("certificatefile"),
            proxy_command=command,
            agent=agent,
            known_hosts=known_files,
            accept_new=(resolved.get("stricthostkeychecking") or "").lower()
            in ("accept-new", "no", "off", "false"),
            connect_timeout=float(seconds(timeout)) if timeout and seconds(timeout) else None,
            compression=_yes(resolved.get("compression")),
            keepalive_s=seconds((resolved.get("serveraliveinterval") or "0").lower()) or 0,
            bind_address=resolved.get("bindaddress"),
            family=(resolved.get("addressfamily") or "any").lower(),
            tcp_keepalive=_yes(resolved.get("tcpkeepalive") or "yes"),
        )


def user_known_hosts(known: Setting | None, tokens: dict[str, str]) -> tuple[str, ...]:
    """The files of a UserKnownHostsFile setting, expanded (() when unset); ``none`` is no file at
    all, as in OpenSSH (never a file called ./none): /dev/null stands for it, so that no key is
    trusted from it."""
    if known is None:
        return ()
    words = shlex.split(known.value)
    if any(word.lower() == "none" for word in words):
        if len(words) > 1:
            raise SSHConfigError(
                f'{known.name} "none" must appear alone (OpenSSH refuses the file)', known.where
            )
        return (os.devnull,)
    return tuple(
        tilde(expand(dollar_expand(f, known.name, known.where), tokens, known.name, known.where))
        for f in words
    )


def _check_jump(jump: Setting, name: str, user: str | None, host_name: str) -> None:
    """A jump host and user as OpenSSH's valid_hostname and valid_ruser accept them: they become the
    %h and %r of that hop's ProxyCommand and Match exec lines."""
    for kind, value, problem in (
        ("host", name, hostname_problem(name)),
        ("user", user, ruser_problem(user) if user else None),
    ):
        if problem is not None:
            raise SSHSettingRefused(
                f"{host_name}: {jump.name} {jump.value!r}: the jump {kind} {value!r} {problem}: "
                f"OpenSSH refuses it (valid_{'hostname' if kind == 'host' else 'ruser'}, "
                f"{RULE_WHY}); {RULE_FIX}",
                jump.where,
            )


def _yes(value: str | None) -> bool:
    return (value or "").lower() in ("yes", "true", "on")


def parse_jump(
    spec: str, where: str = "", host_name: str = ""
) -> tuple[str, str | None, str | None]:
    """``[user@]host[:port]`` (or ``ssh://user@host:port``) of one ProxyJump entry: (host, port,
    user)."""
    spec = spec.strip()
    if spec.startswith("ssh://"):
        spec = spec[len("ssh://") :]
    user, _, rest = spec.rpartition("@")
    port = None
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        port = tail[1:] if tail.startswith(":") else None
    elif rest.count(":") == 1:
        host, _, port = rest.partition(":")
    else:
        host = rest
    if port is not None and not port.isdigit():
        raise SSHSettingRefused(
            f"{host_name}: ProxyJump {spec!r} has a port that is not a number; fix the port", where
        )
    return host, port, user or None
