"""`sweep run` end to end: real sshds on loopback, the real agent bundle replaying a capture."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sweep.collect.ssh.prober as transport
from sweep.demo.loopback import FleetHost, LocalFleet
from sweep.errors import RunFolderError
from sweep.inventory.model import Host, load_inventory
from sweep.collect.run import planned_hosts, run_sweep
from sweep.collect.options import HostSelection, SSHSettings
from sweep.collect.ssh.config import SSHConfigFile
from sweep.collect.ssh.prober import Prober, SSHOptions

from helpers import read_records as records  # noqa: E402
from helpers import schema_validator

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
SCHEMA = schema_validator(json.loads((REPO / "probe_agent" / "schema" / "health-1.schema.json").read_text()))


def test_must_show_fifty_hosts_and_five_faulty(fleet, layout, tmp_path):
    HEALTHY, FAULTY, EXPECTED_CLASS = layout.healthy, layout.faulty, layout.expected_class
    inventory = load_inventory(fleet.inventory_path)
    h200 = inventory.select("h200")
    assert len(h200) == HEALTHY and {"rack_a", "h200"} <= set(h200[0].groups)
    assert h200[0].settings["connect_timeout"] == 5  # a group var of the parent group
    assert "[01:25]" in fleet.inventory_path.read_text()  # written as an Ansible host range

    started = time.monotonic()
    result = run_sweep(fleet.inventory_path, out=tmp_path / "run", hosts=HostSelection(limit="h200:faulty"),
                       ssh=fleet.ssh_settings(connect_timeout=3))
    elapsed = time.monotonic() - started

    assert (result.total, result.ok, result.failed, result.pending) == (HEALTHY + 5, HEALTHY, 5, 0)
    assert not result.fully_swept and result.exit_code == 1 and result.state == "complete"
    assert result.by_class == {cls: 1 for cls in EXPECTED_CLASS.values()}
    found = records(result.run_dir)
    assert len(found) == HEALTHY + 5
    for host in h200:
        record = found[host.name]
        assert record["status"] == "ok" and record["failure"] is None and record["attempts"] == 1
        assert record["address"] == fleet.addresses[host.name]
        SCHEMA.validate(record["health"])
        assert record["health"]["host"]["hostname"] == host.name
    for name, cls in EXPECTED_CLASS.items():
        record = found[name]
        assert record["status"] == "failed" and record["health"] is None
        assert record["failure"]["class"] == cls
        assert record["failure"]["message"].startswith(f"{name}: ")
    messages = {name: found[name]["failure"]["message"] for name in FAULTY}
    assert "ssh-keyscan -H" in messages["gpu-new"] and "--accept-new-host-keys" in messages["gpu-new"]
    assert "man-in-the-middle" in messages["gpu-rebuilt"] and "ssh-keygen -R" in messages["gpu-rebuilt"]
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["state"] == "complete" and manifest["record_version"] == 1
    assert manifest["hosts"] == [h.name for h in inventory.select("h200:faulty")]
    assert manifest["counts"] == {"total": 55, "ok": 50, "failed": 5, "pending": 0}
    assert len(manifest["inventory"]["snapshot"]["hosts"]) == len(inventory.hosts)
    assert elapsed < 60


def test_no_python_agent_error_bad_output_and_a_retried_drop(fleet, layout, tmp_path):
    ODD = layout.odd
    result = run_sweep(fleet.inventory_path, out=tmp_path / "run", hosts=HostSelection(limit="odd:flaky"),
                       ssh=fleet.ssh_settings())
    found = records(result.run_dir)
    for name, kind in ODD.items():
        assert found[name]["failure"]["class"] == kind, found[name]["failure"]
    assert "/nonexistent/bin/python3" in found["odd-nopython"]["failure"]["message"]
    assert "demo agent failure" in found["odd-crash"]["failure"]["message"]
    assert "demo agent failure" in found["odd-crash"]["stderr"]
    flaky = found["odd-flaky"]  # dropped before the banner once, as MaxStartups does: retried
    assert flaky["status"] == "ok" and flaky["attempts"] == 2


def test_output_larger_than_the_cap_is_refused(fleet):
    host = load_inventory(fleet.inventory_path).select("gpu01")[0]
    prober = Prober(_bundle(), (), SSHOptions(output_limit=1000, known_hosts=(str(fleet.known_hosts_path),),
                                              ssh_config=None, allow_agent=False, look_for_keys=False))
    outcome = prober.probe(host)
    assert outcome.status == "failed" and outcome.failure_class == "output_too_large"
    assert outcome.message.startswith("gpu01: the agent wrote more than 1000 bytes")


def test_host_deadline_bounds_a_hung_agent(fleet, tmp_path):
    started = time.monotonic()
    result = run_sweep(fleet.inventory_path, out=tmp_path / "run", hosts=HostSelection(limit="odd-stuck"),
                       ssh=fleet.ssh_settings(host_deadline=2))
    assert time.monotonic() - started < 15  # the agent hangs for ever: the 2 s deadline ended it
    record = records(result.run_dir)["odd-stuck"]
    assert record["failure"]["class"] == "timeout"
    assert "host deadline of 2 s" in record["failure"]["message"]


def test_accept_new_adds_unknown_keys_but_never_changed_ones(fleet, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(fleet.known_hosts_path.read_text())
    ssh = fleet.ssh_settings(known_hosts=str(known), accept_new_host_keys=True)
    first = run_sweep(fleet.inventory_path, out=tmp_path / "a", hosts=HostSelection(limit="gpu-new,gpu-rebuilt"),
                      ssh=ssh)
    found = records(first.run_dir)
    assert found["gpu-new"]["status"] == "ok"
    assert found["gpu-rebuilt"]["failure"]["class"] == "host_key_changed"
    added = known.read_text().splitlines()[-1]
    assert added.startswith("|1|") and " ssh-ed25519 " in added  # hashed, as ssh-keyscan -H writes
    again = run_sweep(fleet.inventory_path, out=tmp_path / "b", hosts=HostSelection(limit="gpu-new"), ssh=ssh)
    assert again.fully_swept and again.exit_code == 0


def test_ssh_config_of_home_and_proxy_jump(fleet, tmp_path, hermetic_home, monkeypatch):
    """~/.ssh/config is honoured (HostName, User, IdentityFile, ProxyJump through a direct-tcpip channel)."""
    jump, target = fleet.addresses["gpu01"], fleet.addresses["gpu02"]
    (hermetic_home / ".ssh" / "config").write_text(
        f"Host viajump\n  HostName {target}\n  ProxyJump root@{jump}\n"
        f"Host *\n  User root\n  IdentityFile {fleet.client_key_path}\n")
    (hermetic_home / ".ssh" / "known_hosts").write_text(fleet.known_hosts_path.read_text())
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    viajump:\n")
    tunnels = []
    real = transport._open_tunnel

    def spy(name, client, hop, deadline):
        tunnels.append((name, hop.address))
        return real(name, client, hop, deadline)

    monkeypatch.setattr(transport, "_open_tunnel", spy)
    result = run_sweep(inventory, out=tmp_path / "run", ssh=SSHSettings(allow_agent=False, look_for_keys=False))
    assert result.fully_swept, result.failures
    assert tunnels == [("viajump", target)]
    assert records(result.run_dir)["viajump"]["address"] == "viajump"


def test_unresolvable_name_is_a_dns_failure(fleet, tmp_path, monkeypatch):
    def no_dns(host, port, *args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(transport.socket, "getaddrinfo", no_dns)  # never ask a real resolver
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    gpu99.invalid:\n")
    result = run_sweep(inventory, out=tmp_path / "run", ssh=fleet.ssh_settings())
    record = records(result.run_dir)["gpu99.invalid"]
    assert record["failure"]["class"] == "dns"
    assert record["failure"]["message"].startswith("gpu99.invalid: cannot resolve 'gpu99.invalid'")


def test_an_empty_ansible_host_is_a_failed_host_naming_the_variable(fleet, tmp_path):
    inventory = tmp_path / "inventory.ini"
    inventory.write_text("[gpu]\ngpu01 ansible_host=\n")
    result = run_sweep(inventory, out=tmp_path / "run", ssh=fleet.ssh_settings())
    record = records(result.run_dir)["gpu01"]
    assert record["failure"]["class"] == "dns"
    assert record["failure"]["message"] == (
        "gpu01: ansible_host is set but empty in the inventory, so there is no address to connect to; "
        "set it to the host's address, or remove it to connect to 'gpu01'")
    assert record["attempts"] == 1  # not retried: nothing changes between attempts


def test_ctrl_c_stops_within_seconds_and_resume_finishes(fleet, layout, tmp_path):
    SLOW = layout.slow
    seen = []

    def progress(state):
        seen.append(state)
        if state.last is not None and len(seen) == 4:
            os.kill(os.getpid(), signal.SIGINT)  # the real Ctrl-C: KeyboardInterrupt in this thread

    started = time.monotonic()
    result = run_sweep(fleet.inventory_path, out=tmp_path / "run", forks=4, progress=progress,
                       hosts=HostSelection(limit="slow:gpu-hung"), ssh=fleet.ssh_settings(connect_timeout=30))
    assert time.monotonic() - started < 25  # did not wait for the hung host's 30 s connect timeout
    assert result.state == "interrupted" and result.exit_code == 130
    assert 3 <= result.ok + result.failed < SLOW + 1 and result.pending > 0
    assert json.loads((result.run_dir / "manifest.json").read_text())["state"] == "interrupted"
    assert len(records(result.run_dir)) == result.ok + result.failed
    # what --list-hosts --resume prints: exactly the hosts without a record
    left = {host.name for host in planned_hosts(None, resume=result.run_dir)}
    assert left and not left & set(records(result.run_dir))
    assert len(left) + len(records(result.run_dir)) == SLOW + 1

    resumed = run_sweep(None, resume=result.run_dir, ssh=fleet.ssh_settings(connect_timeout=2))
    assert resumed.state == "complete" and resumed.pending == 0 and resumed.total == SLOW + 1
    assert resumed.resumed == result.ok + result.failed
    found = records(result.run_dir)
    assert len(found) == SLOW + 1 and found["gpu-hung"]["failure"]["class"] == "timeout"


KILLED_SWEEP = """
import sys
from sweep.collect.run import run_sweep
from sweep.collect.options import HostSelection, SSHSettings
run_sweep(sys.argv[1], out=sys.argv[2], forks=3, hosts=HostSelection(limit="slow"),
          ssh=SSHSettings(known_hosts=sys.argv[3], ssh_config=None, allow_agent=False, look_for_keys=False))
