"""Every ssh_config keyword OpenSSH knows is honoured or refused by sweep's own transport, none ignored.

OpenSSH's own list is the oracle: the keywords `ssh -G` prints, and those of `man ssh_config`
where the manual is installed. The table below is the promise, value by value.
"""
from __future__ import annotations

import gzip
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from sweep.collect.ssh.openssh_config import Setting, SSHArgsError, command_line
from sweep.collect.ssh.policy import KEYWORDS, SSHOptionRefused, check

from helpers import require

H, R = "honoured", "refused"
# keyword -> ((value, verdict), ...)
TABLE = {
    "AddKeysToAgent": (("no", H), ("yes", R)),
    "AddressFamily": (("any", H), ("inet", H), ("inet6", H), ("ipx", R)),
    "BatchMode": (("yes", H), ("no", H)),
    "BindAddress": (("127.0.0.1", H),),
    "BindInterface": (("lo", R),),
    "CanonicalDomains": (("example.org", H),),
    "CanonicalizeFallbackLocal": (("yes", H),),
    "CanonicalizeHostname": (("no", H), ("yes", R), ("always", R)),
    "CanonicalizeMaxDots": (("1", H),),
    "CanonicalizePermittedCNAMEs": (("*.a:*.b", H),),
    "CASignatureAlgorithms": (("ssh-ed25519", H),),
    "CertificateFile": (("~/.ssh/id-cert.pub", H),),
    "CheckHostIP": (("no", H), ("yes", R)),
    "Ciphers": (("aes128-ctr", R),),
    "ClearAllForwardings": (("yes", H), ("no", H)),
    "Compression": (("yes", H), ("no", H)),
    "ConnectionAttempts": (("1", H), ("3", R)),
    "ConnectTimeout": (("5", H), ("none", H), ("soon", R)),
    "ControlMaster": (("no", H), ("auto", R), ("yes", R)),
    "ControlPath": (("none", H), ("~/.ssh/cm-%C", R)),
    "ControlPersist": (("no", H), ("60s", R)),
    "DynamicForward": (("1080", R),),
    "EnableEscapeCommandline": (("yes", H),),
    "EnableSSHKeysign": (("yes", H),),
    "EscapeChar": (("none", H),),
    "ExitOnForwardFailure": (("yes", H),),
    "FingerprintHash": (("sha256", H), ("md5", R)),
    "ForkAfterAuthentication": (("no", H), ("yes", R)),
    "ForwardAgent": (("no", H), ("yes", R), ("/tmp/agent.sock", R)),
    "ForwardX11": (("no", H), ("yes", R)),
    "ForwardX11Timeout": (("20m", H),),
    "ForwardX11Trusted": (("yes", H),),
    "GatewayPorts": (("yes", H),),
    "GlobalKnownHostsFile": (("/etc/ssh/ssh_known_hosts", R),),
    "GSSAPIAuthentication": (("no", H), ("yes", R)),
    "GSSAPIClientIdentity": (("me@REALM", H),),
    "GSSAPIDelegateCredentials": (("yes", H),),
    "GSSAPIKeyExchange": (("no", H), ("yes", R)),
    "GSSAPIKexAlgorithms": (("gss-curve25519-sha256-", H),),
    "GSSAPIRenewalForcesRekey": (("yes", H),),
    "GSSAPIServerIdentity": (("host@example", H),),
    "GSSAPITrustDns": (("yes", H),),
    "HashKnownHosts": (("yes", H), ("no", R)),
    "HostbasedAcceptedAlgorithms": (("ssh-ed25519", H),),
    "HostbasedAuthentication": (("no", H), ("yes", R)),
    "HostKeyAlgorithms": (("ssh-ed25519", R),),
    "HostKeyAlias": (("gpu-alias", H),),
    "Hostname": (("10.0.0.1", H),),
    "IdentitiesOnly": (("yes", H), ("no", H)),
    "IdentityAgent": (("none", H), ("SSH_AUTH_SOCK", H), ("/run/other.sock", R)),
    "IdentityFile": (("~/.ssh/id_ed25519", H),),
    "IgnoreUnknown": (("UseKeychain", H),),
    "IPQoS": (("lowdelay", R),),
    "KbdInteractiveAuthentication": (("no", H), ("yes", H)),
    "KbdInteractiveDevices": (("pam", H),),
    "KexAlgorithms": (("curve25519-sha256", R),),
    "KnownHostsCommand": (("/bin/true", R),),
    "LocalCommand": (("echo hi", H),),
    "LocalForward": (("8080 localhost:80", R),),
    "LogLevel": (("ERROR", H), ("INFO", H), ("DEBUG3", R)),
    "LogVerbose": (("kex.c:*", R),),
    "MACs": (("hmac-sha2-256", R),),
    "NoHostAuthenticationForLocalhost": (("no", H), ("yes", R)),
    "NumberOfPasswordPrompts": (("1", H),),
    "PasswordAuthentication": (("no", H), ("yes", H)),
    "PermitLocalCommand": (("no", H), ("yes", R)),
    "PermitRemoteOpen": (("any", H),),
    "PKCS11Provider": (("none", H), ("/usr/lib/opensc-pkcs11.so", R)),
    "Port": (("2222", H),),
    "PreferredAuthentications": (("publickey,password", H), ("gssapi-with-mic", R)),
    "ProxyCommand": (("ssh -W %h:%p bastion", H),),
    "ProxyJump": (("bastion", H),),
    "ProxyUseFdpass": (("no", H), ("yes", R)),
    "PubkeyAcceptedAlgorithms": (("ssh-ed25519", R),),
    "PubkeyAuthentication": (("yes", H), ("no", R)),
    "RekeyLimit": (("1G", R),),
    "RemoteCommand": (("none", H), ("htop", R)),
    "RemoteForward": (("9000 localhost:9000", R),),
    "RequestTTY": (("no", H), ("auto", H), ("force", R)),
    "RequiredRSASize": (("2048", R),),
    "RevokedHostKeys": (("/etc/ssh/revoked", R),),
    "SecurityKeyProvider": (("internal", R),),
    "SendEnv": (("LANG", R),),
    "ServerAliveCountMax": (("3", H),),
    "ServerAliveInterval": (("15", H), ("often", R)),
    "SessionType": (("default", H), ("none", R)),
    "SetEnv": (("FOO=bar", R),),
    "StdinNull": (("no", H), ("yes", R)),
    "StreamLocalBindMask": (("0177", H),),
    "StreamLocalBindUnlink": (("yes", H),),
    "StrictHostKeyChecking": (("yes", H), ("ask", H), ("accept-new", H), ("no", R), ("off", R)),
    "SyslogFacility": (("USER", H),),
    "TCPKeepAlive": (("yes", H), ("no", H)),
    "Tunnel": (("no", H), ("yes", R)),
    "TunnelDevice": (("any:any", H),),
    "UpdateHostKeys": (("no", H), ("yes", R), ("ask", R)),
    "User": (("ops", H),),
    "UserKnownHostsFile": (("~/.ssh/known_hosts_fleet", H),),
    "VerifyHostKeyDNS": (("no", H), ("yes", R)),
    "VisualHostKey": (("no", H), ("yes", R)),
    "XAuthLocation": (("/usr/bin/xauth", H),),
}
STRUCTURE = {"host", "match", "include"}  # read by sweep's config reader, not settings


