"""ssh_config read as OpenSSH 9 reads it, for one host at a time, every value with where it came
from.

`resolve()` follows readconf.c: command-line options (``-o``, ``-l``, ``-p``, ``-i``, ``-J``, from
the inventory) first, then the config file; the first value of a keyword wins, except the keywords
that accumulate (IdentityFile, CertificateFile, SendEnv, SetEnv, the forwardings). Patterns are
match.c's ``match_pattern``: ``*`` and ``?`` only (``[`` is a plain character), byte by byte on the
UTF-8 name. ``Host`` patterns match the host as given, case-sensitively; ``Match host`` (the
HostName set so far) and ``Match originalhost`` compare with ASCII case folded, as
``match_hostname`` does (never Python's ``str.lower``, which folds the Kelvin sign to ``k``);
``Include`` is read in place (relative paths under ``~/.ssh``, globs sorted) and cannot change the
enclosing block. Lines are split as ssh splits them (`config_grammar`: ProxyCommand whole, Match by
strdelim); ``Match final`` (anywhere in the file) and CanonicalizeHostname make ssh read the file a
second time, Host lines then matching the final host name, ``Match final``/``canonical`` true; that
name is ssh's (addresses canonicalised, other names lower-cased). A line ssh refuses wherever it
stands is `SSHConfigRejected` for the whole file, with its file:line. The tests hold it to ``ssh
-G``. The words of a line, their expansions and the patterns are `config_words`'.
"""

from __future__ import annotations

import glob
import os
import shlex
import subprocess
from dataclasses import dataclass, field
from typing import Collection
from pathlib import Path

from sweep.collect.ssh.config_grammar import (
    COMMANDS,
    Line,
    command_value,
    parse_line,
    strdelim,
    value_problem,
)
from sweep.collect.ssh.config_words import (
    ascii_lower,
    canonical_host,
    expand,
    match_pattern,
    pattern_list_match,
    split_line,
    tilde,
)
from sweep.errors import SSHConfigError

MAX_INCLUDE_DEPTH = 16
ACCUMULATE = {
    "identityfile",
    "certificatefile",
    "sendenv",
    "setenv",
    "localforward",
    "remoteforward",
    "dynamicforward",
}
STRUCTURE = {"host", "match", "include"}
# readconf.c's old names for keywords, and the keywords it reads and ignores (deprecated,
# unsupported)
ALIASES = {
    "challengeresponseauthentication": "kbdinteractiveauthentication",
    "skeyauthentication": "kbdinteractiveauthentication",
    "tisauthentication": "kbdinteractiveauthentication",
    "pubkeyacceptedkeytypes": "pubkeyacceptedalgorithms",
    "hostbasedkeytypes": "hostbasedacceptedalgorithms",
    "dsaauthentication": "pubkeyauthentication",
    "identityfile2": "identityfile",
    "smartcarddevice": "pkcs11provider",
    "keepalive": "tcpkeepalive",
}
IGNORED_BY_OPENSSH = {
    "protocol",
    "cipher",
    "fallbacktorsh",
    "globalknownhostsfile2",
    "rhostsauthentication",
    "userknownhostsfile2",
    "useroaming",
    "usersh",
    "useprivilegedport",
    "afstokenpassing",
    "kerberosauthentication",
    "kerberostgtpassing",
    "rsaauthentication",
    "rhostsrsaauthentication",
    "compressionlevel",
    "useblacklistedkeys",
}


@dataclass(frozen=True)
class Setting:
    """One keyword's value for a host: the words after the keyword, and the file:line (or inventory
    var)."""

    keyword: str  # lower case
    args: tuple[str, ...]
    where: str
    spelled: str = ""  # as written

    @property
    def value(self) -> str:
        return " ".join(self.args)

    @property
    def name(self) -> str:
        return self.spelled or self.keyword