"""


def test_kill_9_mid_sweep_then_resume_accounts_for_every_host_once(fleet, layout, tmp_path, monkeypatch):
    SLOW = layout.slow
    run_dir = tmp_path / "run"
    env = fleet.controller_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    proc = subprocess.Popen([sys.executable, "-c", KILLED_SWEEP, str(fleet.inventory_path), str(run_dir),
                             str(fleet.known_hosts_path)], env=env, cwd=tmp_path)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and proc.poll() is None:
            if (run_dir / "hosts").is_dir() and len(list((run_dir / "hosts").glob("slow*.json"))) >= 4:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the sweep ended before it could be killed"
    finally:
        proc.kill()  # SIGKILL: no handler, no cleanup
        proc.wait()

    hosts_dir = run_dir / "hosts"
    for path in hosts_dir.glob("*.json"):
        if not path.name.startswith("."):
            json.loads(path.read_text())  # whole, or absent
    before = {p.name for p in hosts_dir.glob("*.json") if not p.name.startswith(".")}
    assert 4 <= len(before) < SLOW
    assert json.loads((run_dir / "manifest.json").read_text())["state"] == "running"

    monkeypatch.setenv("HOME", env["HOME"])  # the same user as the killed sweep: its key signed the manifest
    result = run_sweep(None, resume=run_dir, forks=8, ssh=fleet.ssh_settings())
    assert result.state == "complete" and result.fully_swept and result.exit_code == 0
    assert result.resumed == len(before) and result.total == SLOW
    found = records(run_dir)
    assert sorted(found) == [f"slow{i:02d}" for i in range(1, SLOW + 1)]
    assert all(record["status"] == "ok" for record in found.values())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["state"] == "complete" and len(manifest["sessions"]) == 2
    assert manifest["sessions"][1]["hosts_swept"] == SLOW - len(before)


def test_resume_refuses_a_folder_that_is_not_a_run(fleet, tmp_path):
    (tmp_path / "notes").mkdir()
    with pytest.raises(RunFolderError) as caught:
        run_sweep(fleet.inventory_path, resume=tmp_path / "notes", ssh=fleet.ssh_settings())
    assert str(caught.value) == (f"{tmp_path / 'notes'}: is not a sweep run folder (no manifest.json); "
                                 "pass the folder a sweep run wrote")


def test_a_fleet_on_another_port(tmp_path, monkeypatch):
    """ansible_port and [address]:port known_hosts names, on a fleet of its own."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with LocalFleet([FleetHost("p01"), FleetHost("p02", "unknown_key")], tmp_path / "fleet", port=port) as fleet:
        assert f"ansible_port: {port}" in fleet.inventory_path.read_text()
        assert fleet.known_hosts_path.read_text().startswith(f"[{fleet.addresses['p01']}]:{port} ")
        result = run_sweep(fleet.inventory_path, out=tmp_path / "run", ssh=fleet.ssh_settings())
        found = records(result.run_dir)
        assert found["p01"]["status"] == "ok" and found["p01"]["port"] == port
        assert f"ssh-keyscan -H -p {port} {fleet.addresses['p02']}" in found["p02"]["failure"]["message"]


