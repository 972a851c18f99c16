"""ssh_config lines split and checked as OpenSSH 9.2's readconf.c splits and checks them.

A line is its keyword (``strdelim``: whitespace, one ``=``, double quotes) and the rest: the words
of the rest are ``argv_split``'s (single and double quotes, ``\\'`` ``\\"`` ``\\\\`` and ``\\ ``
escapes, a ``#`` starting a word ends the line), except for the keywords whose value is a command
(ProxyCommand, LocalCommand, RemoteCommand, KnownHostsCommand: the rest of the line, whole, as ssh
keeps it) and Match (its criteria split by ``strdelim`` again, as ``match_cfg_line`` does).

`value_problem` is what ssh refuses in a line wherever it is, active or not: ssh then refuses the
whole file ("terminating, N bad configuration options"), so sweep does too, naming file:line. The
accepted values were measured with ``ssh -G`` (OpenSSH_9.2p1) for every keyword; the algorithm
names are ``ssh -Q cipher|mac|kex|key-sig|sig`` there.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass

WHITESPACE = " \t\r\n"
COMMANDS = {"proxycommand", "localcommand", "remotecommand", "knownhostscommand"}

CIPHERS = (
    "3des-cbc aes128-cbc aes192-cbc aes256-cbc aes128-ctr aes192-ctr aes256-ctr "
    "aes128-gcm@openssh.com aes256-gcm@openssh.com chacha20-poly1305@openssh.com"
)
MACS = (
    "hmac-sha1 hmac-sha1-96 hmac-sha2-256 hmac-sha2-512 hmac-md5 hmac-md5-96 umac-64@openssh.com "
    "umac-128@openssh.com hmac-sha1-etm@openssh.com hmac-sha1-96-etm@openssh.com "
    "hmac-sha2-256-etm@openssh.com hmac-sha2-512-etm@openssh.com hmac-md5-etm@openssh.com "
    "hmac-md5-96-etm@openssh.com umac-64-etm@openssh.com umac-128-etm@openssh.com"
)
KEX = (
    "diffie-hellman-group1-sha1 diffie-hellman-group14-sha1 diffie-hellman-group14-sha256 "
    "diffie-hellman-group16-sha512 diffie-hellman-group18-sha512 "
    "diffie-hellman-group-exchange-sha1 diffie-hellman-group-exchange-sha256 ecdh-sha2-nistp256 "
    "ecdh-sha2-nistp384 ecdh-sha2-nistp521 curve25519-sha256 curve25519-sha256@libssh.org "
    "sntrup761x25519-sha512 sntrup761x25519-sha512@openssh.com"
)
KEY_SIG = (
    "ssh-ed25519 ssh-ed25519-cert-v01@openssh.com sk-ssh-ed25519@openssh.com "
    "sk-ssh-ed25519-cert-v01@openssh.com ecdsa-sha2-nistp256 "
    "ecdsa-sha2-nistp256-cert-v01@openssh.com ecdsa-sha2-nistp384 "
    "ecdsa-sha2-nistp384-cert-v01@openssh.com ecdsa-sha2-nistp521 "
    "ecdsa-sha2-nistp521-cert-v01@openssh.com sk-ecdsa-sha2-nistp256@openssh.com "
    "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com webauthn-sk-ecdsa-sha2-nistp256@openssh.com "
    "ssh-dss ssh-dss-cert-v01@openssh.com ssh-rsa ssh-rsa-cert-v01@openssh.com rsa-sha2-256 "
    "rsa-sha2-256-cert-v01@openssh.com rsa-sha2-512 rsa-sha2-512-cert-v01@openssh.com"
)
SIG = (
    "ssh-ed25519 sk-ssh-ed25519@openssh.com ecdsa-sha2-nistp256 ecdsa-sha2-nistp384 "
    "ecdsa-sha2-nistp521 sk-ecdsa-sha2-nistp256@openssh.com "
    "webauthn-sk-ecdsa-sha2-nistp256@openssh.com ssh-dss ssh-rsa rsa-sha2-256 rsa-sha2-512"
)
ALGORITHMS = {
    "ciphers": ("cipher", set(CIPHERS.split())),
    "macs": ("MAC", set(MACS.split())),
    "kexalgorithms": ("key exchange", set(KEX.split())),
    "hostkeyalgorithms": ("host key algorithm", set(KEY_SIG.split())),
    "pubkeyacceptedalgorithms": ("public key algorithm", set(KEY_SIG.split())),
    "hostbasedacceptedalgorithms": ("public key algorithm", set(KEY_SIG.split())),
    "casignaturealgorithms": ("signature algorithm", set(SIG.split())),
}

_FLAG = ("yes", "no", "true", "false")
# keyword -> the values ssh accepts (ASCII case folded); measured with ssh -G, every keyword
CLOSED = {
    **{
        k: _FLAG
        for k in (
            "batchmode",
            "canonicalizefallbacklocal",
            "checkhostip",
            "clearallforwardings",
            "enableescapecommandline",
            "enablesshkeysign",
            "exitonforwardfailure",
            "forkafterauthentication",
            "forwardx11",
            "forwardx11trusted",
            "gatewayports",
            "gssapiauthentication",
            "gssapidelegatecredentials",
            "gssapikeyexchange",
            "gssapirenewalforcesrekey",
            "gssapitrustdns",
            "hashknownhosts",
            "hostbasedauthentication",
            "identitiesonly",
            "kbdinteractiveauthentication",
            "nohostauthenticationforlocalhost",
            "passwordauthentication",
            "permitlocalcommand",
            "proxyusefdpass",
            "stdinnull",
            "streamlocalbindunlink",
            "tcpkeepalive",
            "visualhostkey",
        )
    },
    "addressfamily": ("inet", "inet6", "any"),
    "canonicalizehostname": (*_FLAG, "always"),
    "compression": ("yes", "no"),
    "controlmaster": (*_FLAG, "ask", "auto", "autoask"),
    "fingerprinthash": ("md5", "sha256"),
    "pubkeyauthentication": (*_FLAG, "unbound", "host-bound"),
    "requesttty": (*_FLAG, "auto", "force"),
    "sessiontype": ("none", "default", "subsystem"),
    "stricthostkeychecking": (*_FLAG, "ask", "accept-new", "off"),
    "tunnel": (*_FLAG, "point-to-point", "ethernet"),
    "updatehostkeys": (*_FLAG, "ask"),
    "verifyhostkeydns": (*_FLAG, "ask"),
    "loglevel": (
        "quiet",
        "fatal",
        "error",
        "info",
        "verbose",
        "debug",
        "debug1",
        "debug2",
        "debug3",
    ),
}
NUMBERS = {
    "connectionattempts",
    "numberofpasswordprompts",
    "serveralivecountmax",
    "canonicalizemaxdots",
    "requiredrsasize",
}
# keywords that take more than one word (the others: ssh refuses extra words on the line)
SEVERAL = {
    "host",
    "match",
    "include",
    "canonicaldomains",
    "globalknownhostsfile",
    "ipqos",
    "logverbose",
    "proxyjump",
    "sendenv",
    "setenv",
    "userknownhostsfile",
    "rekeylimit",
    "localforward",
    "remoteforward",
    "permitremoteopen",
    "canonicalizepermittedcnames",
    *COMMANDS,
}


@dataclass(frozen=True)
class Line:
    """One config line: its keyword as written, the raw rest (for commands and Match) and the rest's
    words."""

    keyword: str
    rest: str
    args: tuple[str, ...]


def strdelim(text: str | None, split_equals: bool = True) -> tuple[str | None, str | None]:
    """readconf.c's strdelim: the next token and what is left (None: nothing); a double quote
    groups."""
    if text is None:
        return None, None
    delims = WHITESPACE + '"' + ("=" if split_equals else "")
    at = next((i for i, ch in enumerate(text) if ch in delims), None)
    if at is None:
        return text, None
    if text[at] == '"':
        text = text[:at] + text[at + 1 :]
        end = text.find('"', at)
        if end < 0:
            return None, None  # no matching quote
        return text[:end], text[end + 1 :].lstrip(WHITESPACE)
    token, rest = text[:at], text[at + 1 :].lstrip(WHITESPACE)
    if split_equals and text[at] != "=" and rest.startswith("="):
        rest = rest[1:].lstrip(WHITESPACE)
    return token, rest


def argv_split(text: str) -> list[str]:
    """misc.c's argv_split (terminate_on_comment): ValueError on an unclosed quote."""
    words: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] in " \t":
            i += 1
            continue
        if text[i] == "#":
            break
        quote, word = "", []
        while i < n:
            ch = text[i]
            if (
                ch == "\\"
                and i + 1 < n
                and (text[i + 1] in "'\"\\" or (not quote and text[i + 1] == " "))
            ):
                word.append(text[i + 1])
                i += 2
                continue
            if not quote and ch in " \t":
                break
            if not quote and ch in "\"'":
                quote = ch
            elif quote and ch == quote:
                quote = ""
            else:
                word.append(ch)
            i += 1
        if quote:
            raise ValueError("invalid quotes")
        words.append("".join(word))
    return words