@dataclass
class Resolved:
    """Everything that applies to one host, in the order OpenSSH met it."""

    original: str
    settings: list[Setting] = field(default_factory=list)
    # ssh's final pass: the host name it was made (Match final, CanonicalizeHostname)
    final_host: str | None = None

    def first(self, keyword: str) -> Setting | None:
        for setting in self.settings:
            if setting.keyword == keyword:
                return setting
        return None

    def get(self, keyword: str, default: str | None = None) -> str | None:
        found = self.first(keyword)
        return found.value if found is not None else default

    def all(self, keyword: str) -> list[Setting]:
        return [s for s in self.settings if s.keyword == keyword]

    @property
    def hostname(self) -> str:
        """The name connected to, as ssh.c makes it after reading the config: an address in its
        canonical form (``FD00::0001`` -> ``fd00::1``), any other name ASCII lower-cased."""
        return canonical_host(self.hostname_so_far, (self.get("addressfamily") or "any").lower())

    @property
    def hostname_so_far(self) -> str:
        """HostName with %h expanded (the host as given without one), before ssh lower-cases it."""
        setting = self.first("hostname")
        if self.final_host is not None:
            return self.final_host
        if setting is None:
            return self.original
        return expand(setting.value, {"h": self.original}, setting.name, setting.where)

    @property
    def host_key_alias(self) -> str | None:
        """HostKeyAlias, ASCII lower-cased as ssh.c lower-cases it (known_hosts hashes the
        lower-case name)."""
        alias = self.get("hostkeyalias")
        return ascii_lower(alias) if alias is not None else None

    @property
    def port(self) -> int:
        setting = self.first("port")
        if setting is None:
            return 22
        if not setting.value.isdigit() or not 0 < int(setting.value) < 65536:
            raise SSHConfigError(
                f"{setting.name} {setting.value} is not a port number (1 to 65535)", setting.where
            )
        return int(setting.value)

    def user(self, local_user: str) -> str:
        return self.get("user") or local_user


class SSHConfigRejected(SSHConfigError):
    """A line OpenSSH refuses wherever it stands: ssh refuses the whole file, for every host, and so
    does sweep."""


@dataclass(frozen=True)
class _Read:
    """One line of a file as ssh reads it: the parsed line, or why ssh refuses it."""

    number: int
    line: Line | None
    problem: str | None = None


