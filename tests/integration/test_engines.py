"""The same agent through other fan-out engines: ansible (real ansible-core over the loopback sshd
fleet), Slurm (a real one-node slurmctld + slurmd), shards reported together, the Vagrant fleet."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from sweep.cli import main
from sweep.demo.loopback import FleetHost, LocalFleet, default_capture
from sweep.collect.engines import engine_from_options
from sweep.collect.engines.base import EngineJob
from sweep.collect.engines.ansible import AnsibleEngine, find_ansible, unreachable
from sweep.errors import ConfigError
from sweep.inventory.model import load_inventory
from sweep.report.build import build_report
from sweep.collect.run import run_sweep
from sweep.collect.options import HostSelection, SSHSettings

from helpers import require
from slurm_parts import one_node_slurm

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
HEALTHY = 50
FAILING = {  # name -> (fleet kind, the failure class both engines must record)
    "bad-dead": ("dead", "refused"),
    "bad-hung": ("blackhole", "timeout"),
    "bad-rebuilt": ("changed_key", "host_key_changed"),
    "bad-new": ("unknown_key", "host_key_unknown"),
    "bad-nokey": ("bad_auth", "auth"),
    "bad-nopython": ("no_python", "no_python"),
    "bad-crash": ("agent_error", "agent_error"),
    "bad-motd": ("bad_output", "bad_output"),
}


def _ansible_missing() -> str | None:
    try:
        find_ansible()
    except Exception as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def engine_fleet(needs_sshd, tmp_path_factory):
    """50 healthy loopback hosts and one of each failure the engines must classify alike."""
    hosts = [FleetHost(f"node{i:02d}", group="rack_a" if i % 2 else "rack_b") for i in range(1, HEALTHY + 1)]
    hosts += [FleetHost(name, kind, group="failing") for name, (kind, _) in FAILING.items()]
    with LocalFleet(hosts, tmp_path_factory.mktemp("engine-fleet"),
                    children={"gpus": ["rack_a", "rack_b"]}) as fleet:
        yield fleet


def records(run_dir: Path) -> dict[str, dict]:
    return {r["host"]: r for r in (json.loads(p.read_text()) for p in sorted((run_dir / "hosts").glob("*.json")))}


def verdicts(found: dict[str, dict]) -> dict[str, tuple]:
    return {name: (r["status"], (r["failure"] or {}).get("class")) for name, r in found.items()}


# --- ansible -------------------------------------------------------------------------------------


def test_must_show_ansible_engine_gives_the_same_records_as_ssh(engine_fleet, tmp_path):
    require(_ansible_missing() is None, f"ansible-core is not installed: {_ansible_missing()}")
    fleet = engine_fleet
    options = dict(ssh=fleet.ssh_settings(connect_timeout=3, host_deadline=30))
    started = time.monotonic()
    by_ssh = run_sweep(fleet.inventory_path, out=tmp_path / "ssh", **options)
    ssh_s = time.monotonic() - started
    started = time.monotonic()
    by_ansible = run_sweep(fleet.inventory_path, out=tmp_path / "ansible", engine="ansible", **options)
    ansible_s = time.monotonic() - started
    print(f"\n{HEALTHY + len(FAILING)} hosts: ssh engine {ssh_s:.1f} s, ansible engine {ansible_s:.1f} s")

    ssh, ans = records(by_ssh.run_dir), records(by_ansible.run_dir)
    assert sorted(ans) == sorted(ssh) == sorted(h.name for h in fleet.hosts)
    assert verdicts(ans) == verdicts(ssh)
    assert {name: cls for name, (_, cls) in verdicts(ans).items() if cls} == \
        {name: cls for name, (_, cls) in FAILING.items()}
    assert (by_ansible.ok, by_ansible.failed, by_ansible.pending) == (HEALTHY, len(FAILING), 0)
    assert by_ansible.by_class == by_ssh.by_class
    for name, record in ans.items():
        assert set(record) == set(ssh[name]), name  # the same record format
        assert record["address"] == fleet.addresses[name]
        if record["status"] == "ok":
            assert record["health"]["host"]["hostname"] == name
            assert record["health"]["schema_version"] == ssh[name]["health"]["schema_version"]
            assert len(record["health"]["gpus"]) == len(ssh[name]["health"]["gpus"])
            assert record["exit_status"] == 0 and record["duration_s"] < 30
        else:
            assert record["failure"]["message"].startswith(f"{name}: ") and record["health"] is None
    assert "man-in-the-middle" in ans["bad-rebuilt"]["failure"]["message"]
    assert "--accept-new-host-keys" in ans["bad-new"]["failure"]["message"]
    assert "RuntimeError: demo agent failure" in ans["bad-crash"]["stderr"]
    manifest = json.loads((by_ansible.run_dir / "manifest.json").read_text())
    assert manifest["options"]["engine"] == "ansible" and manifest["state"] == "complete"
    # the report reads an ansible run folder as it reads an ssh one
    report = build_report([by_ansible.run_dir], tmp_path / "report")
    same = build_report([by_ssh.run_dir], tmp_path / "report-ssh")
    assert (report.exit_code, report.headline) == (same.exit_code, same.headline)


def test_ansible_engine_checks_host_keys_with_the_runs_known_hosts(engine_fleet, tmp_path):
    require(_ansible_missing() is None, f"ansible-core is not installed: {_ansible_missing()}")
    fleet = engine_fleet
    # without the fleet's known_hosts every key is unknown, and ansible must refuse each host
    result = run_sweep(fleet.inventory_path, out=tmp_path / "strict", engine="ansible",
                       hosts=HostSelection(limit="node01:node02:node03"),
                       ssh=SSHSettings(ssh_config=None, allow_agent=False, look_for_keys=False, connect_timeout=3))
    assert result.by_class == {"host_key_unknown": 3}
    # --accept-new-host-keys: trusted and written to the first known_hosts file, as OpenSSH does
    known = tmp_path / "known_hosts"
    result = run_sweep(fleet.inventory_path, out=tmp_path / "accept", engine="ansible",
                       hosts=HostSelection(limit="node01:node02:node03"),
                       ssh=SSHSettings(known_hosts=known, accept_new_host_keys=True, ssh_config=None, allow_agent=False, look_for_keys=False, connect_timeout=3))
    assert result.ok == 3 and len(known.read_text().splitlines()) == 3


def test_cli_run_engine_ansible(engine_fleet, tmp_path, capsys):
    require(_ansible_missing() is None, f"ansible-core is not installed: {_ansible_missing()}")
    fleet = engine_fleet
    code = main(["run", str(fleet.inventory_path), "--engine", "ansible", "--limit", "node01:node02:node03:node04:bad-dead",
                 "--known-hosts", str(fleet.known_hosts_path), "--connect-timeout", "3", "--out",
                 str(tmp_path / "run"), "--no-report"])
    assert code == 1  # bad-dead
    assert verdicts(records(tmp_path / "run")) == {
        **{f"node0{i}": ("ok", None) for i in range(1, 5)}, "bad-dead": ("failed", "refused")}


def test_ansible_engine_reads_openssh_words():
    cases = {
        "Failed to connect to the host via ssh: ssh: connect to host 10.0.0.5 port 22: Connection refused": "refused",
        "Failed to connect to the host via ssh: ssh: connect to host 10.0.0.5 port 22: Connection timed out":
            "timeout",
        "Failed to connect to the host via ssh: Connection timed out during banner exchange": "timeout",
        "Failed to connect to the host via ssh: ssh: connect to host 10.0.0.5 port 22: No route to host": "timeout",
        "Failed to connect to the host via ssh: ssh: Could not resolve hostname gpu99: Name or service not known":
            "dns",
        "Failed to connect to the host via ssh: gpuops@10.0.0.5: Permission denied (publickey).": "auth",
        "Failed to connect to the host via ssh: No ED25519 host key is known for 10.0.0.5 and you have requested "
        "strict checking.\r\nHost key verification failed.": "host_key_unknown",
        "Failed to connect to the host via ssh: @@@@@@@@@@@\r\n@    WARNING: REMOTE HOST IDENTIFICATION HAS "
        "CHANGED!     @\r\n@@@@@@@@@@@\r\nIT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\r\n"
        "Host key for 10.0.0.5 has changed and you have requested strict checking.\r\n"
        "Host key verification failed.": "host_key_changed",
        "Task failed: Failed to connect to the host via ssh:": "agent_error",  # cut mid-session, no word
    }
    for msg, cls in cases.items():
        got, message = unreachable("gpu07", msg)
        assert (got, message.startswith("gpu07: ")) == (cls, True), msg


def test_engine_options_are_checked():
    with pytest.raises(ConfigError, match="--partition and --nodelist belong to the slurm engine"):
        engine_from_options("ansible", partition="gpu")
    with pytest.raises(ConfigError, match="--engine 'mpi' is unknown"):
        engine_from_options("mpi")
    assert engine_from_options("ssh") == "ssh"


def test_ansible_command_verifies_host_keys(tmp_path):
    engine = AnsibleEngine(ansible="ansible").bind(EngineJob(payload=b"PK", agent_args=("--deep",), forks=7,
                                                            inventory_path=tmp_path / "inv.yml"))
    argv, env = engine.command(tmp_path, ["gpu01", "gpu02"])
    assert env["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert "StrictHostKeyChecking=yes" in env["ANSIBLE_SSH_ARGS"]
    assert "UserKnownHostsFile=" in env["ANSIBLE_SSH_ARGS"]
    assert env["ANSIBLE_STDOUT_CALLBACK"] == "sweep_lines"
    assert argv[argv.index("-f") + 1] == "7" and argv[argv.index("--limit") + 1] == f"@{tmp_path / 'hosts.txt'}"
    assert (tmp_path / "hosts.txt").read_text().split() == ["gpu01", "gpu02"]
    assert json.loads(argv[argv.index("-a") + 1])["cmd"].endswith("agent.pyz --deep </dev/null")


def test_docs_ansible_script_recipe_runs(engine_fleet, tmp_path):
    """docs/engines.md's `ansible -m script` block, run as written (inventory path and known_hosts set)."""
    require(_ansible_missing() is None, f"ansible-core is not installed: {_ansible_missing()}")
    fleet = engine_fleet
    doc = (REPO / "docs" / "engines.md").read_text()
    section = doc.split("## `ansible -m script`, by hand", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    assert "sweep report health/" in block
    script = block.replace("inventory.yml", f"{fleet.inventory_path} --limit node01:node02:node03")
    env = fleet.controller_env()
    env.update(ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_SSH_COMMON_ARGS=f"-o UserKnownHostsFile={fleet.known_hosts_path}",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), ANSIBLE_NOCOLOR="1",
               PATH=f"{Path(find_ansible()).parent}:{env.get('PATH', '')}")
    proc = subprocess.run(["bash", "-ec", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "health").glob("*.json")) == ["node01.json", "node02.json", "node03.json"]
    assert (tmp_path / "health" / "report" / "report.html").is_file()
    assert "One pool: all 3 of 3 hosts (node[01-03]) can be benchmarked together." in proc.stdout


