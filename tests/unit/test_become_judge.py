"""Become as the controller judges it (sudo's own words -> a failure class) and as the agent reports what a
normal user could not read."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from probe_agent.hostchecks import check_host, check_xid
from sweep.collect.bundle import remote_command
from sweep.collect.outcome import judge_output
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
        judge_output(_host(), b"", status, stderr)
    assert err.value.failure_class == cls and err.value.message.startswith("gpu07: ") and says in err.value.message


def test_without_become_a_sudo_line_is_not_a_become_failure():
    with pytest.raises(HostFailure) as err:
        judge_output(_host(become=False), b"", 1, "sudo: a password is required\n")
    assert err.value.failure_class == "agent_error"


def test_the_remote_command_runs_sudo_non_interactively_only_under_become():
    assert remote_command("python3", 10, [], become_user="gpuadmin").startswith("sudo -n -u gpuadmin -- python3 -c ")
    assert remote_command("python3", 10, []).startswith("python3 -c ")


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