class ConfigReader:
    """One ssh_config file (user config rules: relative Includes under ~/.ssh), read per host.

    `known`: the keywords OpenSSH knows (an unknown one, unless IgnoreUnknown names it, makes ssh
    refuse the whole file); None: not checked."""

    def __init__(
        self, path: str | None, *, local_user: str = "root", known: Collection[str] | None = None
    ):
        self.path = tilde(path) if path else None
        self.local_user = local_user
        self.known = frozenset(known) if known is not None else None
        self._lines: dict[str, list[_Read]] = {}  # each file read and split once per sweep

    def resolve(self, host: str, command_line: list[Setting] = ()) -> Resolved:
        """What applies to `host` (as ``ssh ... host``), command-line settings first; then, where
        the file asks for it (``Match final``, CanonicalizeHostname), ssh's second pass over the
        file."""
        resolved = Resolved(original=host)
        seen: set[str] = set()
        for setting in command_line:
            self._take(resolved, setting, seen)
        if self.path and os.path.isfile(self.path):
            state = _Pass(name=host, ignore_unknown=resolved.get("ignoreunknown"))
            self._read(self.path, resolved, seen, state, active=True, depth=0)
            canonicalize = (resolved.get("canonicalizehostname") or "no").lower() not in (
                "no",
                "false",
            )
            # ssh.c sets HostName to the final name, then reads again
            if state.want_final or canonicalize:
                resolved.final_host = resolved.hostname
                seen.add("hostname")
                final = _Pass(
                    name=resolved.hostname, final=True, ignore_unknown=resolved.get("ignoreunknown")
                )
                self._read(self.path, resolved, seen, final, active=True, depth=0)
        return resolved

    @staticmethod
    def _take(resolved: Resolved, setting: Setting, seen: set[str]) -> None:
        key = setting.keyword
        if key in ACCUMULATE:
            # add_identity_file skips repeats
            if key in ("identityfile", "certificatefile") and any(
                s.keyword == key and s.args == setting.args for s in resolved.settings
            ):
                return
            resolved.settings.append(setting)
            return
        # whichever comes first disables the other, but ProxyJump none leaves ProxyCommand open
        if key == "proxyjump" and "proxycommand" in seen:
            return
        if (
            key == "proxycommand"
            and "proxyjump" in seen
            and resolved.get("proxyjump", "").lower() != "none"
        ):
            return
        if key in seen:
            return
        seen.add(key)
        resolved.settings.append(setting)

    def lines(self, path: str) -> list[_Read]:
        """The file's lines as ssh splits them, read once; SSHConfigError when it cannot be read."""
        found = self._lines.get(path)
        if found is None:
            try:
                text = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError as exc:
                raise SSHConfigError(f"cannot be read ({exc.strerror})", path) from None
            found = [
                read
                for read in (_split(number, raw) for number, raw in enumerate(text, 1))
                if read is not None
            ]
            self._lines[path] = found
        return found

    def _read(
        self,
        path: str,
        resolved: Resolved,
        seen: set[str],
        state: "_Pass",
        *,
        active: bool,
        depth: int,
        never: bool = False,
    ) -> None:
        if depth > MAX_INCLUDE_DEPTH:
            raise SSHConfigError(f"Include nested deeper than {MAX_INCLUDE_DEPTH}", path)
        for read in self.lines(path):
            where = f"{path}:{read.number}"
            if read.problem is not None:
                raise SSHConfigRejected(f"{read.problem} (OpenSSH refuses the whole file)", where)
            line = read.line
            key, args = ALIASES.get(line.keyword.lower(), line.keyword.lower()), line.args
            if key in IGNORED_BY_OPENSSH:
                continue  # OpenSSH reads these and does nothing with them
            if self.known is not None and key not in self.known and key not in STRUCTURE:
                ignore = state.ignore_unknown
                if not (ignore and pattern_list_match(key, ignore)):
                    raise SSHConfigRejected(
                        f"{line.keyword} is not an ssh_config keyword OpenSSH 9.2 knows "
                        "(OpenSSH refuses the whole file)",
                        where,
                    )
                continue
            if key == "host":
                active = not never and self._host_matches(state.name, args)
            elif key == "match":
                matched = self._match(resolved, line.rest, where, state)
                active = not never and matched
            elif key == "include":
                for pattern in args:
                    for found in self._include_paths(pattern):
                        self._read(
                            found,
                            resolved,
                            seen,
                            state,
                            active=active,
                            depth=depth + 1,
                            never=never or not active,
                        )
            elif active:
                if key == "ignoreunknown" and state.ignore_unknown is None:
                    state.ignore_unknown = args[0].lower()
                value = (command_value(line.rest),) if key in COMMANDS else args
                self._take(resolved, Setting(key, tuple(value), where, line.keyword), seen)

    @staticmethod
    def _include_paths(pattern: str) -> list[str]:
        path = tilde(pattern)
        if not os.path.isabs(path):
            path = os.path.join(tilde("~/.ssh"), path)
        return sorted(p for p in glob.glob(path) if os.path.isfile(p))

    @staticmethod
    def _host_matches(host: str, patterns: tuple[str, ...]) -> bool:
        result = False
        for pattern in patterns:
            if not pattern or pattern.startswith("#"):
                break
            negated = pattern.startswith("!")
            if match_pattern(host, pattern[1:] if negated else pattern):
                if negated:
                    return False
                result = True
        return result

    def _match(self, resolved: Resolved, rest: str, where: str, state: "_Pass") -> bool:
        """readconf.c's match_cfg_line: criteria split by strdelim, evaluated left to right."""
        result, count, text = True, 0, rest
        while True:
            word, text = strdelim(text)
            if not word:
                break
            if word.startswith("#"):
                break
            negated = word.startswith("!")
            criterion = (word[1:] if negated else word).lower()
            if criterion == "all":
                following, _ = strdelim(text)
                if count > 1 or (following and not following.startswith("#")):
                    raise SSHConfigRejected(
                        f"Match {word} cannot be combined with other Match attributes "
                        "(OpenSSH refuses the whole file)",
                        where,
                    )
                return result and not negated
            count += 1
            if criterion in ("canonical", "final"):
                state.want_final |= criterion == "final" and not negated
                this = state.final
            elif criterion in ("host", "originalhost", "user", "localuser", "exec"):
                arg, text = strdelim(text)
                if not arg or arg.startswith("#"):
                    raise SSHConfigRejected(
                        f"Match {criterion} needs an argument (OpenSSH refuses the whole file)",
                        where,
                    )
                # ssh runs no exec once an earlier criterion failed
                this = (
                    self._criterion(resolved, criterion, arg, where)
                    if criterion != "exec" or result
                    else False
                )
            else:
                raise SSHConfigRejected(
                    f"Match {criterion} is not a Match criterion OpenSSH 9.2 knows (it reads "
                    "all, canonical, final, exec, host, originalhost, user and localuser); "
                    "OpenSSH refuses the whole file",
                    where,
                )
            if this == negated:
                result = False
        if count == 0:
            raise SSHConfigRejected("Match has no criteria (OpenSSH refuses the whole file)", where)
        return result

    def _criterion(self, resolved: Resolved, criterion: str, arg: str, where: str) -> bool:
        hostname = resolved.hostname_so_far
        user = resolved.user(self.local_user)
        if criterion == "host":  # match_hostname: host names compare with ASCII case folded
            return pattern_list_match(hostname, arg, fold=True)
        if criterion == "originalhost":
            return pattern_list_match(resolved.original, arg, fold=True)
        if criterion == "user":
            return pattern_list_match(user, arg)
        if criterion == "localuser":
            return pattern_list_match(self.local_user, arg)
        tokens = {
            "h": hostname,
            "n": resolved.original,
            "p": str(resolved.port),
            "r": user,
            "u": self.local_user,
            "l": _short_host(),
            "L": _short_host().split(".")[0],
            "d": tilde("~"),
        }
        command = expand(arg, tokens, "Match exec", where, shell=True)
        try:
            done = subprocess.run(
                [os.environ.get("SHELL") or "/bin/sh", "-c", command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SSHConfigError(f"Match exec {command!r} could not run ({exc})", where) from None
        return done.returncode == 0


@dataclass
class _Pass:
    """One pass of ssh over the file: the name Host lines match, whether it is the final pass, and
    what the pass learns (a ``Match final`` asks for a final pass; IgnoreUnknown's patterns)."""

    name: str
    final: bool = False
    want_final: bool = False
    ignore_unknown: str | None = None


def _split(number: int, raw: str) -> _Read | None:
    try:
        line = parse_line(raw)
    except ValueError as exc:
        return _Read(number, None, f"cannot be split into words as OpenSSH splits it ({exc})")
    if line is None:
        return None
    key = ALIASES.get(line.keyword.lower(), line.keyword.lower())
    problem = value_problem(key, line.args)
    return _Read(number, line, None if problem is None else f"{line.keyword} {problem}")


def _short_host() -> str:
    import socket

    return socket.gethostname()


def local_tokens(resolved: Resolved, user: str, local_user: str) -> dict[str, str]:
    """The tokens of IdentityFile, CertificateFile and UserKnownHostsFile (all but %C, %i, %k,
    %T)."""
    return {
        "h": resolved.hostname,
        "n": resolved.original,
        "p": str(resolved.port),
        "r": user,
        "u": local_user,
        "l": _short_host(),
        "L": _short_host().split(".")[0],
        "d": tilde("~"),
    }


# ssh(1)'s flags as the ssh_config settings they stand for (readconf and ssh.c); None: no setting
_FLAG_SETTING = {
    "4": ("addressfamily", "inet"),
    "6": ("addressfamily", "inet6"),
    "A": ("forwardagent", "yes"),
    "a": ("forwardagent", "no"),
    "C": ("compression", "yes"),
    "f": ("forkafterauthentication", "yes"),
    "g": ("gatewayports", "yes"),
    "K": ("gssapiauthentication", "yes"),
    "k": ("gssapidelegatecredentials", "no"),
    "M": ("controlmaster", "yes"),
    "N": ("sessiontype", "none"),
    "n": ("stdinnull", "yes"),
    "q": ("loglevel", "quiet"),
    "s": ("sessiontype", "subsystem"),
    "T": ("requesttty", "no"),
    "t": ("requesttty", "yes"),
    "v": ("loglevel", "verbose"),
    "X": ("forwardx11", "yes"),
    "x": ("forwardx11", "no"),
    "Y": ("forwardx11", "yes"),
    "y": ("syslogfacility", "user"),
}
_FLAG_WITH_ARG = {
    "b": "bindaddress",
    "B": "bindinterface",
    "c": "ciphers",
    "D": "dynamicforward",
    "e": "escapechar",
    "I": "pkcs11provider",
    "i": "identityfile",
    "J": "proxyjump",
    "L": "localforward",
    "l": "user",
    "m": "macs",
    "p": "port",
    "R": "remoteforward",
    "S": "controlpath",
    "w": "tunnel",
    "E": None,
    "F": None,
    "O": None,
    "P": None,
    "Q": None,
    "W": None,
    "o": "",
}
_FLAG_REFUSED = {
    "E": "a log file",
    "F": "another config file per host",
    "O": "a control command",
    "P": "a tag",
    "Q": "a query",
    "W": "stdio forwarding",
    "G": "printing the config",
    "V": "printing the version",
}


class SSHArgsError(SSHConfigError):
    """An ssh(1) argument list sweep cannot turn into settings; the text says which word."""


def command_line(text: str | None, where: str) -> list[Setting]:
    """The settings an ``ansible_ssh_common_args`` / ``_extra_args`` string stands for, in order.

    ``-o Key=Value`` and the flags (``-J``, ``-i``, ``-C``, ...) become Settings; a flag that is
    no setting at all (``-F``, ``-W``, ``-E``) is an SSHArgsError.
    """
    if not text:
        return []
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise SSHArgsError(f"cannot be split into words ({exc}); close the quote") from None
    out: list[Setting] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-") or len(word) < 2:
            raise SSHArgsError(
                f"holds {word!r}, which is not an ssh option; sweep adds the host and command "
                "itself"
            )
        j = 1
        while j < len(word):
            flag = word[j]
            j += 1
            if flag in _FLAG_SETTING:
                key, value = _FLAG_SETTING[flag]
                out.append(Setting(key, (value,), where, f"-{flag}"))
                continue
            if flag not in _FLAG_WITH_ARG and flag not in _FLAG_REFUSED:
                raise SSHArgsError(f"holds -{flag}, which ssh(1) does not know")
            if flag in _FLAG_REFUSED:
                raise SSHArgsError(
                    f"holds -{flag} ({_FLAG_REFUSED[flag]}), which sweep does not pass on: it sets "
                    "up the session itself; remove it (an ssh_config file goes in ~/.ssh/config)"
                )
            arg = word[j:]
            if not arg:
                if i >= len(words):
                    raise SSHArgsError(f"ends with -{flag}, which needs a value")
                arg = words[i]
                i += 1
            j = len(word)
            key = _FLAG_WITH_ARG[flag]
            if key == "":  # -o
                out.append(_option(arg, where))
            else:
                out.append(Setting(key, (arg,), where, f"-{flag}"))
    return out


def _option(text: str, where: str) -> Setting:
    try:
        words = split_line(text)
    except ValueError:
        raise SSHArgsError(f"holds -o {text!r}, which is not Keyword=value") from None
    if len(words) < 2:
        raise SSHArgsError(f"holds -o {text!r} without a value")
    key = ALIASES.get(words[0].lower(), words[0].lower())
    if key in STRUCTURE:
        raise SSHArgsError(f"holds -o {words[0]}, which OpenSSH does not take on the command line")
    return Setting(key, tuple(words[1:]), where, f"-o {words[0]}")
