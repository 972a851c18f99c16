"""`sweep run --become`, every way it fails, over real sshd with real login shells and a real sudo (issues 34, 37).

One loopback host per case, each logged into as its own test user: sudo hidden from PATH under bash, dash,
zsh and busybox sh login shells; a sudoers rule that wants a password; a user whose only NOPASSWD rule is
/bin/true; `requiretty`; and a sudo that prompts and hangs (a `sudo` earlier on PATH that writes a prompt
and sleeps). Each is `become_failed` with its cause, its words and its fix, within the deadline, and the
hung sudo leaves nothing running on the host.
"""
from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sweep.demo.loopback import SSHD, FleetHost, LocalFleet

from helpers import machine_wide_state, read_records, require

# the machine-wide users and /etc/sudoers.d files these modules create in module fixtures are shared by every
# xdist worker (and every checkout's suite on this machine): the fixtures hold helpers.machine_wide_state's lock
# while they exist; the group keeps both modules on one worker where --dist loadgroup works (not on pytest 9.2)
pytestmark = pytest.mark.xdist_group("machine-users")

PYTHON = "/usr/bin/python3"
SUDOERS = Path("/etc/sudoers.d/sweep-test-become-causes")
HANG = "1000.125"  # the hung sudo's sleep, found by its argument afterwards
NOSUDO_PATH = "/nonexistent-sweep-bin"
# host -> (login user, login shell, the PATH its sessions get or None, sudoers lines)
CASES = {
    "bash01": ("sweepc-bash", "/bin/bash", NOSUDO_PATH, ""),
    "dash01": ("sweepc-dash", "/bin/dash", NOSUDO_PATH, ""),
    "zsh01": ("sweepc-zsh", "/usr/bin/zsh", NOSUDO_PATH, ""),
    "bbox01": ("sweepc-bbox", "BUSYBOX_SH", NOSUDO_PATH, ""),
    "pw01": ("sweepc-pw", "/bin/sh", None, f"sweepc-pw ALL=(root) {PYTHON}\n"),
    "true01": ("sweepc-true", "/bin/sh", None, "sweepc-true ALL=(root) NOPASSWD: /bin/true\n"),
    "tty01": ("sweepc-tty", "/bin/sh", None, f"Defaults:sweepc-tty requiretty\nsweepc-tty ALL=(root) NOPASSWD: {PYTHON}\n"),
    "hang01": ("sweepc-hang", "/bin/sh", "HANG_PATH", ""),
}


@pytest.fixture(scope="module")
def hosts():
    """`_hosts`, holding the machine-wide state's lock from creating its users to removing them."""
    with machine_wide_state():
        yield from _hosts()


