"""Every ssh_config keyword, honoured or refused by sweep's own (paramiko) transport: none ignored.

`KEYWORDS` holds OpenSSH 9.2's ssh_config(5) keywords. Each is one of:

- ``use``: sweep reads the value and does what OpenSSH does with it;
- ``only``: sweep behaves one fixed way; the values that ask for that way are honoured, any other
  value is refused (``ForwardAgent yes``: sweep forwards nothing);
- ``inert``: the keyword acts only through another one that sweep refuses when it is switched on
  (``ForwardX11Timeout`` without ``ForwardX11``), or only on a terminal sweep never has;
- ``refuse``: sweep cannot do it at all; any value is refused.

A refusal is a `SSHOptionRefused` raised before any host is contacted; its fix is to drop the
option for these hosts or to sweep with ``--transport openssh``, where OpenSSH itself reads it.
"""
from __future__ import annotations

from dataclasses import dataclass

from sweep.collect.ssh.openssh_config import Setting
from sweep.errors import SSHConfigError


@dataclass(frozen=True)
class Rule:
    kind: str  # use, only, inert, refuse
    accepted: tuple[str, ...] = ()  # for "only" (lower case first word); for "use": accepted values, () any
    note: str = ""


def _use(note: str, *accepted: str) -> Rule:
    return Rule("use", accepted, note)


def _only(note: str, *accepted: str) -> Rule:
    return Rule("only", accepted, note)


def _inert(note: str) -> Rule:
    return Rule("inert", (), note)


def _refuse(note: str) -> Rule:
    return Rule("refuse", (), note)


