"""sweep reads ssh_config as OpenSSH does: `ssh -G` (OpenSSH's own answer) is the oracle.

Configs are generated (hypothesis) from the grammar sweep honours: Host and Match blocks
(host, originalhost, user, all, exec, negation), Include, HostName with %h, User, Port,
IdentityFile, CertificateFile, ProxyCommand and ProxyJump (first one wins), and ssh(1)
options on the command line, as an inventory's ansible_ssh_common_args gives them.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sweep.collect.ssh.config import SSHConfigFile
from sweep.errors import SSHConfigError
from sweep.collect.ssh.openssh_config import ConfigReader, SSHConfigRejected, command_line
from sweep.collect.ssh.policy import KEYWORDS
from sweep.inventory.model import Host

from helpers import require

SSH = shutil.which("ssh")
# mixed case and non-ASCII: OpenSSH matches Host patterns byte by byte, case-sensitively; Match host and
# originalhost fold ASCII case only (the Kelvin sign \u212a is not k); "gpu[12]" is a name, not a class
NAMES = ["gpu01", "gpu02", "GPU01", "Gpu02", "gpu1", "gpu[12]", "web1", "bastion", "db.example.org",
         "Db.Example.ORG", "gpu\u00e9", "\u212aube", "kube", "KUBE"]
PATTERNS = ["gpu*", "gpu0?", "*", "web1", "!gpu02", "*.example.org", "bast*", "db*", "GPU*", "Gpu0?", "gpu[12]",
            "gpu?", "gpu??", "*\u00e9", "\u212a*", "k*", "KUBE", "!GPU01", "*.EXAMPLE.org"]
KEYWORDS_VALUES = st.one_of(
    st.tuples(st.just("HostName"), st.sampled_from(["10.1.2.3", "%h.internal", "real-%h", "%%h", "FD00::0001",
                                                   "AbC:x", "Real-%h.Example", "127.1", "GPU01"])),
    st.tuples(st.just("User"), st.sampled_from(["alice", "bob", "ops"])),
    st.tuples(st.just("Port"), st.sampled_from(["22", "2222", "8022"])),
    st.tuples(st.just("IdentityFile"), st.sampled_from(["/keys/a", "/keys/%h_%r", "/keys/b"])),
    st.tuples(st.just("CertificateFile"), st.sampled_from(["/keys/a-cert.pub", "/certs/%n"])),
    st.tuples(st.just("ProxyCommand"), st.sampled_from(["ssh -W %h:%p bastion", "nc %h %p", "none",
                                                       'ssh -o "ProxyCommand nc %h %p" -W %h:%p jump',
                                                       "sh -c 'nc %h %p'  # kept"])),
    st.tuples(st.just("ProxyJump"), st.sampled_from(["bastion", "ops@jump:2200", "a,b", "none", "NONE"])),
)


def _match_line(draw, top: bool = True) -> str:
    kinds = ["host", "originalhost", "user", "localuser", "all", "exec", "final", "canonical"] + (
        ["all+", "+all"] if top else [])
    kind = draw(st.sampled_from(kinds))
    neg = "!" if draw(st.booleans()) and kind != "all" else ""
    if kind == "all":
        return "Match all"
    if kind in ("final", "canonical"):  # ssh's second pass: Host lines then match the final name
        return f"Match {neg}{kind} host {draw(st.sampled_from(['gpu*', '10.*', 'fd00::1', '*']))}"
    if kind == "all+":  # ssh refuses the file: 'all' cannot be combined with other Match attributes
        return f"Match {neg}all host {draw(st.sampled_from(PATTERNS))}"
    if kind == "+all":  # after another attribute ssh takes it
        return f"Match host {draw(st.sampled_from(PATTERNS))} {neg}all"
    if kind == "exec":
        return f"Match {neg}exec \"{draw(st.sampled_from(['true', 'false', 'test %h = gpu01']))}\""
    values = {"host": ["gpu*", "10.*", "*.internal", "real-*,!real-web1", "GPU*", "\u212a*", "k*,!KUBE"],
              "originalhost": ["gpu0?", "web*", "GPU0?", "kube", "gpu[12]"],
              "user": ["alice", "b*", "root"], "localuser": ["root", "nobody,r*"]}[kind]
    return f"Match {neg}{kind} {draw(st.sampled_from(values))}"


@st.composite
def configs(draw, include: bool = True):
    """Blocks of lines; with `include`, an Include of another generated file somewhere (its text second)."""
    blocks = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            header = "Host " + " ".join(draw(st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=2)))
        else:
            header = _match_line(draw, include)
        body = draw(st.lists(KEYWORDS_VALUES, min_size=1, max_size=4))
        sep = draw(st.sampled_from([" ", "=", " = "]))
        blocks.append([header, *(f"  {k}{sep}{v}" if k != "ProxyCommand" else f"  {k} {v}" for k, v in body)])
    if include and draw(st.booleans()):
        where = draw(st.integers(0, len(blocks) - 1))
        blocks[where].insert(draw(st.integers(1, len(blocks[where]))), "  Include {tmp}/included.conf")
        return blocks, draw(configs(include=False))
    return blocks, None


def _ssh_g(config: Path, host: str, args: list[str], refused: bool = False) -> dict[str, list[str]] | str:
    done = subprocess.run([SSH, "-G", "-F", str(config), *args, host], capture_output=True, text=True,
                          timeout=20, stdin=subprocess.DEVNULL)
    if refused and done.returncode != 0:
        return done.stderr
    assert done.returncode == 0, done.stderr
    out: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        out.setdefault(key, []).append(value)
    return out


def _compare(tmp_path: Path, text: str, host: str, args_text: str) -> None:
    config = tmp_path / "config"
    config.write_text(text)
    (tmp_path / "inv").write_text("")  # ssh drops an -i file that does not exist
    args_text = args_text.replace("{tmp}", str(tmp_path))
    reader = ConfigReader(str(config), local_user="root")
    theirs = _ssh_g(config, host, args_text.split(), refused=True)
    if isinstance(theirs, str) and "cannot be combined with other Match attributes" in theirs:
        with pytest.raises(SSHConfigError, match="cannot be combined with other Match attributes"):
            reader.resolve(host, command_line(args_text, "inventory"))
        return
    ours = reader.resolve(host, command_line(args_text, "inventory"))
    if isinstance(theirs, str):  # OpenSSH refuses the config for this host: so must sweep
        assert "jumphost loop" in theirs, theirs
        with pytest.raises(SSHConfigError, match="jumphost loop"):
            SSHConfigFile(str(config)).check(Host(
                name=host, address=host, port=None, user=None, key_file=None, python="python3",
                ssh_common_args=args_text or None, proxy_jump=None, groups=(), vars={}, settings={}))
        return
    assert theirs["hostname"] == [ours.hostname], text
    assert theirs["port"] == [str(ours.port)], text
    assert theirs["user"] == [ours.user("root")], text
    for key in ("identityfile", "certificatefile"):
        mine = [s.value for s in ours.all(key)]
        if mine:  # ssh -G lists its default identities when none is set
            assert theirs.get(key) == mine, text
        elif key == "certificatefile":
            assert key not in theirs, text
    for key in ("proxycommand", "proxyjump"):  # ssh -G prints neither when it is none
        mine = ours.get(key)
        assert theirs.get(key) == ([mine] if mine and mine.lower() != "none" else None), text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(blocks=configs(), host=st.sampled_from(NAMES),
       args=st.sampled_from(["", "-l root", "-p 2200 -o User=ops", "-o ProxyJump=jumper", "-J x -i {tmp}/inv -C"]))
def test_resolution_agrees_with_ssh_G(tmp_path, blocks, host, args):
    require(SSH is not None, "needs OpenSSH's ssh (apt-get install -y openssh-client)")
    main, included = blocks
    if included is not None:
        (tmp_path / "included.conf").write_text("\n".join(line for block in included[0] for line in block) + "\n")
    text = "\n".join(line for block in main for line in block) + "\n"
    _compare(tmp_path, text.replace("{tmp}", str(tmp_path)), host, args)


def test_include_is_read_in_place_and_cannot_change_the_enclosing_block(tmp_path):
    require(SSH is not None, "needs OpenSSH's ssh")
    extra = tmp_path / "conf.d"
    extra.mkdir()
    (extra / "10-a.conf").write_text("Host gpu*\n  User from-include\nHost web1\n  Port 2201\n")
    (extra / "20-b.conf").write_text("Port 2299\nHostName via-include-%h\n")
    text = (f"Host gpu01\n  Include {extra}/*.conf\n  IdentityFile /keys/after-include\n"
            "Host *\n  User everyone\n")
    for host in ("gpu01", "gpu02", "web1"):
        _compare(tmp_path, text, host, "")


def test_a_token_openssh_does_not_accept_is_refused_with_its_line(tmp_path):
    config = tmp_path / "config"
    config.write_text("Host *\n  HostName %x.example\n")
    resolved = ConfigReader(str(config)).resolve("gpu01")
    with pytest.raises(SSHConfigError) as err:
        resolved.hostname
    assert "%x" in err.value.message and "%h" in err.value.message


def test_match_criteria_ssh_does_not_know_refuse_the_whole_file_as_ssh_does(tmp_path):
    require(SSH is not None, "needs OpenSSH's ssh")
    config = tmp_path / "config"
    config.write_text("Host gpu*\n  User a\nMatch localnetwork 10.0.0.0/8\n  User b\n")
    assert "Bad Match condition" in _ssh_g(config, "web1", [], refused=True)
    with pytest.raises(SSHConfigRejected) as err:
        ConfigReader(str(config)).resolve("web1")  # a host the block does not concern: the file is refused
    assert err.value.where == f"{config}:3" and "localnetwork" in err.value.message


FINAL_PASS = """Host alias
  HostName Real
