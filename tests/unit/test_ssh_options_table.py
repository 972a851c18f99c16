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
from sweep.collect.ssh.policy import KEYWORDS, check, describe

from helpers import require

H, N, O = "honoured", "note", "openssh"
# keyword -> ((value, verdict), ...): honoured as asked; left unused with a note; sent through OpenSSH's ssh
TABLE = {
    "AddKeysToAgent": (('no', H), ('yes', N)),
    "AddressFamily": (('any', H), ('inet', H), ('inet6', H)),
    "BatchMode": (('yes', H), ('no', H)),
    "BindAddress": (('127.0.0.1', H),),
    "BindInterface": (('lo', O),),
    "CanonicalDomains": (('example.org', H),),
    "CanonicalizeFallbackLocal": (('yes', H),),
    "CanonicalizeHostname": (('no', H), ('yes', O), ('always', O)),
    "CanonicalizeMaxDots": (('1', H),),
    "CanonicalizePermittedCNAMEs": (('*.a:*.b', H),),
    "CASignatureAlgorithms": (('ssh-ed25519', H),),
    "CertificateFile": (('~/.ssh/id-cert.pub', H),),
    "CheckHostIP": (('no', H), ('yes', N)),
    "Ciphers": (('aes128-ctr', O),),
    "ClearAllForwardings": (('yes', H), ('no', H)),
    "Compression": (('yes', H), ('no', H)),
    "ConnectionAttempts": (('1', H), ('3', N)),
    "ConnectTimeout": (('5', H), ('none', H), ('soon', O), ('1m', H)),
    "ControlMaster": (('no', H), ('auto', N), ('yes', N), ('autoask', N), ('AUTO', N)),
    "ControlPath": (('none', H), ('~/.ssh/cm-%C', N), ('~/.ssh/cm/%r@%h:%p', N)),
    "ControlPersist": (('no', H), ('60s', N)),
    "DynamicForward": (('1080', N),),
    "EnableEscapeCommandline": (('yes', H),),
    "EnableSSHKeysign": (('yes', H),),
    "EscapeChar": (('none', H),),
    "ExitOnForwardFailure": (('yes', H),),
    "FingerprintHash": (('sha256', H), ('md5', N)),
    "ForkAfterAuthentication": (('no', H), ('yes', N)),
    "ForwardAgent": (('no', H), ('yes', N), ('/tmp/agent.sock', N), ('~/.ssh/agent.sock', N)),
    "ForwardX11": (('no', H), ('yes', N)),
    "ForwardX11Timeout": (('20m', H),),
    "ForwardX11Trusted": (('yes', H),),
    "GatewayPorts": (('yes', H),),
    "GlobalKnownHostsFile": (('/etc/ssh/ssh_known_hosts', N),),
    "GSSAPIAuthentication": (('no', H), ('yes', O)),
    "GSSAPIClientIdentity": (('me@REALM', H),),
    "GSSAPIDelegateCredentials": (('yes', H),),
    "GSSAPIKeyExchange": (('no', H), ('yes', O)),
    "GSSAPIKexAlgorithms": (('gss-curve25519-sha256-', H),),
    "GSSAPIRenewalForcesRekey": (('yes', H),),
    "GSSAPIServerIdentity": (('host@example', H),),
    "GSSAPITrustDns": (('yes', H),),
    "HashKnownHosts": (('yes', H), ('no', N)),
    "HostbasedAcceptedAlgorithms": (('ssh-ed25519', H),),
    "HostbasedAuthentication": (('no', H), ('yes', O)),
    "HostKeyAlgorithms": (('ssh-ed25519', O), ('+ssh-rsa', O)),
    "HostKeyAlias": (('gpu-alias', H),),
    "Hostname": (('10.0.0.1', H),),
    "IdentitiesOnly": (('yes', H), ('no', H)),
    "IdentityAgent": (('none', H), ('SSH_AUTH_SOCK', H), ('/run/other.sock', O), ('~/Library/Group Containers/2BUA8C4S2C.com.1password/t/agent.sock', O)),
    "IdentityFile": (('~/.ssh/id_ed25519', H),),
    "IgnoreUnknown": (('UseKeychain', H),),
    "IPQoS": (('lowdelay', N),),
    "KbdInteractiveAuthentication": (('no', H), ('yes', H)),
    "KbdInteractiveDevices": (('pam', H),),
    "KexAlgorithms": (('curve25519-sha256', O),),
    "KnownHostsCommand": (('/bin/true', N),),
    "LocalCommand": (('echo hi', H),),
    "LocalForward": (('8080 localhost:80', N),),
    "LogLevel": (('ERROR', H), ('INFO', H), ('DEBUG3', H)),
    "LogVerbose": (('kex.c:*', H),),
    "MACs": (('hmac-sha2-256', O),),
    "NoHostAuthenticationForLocalhost": (('no', H), ('yes', N)),
    "NumberOfPasswordPrompts": (('1', H),),
    "PasswordAuthentication": (('no', H), ('yes', H)),
    "PermitLocalCommand": (('no', H), ('yes', N)),
    "PermitRemoteOpen": (('any', H),),
    "PKCS11Provider": (('none', H), ('/usr/lib/opensc-pkcs11.so', O)),
    "Port": (('2222', H),),
    "PreferredAuthentications": (('publickey,password', H), ('gssapi-with-mic', O)),
    "ProxyCommand": (('ssh -W %h:%p bastion', H),),
    "ProxyJump": (('bastion', H),),
    "ProxyUseFdpass": (('no', H), ('yes', O)),
    "PubkeyAcceptedAlgorithms": (('ssh-ed25519', O),),
    "PubkeyAuthentication": (('yes', H), ('no', O)),
    "RekeyLimit": (('1G', N),),
    "RemoteCommand": (('none', H), ('htop', N)),
    "RemoteForward": (('9000 localhost:9000', N),),
    "RequestTTY": (('no', H), ('auto', H), ('force', N)),
    "RequiredRSASize": (('2048', O),),
    "RevokedHostKeys": (('/etc/ssh/revoked', O),),
    "SecurityKeyProvider": (('internal', H),),
    "SendEnv": (('LANG', N),),
    "ServerAliveCountMax": (('3', H),),
    "ServerAliveInterval": (('15', H), ('often', O)),
    "SessionType": (('default', H), ('none', N)),
    "SetEnv": (('FOO=bar', O), ('CUDA_VISIBLE_DEVICES=0', O)),
    "StdinNull": (('no', H), ('yes', N)),
    "StreamLocalBindMask": (('0177', H),),
    "StreamLocalBindUnlink": (('yes', H),),
    "StrictHostKeyChecking": (('yes', H), ('ask', H), ('accept-new', H), ('no', N), ('off', N), ('false', N)),
    "SyslogFacility": (('USER', H),),
    "TCPKeepAlive": (('yes', H), ('no', H)),
    "Tunnel": (('no', H), ('yes', N)),
    "TunnelDevice": (('any:any', H),),
    "UpdateHostKeys": (('no', H), ('yes', N), ('ask', N)),
    "User": (('ops', H),),
    "UserKnownHostsFile": (('~/.ssh/known_hosts_fleet', H),),
    "VerifyHostKeyDNS": (('no', H), ('yes', N)),
    "VisualHostKey": (('no', H), ('yes', N)),
    "XAuthLocation": (('/usr/bin/xauth', H),),
}
STRUCTURE = {"host", "match", "include"}  # read by sweep's config reader, not settings


def _verdict(keyword: str, value: str) -> str:
    finding = check(Setting(keyword.lower(), tuple(value.split()), "test:1", keyword))
    return H if finding is None else {"note": N, "openssh": O}[finding.kind]


@pytest.mark.parametrize("keyword,value,verdict",
                         [(k, v, verdict) for k, cases in TABLE.items() for v, verdict in cases])
def test_each_keyword_value_is_honoured_left_unused_or_sent_through_ssh_as_promised(keyword, value, verdict):
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
        assert said.strip() == describe(name.lower()), name


def test_an_unknown_keyword_on_the_command_line_is_refused_as_ssh_refuses_it():
    from sweep.collect.ssh.config import SSHConfigFile, SSHSettingRefused
    from sweep.inventory.model import Host

    host = Host(name="gpu01", address="gpu01", port=None, user=None, key_file=None, python="python3",
                ssh_common_args="-o UseKeychain=yes", proxy_jump=None, groups=(), vars={}, settings={})
    with pytest.raises(SSHSettingRefused, match="UseKeychain is not an ssh_config keyword"):
        SSHConfigFile(None).check(host)


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