# --- shards --------------------------------------------------------------------------------------


def test_shards_cover_the_fleet_once_and_report_together(engine_fleet, tmp_path):
    fleet = engine_fleet
    runs = []
    for index in (1, 2, 3):
        code = main(["run", str(fleet.inventory_path), "--limit", "gpus", "--shard", f"{index}/3",
                     "--known-hosts", str(fleet.known_hosts_path), "--out", str(tmp_path / f"shard{index}"),
                     "--no-report"])
        assert code == 0
        runs.append(tmp_path / f"shard{index}")
    shares = [set(records(run)) for run in runs]
    assert all(shares) and sum(map(len, shares)) == HEALTHY
    assert set.union(*shares) == {f"node{i:02d}" for i in range(1, HEALTHY + 1)}
    manifest = json.loads((runs[1] / "manifest.json").read_text())
    assert manifest["options"]["shard"] == {"index": 2, "count": 3, "by": "hash"}
    # `sweep report` takes the shards' run folders together: one report of the whole fleet
    report = build_report(runs, tmp_path / "report")
    hosts_csv = (tmp_path / "report" / "hosts.csv").read_text().splitlines()
    assert len(hosts_csv) == HEALTHY + 1
    assert main(["report", *map(str, runs), "--out", str(tmp_path / "cli-report")]) == report.exit_code