def test_route_takes_the_inventory_over_ssh_config(tmp_path, hermetic_home):
    """Inventory values stand where Ansible puts them on ssh's command line, before the config: they win.
    A key file given (-i) is offered first and the config's IdentityFile after it, as OpenSSH does."""
    config = tmp_path / "ssh_config"
    config.write_text("Host gpu*\n  HostName %h.dc1\n  User ops\n  Port 2200\n  IdentityFile ~/.ssh/ops\n"
                      "  ProxyJump jump@bastion:2222,relay\nHost relay\n  User relayer\n")

    def host(**given):
        fields = {"name": "gpu07", "address": "gpu07", "port": None, "user": None, "key_file": None,
                  "python": "python3", "ssh_common_args": None, "proxy_jump": None, "groups": (),
                  "vars": {}, "settings": {}}
        return Host(**{**fields, **given})

    *hops, target = SSHConfigFile(str(config)).route(host())
    assert (target.address, target.port, target.user) == ("gpu07.dc1", 2200, "ops")
    assert target.key_files == (str(hermetic_home / ".ssh" / "ops"),)
    assert [(h.address, h.port, h.user) for h in hops] == [("bastion", 2222, "jump"), ("relay", 22, "relayer")]
    *hops, target = SSHConfigFile(str(config)).route(
        host(port=22, user="root", key_file="/k", ssh_common_args="-o ProxyJump=none"))
    assert (target.port, target.user, target.key_files, hops) == \
        (22, "root", ("/k", str(hermetic_home / ".ssh" / "ops")), [])