KEYWORDS: dict[str, Rule] = {
    "addkeystoagent": _only("sweep adds no key to an agent", "no"),
    "addressfamily": _use("the address families tried", "any", "inet", "inet6"),
    "batchmode": _use("sweep never prompts, in either case", "yes", "no"),
    "bindaddress": _use("the local address the TCP connection is made from"),
    "bindinterface": _refuse("binding to an interface by name"),
    "canonicaldomains": _inert("acts only with CanonicalizeHostname, refused unless no"),
    "canonicalizefallbacklocal": _inert("acts only with CanonicalizeHostname, refused unless no"),
    "canonicalizehostname": _only("sweep does not canonicalize host names", "no", "false"),
    "canonicalizemaxdots": _inert("acts only with CanonicalizeHostname, refused unless no"),
    "canonicalizepermittedcnames": _inert("acts only with CanonicalizeHostname, refused unless no"),
    "casignaturealgorithms": _inert("host certificates (@cert-authority) are not trusted by sweep's transport"),
    "certificatefile": _use("the user certificates offered with the identities"),
    "checkhostip": _only("sweep checks the host key under the host's name only", "no"),
    "ciphers": _refuse("choosing ciphers"),
    "clearallforwardings": _use("sweep opens no forwarding, in either case", "yes", "no"),
    "compression": _use("zlib compression of the session", "yes", "no"),
    "connectionattempts": _only("sweep retries transient failures itself (sweep_retries)", "1"),
    "connecttimeout": _use("the timeout of the TCP connect, banner and authentication (sweep_connect_timeout)"),
    "controlmaster": _only("sweep does not multiplex connections", "no"),
    "controlpath": _only("sweep does not multiplex connections", "none"),
    "controlpersist": _only("sweep does not multiplex connections", "no"),
    "dynamicforward": _refuse("forwarding"),
    "enableescapecommandline": _inert("acts only on a terminal; sweep's session has none"),
    "enablesshkeysign": _inert("acts only with HostbasedAuthentication, refused unless no"),
    "escapechar": _inert("acts only on a terminal; sweep's session has none"),
    "exitonforwardfailure": _inert("acts only with forwardings, which are refused"),
    "fingerprinthash": _only("sweep shows SHA256 fingerprints", "sha256"),
    "forkafterauthentication": _only("sweep waits for the agent's output", "no"),
    "forwardagent": _only("sweep forwards no agent", "no"),
    "forwardx11": _only("sweep forwards no X11", "no"),
    "forwardx11timeout": _inert("acts only with ForwardX11, refused unless no"),
    "forwardx11trusted": _inert("acts only with ForwardX11, refused unless no"),
    "gatewayports": _inert("acts only with forwardings, which are refused"),
    "globalknownhostsfile": _refuse("a global known_hosts file (give it with --known-hosts)"),
    "gssapiauthentication": _only("sweep authenticates with keys and certificates only", "no"),
    "gssapiclientidentity": _inert("acts only with GSSAPIAuthentication, refused unless no"),
    "gssapidelegatecredentials": _inert("acts only with GSSAPIAuthentication, refused unless no"),
    "gssapikeyexchange": _only("no GSSAPI key exchange", "no"),
    "gssapikexalgorithms": _inert("acts only with GSSAPIKeyExchange, refused unless no"),
    "gssapirenewalforcesrekey": _inert("acts only with GSSAPIKeyExchange, refused unless no"),
    "gssapiserveridentity": _inert("acts only with GSSAPIAuthentication, refused unless no"),
    "gssapitrustdns": _inert("acts only with GSSAPIAuthentication, refused unless no"),
    "hashknownhosts": _only("keys accepted with --accept-new-host-keys are written hashed", "yes"),
    "host": _use("the block's patterns, matched as OpenSSH does"),
    "hostbasedacceptedalgorithms": _inert("acts only with HostbasedAuthentication, refused unless no"),
    "hostbasedauthentication": _only("no host-based authentication", "no"),
    "hostkeyalgorithms": _refuse("choosing host key algorithms"),
    "hostkeyalias": _use("the name the host key is looked up under in known_hosts"),
    "hostname": _use("the address connected to (%h expanded)"),
    "identitiesonly": _use("yes: the ssh-agent's keys are not offered", "yes", "no"),
    "identityagent": _use("none: no agent; SSH_AUTH_SOCK: the environment's agent", "none", "ssh_auth_sock",
                          "$ssh_auth_sock"),
    "identityfile": _use("the private keys offered (with their -cert.pub)"),
    "ignoreunknown": _use("unknown keywords matching it are skipped, as OpenSSH skips them"),
    "include": _use("the files are read in place, as OpenSSH reads them"),
    "ipqos": _refuse("setting IP type-of-service"),
    "kbdinteractiveauthentication": _use("sweep never prompts, in either case", "yes", "no"),
    "kbdinteractivedevices": _inert("acts only on prompts, which sweep never answers"),
    "kexalgorithms": _refuse("choosing key exchange algorithms"),
    "knownhostscommand": _refuse("a command that lists host keys"),
    "localcommand": _inert("acts only with PermitLocalCommand, refused unless no"),
    "localforward": _refuse("forwarding"),
    "loglevel": _only("sweep's transport logs nothing of its own", "quiet", "fatal", "error", "info"),
    "logverbose": _refuse("verbose logging of source locations"),
    "macs": _refuse("choosing MACs"),
    "match": _use("host, originalhost, user, localuser, exec and all, as OpenSSH evaluates them"),
    "nohostauthenticationforlocalhost": _only("sweep checks the host key of localhost too", "no"),
    "numberofpasswordprompts": _inert("acts only on prompts, which sweep never answers"),
    "passwordauthentication": _use("sweep never prompts, in either case", "yes", "no"),
    "permitlocalcommand": _only("sweep runs no local command", "no"),
    "permitremoteopen": _inert("acts only with RemoteForward, which is refused"),
    "pkcs11provider": _only("no PKCS#11 smart cards in sweep's transport", "none"),
    "port": _use("the port connected to"),
    "preferredauthentications": _use("must list publickey: sweep authenticates with keys and certificates"),
    "proxycommand": _use("run with /bin/sh (%h %p %r %n expanded) as the connection, under the host deadline"),
    "proxyjump": _use("the hosts tunnelled through, in order"),
    "proxyusefdpass": _only("the ProxyCommand's stdin and stdout carry the connection", "no"),
    "pubkeyacceptedalgorithms": _refuse("choosing public key algorithms"),
    "pubkeyauthentication": _only("sweep authenticates with keys and certificates", "yes", "unbound", "host-bound"),
    "rekeylimit": _refuse("rekeying limits"),
    "remotecommand": _only("sweep runs its agent as the command", "none"),
    "remoteforward": _refuse("forwarding"),
    "requesttty": _only("sweep's session has no terminal", "no", "auto"),
    "requiredrsasize": _refuse("a minimum RSA key size"),
    "revokedhostkeys": _refuse("revoked host key lists"),
    "securitykeyprovider": _refuse("FIDO security keys"),
    "sendenv": _refuse("sending environment variables"),
    "serveralivecountmax": _inert("the host deadline ends a host that stops answering"),
    "serveraliveinterval": _use("keepalive messages every N seconds"),
    "sessiontype": _only("sweep runs one command", "default"),
    "setenv": _refuse("setting environment variables on the host"),
    "stdinnull": _only("the agent is sent on stdin", "no"),
    "streamlocalbindmask": _inert("acts only with forwardings, which are refused"),
    "streamlocalbindunlink": _inert("acts only with forwardings, which are refused"),
    "stricthostkeychecking": _use("yes and ask: unknown keys refused; accept-new: recorded; a changed key is "
                                  "always refused", "yes", "ask", "accept-new"),
    "syslogfacility": _inert("sweep's transport writes nothing to syslog"),
    "tcpkeepalive": _use("TCP keepalives on the connection", "yes", "no"),
    "tunnel": _only("sweep opens no tun device", "no"),
    "tunneldevice": _inert("acts only with Tunnel, refused unless no"),
    "updatehostkeys": _only("sweep does not rewrite known_hosts from the host's offer", "no"),
    "user": _use("the user logged in as"),
    "userknownhostsfile": _use("the known_hosts files (after --known-hosts), %-tokens expanded"),
    "verifyhostkeydns": _only("host keys are checked against known_hosts only", "no"),
    "visualhostkey": _only("sweep draws no host key art", "no"),
    "xauthlocation": _inert("acts only with ForwardX11, refused unless no"),
}
BOOLEAN_SYNONYMS = {"true": "yes", "false": "no", "off": "no", "on": "yes"}  # readconf's multistate



