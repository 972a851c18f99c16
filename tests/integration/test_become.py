"""Become: a host whose login user may not read the kernel log, swept with and without --become.

The host is a real sshd on loopback; its login user is a real unprivileged user created here, with a
real sudoers.d rule (NOPASSWD for the agent's python only, as root only). Its kernel log is a real file
readable by root alone (the machine's kernel.dmesg_restrict is left as it is): the agent reads it
through --kernel-log (SWEEP_KERNEL_LOG, which the sudoers rule keeps, as it keeps SWEEP_REPLAY).
"""
from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sweep.demo.loopback import FleetHost, LocalFleet

from helpers import machine_wide_state, read_records, require

# the machine-wide users and /etc/sudoers.d files these modules create in module fixtures are shared by every
# xdist worker (and every checkout's suite on this machine): the fixtures hold helpers.machine_wide_state's lock
# while they exist; the group keeps both modules on one worker where --dist loadgroup works (not on pytest 9.2)
pytestmark = pytest.mark.xdist_group("machine-users")

USER = "sweepbecome"
PYTHON = "/usr/bin/python3"
SUDOERS = Path("/etc/sudoers.d/sweep-test-become")
XID_79 = "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python3, GPU has fallen off the bus."


@pytest.fixture(scope="module")
def sudo_user():
    """`_sudo_user`, holding the machine-wide state's lock from creating its users to removing them."""
    with machine_wide_state():
        yield from _sudo_user()


def _sudo_user():
    """An unprivileged login user with passwordless sudo for the agent's python (as root), removed after."""
    require(os.geteuid() == 0 and shutil.which("sudo") is not None and os.path.exists(PYTHON),
            "needs root, sudo (apt-get install -y sudo) and /usr/bin/python3")
    try:
        pwd.getpwnam(USER)
        created = False
    except KeyError:  # '*': no password, not locked (sshd without PAM refuses a locked account)
        done = subprocess.run(["useradd", "-M", "-d", "/nonexistent", "-s", "/bin/sh", "-p", "*", USER],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        created = True
    SUDOERS.write_text(f'Defaults:{USER} env_keep += "SWEEP_REPLAY SWEEP_REPLAY_HOSTNAME SWEEP_KERNEL_LOG"\n'
                       f"{USER} ALL=(root) NOPASSWD: {PYTHON}, /bin/sh\n")  # /bin/sh: ansible's become, the oracle
    SUDOERS.chmod(0o440)
    check = subprocess.run(["visudo", "-c", "-f", str(SUDOERS)], capture_output=True, text=True)
    try:
        assert check.returncode == 0, check.stdout + check.stderr
        yield pwd.getpwnam(USER)
    finally:
        SUDOERS.unlink()
        if created:
            subprocess.run(["userdel", USER], check=False)


@pytest.fixture(scope="module")
def host(sudo_user):
    """Two hosts of one sshd each, logged into as USER; the kernel log holds an Xid 79 and only root reads it."""
    work = Path(tempfile.mkdtemp(prefix="sweep-become-", dir="/tmp"))
    os.chmod(work, 0o755)
    log = work / "kern.log"
    log.write_text(f"Dec  1 10:00:00 gpu kernel: [  12.5] {XID_79}\n")
    log.chmod(0o600)  # root's; the login user is refused it
    env = (("SWEEP_KERNEL_LOG", str(log)),)
    hosts = [FleetHost("sudo01", env=env), FleetHost("sudo02", env=env)]
    try:
        with LocalFleet(hosts, work / "fleet", user=USER) as fleet:
            inventory = work / "hosts.ini"
            lines = ["[gpus]"]
            lines.append(f"sudo01 ansible_host={fleet.addresses['sudo01']}")
            # the sudoers rule lets USER become root only: sudo -n as nobody would ask for a password
            lines.append(f"sudo02 ansible_host={fleet.addresses['sudo02']} ansible_become_user=nobody")
            lines += ["[all:vars]", f"ansible_user={USER}", f"ansible_ssh_private_key_file={fleet.client_key_path}",
                      f"ansible_python_interpreter={PYTHON}", f"ansible_port={fleet.port}"]
            inventory.write_text("\n".join(lines) + "\n")
            fleet.test_inventory = inventory
            yield fleet
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree("/tmp/.ansible-sweep-become", ignore_errors=True)  # the ansible engine's remote tmp


def _sweep(fleet, tmp_path, *args) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "sweep.cli", "run", str(fleet.test_inventory), "--known-hosts",
                           str(fleet.known_hosts_path), "-o", str(out), "--no-report", *args],
                          env={**fleet.controller_env(), "ANSIBLE_REMOTE_TMP": "/tmp/.ansible-sweep-become"},
                          capture_output=True, text=True, timeout=300)  # ansible's: the user has no home
    return done, read_records(out)


def _xid(record: dict) -> dict:
    return next(c for c in record["health"]["contracts"] if c["name"] == "xid")


