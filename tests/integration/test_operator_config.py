"""Issue 50: the operator's own ~/.ssh/config, as people keep it, on real loopback sshds: no host refused
that ssh would reach. Conveniences sweep never needs are left unused, with one note per keyword and run;
a host whose config asks for what only OpenSSH does goes through ssh in the same run, named; a ProxyCommand
holding double quotes runs as ssh runs it."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import yaml

from sweep.collect.run import run_sweep
from sweep.demo.loopback import FleetHost, LocalFleet

from helpers import read_records, require

pytestmark = pytest.mark.integration
HOSTS = ("cfg-a", "cfg-b", "cfg-c")


@pytest.fixture(scope="module")
def config_fleet(needs_sshd, tmp_path_factory):
    """Three healthy hosts and a bastion, each sshd logging the client's software version (LogLevel DEBUG1)."""
    hosts = [FleetHost(name, sshd_options=("LogLevel DEBUG1",)) for name in (*HOSTS, "bastion")]
    with LocalFleet(hosts, tmp_path_factory.mktemp("config-fleet") / "fleet") as fleet:
        yield fleet


def _inventory(path: Path, names) -> Path:
    path.write_text(yaml.safe_dump({"all": {"hosts": {name: None for name in names}}}))
    return path


def _blocks(fleet: LocalFleet, names=HOSTS) -> str:
    return "".join(f"Host {name}\n  HostName {fleet.addresses[name]}\n" for name in names)


TYPICAL = """Host *
  ForwardAgent yes
  ControlMaster auto
  ControlPath ~/.ssh/cm-%r@%h:%p
  ControlPersist 10m
  SendEnv LANG LC_*
  User root
  IdentityFile {key}
"""


def test_a_typical_config_sweeps_every_host_with_one_note_per_keyword(config_fleet, tmp_path, hermetic_home):
    """`Host *` with ForwardAgent yes, ControlMaster auto, ControlPath, ControlPersist and SendEnv, as the issue's
    operator keeps it: 970fdb3 stopped the run at ForwardAgent; now every host is swept, and stderr says once per
    keyword (not per host) that sweep leaves it unused."""
    fleet = config_fleet
    (hermetic_home / ".ssh" / "config").write_text(_blocks(fleet) + TYPICAL.format(key=fleet.client_key_path))
    inventory = _inventory(tmp_path / "inv.yml", HOSTS)
    done = subprocess.run([sys.executable, "-m", "sweep.cli", "run", str(inventory), "--known-hosts",
                           str(fleet.known_hosts_path), "--out", str(tmp_path / "run"), "--no-report"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "HOME": str(hermetic_home)})
    records = read_records(tmp_path / "run")
    assert {name: r["status"] for name, r in records.items()} == dict.fromkeys(HOSTS, "ok"), done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("sweep: note: ")]
    for keyword in ("ForwardAgent yes", "ControlMaster auto", "ControlPath", "ControlPersist 10m", "SendEnv LANG"):
        said = [line for line in notes if f": {keyword}" in line]
        assert len(said) == 1, (keyword, notes)
        assert "left unused" in said[0] and "cfg-a, cfg-b, cfg-c" in said[0], said[0]
    assert len(notes) == 5, notes
    assert not list((hermetic_home / ".ssh").glob("cm-*"))  # no connection shared, nothing left running


@pytest.fixture()
def agent_socket(tmp_path, config_fleet):
    """A private ssh-agent holding the fleet's client key, at a socket no environment names (as 1Password's)."""
    require(shutil.which("ssh-agent") is not None, "needs OpenSSH's ssh-agent")
    sock = tmp_path / "vault" / "agent.sock"
    sock.parent.mkdir()
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if sock.exists():
            break
        time.sleep(0.05)
    subprocess.run(["ssh-add", "-q", str(config_fleet.client_key_path)], check=True, capture_output=True,
                   env={**os.environ, "SSH_AUTH_SOCK": str(sock)})
    yield sock
    proc.terminate()
    proc.wait()