class SSHOptionRefused(SSHConfigError):
    """A keyword or -o option that sweep's SSH transport would not carry out; the text says why and the fix."""

    def __init__(self, setting: Setting, why: str):
        super().__init__(why, setting.where)
        self.setting, self.why = setting, why


def check(setting: Setting) -> None:
    """Raise SSHOptionRefused unless sweep's transport does what `setting` asks."""
    rule = KEYWORDS.get(setting.keyword)
    if rule is None:
        raise SSHOptionRefused(setting, "is not an ssh_config keyword OpenSSH 9.2 knows")
    value = setting.value.lower()
    first = BOOLEAN_SYNONYMS.get(value.split()[0], value.split()[0]) if value else ""
    if rule.kind == "refuse":
        raise SSHOptionRefused(setting, f"asks for {rule.note}, which sweep's SSH transport does not do")
    if rule.kind in ("only", "use") and rule.accepted and first not in rule.accepted:
        wanted = " or ".join(rule.accepted)
        raise SSHOptionRefused(setting, f"is honoured only as {wanted} ({rule.note})")
    if setting.keyword == "preferredauthentications" and "publickey" not in value.split(","):
        raise SSHOptionRefused(setting, "leaves out publickey, the only method sweep uses")
    if setting.keyword == "port" and not (value.isdigit() and 0 < int(value) < 65536):
        raise SSHOptionRefused(setting, "is not a port number (1 to 65535)")
    if setting.keyword in ("connecttimeout", "serveraliveinterval") and not (
            value.isdigit() or value == "none" and setting.keyword == "connecttimeout"):
        raise SSHOptionRefused(setting, "is not a whole number of seconds")
