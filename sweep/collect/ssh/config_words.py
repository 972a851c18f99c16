"""The words of ssh_config as OpenSSH reads them: a line split into its words, ``${NAME}`` and
%-token expansion, ``Host`` and ``Match`` patterns (match.c, byte by byte, ASCII case folding only),
and the host name as ssh canonicalises it; `openssh_config` reads the files with them."""

from __future__ import annotations

import functools
import os
import re
import shlex

from sweep.collect.ssh.config_grammar import COMMANDS, command_value, parse_line
from sweep.errors import SSHConfigError


def canonical_host(name: str, family: str = "any") -> str:
    """ssh.c's treatment of the host name after the config: is_addr() names are canonicalised by
    getaddrinfo/getnameinfo (numeric only, no lookup) and left as they are when that fails (a name
    holding ':' or '%', or only digits and dots, counts as an address); other names lower-cased."""
    fast = "%" in name or ":" in name or all(ch in "0123456789." for ch in name)
    canonical = _numeric_address(name, family)
    if canonical is not None:  # resolve_canonicalize keeps the name when only its case differs
        return name if ascii_lower(canonical) == ascii_lower(name) else canonical
    return name if fast else ascii_lower(name)


@functools.lru_cache(maxsize=4096)
def _numeric_address(name: str, family: str) -> str | None:
    import socket

    families = {"inet": socket.AF_INET, "inet6": socket.AF_INET6}
    try:
        found = socket.getaddrinfo(
            name,
            "22",
            families.get(family, socket.AF_UNSPEC),
            socket.SOCK_STREAM,
            0,
            socket.AI_NUMERICHOST | socket.AI_NUMERICSERV,
        )
        if len(found) != 1:
            return None
        return socket.getnameinfo(found[0][4], socket.NI_NUMERICHOST | socket.NI_NUMERICSERV)[0]
    except (OSError, UnicodeError, ValueError):
        return None


def split_line(line: str) -> list[str]:
    """A line's words as OpenSSH splits them (`config_grammar`): the keyword, then argv_split's
    words, or the rest of the line, whole, for a command keyword (ProxyCommand, ...)."""
    try:
        parsed = parse_line(line)
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    if parsed is None:
        raise ValueError("no keyword")
    if parsed.keyword.lower() in COMMANDS:
        return [parsed.keyword, command_value(parsed.rest)]
    return [parsed.keyword, *parsed.args]


def dollar_expand(text: str, keyword: str, where: str) -> str:
    """misc.c's ``${NAME}`` expansion (before the %-tokens) of the keywords ssh gives it
    (IdentityFile, CertificateFile, UserKnownHostsFile, ControlPath, IdentityAgent, the forwardings'
    socket paths): a variable this environment does not set makes ssh refuse the host, so
    SSHConfigError says which."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("${", i):
            end = text.find("}", i + 2)
            name = text[i + 2 : end] if end > i + 2 else ""
            if not name or os.environ.get(name) is None:
                raise SSHConfigError(
                    f"{keyword} uses ${{{name}}}, which has no value in this environment (ssh "
                    "refuses the host too); set it, or write the path out",
                    where,
                )
            out.append(os.environ[name])
            i = end + 1
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def expand(
    text: str, tokens: dict[str, str], keyword: str, where: str, *, shell: bool = False
) -> str:
    """OpenSSH's percent_expand: every %x must be one of `tokens` (or %%), else SSHConfigError.

    With `shell` (a ProxyCommand, a Match exec line: text the shell runs) each token's value is
    quoted with shlex.quote, so that no value carries shell syntax into the command; a value of
    plain name characters (every valid host name and address) is left as it is, as OpenSSH writes
    it.
    """
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        key = text[i + 1 : i + 2]
        if key == "%":
            out.append("%")
        elif key in tokens:
            out.append(shlex.quote(tokens[key]) if shell else tokens[key])
        else:
            allowed = ", ".join(f"%{k}" for k in ("%", *tokens))
            raise SSHConfigError(
                f"{keyword} uses the token %{key}, which OpenSSH does not accept there "
                f"(or sweep cannot expand); it accepts {allowed}",
                where,
            )
        i += 2
    return "".join(out)


def tilde(path: str) -> str:
    return os.path.expanduser(path)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_lower(text: str) -> str:
    """OpenSSH's lowercase(): A-Z only (tolower in the C locale); every other character stays as it
    is."""
    return text.translate(_ASCII_LOWER)


@functools.lru_cache(maxsize=4096)
def _pattern(pattern: str) -> re.Pattern:
    raw = pattern.encode("utf-8", "surrogateescape")
    return re.compile(
        b"".join(
            b".*" if byte == 42 else b"." if byte == 63 else re.escape(bytes((byte,)))
            for byte in raw
        ),
        re.DOTALL,
    )


def match_pattern(name: str, pattern: str) -> bool:
    """match.c's match_pattern: ``*`` any bytes, ``?`` one byte, every other byte itself (``[``
    too)."""
    return _pattern(pattern).fullmatch(name.encode("utf-8", "surrogateescape")) is not None


def pattern_list_match(name: str, patterns: str, *, fold: bool = False) -> bool:
    """OpenSSH's match_pattern_list: comma-separated, ``!`` negates and vetoes; case-sensitive
    unless `fold` (ASCII case folded on both sides, as match_hostname does)."""
    if fold:
        name, patterns = ascii_lower(name), ascii_lower(patterns)
    result = False
    for pattern in patterns.split(","):
        negated = pattern.startswith("!")
        if negated:
            pattern = pattern[1:]
        if match_pattern(name, pattern):
            if negated:
                return False
            result = True
    return result
