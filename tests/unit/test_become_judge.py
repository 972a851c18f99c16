"""Become as the controller judges it (sudo's own words -> a failure class) and as the agent reports what a
normal user could not read."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from probe_agent.hostchecks import check_host, check_xid
from sweep.collect.bundle import remote_command
from sweep.collect.outcome import read_agent_output
from sweep.failures import HostFailure


def _host(become=True, user="ops"):
    return SimpleNamespace(name="gpu07", python="python3", user=user, become=become, become_user="root" if become else None)


@pytest.mark.parametrize("status,stderr,cls,says", [
    (1, "sudo: a password is required\n", "become_failed", "sudo -n -u root refused to run the agent for user ops "
                                                          "(sudo: a password is required)"),
    (127, "sh: 1: sudo: not found\n", "become_failed", "needs sudo, which is not installed on the host"),
    (127, "bash: sudo: command not found\n", "become_failed", "needs sudo, which is not installed on the host"),
    (1, "sudo: python3: command not found\n", "no_python", "sudo finds no 'python3'"),
])
def test_sudo_that_did_not_run_the_agent_is_named(status, stderr, cls, says):
    with pytest.raises(HostFailure) as err:
        read_agent_output(_host(), b"", status, stderr)
    assert err.value.failure_class == cls and err.value.message.startswith("gpu07: ") and says in err.value.message


def test_without_become_a_sudo_line_is_not_a_become_failure():
    with pytest.raises(HostFailure) as err:
        read_agent_output(_host(become=False), b"", 1, "sudo: a password is required\n")
    assert err.value.failure_class == "agent_error"


def test_the_remote_command_runs_sudo_non_interactively_only_under_become():
    import shlex
    argv = shlex.split(remote_command("python3", 10, [], lifetime=30.0, become_user="gpuadmin"))
    # the guard (the login user's python) starts sudo -n, waits half the lifetime for it to start the agent
    assert argv[:3] == ["python3", "-I", "-c"]
    assert argv[4:13] == ["15.0", "sudo", "-n", "-u", "gpuadmin", "--", "python3", "-I", "-c"]
    assert argv[14] == "10/30.0+"  # the bootstrap tells the guard that sudo started it
    assert remote_command("python3", 10, []).startswith("python3 -I -c ")


SHELLS = {"bash": ["/bin/bash", "-c"], "dash": ["/bin/dash", "-c"], "zsh": ["/usr/bin/zsh", "-c"],
          "busybox": ["/usr/bin/busybox", "sh", "-c"]}


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_a_login_shell_that_finds_no_sudo_is_become_failed_in_its_own_words(shell):
    """The real shell's wording (bash 'line 1:', zsh's reversed order, busybox without a line number)."""
    import os
    import subprocess
    from helpers import require
    require(os.path.exists(SHELLS[shell][0]), f"{shell} is not installed (apt-get install -y zsh busybox)")
    done = subprocess.run([*SHELLS[shell], "sudo -n -u root -- python3 -c 1"], capture_output=True, text=True,
                          env={"PATH": "/nonexistent"})
    assert done.returncode == 127 and "sudo" in done.stderr, done.stderr
    with pytest.raises(HostFailure) as err:
        read_agent_output(_host(), b"", done.returncode, done.stderr)
    assert err.value.failure_class == "become_failed", (shell, done.stderr, err.value.message)
    assert err.value.message.startswith("gpu07: become (root) needs sudo, which is not installed on the host (")
    assert done.stderr.strip()[:40] in err.value.message


@pytest.mark.parametrize("stderr,says", [
    ("sudo: sorry, you must have a tty to run sudo\n", "without a terminal (sudo: sorry, you must have a tty to run "
                                                       "sudo); sweep opens no terminal: add 'Defaults:ops !requiretty'"),
    ("sudo: a password is required\nsweep-agent: sudo -n -l: sudo: a password is required\n",
     "(sudo: a password is required; sudo -n -l: no rule without a password: not in sudoers, or every rule asks "
     "for one)"),
    ("sudo: a password is required\nsweep-agent: sudo -n -l: Matching Defaults entries for ops on h: | env_reset | "
     "User ops may run the following commands on h: | (root) NOPASSWD: /bin/true\n",
     "sudo -n -l: its rules do not cover the agent's python as root: (root) NOPASSWD: /bin/true)"),
    ("sweep-agent: sudo is not installed (No such file or directory; PATH=/opt/bin)\n",
     "needs sudo, which is not installed on the host (sudo: No such file or directory; PATH=/opt/bin)"),
])
def test_each_way_sudo_refuses_names_its_cause(stderr, says):
    status = 127 if "not installed" in stderr else 1
    with pytest.raises(HostFailure) as err:
        read_agent_output(_host(), b"", status, stderr)
    assert err.value.failure_class == "become_failed" and says in err.value.message, err.value.message


DENIED = {"kernel_log": {"source": None, "tried": {"/dev/kmsg": "PermissionError", "journalctl -k": "exit 1"}}}


def test_xid_says_not_readable_as_the_user_never_clean():
    xid = check_xid({**DENIED, "run_as": {"name": "ops", "uid": 1000}})
    assert xid["status"] == "unknown"
    assert xid["message"] == ("kernel log not readable as user ops (/dev/kmsg: PermissionError; journalctl -k: exit 1): "
                              "Xid events are unknown, not absent")
    assert xid["evidence"]["read_as"] == "ops" and "--become" in xid["fix"]
    as_root = check_xid({**DENIED, "run_as": {"name": "root", "uid": 0}})
    assert as_root["message"].startswith("kernel log not readable (") and "read_as" not in as_root["evidence"]


def test_host_contract_names_what_it_could_not_read_as_the_user():
    settings = {"cpu_governor": {"performance": 8}, "unreadable": {"numa_balancing": "PermissionError"},
                "acs": [{"bridge": "0000:17:00.0", "error": "config space beyond 64 bytes not readable (needs root)"}]}
    host = check_host({"host_settings": settings, "run_as": {"name": "ops", "uid": 1000}})
    assert "; not readable as user ops: ACS of PCIe switch port 0000:17:00.0 (config space beyond 64 bytes not " \
           "readable (needs root)), numa_balancing (PermissionError)" in host["message"]


def test_an_empty_journal_read_by_a_user_outside_its_groups_is_not_a_clean_log():
    log = {"kernel_log": {"source": "journalctl -k", "tried": {"/dev/kmsg": "PermissionError"}, "xid": []}}
    outside = check_xid({**log, "run_as": {"name": "ops", "uid": 1000, "groups": ["ops"]}})
    assert outside["status"] == "unknown" and outside["message"].startswith("kernel log not readable as user ops: "
                                                                           "journalctl -k shows no kernel message")
    inside = check_xid({**log, "run_as": {"name": "ops", "uid": 1000, "groups": ["ops", "systemd-journal"]}})
    assert inside["status"] == "ok" and inside["message"] == "no Xid since boot (journalctl -k)"
