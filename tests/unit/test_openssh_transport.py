"""--transport openssh: what ssh(1) itself makes of the command line sweep gives it (`ssh -G` is the oracle).

Host keys as strict as sweep's own transport, for every hop; the run's known_hosts first; curve25519
first unless the operator's config or inventory chooses the key exchange.
"""
from __future__ import annotations

import shutil
import subprocess

import pytest

from sweep.errors import SSHConfigError
from sweep.collect.ssh.openssh import OpenSSHProber
from sweep.collect.ssh.prober import SSHOptions
from sweep.inventory.model import Host

from helpers import require

SSH = shutil.which("ssh")


def _host(**given) -> Host:
    fields = {"name": "gpu07", "address": "gpu07", "port": None, "user": None, "key_file": None,
              "python": "python3", "ssh_common_args": None, "proxy_jump": None, "groups": (), "vars": {},
              "settings": {}}
    return Host(**{**fields, **given})


def _resolved(prober: OpenSSHProber, host: Host, target: str | None = None) -> dict[str, str]:
    """ssh -G for the argv sweep would run (or for another host name through the same -F file)."""
    argv = prober.argv(host, prober.options)
    assert argv[-3] == "--" and argv[-2] == host.address
    options = argv[1:-3]
    done = subprocess.run([SSH, "-G", *options, target or host.address], capture_output=True, text=True,
                          timeout=20, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)


@pytest.fixture()
def options(tmp_path, hermetic_home):
    require(SSH is not None, "needs OpenSSH's ssh (apt-get install -y openssh-client)")
    run_known = tmp_path / "fleet_known_hosts"
    return SSHOptions(known_hosts=(str(run_known), "~/.ssh/known_hosts"), ssh_config="~/.ssh/config",
                      allow_agent=False)


@pytest.fixture()
def hermetic_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


def test_strict_host_keys_and_curve25519_first_without_a_config(options, tmp_path, hermetic_home):
    found = _resolved(OpenSSHProber(b"", [], options), _host())
    assert found["batchmode"] == "yes" and found["stricthostkeychecking"] == "true"
    assert found["userknownhostsfile"] == f"{tmp_path / 'fleet_known_hosts'} {hermetic_home / '.ssh' / 'known_hosts'}"
    assert found["globalknownhostsfile"] == "none" and found["updatehostkeys"] == "false"
    assert found["kexalgorithms"].startswith("curve25519-sha256,curve25519-sha256@libssh.org,")
    assert found["identityagent"] == "none"


def test_the_operators_config_chooses_kex_and_cannot_loosen_host_keys_of_a_jump_host(options, hermetic_home):
    (hermetic_home / ".ssh" / "config").write_text(
        "Host gpu*\n  KexAlgorithms diffie-hellman-group14-sha256\n  ProxyJump bastion\n"
        "Host bastion\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n")
    prober = OpenSSHProber(b"", [], options)
    found = _resolved(prober, _host())
    assert found["kexalgorithms"] == "diffie-hellman-group14-sha256" and found["proxyjump"] == "bastion"
    # ssh runs `ssh -F <the same file> -W ... bastion` for the jump: sweep's settings lead that file
    jump = subprocess.run([SSH, "-G", "-F", prober.run_config, "bastion"], capture_output=True, text=True,
                          check=True).stdout
    assert "stricthostkeychecking true" in jump.splitlines()
    assert "userknownhostsfile /dev/null" not in jump.splitlines()


def test_accept_new_only_when_asked(options, hermetic_home):
    from dataclasses import replace

    assert _resolved(OpenSSHProber(b"", [], replace(options, accept_new_host_keys=True)),
                     _host())["stricthostkeychecking"] == "accept-new"
    (hermetic_home / ".ssh" / "config").write_text("Host gpu07\n  StrictHostKeyChecking no\n")
    OpenSSHProber(b"", [], options).check(_host())  # issue 50: no refusal, and no less strict than accept-new
    assert _resolved(OpenSSHProber(b"", [], options), _host())["stricthostkeychecking"] == "accept-new"


def test_what_only_an_interactive_session_wants_is_overridden_on_the_command_line(options, hermetic_home):
    """Issue 50: the config's conveniences reach no host through ssh either: no agent or X11 forwarded, no
    forwarding, no connection shared (nothing left running), the agent run as the command."""
    (hermetic_home / ".ssh" / "config").write_text(
        "Host *\n  ForwardAgent yes\n  ForwardX11 yes\n  ControlMaster auto\n  ControlPath ~/.ssh/cm-%C\n"
        "  ControlPersist 10m\n  LocalForward 8080 localhost:80\n  RemoteCommand htop\n  RequestTTY force\n"
        "  PermitLocalCommand yes\n  LocalCommand touch /tmp/x\n")
    found = _resolved(OpenSSHProber(b"", [], options), _host())
    assert (found["forwardagent"], found["forwardx11"], found["controlmaster"]) == ("no", "no", "false")
    assert "controlpath" not in found and found["controlpersist"] == "no"
    assert (found["clearallforwardings"], found["permitlocalcommand"], found["sessiontype"]) == ("yes", "no", "default")
    assert "remotecommand" not in found


def test_the_inventory_args_reach_ssh(options):
    host = _host(port=2222, user="ops", ssh_common_args="-o ServerAliveInterval=7 -C",
                 ssh_extra_args="-o GSSAPIAuthentication=yes")
    found = _resolved(OpenSSHProber(b"", [], options), host)
    assert (found["port"], found["user"], found["serveraliveinterval"]) == ("2222", "ops", "7")
    assert found["compression"] == "yes" and found["gssapiauthentication"] == "yes"