# --- Slurm ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A real one-node Slurm cluster on loopback (slurmctld + slurmd as root, no munge)."""
    with one_node_slurm(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster


@pytest.fixture
def slurm_env(slurm, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", slurm["conf"])
    monkeypatch.setenv("SWEEP_REPLAY", str(default_capture()))  # srun hands the tasks this environment
    return slurm


def test_slurm_single_node_run_lands_in_a_run_folder_the_report_reads(slurm_env, tmp_path):
    node = slurm_env["node"]
    started = time.monotonic()
    result = run_sweep(None, engine=engine_from_options("slurm", nodelist=node), out=tmp_path / "run")
    print(f"\none-node Slurm sweep: {time.monotonic() - started:.1f} s")
    assert (result.total, result.ok, result.failed, result.pending) == (1, 1, 0, 0)
    record = records(result.run_dir)[node]
    assert record["status"] == "ok" and record["exit_status"] == 0 and record["attempts"] == 1
    assert record["health"]["schema_version"].startswith("1.") and record["health"]["gpus"]
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["options"]["engine"] == "slurm" and manifest["hosts"] == [node]
    report = build_report([result.run_dir], tmp_path / "report")
    assert (tmp_path / "report" / "report.html").is_file()
    assert report.summary and len((tmp_path / "report" / "hosts.csv").read_text().splitlines()) == 2


def test_slurm_nodes_from_an_inventory_unknown_nodes_are_records(slurm_env, tmp_path):
    node = slurm_env["node"]
    inventory = tmp_path / "nodes.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {node: None, "gpu-nowhere": None}}}))
    result = run_sweep(inventory, engine="slurm", out=tmp_path / "run")
    found = records(result.run_dir)
    assert verdicts(found) == {node: ("ok", None), "gpu-nowhere": ("failed", "dns")}
    assert "Slurm knows no node" in found["gpu-nowhere"]["failure"]["message"]


def test_cli_run_engine_slurm_partition(slurm_env, tmp_path):
    code = main(["run", "--engine", "slurm", "--partition", "debug", "--out", str(tmp_path / "run")])
    assert code in (0, 3, 4)  # swept; the report's verdict on one replayed host
    assert (tmp_path / "run" / "report" / "report.html").is_file()
    assert verdicts(records(tmp_path / "run")) == {slurm_env["node"]: ("ok", None)}


# --- the Vagrant fleet ---------------------------------------------------------------------------


def test_vagrantfile_is_valid(tmp_path):
    """`vagrant validate` where vagrant is installed; else ruby's syntax check; else skip."""
    shutil.copy(REPO / "Vagrantfile", tmp_path / "Vagrantfile")  # vagrant writes .vagrant/ beside it
    if shutil.which("vagrant"):
        env = {**os.environ, "SWEEP_VMS": "2", "VAGRANT_CHECKPOINT_DISABLE": "1"}  # the VM count is a variable
        proc = subprocess.run(["vagrant", "validate", "--ignore-provider"], cwd=tmp_path, capture_output=True,
                              text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "validated successfully" in proc.stdout
        assert "sweep-vm2" in proc.stdout and "sweep-vm3" not in proc.stdout
        assert not (tmp_path / ".vagrant" / "sweep").exists()  # validate makes no keys
    elif shutil.which("ruby"):
        proc = subprocess.run(["ruby", "-c", "Vagrantfile"], cwd=tmp_path, capture_output=True, text=True)
        assert proc.returncode == 0 and "Syntax OK" in proc.stdout
    else:
        require(False, "neither vagrant nor ruby is installed (apt-get install -y vagrant)")


def test_vagrant_up_writes_keys_known_hosts_and_an_inventory_sweep_reads(tmp_path):
    """The Vagrantfile's host-side step of `vagrant up`, run by ruby with Vagrant itself stubbed."""
    if shutil.which("ruby") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("needs ruby and ssh-keygen (apt-get install -y ruby openssh-client)")
    shutil.copy(REPO / "Vagrantfile", tmp_path / "Vagrantfile")
    stub = 'module Vagrant; def self.configure(*); end; end; ARGV.replace(["up"]); load ARGV_FILE'
    proc = subprocess.run(["ruby", "-e", stub.replace("ARGV_FILE", repr(str(tmp_path / "Vagrantfile")))],
                          cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "SWEEP_VMS": "4"})
    assert proc.returncode == 0, proc.stderr
    keys = tmp_path / ".vagrant" / "sweep"
    inventory = load_inventory(keys / "inventory.yml")
    assert [h.name for h in inventory.hosts] == [f"sweep-vm{i}" for i in range(1, 5)]
    assert [h.address for h in inventory.hosts] == [f"192.168.56.{10 + i}" for i in range(1, 5)]
    assert {h.user for h in inventory.hosts} == {"vagrant"} and Path(inventory.hosts[0].key_file).is_file()
    known = (keys / "known_hosts").read_text().splitlines()
    assert [line.split()[0] for line in known] == [h.address for h in inventory.hosts]
    assert all(line.split()[1] == "ssh-ed25519" for line in known)
    # the checked-in inventory is the same fleet for the default SWEEP_VMS=3
    static = load_inventory(REPO / "inventories" / "vagrant.yml")
    assert [(h.name, h.address, h.user) for h in static.hosts] == \
        [(h.name, h.address, h.user) for h in inventory.hosts[:3]]
