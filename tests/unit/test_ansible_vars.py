"""The ansible engine's table of ansible_* variables (sweep.collect.engines.ansible_vars) covers every
variable ansible-core itself reads for the run: ansible-core's own plugin options are the oracle."""
from __future__ import annotations

from pathlib import Path

import pytest

from sweep.collect.engines.ansible_vars import UNREACHABLE, VARIABLES, INTERPRETER, check_hosts, refusal
from sweep.errors import InventoryError
from sweep.inventory.model import load_inventory

from helpers import require


def _plugin_vars(kind: str, name: str) -> set[str]:
    from ansible import constants as C
    from ansible.plugins.loader import become_loader, connection_loader, shell_loader

    {"connection": connection_loader, "shell": shell_loader, "become": become_loader}[kind].get(name, class_only=True)
    definitions = C.config.get_configuration_definitions(kind, name)
    return {v["name"] for option in definitions.values() for v in (option.get("vars") or [])
            if v["name"].startswith("ansible_")}


@pytest.fixture(scope="module")
def ansible_core():
    try:
        from ansible.plugins.loader import init_plugin_loader
    except ImportError:
        require(False, "ansible-core is not installed (pip install ansible-core)")
    init_plugin_loader()


def test_every_variable_of_the_plugins_the_run_uses_is_declared(ansible_core):
    from ansible import constants as C

    used = _plugin_vars("connection", "ssh") | _plugin_vars("shell", "sh") | _plugin_vars("become", "sudo")
    used |= {var for names in C.MAGIC_VARIABLE_MAPPING.values() for var in names}
    missing = sorted(var for var in used if var not in VARIABLES and not var.startswith(UNREACHABLE))
    assert missing == []


@pytest.mark.parametrize("kind, name", [("connection", "local"), ("connection", "paramiko_ssh"),
                                        ("connection", "winrm"), ("connection", "psrp"), ("become", "su"),
                                        ("become", "runas")])
def test_the_plugins_only_a_refused_choice_selects_are_unreachable_or_declared(ansible_core, kind, name):
    assert sorted(v for v in _plugin_vars(kind, name) if v not in VARIABLES and not v.startswith(UNREACHABLE)) == []


@pytest.mark.parametrize("var, value", [
    ("ansible_connection", "local"), ("ansible_ssh_executable", "/tmp/x"), ("ansible_host_key_checking", False),
    ("ansible_ssh_args", "-o StrictHostKeyChecking=no"), ("ansible_shell_executable", "-oProxyCommand=/tmp/x"),
    ("ansible_shell_executable", "/bin/sh -oProxyCommand=x"), ("ansible_control_path", "/tmp/other-host"),
    ("ansible_remote_tmp", "{{ lookup('pipe', 'id') }}"), ("ansible_paramiko_proxy_command", "{{ x }}"),
    ("ansible_sh_interpreter", ["{% if 1 %}x{% endif %}"]),
])
def test_hostile_values_are_refused(var, value):
    assert refusal(var, value) is not None


@pytest.mark.parametrize("var, value", [
    ("ansible_connection", "ssh"), ("ansible_connection", "smart"), ("ansible_host_key_checking", True),
    ("ansible_ssh_host_key_checking", "yes"), ("ansible_shell_executable", "/bin/bash"),
    ("ansible_ssh_use_tty", False), ("ansible_remote_tmp", "/var/tmp/ansible"), ("ansible_timeout", 30),
    ("ansible_user", "{{ read by sweep.inventory, which refuses it }}"), ("site_rack", "{{ not ansible's }}"),
])
def test_values_that_ask_for_what_sweep_does_are_kept(var, value):
    assert refusal(var, value) is None


def test_a_refusal_names_the_host_the_variable_and_its_line(tmp_path: Path):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpus]\ngpu01 ansible_host=10.0.0.1\ngpu02 ansible_host=10.0.0.2\n")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "gpu02.yml").write_text("site: a\nansible_ssh_executable: /tmp/evil\n")
    hosts = load_inventory(inventory).hosts
    with pytest.raises(InventoryError) as err:
        check_hosts(hosts, inventory)
    assert err.value.message.startswith("gpu02: ansible_ssh_executable names a program ansible runs on the controller")
    assert err.value.where == f"{tmp_path / 'host_vars' / 'gpu02.yml'}:2"
    assert "--engine ssh" in err.value.fix


def test_interpreter_pattern():
    assert INTERPRETER.match("ansible_perl_interpreter") and not INTERPRETER.match("ansible_python_interpreterx")