Match host zzz final
Host real
  User realuser
Match canonical host can*
  User canuser
Match final originalhost Mixed*
  Port 2201
Host Mixed*
  Port 2202
Host v6
  HostName FD00::0001
Host colon
  HostName AbC:x
Host ka
  KeepAlive no
Host mapped
  HostName ::FFFF:1.2.3.4
Host upper6
  HostName FD00::1
  HostKeyAlias Gpu-Alias
"""


@pytest.mark.parametrize("name", ["alias", "ALIAS", "real", "can1", "Can1", "Mixed1", "mixed1", "v6", "colon", "ka",
                                  "mapped", "upper6", "nothing"])
def test_match_final_and_canonical_and_the_final_name_agree_with_ssh_G(tmp_path, name):
    """Issue 50: `Match final` anywhere makes ssh read the file again, Host lines then matching the final
    name (lower-cased, addresses canonical: FD00::0001 is fd00::1, but FD00::1 kept as written, a name with ':'
    kept as written); HostKeyAlias lower-cased, as ssh looks it up in known_hosts."""
    require(SSH is not None, "needs OpenSSH's ssh")
    config = tmp_path / "config"
    config.write_text(FINAL_PASS)
    theirs = _ssh_g(config, name, [])
    ours = ConfigReader(str(config), local_user="root", known=KEYWORDS).resolve(name)
    assert (ours.hostname, str(ours.port), ours.user("root")) == (
        theirs["hostname"][0], theirs["port"][0], theirs["user"][0])
    assert theirs["tcpkeepalive"] == [{"no": "no"}.get(ours.get("tcpkeepalive"), "yes")]
    assert theirs.get("hostkeyalias") == ([ours.host_key_alias] if ours.host_key_alias else None)


@pytest.mark.parametrize("line", [
    'ProxyCommand ssh -o "ProxyCommand nc %h %p" -W %h:%p jump',
    "ProxyCommand sh -c 'nc %h %p'  # a comment kept, as ssh keeps it",
    "ProxyCommand=nc  -X 5   %h %p",
    'LocalCommand echo "a  b"',
])
def test_command_values_are_the_rest_of_the_line_as_ssh_keeps_them(tmp_path, line):
    require(SSH is not None, "needs OpenSSH's ssh")
    config = tmp_path / "config"
    config.write_text(f"Host *\n  {line}\n")
    (setting,) = ConfigReader(str(config), known=KEYWORDS).resolve("gpu01").settings
    assert _ssh_g(config, "gpu01", [])[setting.keyword] == [setting.value]


@pytest.mark.parametrize("text, refused", [
    ('Match exec "test -n \\"$SSH_AGENT\\""\n  User x\n', True),  # ssh splits it by strdelim and refuses it
    ('Match exec "test %h = gpu01" user root\n  User x\n', False),
    ("Match exec 'true'\n  User x\n", False),  # strdelim keeps single quotes: the shell runs 'true'
    ("Match exec 'true' user nobody\n  User x\n", False),
    ("Match exec a\\ b\n  User x\n", True),  # strdelim: exec 'a\\', then a criterion 'b' 
    ('Match host="gpu*"\n  User x\n', False),
    ("Host a\n  Ciphers bogus-cipher\nHost gpu01\n  User x\n", True),  # refused wherever it stands
    ("Host a\n  User one two\nHost gpu01\n  User x\n", True),
    ("Host a\n  Port abc\n", True),
    ("Host a\n  Port ssh\n  ForwardAgent maybe\n", False),
    ("Host a\n  Frobnicate yes\n", True),
    ("IgnoreUnknown frob*\nHost a\n  Frobnicate yes\n", False),
    ("Host a\n  HostName 'unclosed\n", True),
    ("Host a\n  Compression true\n", True),
    ("Host a\n  RemoteForward ${SWEEP_UNSET_50}/S.gpg-agent /tmp/S.extra\n", True),  # readconf expands it as it reads
    ("Host a\n  RemoteForward ${HOME}/S.gpg-agent /tmp/S.extra\n", False),
])
def test_lines_ssh_refuses_refuse_the_whole_file_and_only_those(tmp_path, text, refused):
    require(SSH is not None, "needs OpenSSH's ssh")
    config = tmp_path / "config"
    config.write_text(text)
    theirs = _ssh_g(config, "gpu01", [], refused=True)
    assert isinstance(theirs, str) == refused, theirs
    reader = ConfigReader(str(config), local_user="root", known=KEYWORDS)
    if refused:
        with pytest.raises(SSHConfigRejected) as err:
            reader.resolve("gpu01")
        assert err.value.where.startswith(f"{config}:")
        assert f"line {err.value.where.rsplit(':', 1)[1]}" in theirs  # the line ssh names
    else:
        assert reader.resolve("gpu01").user("root") == theirs["user"][0]


@pytest.mark.parametrize("line", [
    "ChallengeResponseAuthentication no", "SkeyAuthentication yes", "PubkeyAcceptedKeyTypes ssh-ed25519",
    "DSAAuthentication yes", "IdentityFile2 /keys/old", "SmartcardDevice /usr/lib/p11.so",
    "HostbasedKeyTypes ssh-ed25519",
])
def test_old_names_are_the_keywords_openssh_reads_them_as(tmp_path, line):
    require(SSH is not None, "needs OpenSSH's ssh")
    config = tmp_path / "config"
    config.write_text(f"Host *\n  {line}\n")
    (setting,) = ConfigReader(str(config)).resolve("gpu01").settings
    theirs = _ssh_g(config, "gpu01", [])
    assert setting.value in theirs[setting.keyword] or theirs[setting.keyword] == [
        {"yes": "true", "no": "false"}.get(setting.value, setting.value)]


@pytest.mark.parametrize("line", ["Protocol 2", "Cipher aes128-cbc", "UseRoaming no", "RSAAuthentication yes",
                                  "CompressionLevel 6", "KerberosAuthentication no", "UsePrivilegedPort no"])
def test_options_openssh_reads_and_ignores_are_ignored_here_too(tmp_path, line):
    require(SSH is not None, "needs OpenSSH's ssh")
    config = tmp_path / "config"
    config.write_text(f"Host *\n  {line}\n  User ops\n")
    assert [s.keyword for s in ConfigReader(str(config)).resolve("gpu01").settings] == ["user"]
    assert _ssh_g(config, "gpu01", [])["user"] == ["ops"]  # ssh -G reads the file without complaint


def _host_named(name: str) -> Host:
    return Host(name=name, address=name, port=None, user=None, key_file=None, python="python3",
                ssh_common_args=None, proxy_jump=None, groups=(), vars={}, settings={})


def test_host_patterns_are_case_sensitive_so_the_route_is_openssh_s(tmp_path):
    """Issue 37: `Host GPU*` (through a bastion) before `Host gpu*`: GPU01 goes through the bastion to .2,
    as ssh -G says, never directly to .3; `Host gpu[12]` is the literal name, not a character class."""
    require(SSH is not None, "needs OpenSSH's ssh")
    config = tmp_path / "config"
    config.write_text("Host GPU*\n  HostName 10.0.0.2\n  ProxyJump bastion\nHost gpu[12]\n  HostName 10.0.0.9\n"
                      "Host gpu*\n  HostName 10.0.0.3\nHost bastion\n  HostName 10.0.0.1\n")
    routes = {name: [hop.address for hop in SSHConfigFile(str(config)).check(_host_named(name))]
              for name in ("GPU01", "gpu01", "gpu1", "gpu[12]", "\u212a")}
    assert routes == {"GPU01": ["10.0.0.1", "10.0.0.2"], "gpu01": ["10.0.0.3"], "gpu1": ["10.0.0.3"],
                      "gpu[12]": ["10.0.0.9"], "\u212a": ["\u212a"]}
    for name in ("GPU01", "gpu01", "gpu1", "gpu[12]"):
        assert _ssh_g(config, name, [])["hostname"] == [routes[name][-1]]


def test_match_all_with_other_attributes_is_refused_as_ssh_refuses_it(tmp_path):
    require(SSH is not None, "needs OpenSSH's ssh")
    config = tmp_path / "config"
    config.write_text("Host *\n  User a\nMatch all host x\n  User b\n")
    assert "cannot be combined" in _ssh_g(config, "x", [], refused=True)
    with pytest.raises(SSHConfigError) as err:
        ConfigReader(str(config)).resolve("x")
    assert err.value.where == f"{config}:3" and "cannot be combined with other Match attributes" in err.value.message


def test_strict_host_key_checking_no_is_taken_as_accept_new_with_a_note(tmp_path):
    """Issue 50: `StrictHostKeyChecking no` no longer stops the run; sweep records a new key (accept-new) and still
    refuses a changed one: never less strict than accept-new, and the run says so once."""
    config = tmp_path / "config"
    config.write_text("Host gpu*\n  StrictHostKeyChecking no\n  ForwardAgent yes\n")
    file = SSHConfigFile(str(config), local_user="root")
    for name in ("gpu01", "gpu02"):
        (hop,) = file.check(_host_named(name))
        assert hop.accept_new
    assert set(file.notes) == {"stricthostkeychecking", "forwardagent"}
    why, where, hosts = file.notes["stricthostkeychecking"]
    assert where == f"{config}:2" and hosts == {"gpu01", "gpu02"} and "accept-new" in why


def test_a_host_sent_through_ssh_is_named_in_the_notes_of_what_it_leaves_unused(tmp_path):
    """A host going through OpenSSH's ssh has its ForwardAgent overridden there too (PROBE_OPTIONS): the run's note
    names it beside the hosts of sweep's own transport; the reason it goes through ssh is the first such setting."""
    from sweep.collect.ssh.config import NeedsOpenSSH

    config = tmp_path / "config"
    config.write_text("Host gpu02\n  Ciphers aes128-ctr\n  KexAlgorithms curve25519-sha256\nHost *\n  ForwardAgent yes\n")
    file = SSHConfigFile(str(config), local_user="root")
    file.check(_host_named("gpu01"))
    with pytest.raises(NeedsOpenSSH) as need:
        file.check(_host_named("gpu02"))
    assert need.value.why.startswith("Ciphers aes128-ctr asks for choosing ciphers") and need.value.where.endswith(":2")
    assert file.notes["forwardagent"][2] == {"gpu01", "gpu02"}


