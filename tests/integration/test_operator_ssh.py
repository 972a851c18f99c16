"""The operator's SSH as it is, on real loopback sshds: user certificates signed by a CA, a bastion
reached through ProxyCommand and ProxyJump (the target's own log shows it was never contacted
directly), and ``--transport openssh`` giving the same records as sweep's own transport."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from sweep.collect.run import run_sweep
from sweep.demo.loopback import FleetHost, LocalFleet
from sweep.collect.options import HostSelection, SSHSettings

from helpers import read_records, require

pytestmark = pytest.mark.integration
TRANSPORTS = ("paramiko", "openssh")


def _keygen(*args: str) -> None:
    subprocess.run(["ssh-keygen", "-q", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def ca_fleet(needs_sshd, tmp_path_factory):
    """Hosts that trust only certificates of a test CA (no authorized_keys), a bastion, and a target
    whose sshd logs every connection (LogLevel VERBOSE); the bastion logs every tunnel it opens."""
    work = tmp_path_factory.mktemp("ca-fleet")
    _keygen("-t", "ed25519", "-N", "", "-C", "sweep test CA", "-f", str(work / "ca"))
    trusted = (f"TrustedUserCAKeys {work / 'ca.pub'}",)
    hosts = [FleetHost("cert-host", "bad_auth", sshd_options=trusted),
             FleetHost("bastion", sshd_options=("LogLevel DEBUG1",)),
             FleetHost("inner", sshd_options=("LogLevel VERBOSE",))]
    with LocalFleet(hosts, work / "fleet") as fleet:
        time.sleep(0.5)  # the fleet's own readiness probes are logged as connections too: let them land
        yield fleet, work


def _cert(work: Path, name: str, validity: str, principal: str) -> Path:
    key = work / name
    if not key.exists():
        _keygen("-t", "ed25519", "-N", "", "-f", str(key))
        _keygen("-s", str(work / "ca"), "-I", f"{name} key id", "-V", validity, "-n", principal, f"{key}.pub")
    return key


def _inventory(path: Path, hosts: dict[str, dict]) -> Path:
    path.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    return path


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_certificates_signed_by_the_ca_log_in_and_bad_ones_are_auth_with_their_reason(ca_fleet, tmp_path, transport):
    fleet, work = ca_fleet
    address = fleet.addresses["cert-host"]
    keys = {"valid": _cert(work, "valid", "-5m:+1h", "root"),
            "expired": _cert(work, "expired", "20200101:20200102", "root"),
            "other": _cert(work, "other", "-5m:+1h", "alice")}
    inventory = _inventory(tmp_path / "inv.yml", {
        name: {"ansible_host": address, "ansible_user": "root", "ansible_ssh_private_key_file": str(key)}
        for name, key in keys.items()})
    result = run_sweep(inventory, out=tmp_path / "run", ssh=fleet.ssh_settings(transport=transport))
    found = read_records(result.run_dir)
    assert found["valid"]["status"] == "ok", found["valid"]["failure"]
    for name, reason in (("expired", r"expired at 2020-01-0[12]T"),
                         ("other", r"is for the principal alice, not the user 'root'")):
        failure = found[name]["failure"]
        assert failure["class"] == "auth", failure
        assert f"certificate {keys[name]}-cert.pub (key id '{name} key id')" in failure["message"]
        assert re.search(reason, failure["message"]), failure["message"]


def test_a_certificate_file_named_by_ssh_config(ca_fleet, tmp_path):
    fleet, work = ca_fleet
    key = _cert(work, "valid", "-5m:+1h", "root")
    moved = tmp_path / "elsewhere-cert.pub"
    shutil.copy(f"{key}-cert.pub", moved)
    plain = tmp_path / "plain"
    shutil.copy(key, plain)
    plain.chmod(0o600)
    config = tmp_path / "ssh_config"
    config.write_text(f"Host {fleet.addresses['cert-host']}\n  IdentityFile {plain}\n  CertificateFile {moved}\n"
                      "  User root\n")
    inventory = _inventory(tmp_path / "inv.yml", {"c1": {"ansible_host": fleet.addresses["cert-host"]}})
    result = run_sweep(inventory, out=tmp_path / "run", ssh=fleet.ssh_settings(ssh_config=str(config)))
    assert result.fully_swept, result.failures


@pytest.fixture()
def agent(tmp_path, monkeypatch):
    """A private ssh-agent for one test; `agent(key)` loads a key and its -cert.pub."""
    require(shutil.which("ssh-agent") is not None, "needs OpenSSH's ssh-agent")
    sock = tmp_path / "agent.sock"
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(100):
        if sock.exists():
            break
        time.sleep(0.05)
    monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))

    def load(key: Path) -> None:
        subprocess.run(["ssh-add", "-q", str(key)], check=True, capture_output=True)

    yield load
    proc.terminate()
    proc.wait()


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("which", ["valid", "expired"])
def test_a_certificate_held_by_ssh_agent(ca_fleet, tmp_path, agent, transport, which):
    fleet, work = ca_fleet
    key = _cert(work, which, "-5m:+1h" if which == "valid" else "20200101:20200102", "root")
    agent(key)
    inventory = _inventory(tmp_path / "inv.yml", {"a1": {"ansible_host": fleet.addresses["cert-host"],
                                                         "ansible_user": "root"}})
    result = run_sweep(inventory, out=tmp_path / "run",
                       ssh=SSHSettings(transport=transport, known_hosts=str(fleet.known_hosts_path), ssh_config=None, allow_agent=True, look_for_keys=False))
    record = read_records(result.run_dir)["a1"]
    if which == "valid":
        assert record["status"] == "ok", record["failure"]
        return
    assert record["failure"]["class"] == "auth", record["failure"]
    assert re.search(r"certificate in ssh-agent \(.*\) \(key id 'expired key id'\) expired at 2020-01-0",
                     record["failure"]["message"]), record["failure"]["message"]


def _bastion_config(fleet: LocalFleet, tmp_path: Path) -> Path:
    config = tmp_path / "ssh_config"
    strict = f"-o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={fleet.known_hosts_path}"
    config.write_text(
        f"Host inner-cmd\n  HostName {fleet.addresses['inner']}\n"
        f"  ProxyCommand ssh -F {config} {strict} -W %h:%p bastion\n"
        f"Host inner-jump\n  HostName {fleet.addresses['inner']}\n  ProxyJump bastion\n"
        f"Host bastion\n  HostName {fleet.addresses['bastion']}\n"
        f"Host *\n  User root\n  IdentityFile {fleet.client_key_path}\n")
    return config


def _connections(fleet: LocalFleet, name: str) -> int:
    log = (fleet.workdir / "logs" / f"{name}.log").read_text(errors="replace")
    return len(re.findall(rf"Connection from \S+ port \d+ on {re.escape(fleet.addresses[name])} port", log))


def _tunnels_to(fleet: LocalFleet, target: str) -> int:
    log = (fleet.workdir / "logs" / "bastion.log").read_text(errors="replace")
    return len(re.findall(rf"direct-tcpip.*target {re.escape(fleet.addresses[target])} port {fleet.port}\b|"
                          rf"originator .* target {re.escape(fleet.addresses[target])} port {fleet.port}\b", log))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_host_behind_a_bastion_is_reached_only_through_it(ca_fleet, tmp_path, transport):
    """Through ProxyCommand (ssh_config and -o), and ProxyJump (ssh_config and -J). On loopback every
    connection comes from 127.0.0.1, the bastion's too, so the source address cannot tell them apart:
    the target's sshd (LogLevel VERBOSE) logs each connection, the bastion's (DEBUG1) each tunnel it
    opens, and the two counts must be equal."""
    fleet, _ = ca_fleet
    config = _bastion_config(fleet, tmp_path)
    strict = f"-o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={fleet.known_hosts_path}"
    inventory = _inventory(tmp_path / "inv.yml", {
        "inner-cmd": None, "inner-jump": None,
        "inner-args": {"ansible_host": fleet.addresses["inner"], "ansible_ssh_common_args":
                       f"-o ProxyCommand='ssh -F {config} {strict} -W %h:%p bastion'"},
        "inner-argjump": {"ansible_host": fleet.addresses["inner"],
                          "ansible_ssh_common_args": f"-J root@{fleet.addresses['bastion']}"}})
    before, tunnels_before = _connections(fleet, "inner"), _tunnels_to(fleet, "inner")
    result = run_sweep(inventory, out=tmp_path / "run", ssh=fleet.ssh_settings(ssh_config=str(config),
                                                                             transport=transport))
    assert result.fully_swept, result.failures
    time.sleep(0.5)  # the target's log line may trail the session
    seen, tunnelled = _connections(fleet, "inner") - before, _tunnels_to(fleet, "inner") - tunnels_before
    assert seen == 4 and tunnelled == 4, (seen, tunnelled)


def test_the_check_would_see_a_direct_connection(ca_fleet, tmp_path):
    """The log check above is not vacuous: a direct sweep of the target shows as a connection
    the bastion did not tunnel."""
    fleet, _ = ca_fleet
    inventory = _inventory(tmp_path / "inv.yml", {"inner": {"ansible_host": fleet.addresses["inner"],
                                                            "ansible_user": "root",
                                                            "ansible_ssh_private_key_file": str(fleet.client_key_path)}})
    before, tunnels_before = _connections(fleet, "inner"), _tunnels_to(fleet, "inner")
    assert run_sweep(inventory, out=tmp_path / "run", ssh=fleet.ssh_settings()).fully_swept
    time.sleep(0.5)
    assert (_connections(fleet, "inner") - before, _tunnels_to(fleet, "inner") - tunnels_before) == (1, 0)


def _hung_proxy(fleet, tmp_path, marker: str, **ssh) -> tuple[dict, float]:
    """Sweep one host whose ProxyCommand is `sleep MARKER` (it never answers) with `ssh` settings:
    its failure, and the seconds the sweep took."""
    inventory = _inventory(tmp_path / "inv.yml", {"hung": {
        "ansible_host": fleet.addresses["inner"], "ansible_user": "root",
        "ansible_ssh_private_key_file": str(fleet.client_key_path),
        "ansible_ssh_common_args": f"-o 'ProxyCommand=sleep {marker}'"}})
    started = time.monotonic()
    result = run_sweep(inventory, out=tmp_path / "run", ssh=fleet.ssh_settings(retries=1, **ssh))
    return read_records(result.run_dir)["hung"]["failure"], time.monotonic() - started


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_hung_proxy_command_ends_at_the_host_deadline_and_is_killed(ca_fleet, tmp_path, transport):
    fleet, _ = ca_fleet
    # a sleep of its own (this worker's pid, this transport): the other transport's case may run beside it on another
    # xdist worker, and its proxy, still being ended, is not this one's
    marker = f"317.{os.getpid()}{TRANSPORTS.index(transport)}"
    failure, took = _hung_proxy(fleet, tmp_path, marker, transport=transport, host_deadline=2)
    assert took < 20  # the ProxyCommand sleeps 317 s: the 2 s deadline ended it
    assert failure["class"] == "timeout", failure
    left = _left(f"sleep {marker}", within=5.0)  # killed: gone within seconds, not at the end of its 317 s
    assert not left, f"the hung ProxyCommand is still running: {left}"


def test_a_proxy_command_ended_by_sweeps_own_wait_is_a_timeout_not_a_refusal(ca_fleet, tmp_path):
    """paramiko's wait for the banner (the connect timeout, 1 s) ends before the host deadline (30 s):
    paramiko closes the transport, which kills the hung ProxyCommand. Its exit (-9) is sweep's doing,
    so the record is a timeout naming the command, not "the ProxyCommand ended" (refused). Under load
    the same race came between the banner wait and a 2 s host deadline (the test above)."""
    fleet, _ = ca_fleet
    marker = f"318.{os.getpid()}"
    failure, took = _hung_proxy(fleet, tmp_path, marker, connect_timeout=1, host_deadline=30)
    assert took < 20  # the 1 s wait ended it, not the 30 s deadline
    assert failure["class"] == "timeout", failure
    assert "ProxyCommand" in failure["message"] and "within 1 s" in failure["message"], failure
    assert not _left(f"sleep {marker}", within=5.0)


def _left(command: str, within: float) -> list[str]:
    """The pids whose command line ends with `command`, once none is left or `within` seconds have passed."""
    end = time.monotonic() + within
    while True:
        left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline(pid).endswith(command)]
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.1)


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def test_openssh_transport_gives_the_same_records_as_the_default(fleet, tmp_path):
    """The must-show fleet of `sweep run` (50 healthy hosts and five faulty ones) through both transports."""
    records = {}
    for transport in TRANSPORTS:
        result = run_sweep(fleet.inventory_path, out=tmp_path / transport, hosts=HostSelection(limit="h200:faulty"),
                           ssh=fleet.ssh_settings(connect_timeout=3, transport=transport))
        records[transport] = read_records(result.run_dir)
    assert records["paramiko"].keys() == records["openssh"].keys()
    for name, mine in records["paramiko"].items():
        theirs = records["openssh"][name]
        assert (mine["status"], (mine["failure"] or {}).get("class")) == \
            (theirs["status"], (theirs["failure"] or {}).get("class")), name
        if mine["status"] == "ok":
            for volatile in ("started_at", "duration_s", "steps_s"):  # timings differ run to run
                mine["health"]["probe"].pop(volatile, None), theirs["health"]["probe"].pop(volatile, None)
            assert mine["health"] == theirs["health"], name
            assert mine["exit_status"] == theirs["exit_status"] == 0
        else:
            assert theirs["failure"]["message"].startswith(f"{name}: ")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_proxy_command_that_fails_is_not_bypassed(ca_fleet, tmp_path, hermetic_home, transport):
    """The issue's check: `ProxyCommand /bin/false` (in ~/.ssh/config, or -o in ansible_ssh_common_args)
    used to be ignored, and the host reached directly, record ok."""
    fleet, _ = ca_fleet
    inner = fleet.addresses["inner"]
    (hermetic_home / ".ssh" / "config").write_text(f"Host via-config\n  HostName {inner}\n  ProxyCommand /bin/false\n")
    common = {"ansible_user": "root", "ansible_ssh_private_key_file": str(fleet.client_key_path)}
    inventory = _inventory(tmp_path / "inv.yml", {
        "via-config": common,
        "via-args": {**common, "ansible_host": inner, "ansible_ssh_common_args": "-o ProxyCommand=/bin/false"}})
    before = _connections(fleet, "inner")
    result = run_sweep(inventory, out=tmp_path / "run",
                       ssh=SSHSettings(transport=transport, ssh_config="~/.ssh/config", known_hosts=str(fleet.known_hosts_path), allow_agent=False, look_for_keys=False))
    found = read_records(result.run_dir)
    for name in ("via-config", "via-args"):
        assert found[name]["status"] == "failed", found[name]
        assert found[name]["failure"]["class"] == "refused", found[name]["failure"]
        assert "ProxyCommand" in found[name]["failure"]["message"] or transport == "openssh"
    time.sleep(0.3)
    assert _connections(fleet, "inner") == before


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_auth_failure_names_the_keys_tried_and_where_each_was_set(ca_fleet, tmp_path, hermetic_home, transport):
    """The host refuses every key (it trusts only the CA's certificates): the message names each key
    offered and the line or variable that set it, a missing one as skipped, and that no agent was asked."""
    fleet, work = ca_fleet
    inventory_key, config_key = tmp_path / "inventory_key", tmp_path / "config_key"
    for key in (inventory_key, config_key):
        _keygen("-t", "ed25519", "-N", "", "-f", str(key))
    config = tmp_path / "ssh_config"
    config.write_text(f"Host *\n  User root\n  IdentityFile {config_key}\n  IdentityFile {tmp_path / 'gone'}\n")
    inventory = tmp_path / "inv.yml"
    inventory.write_text(f"all:\n  hosts:\n    k1:\n      ansible_host: {fleet.addresses['cert-host']}\n"
                         f"      ansible_ssh_private_key_file: {inventory_key}\n")
    result = run_sweep(inventory, out=tmp_path / "run", ssh=SSHSettings(
        known_hosts=str(fleet.known_hosts_path), ssh_config=str(config), allow_agent=False, look_for_keys=False,
        transport=transport))
    failure = read_records(result.run_dir)["k1"]["failure"]
    assert failure["class"] == "auth", failure
    assert (f"keys tried: {inventory_key} (k1: ansible_ssh_private_key_file at {inventory}:5), "
            f"{config_key} ({config}:3), {tmp_path / 'gone'} ({config}:4: no such file, skipped); "
            "check ansible_user") in failure["message"], failure["message"]