def _hosts():
    require(os.geteuid() == 0 and shutil.which("sudo") is not None and os.path.exists(SSHD),
            "needs root, sudo and OpenSSH's sshd (apt-get install -y sudo openssh-server)")
    require(os.path.exists("/usr/bin/zsh") and os.path.exists("/usr/bin/busybox"),
            "needs zsh and busybox (apt-get install -y zsh busybox)")
    work = Path(tempfile.mkdtemp(prefix="sweep-become-causes-", dir="/tmp"))
    os.chmod(work, 0o755)
    (work / "bin").mkdir()
    os.symlink("/usr/bin/busybox", work / "bin" / "sh")  # busybox's sh as a login shell: it goes by its name
    fake = work / "fake"
    fake.mkdir()
    (fake / "sudo").write_text(f'#!/bin/sh\nprintf "[sudo] password for $(id -un): " >&2\nexec sleep {HANG}\n')
    (fake / "sudo").chmod(0o755)
    created = []
    try:
        for name, (user, shell, _, _) in CASES.items():
            shell = str(work / "bin" / "sh") if shell == "BUSYBOX_SH" else shell
            try:
                pwd.getpwnam(user)
            except KeyError:
                done = subprocess.run(["useradd", "-M", "-d", "/nonexistent", "-s", shell, "-p", "*", user],
                                      capture_output=True, text=True)
                assert done.returncode == 0, done.stderr
                created.append(user)
        SUDOERS.write_text("".join(c[3] for c in CASES.values()))
        SUDOERS.chmod(0o440)
        check = subprocess.run(["visudo", "-c", "-f", str(SUDOERS)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        fleet_hosts = []
        for name, (_, _, path, _) in CASES.items():
            env = () if path is None else (("PATH", f"{fake}:/usr/bin:/bin" if path == "HANG_PATH" else path),)
            fleet_hosts.append(FleetHost(name, env=env))
        with LocalFleet(fleet_hosts, work / "fleet") as fleet:
            inventory = work / "hosts.ini"
            lines = ["[gpus]"] + [f"{name} ansible_host={fleet.addresses[name]} ansible_user={CASES[name][0]}"
                                  for name in CASES]
            lines += ["[all:vars]", f"ansible_ssh_private_key_file={fleet.client_key_path}",
                      f"ansible_python_interpreter={PYTHON}", f"ansible_port={fleet.port}"]
            inventory.write_text("\n".join(lines) + "\n")
            fleet.test_inventory = inventory
            yield fleet
    finally:
        SUDOERS.unlink(missing_ok=True)
        for user in created:
            subprocess.run(["userdel", user], check=False)
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def swept(hosts, tmp_path_factory):
    out = tmp_path_factory.mktemp("causes") / "run"
    done = subprocess.run([sys.executable, "-m", "sweep.cli", "run", str(hosts.test_inventory), "--known-hosts",
                           str(hosts.known_hosts_path), "-o", str(out), "--no-report", "--become",
                           "--host-deadline", "8"], env=hosts.controller_env(), capture_output=True, text=True,
                          timeout=300)
    return done, read_records(out)


def failure(swept, name):
    record = swept[1][name]
    assert record["status"] == "failed", (name, record.get("failure"), swept[0].stderr[-1000:])
    assert record["failure"]["class"] == "become_failed", (name, record["failure"])
    return record["failure"]["message"]


@pytest.mark.parametrize("name", ["bash01", "dash01", "zsh01", "bbox01"])
def test_sudo_absent_under_every_login_shell_is_become_failed_saying_so(swept, name):
    message = failure(swept, name)
    assert message == (f"{name}: become (root) needs sudo, which is not installed on the host (sudo: No such "
                       f"file or directory; PATH={NOSUDO_PATH}); install sudo and give user "
                       f"{CASES[name][0]} a NOPASSWD rule for the agent's python, or sweep the host without become")


def test_a_rule_that_wants_a_password_says_no_rule_without_one(swept):
    assert failure(swept, "pw01") == (
        "pw01: sudo -n -u root refused to run the agent for user sweepc-pw (sudo: a password is required; sudo -n "
        "-l: no rule without a password: not in sudoers, or every rule asks for one); sweep never types a "
        "password: give user sweepc-pw a NOPASSWD rule for '/usr/bin/python3' in /etc/sudoers.d, or sweep the "
        "host without become (no --become, ansible_become: false)")


def test_rules_that_miss_the_python_are_listed(swept):
    message = failure(swept, "true01")
    assert "(sudo: a password is required; sudo -n -l: its rules do not cover the agent's python as root: (root) " \
           "NOPASSWD: /bin/true); sweep never types a password: give user sweepc-true a NOPASSWD rule for " \
           "'/usr/bin/python3'" in message, message


def test_requiretty_is_named_with_its_sudoers_fix(swept):
    assert failure(swept, "tty01") == (
        "tty01: sudo -n -u root refused to run the agent for user sweepc-tty without a terminal (sudo: sorry, you "
        "must have a tty to run sudo); sweep opens no terminal: add 'Defaults:sweepc-tty !requiretty' in "
        "/etc/sudoers.d, or sweep the host without become")


def test_a_prompting_hanging_sudo_is_become_failed_with_its_prompt_and_leaves_nothing_running(swept):
    message = failure(swept, "hang01")
    assert re.match(r"hang01: sudo -n -u root neither ran the agent nor ended within [34]\.\d s \(", message), message
    assert "[sudo] password for sweepc-hang:')" in message  # sudo's own words, last
    left = subprocess.run(["pgrep", "-f", f"sleep {HANG}"], capture_output=True, text=True)
    assert left.stdout == "", f"the hung sudo's child is still running: {left.stdout}"


@pytest.mark.parametrize("name,starts", [
    ("hang01", "hang01: sudo -n -u root neither ran the agent nor ended within "),
    ("pw01", "pw01: sudo -n -u root refused to run the agent for user sweepc-pw (sudo: a password is required; "),
    ("zsh01", "zsh01: become (root) needs sudo, which is not installed on the host (sudo: No such file"),
])
def test_the_openssh_transport_reads_the_same_causes(hosts, tmp_path, name, starts):
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "sweep.cli", "run", str(hosts.test_inventory), "--known-hosts",
                           str(hosts.known_hosts_path), "-o", str(out), "--no-report", "--become", "--limit", name,
                           "--transport", "openssh", "--host-deadline", "8"], env=hosts.controller_env(),
                          capture_output=True, text=True, timeout=300)
    record = read_records(out)[name]
    assert record["failure"]["class"] == "become_failed", (record["failure"], done.stderr[-1000:])
    assert record["failure"]["message"].startswith(starts), record["failure"]["message"]
    assert subprocess.run(["pgrep", "-f", f"sleep {HANG}"], capture_output=True).stdout == b""