def _verdict(keyword: str, value: str) -> str:
    try:
        check(Setting(keyword.lower(), tuple(value.split()), "test:1", keyword))
    except SSHOptionRefused:
        return R
    return H


@pytest.mark.parametrize("keyword,value,verdict",
                         [(k, v, verdict) for k, cases in TABLE.items() for v, verdict in cases])
def test_each_keyword_value_is_honoured_or_refused_as_promised(keyword, value, verdict):
    assert _verdict(keyword, value) == verdict


def _openssh_keywords() -> set[str]:
    ssh = shutil.which("ssh")
    require(ssh is not None, "needs OpenSSH's ssh (apt-get install -y openssh-client)")
    done = subprocess.run([ssh, "-G", "-F", "/dev/null", "example"], capture_output=True, text=True, check=True)
    found = {line.split()[0].lower() for line in done.stdout.splitlines() if line.strip()}
    manual = Path("/usr/share/man/man5/ssh_config.5.gz")
    if manual.is_file():  # the manual's keyword list (Debian images may leave the manual out)
        text = gzip.decompress(manual.read_bytes()).decode(errors="replace")
        found |= {m.lower() for m in re.findall(r"^\.It Cm (\w+)", text, re.M)}
    return found


def test_no_keyword_openssh_knows_is_left_out():
    known = _openssh_keywords()
    assert known - set(KEYWORDS) == set()
    assert {k.lower() for k in TABLE} | STRUCTURE == set(KEYWORDS)