def _bundle() -> bytes:
    from sweep.collect.bundle import bundle_bytes

    return bundle_bytes()


def test_ctrl_c_before_the_run_folder_exists_says_so(tmp_path, hermetic_home):
    """A Ctrl-C while sweep still reads its inputs (here: a ssh_config `Match exec` that is slow to answer)
    names what happened and what to do (it used to exit 130 and print nothing), and makes no folder."""
    started = tmp_path / "match-exec.pid"
    (hermetic_home / ".ssh" / "config").write_text(f'Match exec "echo $$ > {started}; exec sleep 60"\n  User root\n')
    inventory = tmp_path / "inv.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01:\n      ansible_host: gpu01.invalid\n")
    run = tmp_path / "run"
    env = {**os.environ, "HOME": str(hermetic_home), "PYTHONPATH": str(REPO), "COLUMNS": "400"}
    proc = subprocess.Popen([sys.executable, "-m", "sweep.cli", "run", str(inventory), "--out", str(run)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (started.exists() and started.read_text().strip()) and proc.poll() is None:
            assert time.monotonic() < deadline, "the Match exec line never ran"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if started.exists() and started.read_text().strip():
            try:
                os.kill(int(started.read_text()), signal.SIGKILL)  # the sleep the Match exec line started
            except ProcessLookupError:
                pass
    assert proc.returncode == 130, (out, err)
    assert err.strip().splitlines()[-1] == (
        f"sweep: interrupted: Ctrl-C before the run folder {run} was made: no host was contacted and nothing "
        "was written; run the same command again"), err
    assert not run.exists()