def test_environment_variables_in_paths_are_expanded_and_an_unset_one_refused_as_ssh_refuses(tmp_path, monkeypatch):
    """${NAME} in IdentityFile and UserKnownHostsFile is the environment's value (ssh expands it before %-tokens);
    a ControlPath naming a variable this environment lacks makes ssh refuse the host, and sweep too."""
    require(SSH is not None, "needs OpenSSH's ssh")
    monkeypatch.setenv("SWEEP_KEYS_50", "/keys")
    monkeypatch.delenv("SWEEP_UNSET_50", raising=False)
    config = tmp_path / "config"
    config.write_text("Host gpu01\n  IdentityFile ${SWEEP_KEYS_50}/%h\n  UserKnownHostsFile ${SWEEP_KEYS_50}/kh\n"
                      "Host gpu02\n  ControlPath ${SWEEP_UNSET_50}/cm\n")
    (hop,) = SSHConfigFile(str(config)).check(_host_named("gpu01"))
    assert hop.key_files == ("/keys/gpu01",) and hop.known_hosts == ("/keys/kh",)
    assert _ssh_g(config, "gpu01", [])["userknownhostsfile"] == ["/keys/kh"]
    assert "SWEEP_UNSET_50" in _ssh_g(config, "gpu02", [], refused=True)
    with pytest.raises(SSHConfigError, match=r"ControlPath uses \$\{SWEEP_UNSET_50\}, which has no value"):
        SSHConfigFile(str(config)).check(_host_named("gpu02"))