def test_become_reads_the_kernel_log_as_root_and_judges_xid(host, tmp_path):
    done, records = _sweep(host, tmp_path, "--become", "--limit", "sudo01")
    record = records["sudo01"]
    assert record["status"] == "ok", (record["failure"], done.stderr[-2000:])
    assert (record["health"]["probe"]["user"]["name"], record["health"]["probe"]["user"]["uid"]) == ("root", 0)
    xid = _xid(record)
    assert xid["status"] == "broken", xid
    assert xid["message"].startswith("Xid 79 on 0000:18:00 x1: GPU has fallen off the bus")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["options"]["inventory_vars"]["under"]["ansible_become"][0] is True  # --resume keeps it


def test_without_become_the_xid_contract_says_not_readable_as_the_user(host, tmp_path):
    done, records = _sweep(host, tmp_path, "--limit", "sudo01")
    record = records["sudo01"]
    assert record["status"] == "ok", (record["failure"], done.stderr[-2000:])
    assert record["health"]["probe"]["user"]["name"] == USER
    xid = _xid(record)
    assert xid["status"] == "unknown"
    assert f"kernel log not readable as user {USER}" in xid["message"], xid
    assert "PermissionError" in xid["message"] and "no Xid" not in xid["message"]
    assert "--become" in xid["fix"]


def test_a_sudo_that_would_ask_for_a_password_is_become_failed_not_a_hang(host, tmp_path):
    done, records = _sweep(host, tmp_path, "--become", "--limit", "sudo02")
    assert done.returncode == 1, done.stderr[-2000:]
    record = records["sudo02"]
    assert record["status"] == "failed" and record["failure"]["class"] == "become_failed", record["failure"]
    message = record["failure"]["message"]
    assert message.startswith(f"sudo02: sudo -n -u nobody refused to run the agent for user {USER} "
                              "(sudo: a password is required; sudo -n -l: its rules do not cover the agent's python "
                              f"as nobody: (root) NOPASSWD: {PYTHON}, /bin/sh)"), message
    assert "NOPASSWD" in message and record["attempts"] == 1


def test_extra_vars_win_over_the_command_line_become(host, tmp_path):
    """Ansible's precedence: -e over everything, --become a command-line value under every variable."""
    done, records = _sweep(host, tmp_path, "--become", "--limit", "sudo01", "-e", "ansible_become=false")
    assert records["sudo01"]["health"]["probe"]["user"]["name"] == USER, done.stderr[-2000:]


# the command line and -e against the inventory's ansible_user (USER): (sweep run's options, the login user
# and the user the agent runs as, which ansible must agree with)
PRECEDENCE = [
    (["--become"], "root"),
    (["--become", "-e", "ansible_become=false"], USER),
    (["-u", "root"], USER),  # -u is a command-line value: the inventory's ansible_user wins
    (["-e", "ansible_user=root"], "root"),  # -e wins over the inventory
    (["-e", "ansible_become=yes", "--become-user", "root"], "root"),
]


def _ansible_whoami(fleet, args: list[str]) -> str:
    from sweep.collect.engines.ansible import find_ansible

    env = fleet.controller_env()
    env.update(ANSIBLE_SSH_ARGS=f"-o UserKnownHostsFile={fleet.known_hosts_path} -o StrictHostKeyChecking=yes",
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(Path(env["HOME"]) / "ansible-tmp"))
    done = subprocess.run([find_ansible(), "-i", str(fleet.test_inventory), "sudo01", *args, "-m", "raw",
                           "-a", "echo whoami=$(whoami)"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    said = [line.strip()[len("whoami="):] for line in done.stdout.splitlines() if line.startswith("whoami=")]
    assert len(said) == 1, done.stdout  # raw runs with a tty: ssh's and the login's lines come with it
    return said[0]


@pytest.mark.parametrize("args,runs_as", PRECEDENCE, ids=[" ".join(a) for a, _ in PRECEDENCE])
def test_become_user_and_extra_vars_follow_ansibles_precedence(host, tmp_path, args, runs_as):
    require(shutil.which("ansible") is not None or Path(sys.executable).with_name("ansible").exists(),
            "needs ansible-core (the oracle)")
    assert _ansible_whoami(host, args) == runs_as  # the owner of the fact says so
    done, records = _sweep(host, tmp_path, "--limit", "sudo01", *args)
    assert records["sudo01"]["status"] == "ok", (records["sudo01"]["failure"], done.stderr[-2000:])
    assert records["sudo01"]["health"]["probe"]["user"]["name"] == runs_as


@pytest.mark.parametrize("how", [["--transport", "openssh"], ["--engine", "ansible"]], ids=["openssh", "ansible"])
def test_become_through_the_other_transports(host, tmp_path, how):
    """The system ssh runs the same sudo -n command; the ansible engine hands --become to ansible's own become."""
    done, records = _sweep(host, tmp_path, "--become", "--limit", "sudo01", *how)
    record = records["sudo01"]
    assert record["status"] == "ok", (record["failure"], done.stderr[-2000:])
    assert record["health"]["probe"]["user"]["name"] == "root"
    assert _xid(record)["status"] == "broken"