def parse_line(line: str) -> Line | None:
    """The line as ssh reads it (None: blank or a comment); ValueError: ssh refuses it."""
    line = line.rstrip(WHITESPACE + "\f")
    keyword, rest = strdelim(line)
    if keyword == "":
        keyword, rest = strdelim(rest)
    if not keyword or keyword.startswith("#"):
        return None
    rest = rest.lstrip(WHITESPACE) if rest is not None else ""
    if not rest:
        raise ValueError(f'no argument after keyword "{keyword.lower()}"')
    args = argv_split(rest)  # ssh splits every line, commands and Match included
    return Line(keyword, rest, tuple(args))


def command_value(rest: str) -> str:
    """A command keyword's value: the rest of the line, whole (ssh skips only leading blanks and
    '=')."""
    return rest.lstrip(WHITESPACE + "=")


def value_problem(keyword: str, args: tuple[str, ...]) -> str | None:
    """Why ssh refuses this keyword's value wherever the line is (None: it takes it)."""
    if keyword in COMMANDS or keyword in ("host", "match", "include"):
        return None
    if not args:
        return "has no value"
    if len(args) > 1 and keyword not in SEVERAL:
        return f"has extra words at the end of the line ({' '.join(args[1:])!r})"
    value = args[0]
    if keyword in CLOSED and value.lower() not in CLOSED[keyword]:
        return f"{value!r} is not one of {', '.join(CLOSED[keyword])}"
    if keyword in NUMBERS and not value.isdigit():
        return f"{value!r} is not a whole number"
    if keyword == "port" and port_number(value) is None:
        return f"{value!r} is not a port (1 to 65535, or a service name)"
    if keyword in ALGORITHMS and not value.startswith("-"):
        what, names = ALGORITHMS[keyword]
        unknown = [name for name in value.lstrip("+^").split(",") if name not in names]
        if unknown:
            return f"{unknown[0]!r} is not a {what} OpenSSH 9.2 knows"
    if keyword == "setenv" and any("=" not in arg for arg in args):
        return "holds a word without NAME=value"
    # readconf expands ${NAME} as it reads
    if keyword in ("localforward", "remoteforward", "dynamicforward"):
        for name in re.findall(r"\$\{([^}]*)\}", " ".join(args)):
            if not name or os.environ.get(name) is None:
                return f"uses ${{{name}}}, which has no value in this environment"
    return None


def port_number(value: str) -> int | None:
    """ssh's a2port: a number 1-65535 or a TCP service name (None: neither)."""
    if value.isdigit():
        return int(value) if 0 < int(value) < 65536 else None
    try:
        return socket.getservbyname(value, "tcp")
    except OSError:
        return None