def _clients(fleet: LocalFleet, name: str) -> list[str]:
    """The client software each connection to `name`'s sshd announced (OpenSSH_..., paramiko_...)."""
    log = (fleet.workdir / "logs" / f"{name}.log").read_text(errors="replace")
    return re.findall(r"remote software version (\S+)", log)


def test_a_host_needing_openssh_and_one_not_are_both_swept_the_first_through_ssh_named(
        config_fleet, tmp_path, hermetic_home, agent_socket):
    """cfg-a's key is only in an agent at an IdentityAgent socket (paramiko cannot use one), cfg-b's a key file:
    one run sweeps both, cfg-a through OpenSSH's ssh (its sshd saw an OpenSSH client), named in a note with why;
    cfg-b through sweep's own transport (its sshd saw paramiko). `--transport paramiko` refuses cfg-a instead."""
    fleet = config_fleet
    (hermetic_home / ".ssh" / "config").write_text(
        f"Host cfg-a\n  HostName {fleet.addresses['cfg-a']}\n  IdentityAgent {agent_socket}\n"
        f"Host cfg-b\n  HostName {fleet.addresses['cfg-b']}\n  IdentityFile {fleet.client_key_path}\n"
        "Host *\n  User root\n")
    inventory = _inventory(tmp_path / "inv.yml", ("cfg-a", "cfg-b"))
    before = {name: len(_clients(fleet, name)) for name in ("cfg-a", "cfg-b")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_sweep(inventory, out=tmp_path / "run", ssh=fleet.ssh_settings(
            ssh_config="~/.ssh/config", allow_agent=True))
    assert result.fully_swept, result.failures
    from sweep.errors import SSHConfigNote

    notes = [str(w.message) for w in caught if issubclass(w.category, SSHConfigNote)]
    assert len(notes) == 1 and notes[0].startswith("cfg-a through OpenSSH's ssh: IdentityAgent "), notes
    time.sleep(0.3)  # the sshd log line may trail the session
    new = {name: _clients(fleet, name)[before[name]:] for name in ("cfg-a", "cfg-b")}
    assert new["cfg-a"] and all(v.startswith("OpenSSH_") for v in new["cfg-a"]), new
    assert new["cfg-b"] and all(v.startswith("paramiko_") for v in new["cfg-b"]), new
    from sweep.errors import SSHConfigError

    with pytest.raises(SSHConfigError, match=r"cfg-a: IdentityAgent .* asks for an agent socket"):
        run_sweep(inventory, out=tmp_path / "strict", ssh=fleet.ssh_settings(
            ssh_config="~/.ssh/config", allow_agent=True, transport="paramiko"))


@pytest.mark.parametrize("transport", ["paramiko", "auto", "openssh"])
def test_a_proxy_command_with_double_quotes_runs_as_ssh_runs_it(config_fleet, tmp_path, hermetic_home, transport):
    """`ProxyCommand ssh -o "StrictHostKeyChecking yes" ... -W %h:%p bastion`: 970fdb3 dropped the quotes, so the
    command run was `ssh -o StrictHostKeyChecking yes ...` (a different command, which fails); now the shell
    gets the line as ssh gives it, and the host is reached through the bastion."""
    fleet = config_fleet
    config = hermetic_home / ".ssh" / "config"
    quoted = (f'ssh -F {config} -o "BatchMode yes" -o "StrictHostKeyChecking yes" '
              f'-o "UserKnownHostsFile {fleet.known_hosts_path}" -W %h:%p bastion')
    config.write_text(f"Host cfg-c\n  HostName {fleet.addresses['cfg-c']}\n  ProxyCommand {quoted}\n"
                      f"Host bastion\n  HostName {fleet.addresses['bastion']}\n"
                      f"Host *\n  User root\n  IdentityFile {fleet.client_key_path}\n")
    inventory = _inventory(tmp_path / "inv.yml", ("cfg-c",))
    result = run_sweep(inventory, out=tmp_path / "run", ssh=fleet.ssh_settings(ssh_config=str(config),
                                                                             transport=transport))
    assert result.fully_swept, result.failures