def test_the_docs_table_says_what_the_code_does():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "ssh.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", doc, re.M))
    assert {k.lower() for k in rows} == set(KEYWORDS)
    for name, said in rows.items():
        rule = KEYWORDS[name.lower()]
        expected = {"refuse": "refused", "inert": "honoured (no effect here)",
                    "only": f"honoured as {' / '.join(rule.accepted)}; other values refused",
                    "use": "honoured" + (f" ({', '.join(rule.accepted)})" if rule.accepted else "")}[rule.kind]
        assert said.strip() == expected, name


def test_an_unknown_keyword_is_refused():
    assert _verdict("UseKeychain", "yes") == R


def test_ssh_flags_are_the_settings_they_stand_for():
    settings = command_line("-C -o ForwardAgent=yes -J ops@jump:2200 -i '/keys/my key' -4 -oUser=x", "inv")
    assert [(s.keyword, s.value, s.name) for s in settings] == [
        ("compression", "yes", "-C"), ("forwardagent", "yes", "-o ForwardAgent"),
        ("proxyjump", "ops@jump:2200", "-J"), ("identityfile", "/keys/my key", "-i"),
        ("addressfamily", "inet", "-4"), ("user", "x", "-o User")]
    for bad in ("-W host:22", "-F other_config", "gpu01", "-o", "-o Include=x", "-Z"):
        with pytest.raises(SSHArgsError):
            command_line(bad, "inv")


def test_ignore_unknown_lets_a_keyword_openssh_does_not_know_pass_as_openssh_does(tmp_path):
    from sweep.collect.ssh.config import SSHConfigFile
    from sweep.errors import SSHConfigError
    from sweep.inventory.model import Host

    host = Host(name="gpu01", address="gpu01", port=None, user=None, key_file=None, python="python3",
                ssh_common_args=None, proxy_jump=None, groups=(), vars={}, settings={})
    config = tmp_path / "config"
    config.write_text("Host *\n  IgnoreUnknown UseKeychain,AddKeys*\n  UseKeychain yes\n")
    assert SSHConfigFile(str(config)).check(host)[-1].address == "gpu01"
    ssh = shutil.which("ssh")
    if ssh:  # OpenSSH agrees: it reads the file
        subprocess.run([ssh, "-G", "-F", str(config), "gpu01"], check=True, capture_output=True)
    config.write_text("Host *\n  UseKeychain yes\n")
    with pytest.raises(SSHConfigError) as refused:
        SSHConfigFile(str(config)).check(host)
    assert refused.value.where == f"{config}:2" and "not an ssh_config keyword" in refused.value.message


_WORDS = st.sampled_from(["Host", "Match", "Include", "HostName", "Port", "User", "IdentityFile", "ProxyJump",
                          "ProxyCommand", "ConnectTimeout", "StrictHostKeyChecking", "Bogus", "exec", "host",
                          "user", "all", "canonical", "*", "!gpu*", "%h", "%x", "%%", "=", '"', "a,b", "0", "99999",
                          "none", "yes", "exec true", "Match exec true", "\\t", "#", "@", ":", "[", "]", "\\x1b", "é"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.lists(_WORDS, min_size=1, max_size=5).map(" ".join), max_size=8),
       inventory_args=st.sampled_from([None, "-o", "-J", "-o Port=x", "-J a:b", "'", "-o ProxyCommand=%Z",
                                                 "-p 0", "-p 70000 -o User=%u"]))
@example(lines=["HostName %x"], inventory_args=None)  # once found: the refusal lacked its file:line
def test_any_config_is_read_or_refused_with_its_place_never_a_crash(tmp_path, lines, inventory_args):
    """Hostile or broken ssh_config text and inventory args end as hops or as one refusal naming
    where, never as an exception the CLI would show as a traceback."""
    from sweep.collect.ssh.config import SSHConfigFile
    from sweep.errors import SSHConfigError
    from sweep.inventory.model import Host

    config = tmp_path / "config"
    config.write_text("\n".join(lines) + "\n")
    host = Host(name="gpu01", address="gpu01", port=None, user=None, key_file=None, python="python3",
                ssh_common_args=inventory_args, proxy_jump=None, groups=(), vars={}, settings={})
    try:
        hops = SSHConfigFile(str(config)).check(host)
    except SSHConfigError as refused:
        assert refused.where and refused.message.startswith("gpu01: ")
    else:
        assert hops and all(0 < hop.port < 65536 for hop in hops)
