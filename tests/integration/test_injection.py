"""No inventory value runs as a command: issue 23's shell injections through ssh_config tokens, on real
loopback sshds reached through a ProxyCommand (a TCP relay that logs each connection) and read with a
``Match exec`` line, through both transports. The ssh_config is the test's own ``~/.ssh/config``
under a temporary HOME (hermetic)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweep.collect.run import run_sweep
from sweep.demo.loopback import FleetHost, LocalFleet
from sweep.collect.options import SSHSettings

from helpers import RELAY_LOOP, read_records

pytestmark = pytest.mark.integration
TRANSPORTS = ("paramiko", "openssh")
ROOT = Path(__file__).resolve().parents[2]

RELAY = """import os, socket, sys, threading
host, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with open(log, "a") as fh:
    fh.write(f"{host} {port}\\n")
conn = socket.create_connection((host, port))
""" + RELAY_LOOP


@pytest.fixture(scope="module")
def relay_fleet(needs_sshd, tmp_path_factory):
    """Two healthy loopback hosts and a TCP relay script for the ProxyCommand."""
    work = tmp_path_factory.mktemp("injection")
    (work / "tcp.py").write_text(RELAY)
    with LocalFleet([FleetHost("honest"), FleetHost("second")], work / "fleet") as fleet:
        yield fleet, work


def _setup(fleet, work: Path, home: Path, tmp_path: Path) -> dict[str, Path]:
    """~/.ssh/config with the issue's ProxyCommand and a Match exec line that leaves a file when it runs."""
    paths = {"log": tmp_path / "relay.log", "ran": tmp_path / "match-ran", "marker": tmp_path / "INJECTED"}
    paths["ran"].mkdir()
    (home / ".ssh" / "config").write_text(
        f'Match exec "touch {paths["ran"]}/%h && test %r = root"\n  ConnectTimeout 20\n'
        f"Host *\n  ProxyCommand {sys.executable} {work / 'tcp.py'} %h %p {paths['log']}\n")
    return paths


def _inventory(path: Path, fleet, hosts: dict[str, dict]) -> Path:
    common = {"ansible_user": "root", "ansible_port": fleet.port,
              "ansible_ssh_private_key_file": str(fleet.client_key_path)}
    path.write_text(yaml.safe_dump({"all": {"hosts": {name: {**common, **own} for name, own in hosts.items()}}}))
    return path


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_proxy_command_and_match_exec_of_the_config_work_for_valid_hosts(relay_fleet, tmp_path, hermetic_home,
                                                                          transport):
    """The control: the same ssh_config carries honest hosts (through the relay, Match exec run with the
    address quoted as OpenSSH writes it), so the refusals below are of the values, not of the config."""
    fleet, work = relay_fleet
    paths = _setup(fleet, work, hermetic_home, tmp_path)
    inventory = _inventory(tmp_path / "inv.yml", fleet, {"honest": {"ansible_host": fleet.addresses["honest"]}})
    result = run_sweep(inventory, out=tmp_path / "run",
                       ssh=SSHSettings(transport=transport, ssh_config="~/.ssh/config", known_hosts=str(fleet.known_hosts_path), allow_agent=False, look_for_keys=False))
    record = read_records(result.run_dir)["honest"]
    assert record["status"] == "ok", record["failure"]
    assert f"{fleet.addresses['honest']} {fleet.port}" in paths["log"].read_text()
    assert (paths["ran"] / fleet.addresses["honest"]).exists()


def _hostile(fleet, marker: Path) -> dict[str, tuple[str, dict, str]]:
    """The issue's four cases: inventory host -> (its vars, the variable the refusal names)."""
    address = fleet.addresses["second"]
    touch = f"touch {marker}"
    return {
        "name": (f"h0002$({touch})", {}, "host name (no ansible_host)"),
        "backquote": ("h0003", {"ansible_host": f"{address}`{touch}`"}, "ansible_host"),
        "pipe": ("h0004", {"ansible_host": f"{address}|{touch}"}, "ansible_host"),
        "user": ("h0005", {"ansible_host": address, "ansible_user": f"root$({touch})"}, "ansible_user"),
    }


@pytest.mark.parametrize("case", ("name", "backquote", "pipe", "user"))
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_inventory_value_with_shell_syntax_is_refused_before_any_host_is_contacted(
        relay_fleet, tmp_path, hermetic_home, transport, case):
    fleet, work = relay_fleet
    paths = _setup(fleet, work, hermetic_home, tmp_path)
    name, own, variable = _hostile(fleet, paths["marker"])[case]
    inventory = _inventory(tmp_path / "inv.yml", fleet, {
        "honest": {"ansible_host": fleet.addresses["honest"]}, name: own})
    env = {**os.environ, "HOME": str(hermetic_home), "PYTHONPATH": str(ROOT), "COLUMNS": "400"}
    env.pop("SSH_AUTH_SOCK", None)
    for extra in ([], ["--list-hosts"]):
        done = subprocess.run([sys.executable, "-m", "sweep.cli", "run", str(inventory), "--out", str(tmp_path / "run"),
                               "--transport", transport, "--known-hosts", str(fleet.known_hosts_path), *extra],
                              capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
        assert done.returncode == 2, (done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith(f"sweep: error: {inventory}:"), lines[0]
        assert f"{name}: {variable} " in lines[0] and "OpenSSH refuses it" in lines[0], lines[0]
        assert "CVE-2023-51385" in lines[0] and ("valid_ruser" if case == "user" else "valid_hostname") in lines[0]
    assert not paths["marker"].exists(), "the inventory value ran as a command"
    assert not paths["log"].exists(), "a host was contacted (the relay ran)"
    assert not list(paths["ran"].iterdir()), "the Match exec line ran"
    assert not (tmp_path / "run").exists()
