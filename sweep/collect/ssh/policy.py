"""Every ssh_config keyword, as sweep's own (paramiko) transport takes it: none ignored silently.

`KEYWORDS` holds OpenSSH 9.2's ssh_config(5) keywords. Each is one of:

- ``use``: sweep reads the value and does what OpenSSH does with it; a value outside ``values``
  (when given) asks for what paramiko cannot do, and the host goes through OpenSSH's ssh;
- ``unused``: a client convenience or side effect a non-interactive probe never has (agent and X11
  forwarding, connection sharing, port forwards, environment sent, keys added to an agent, ...):
  sweep does none of it, whatever the value; a value outside ``values`` (those asking for what sweep
  does anyway) gets one note per keyword and run (`Finding` "note");
- ``openssh``: changes how the host is reached or proves who it is, and paramiko cannot do it (a
  cipher list, GSSAPI, a PKCS#11 provider, ...): any value outside ``values`` sends the host through
  OpenSSH's ssh (`Finding` "openssh"); ``--transport paramiko`` refuses it instead.

Nothing here makes sweep less safe than the config asks: it forwards nothing, sends no
environment but SetEnv's (through ssh), and keeps host keys strict; ``StrictHostKeyChecking no``
(or ``off``) is taken as ``accept-new``: a new key is recorded, a changed key is still refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sweep.collect.ssh.openssh_config import Setting


@dataclass(frozen=True)
class Rule:
    kind: str  # use, unused, openssh
    values: tuple[str, ...] = ()  # lower case first word; "*": every value
    note: str = ""


def _use(note: str, *values: str) -> Rule:
    return Rule("use", values, note)


def _unused(note: str, *quiet: str) -> Rule:
    return Rule("unused", quiet, note)


def _inert(note: str) -> Rule:
    return Rule("unused", ("*",), note)


def _openssh(note: str, *values: str) -> Rule:
    return Rule("openssh", values, note)


@dataclass(frozen=True)
class Finding:
    """What a setting asks that sweep's own transport does not do: "note" (left unused, said once
    per run) or "openssh" (the host goes through OpenSSH's ssh); `why` says what and why."""

    kind: str
    why: str


_SHARING = "sweep does not share connections: each host's probe is a connection of its own"
_FORWARD = "sweep opens no forwarding"
_GSSAPI = "acts only with GSSAPIAuthentication, which goes through OpenSSH"
KEYWORDS: dict[str, Rule] = {
    "addkeystoagent": _unused("sweep adds no key to an agent", "no", "false"),
    "addressfamily": _use("the address families tried"),
    "batchmode": _use("sweep never prompts, in either case"),
    "bindaddress": _use("the local address the TCP connection is made from"),
    "bindinterface": _openssh("binding to an interface by name"),
    "canonicaldomains": _inert("acts only with CanonicalizeHostname, which goes through OpenSSH"),
    "canonicalizefallbacklocal": _inert(
        "acts only with CanonicalizeHostname, which goes through OpenSSH"
    ),
    "canonicalizehostname": _openssh("canonicalizing host names through DNS", "no", "false"),
    "canonicalizemaxdots": _inert(
        "acts only with CanonicalizeHostname, which goes through OpenSSH"
    ),
    "canonicalizepermittedcnames": _inert(
        "acts only with CanonicalizeHostname, which goes through OpenSSH"
    ),
    "casignaturealgorithms": _inert(
        "sweep's transport trusts no host certificate (@cert-authority) at all"
    ),
    "certificatefile": _use("the user certificates offered with the identities"),
    "checkhostip": _unused("sweep checks the host key under the host's name only", "no", "false"),
    "ciphers": _openssh("choosing ciphers"),
    "clearallforwardings": _inert(_FORWARD),
    "compression": _use("zlib compression of the session"),
    "connectionattempts": _unused("sweep retries transient failures itself (sweep_retries)", "1"),
    "connecttimeout": _use(
        "the timeout of the TCP connect, banner and authentication (sweep_connect_timeout)"
    ),
    "controlmaster": _unused(_SHARING, "no", "false"),
    "controlpath": _unused(_SHARING, "none"),
    "controlpersist": _unused(_SHARING, "no", "false"),
    "dynamicforward": _unused(_FORWARD),
    "enableescapecommandline": _inert("acts only on a terminal; sweep's session has none"),
    "enablesshkeysign": _inert(
        "acts only with HostbasedAuthentication, which goes through OpenSSH"
    ),
    "escapechar": _inert("acts only on a terminal; sweep's session has none"),
    "exitonforwardfailure": _inert(_FORWARD),
    "fingerprinthash": _unused("sweep shows SHA256 fingerprints", "sha256"),
    "forkafterauthentication": _unused("sweep waits for the agent's output", "no", "false"),
    "forwardagent": _unused("sweep forwards no agent", "no", "false"),
    "forwardx11": _unused("sweep forwards no X11", "no", "false"),
    "forwardx11timeout": _inert("acts only with ForwardX11, which sweep never does"),
    "forwardx11trusted": _inert("acts only with ForwardX11, which sweep never does"),
    "gatewayports": _inert(_FORWARD),
    "globalknownhostsfile": _unused(
        "host keys are checked against the run's known_hosts files only; give this "
        "file with --known-hosts to trust it"
    ),
    "gssapiauthentication": _openssh("GSSAPI authentication", "no", "false"),
    "gssapiclientidentity": _inert(_GSSAPI),
    "gssapidelegatecredentials": _inert(_GSSAPI),
    "gssapikeyexchange": _openssh("GSSAPI key exchange", "no", "false"),
    "gssapikexalgorithms": _inert(_GSSAPI),
    "gssapirenewalforcesrekey": _inert(_GSSAPI),
    "gssapiserveridentity": _inert(_GSSAPI),
    "gssapitrustdns": _inert(_GSSAPI),
    "hashknownhosts": _unused("keys sweep records (accept-new) are written hashed", "yes", "true"),
    "host": _use("the block's patterns, matched as OpenSSH does"),
    "hostbasedacceptedalgorithms": _inert(
        "acts only with HostbasedAuthentication, which goes through OpenSSH"
    ),
    "hostbasedauthentication": _openssh("host-based authentication", "no", "false"),
    "hostkeyalgorithms": _openssh("choosing host key algorithms"),
    "hostkeyalias": _use("the name the host key is looked up under in known_hosts"),
    "hostname": _use("the address connected to (%h expanded)"),
    "identitiesonly": _use("yes: the ssh-agent's keys are not offered"),
    "identityagent": _use(
        "an agent socket other than SSH_AUTH_SOCK", "none", "ssh_auth_sock", "$ssh_auth_sock"
    ),
    "identityfile": _use("the private keys offered (with their -cert.pub)"),
    "ignoreunknown": _use("unknown keywords matching it are skipped, as OpenSSH skips them"),
    "include": _use("the files are read in place, as OpenSSH reads them"),
    "ipqos": _unused("sweep leaves the IP type-of-service as the system sets it"),
    "kbdinteractiveauthentication": _use("sweep never prompts, in either case"),
    "kbdinteractivedevices": _inert("acts only on prompts, which sweep never answers"),
    "kexalgorithms": _openssh("choosing key exchange algorithms"),
    "knownhostscommand": _unused(
        "host keys are checked against the run's known_hosts files only", "none"
    ),
    "localcommand": _inert("acts only with PermitLocalCommand, which sweep never does"),
    "localforward": _unused(_FORWARD),
    "loglevel": _inert("sweep's transport logs nothing of its own"),
    "logverbose": _inert("sweep's transport logs nothing of its own"),
    "macs": _openssh("choosing MACs"),
    "match": _use(
        "all, canonical, final, exec, host, originalhost, user and localuser, as OpenSSH "
        "evaluates them"
    ),
    "nohostauthenticationforlocalhost": _unused(
        "sweep checks the host key of localhost too", "no", "false"
    ),
    "numberofpasswordprompts": _inert("acts only on prompts, which sweep never answers"),
    "passwordauthentication": _use("sweep never prompts, in either case"),
    "permitlocalcommand": _unused("sweep runs no local command", "no", "false"),
    "permitremoteopen": _inert(_FORWARD),
    "pkcs11provider": _openssh("PKCS#11 smart cards", "none"),
    "port": _use("the port connected to"),
    "preferredauthentications": _use(
        "authentication other than keys and certificates (publickey left out)"
    ),
    "proxycommand": _use(
        "run with /bin/sh (%h %p %r %n expanded) as the connection, under the host deadline"
    ),
    "proxyjump": _use("the hosts tunnelled through, in order"),
    "proxyusefdpass": _openssh(
        "a ProxyCommand that passes a connected descriptor back", "no", "false"
    ),
    "pubkeyacceptedalgorithms": _openssh("choosing public key algorithms"),
    "pubkeyauthentication": _use(
        "authentication without keys", "yes", "true", "unbound", "host-bound"
    ),
    "rekeylimit": _unused("the session rekeys on paramiko's schedule", "default"),
    "remotecommand": _unused("sweep runs its agent as the command", "none"),
    "remoteforward": _unused(_FORWARD),
    "requesttty": _unused("sweep's session has no terminal", "no", "false", "auto"),
    "requiredrsasize": _openssh("a minimum RSA key size"),
    "revokedhostkeys": _openssh("revoked host key lists", "none"),
    "securitykeyprovider": _openssh("FIDO security keys", "internal"),
    "sendenv": _unused(
        "sweep sends no environment variable of the controller's: every host's agent sees the same "
        "environment, whoever runs the sweep"
    ),
    "serveralivecountmax": _inert("the host deadline ends a host that stops answering"),
    "serveraliveinterval": _use("keepalive messages every N seconds"),
    "sessiontype": _unused("sweep runs its agent as the command", "default"),
    "setenv": _openssh(
        "environment variables set on the host (ssh sends them; the host's AcceptEnv decides)"
    ),
    "stdinnull": _unused("the agent is sent on stdin", "no", "false"),
    "streamlocalbindmask": _inert(_FORWARD),
    "streamlocalbindunlink": _inert(_FORWARD),
    "stricthostkeychecking": _use(
        "yes and ask: unknown keys refused; accept-new: recorded; no: taken as accept-new; "
        "a changed key is always refused",
        "yes",
        "true",
        "ask",
        "accept-new",
    ),
    "syslogfacility": _inert("sweep's transport writes nothing to syslog"),
    "tcpkeepalive": _use("TCP keepalives on the connection"),
    "tunnel": _unused("sweep opens no tun device", "no", "false"),
    "tunneldevice": _inert("acts only with Tunnel, which sweep never does"),
    "updatehostkeys": _unused(
        "sweep does not rewrite known_hosts from the host's offer", "no", "false"
    ),
    "user": _use("the user logged in as"),
    "userknownhostsfile": _use("the known_hosts files (after --known-hosts), %-tokens expanded"),
    "verifyhostkeydns": _unused("host keys are checked against known_hosts only", "no", "false"),
    "visualhostkey": _unused("sweep draws no host key art", "no", "false"),
    "xauthlocation": _inert("acts only with ForwardX11, which sweep never does"),
}
BOOLEAN_SYNONYMS = {"true": "yes", "false": "no", "off": "no", "on": "yes"}  # readconf's multistate


def check(setting: Setting) -> Finding | None:
    """What `setting` asks that sweep's own transport does not do (None: honoured as asked)."""
    # the reader refuses a keyword OpenSSH does not know, for the whole file
    rule = KEYWORDS[setting.keyword]
    value = setting.value.lower()
    first = BOOLEAN_SYNONYMS.get(value.split()[0], value.split()[0]) if value else ""
    accepted = {BOOLEAN_SYNONYMS.get(v, v) for v in rule.values}
    asked = f"{setting.name} {setting.value}"
    if setting.keyword == "stricthostkeychecking" and first == "no":
        return Finding(
            "note",
            f"{asked} is taken as accept-new: a new host key is recorded, a changed one is "
            "still refused (sweep never connects to a host whose key changed)",
        )
    if setting.keyword == "preferredauthentications" and "publickey" not in value.split(","):
        return Finding("openssh", f"{asked} asks for {rule.note}")
    if rule.kind == "unused":
        if "*" in rule.values or first in accepted or not rule.values and value in ("", "none"):
            return None
        return Finding("note", f"{asked} is left unused: {rule.note}")
    if (rule.kind == "openssh" or rule.values) and first not in accepted:
        return Finding(
            "openssh", f"{asked} asks for {rule.note}, which sweep's own transport does not do"
        )
    if setting.keyword in ("connecttimeout", "serveraliveinterval") and seconds(value) is None:
        return Finding("openssh", f"{asked} is a time sweep does not read")
    return None


def describe(keyword: str) -> str:
    """The docs table's second column for `keyword` (docs/ssh.md;
    tests/unit/test_ssh_options_table.py)."""
    rule = KEYWORDS[keyword]
    values = " / ".join(rule.values)
    if keyword == "stricthostkeychecking":
        return f"honoured ({values}); no / off taken as accept-new, noted"
    if rule.kind == "use":
        return "honoured" + (f" ({values}); other values: through OpenSSH" if rule.values else "")
    if rule.kind == "openssh":
        return (f"honoured as {values}; other values: " if rule.values else "") + "through OpenSSH"
    if "*" in rule.values:
        return "left unused (no effect on a probe)"
    return "left unused" + (f"; other than {values}: noted" if rule.values else ", noted")


def seconds(text: str) -> int | None:
    """misc.c's convtime: ``90``, ``1m30s``, ``2h`` as seconds (``none`` for ConnectTimeout: 0);
    None: not a time."""
    if text == "none":
        return 0
    parts = re.findall(r"(\d+)([smhdwSMHDW]?)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    scale = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    return sum(int(n) * scale[u.lower()] for n, u in parts)
