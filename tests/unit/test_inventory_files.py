"""Hostile inventories (issue 23 items 1, 6, 11; issue 22's setting errors): names with shell syntax refused
by OpenSSH's rules, special and oversized files refused by name, long INI lines bounded, and an error
about a setting names the file that set it. Reads that could hang run in a subprocess with a timeout
(and a memory ceiling), so a regression fails instead of hanging the suite."""
from __future__ import annotations

import os
import resource
import string
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from sweep.cli import main
from sweep.collect.ssh.config import SSHConfigFile
from sweep.errors import SSHConfigError
from sweep.collect.ssh.openssh_config import expand
from sweep.errors import InventoryError
from sweep.inventory.formats import InventoryLimits
from sweep.inventory.model import load_inventory
from sweep.inventory.names import hostname_problem, ruser_problem

ROOT = Path(__file__).resolve().parents[2]
HOST_SHELL = "'`\"$\\;&<>|(){},"
USER_SHELL = "'`\";&<>|(){}"
NAME_CHARS = string.ascii_letters + string.digits + "._:-[]%*@+=/~"


# --- OpenSSH's valid_hostname / valid_ruser -------------------------------------------------------

names = st.text(alphabet=NAME_CHARS, min_size=1, max_size=40).filter(lambda s: not s.startswith("-"))


@given(names)
def test_names_of_plain_characters_are_accepted_as_host_and_user(name):
    assert hostname_problem(name) is None
    assert ruser_problem(name) is None


@given(names, st.sampled_from(HOST_SHELL + " \t\n\r\x00\x1b\x7f"), st.integers(min_value=0, max_value=40))
def test_a_host_name_with_a_shell_metacharacter_space_or_control_is_refused(name, bad, at):
    at = min(at, len(name))
    assert hostname_problem(name[:at] + bad + name[at:]) is not None


@given(names, st.sampled_from(USER_SHELL + "\x00\x1b\x7f"), st.integers(min_value=0, max_value=40))
def test_a_user_name_with_a_shell_metacharacter_or_control_is_refused(name, bad, at):
    at = min(at, len(name))
    assert ruser_problem(name[:at] + bad + name[at:]) is not None


@given(names)
def test_a_leading_dash_is_refused_and_the_user_rules_on_space_dash_and_backslash(name):
    assert hostname_problem("-" + name) and ruser_problem("-" + name)
    assert ruser_problem(f"{name} -x") and ruser_problem(name + "\\")
    assert ruser_problem(f"{name} x") is None  # valid_ruser allows a space not followed by '-'
    assert ruser_problem(f"{name}$x") is None and hostname_problem(f"{name}$x")  # '$': refused in hosts only


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="\x00", codec="utf-8"), max_size=30))
def test_a_token_expanded_into_a_shell_command_reaches_the_command_as_one_word(value):
    command = expand("printf '%%s|' %h", {"h": value}, "ProxyCommand", "test", shell=True)
    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, timeout=30)
    assert done.stdout.decode("utf-8", "surrogateescape") == value + "|"


# --- the inventory refuses such values, naming host, variable, file:line --------------------------


@pytest.mark.parametrize("body, where, text", [
    ('    "h0002$(touch x)":\n', ":3", "h0002$(touch x): host name (no ansible_host) 'h0002$(touch x)' holds '$'"),
    ('    a: {ansible_host: "127.0.10.5`touch x`"}\n', ":3", "a: ansible_host '127.0.10.5`touch x`' holds '`'"),
    ('    a: {ansible_host: "127.0.10.6|touch x"}\n', ":3", "a: ansible_host '127.0.10.6|touch x' holds '|'"),
    ('    a: {ansible_ssh_user: "root$(touch x)"}\n', ":3", "a: ansible_ssh_user 'root$(touch x)' holds '('"),
    ('    a: {ansible_host: "-oProxyCommand=x"}\n', ":3", "a: ansible_host '-oProxyCommand=x' starts with '-'"),
])
def test_an_inventory_value_with_shell_syntax_is_refused_with_host_variable_and_line(tmp_path, body, where, text):
    path = tmp_path / "inv.yml"
    path.write_text("all:\n  hosts:\n" + body)
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    assert caught.value.where == f"{path}{where}"
    assert caught.value.message.startswith(text) and "CVE-2023-51385" in caught.value.message


def test_hosts_that_share_their_group_vars_are_each_checked(tmp_path):
    """The loader builds hosts without vars of their own from a template: the name is checked there too."""
    path = tmp_path / "hosts.ini"
    path.write_text("[gpus]\ngpu01\ngpu02;reboot\n[gpus:vars]\nansible_user=ops\n")
    with pytest.raises(InventoryError, match=r"gpu02;reboot: host name \(no ansible_host\) .* holds ';'") as caught:
        load_inventory(path)
    assert caught.value.where == f"{path}:3"


def test_a_jump_host_with_shell_syntax_is_refused(tmp_path):
    path = tmp_path / "inv.yml"
    path.write_text("all:\n  hosts:\n    a:\n      ansible_host: 127.0.0.1\n"
                    "      ansible_ssh_common_args: \"-J 'ops@j$(touch x)'\"\n")
    host = load_inventory(path).hosts[0]
    with pytest.raises(SSHConfigError, match=r"the jump host 'j\$\(touch x\)' holds '\$'") as caught:
        SSHConfigFile(None, local_user="root").check(host)
    assert caught.value.where == f"{path}:5"


# --- special and oversized files, long INI lines: refused by name, never a hang -------------------


def _list_hosts(inventory: Path, home: Path) -> subprocess.CompletedProcess:
    def ceiling():  # a regression reading /dev/zero fails on memory instead of taking the machine's
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))

    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(home), "COLUMNS": "400"}
    return subprocess.run([sys.executable, "-m", "sweep.cli", "run", str(inventory), "--list-hosts"],
                          capture_output=True, text=True, env=env, timeout=90, preexec_fn=ceiling)


def _fleet(tmp_path: Path) -> Path:
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "host_vars").mkdir()
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  children:\n    gpus:\n      hosts:\n        h1:\n        h2:\n")
    return inventory


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "dev-urandom", "fifo-in-folder", "oversized"])
def test_a_vars_file_that_is_not_a_bounded_regular_file_is_refused_by_name(tmp_path, kind):
    inventory = _fleet(tmp_path)
    if kind == "fifo":
        target, what = tmp_path / "group_vars" / "gpus.yml", "is a FIFO (named pipe), not a regular file"
        os.mkfifo(target)
    elif kind == "dev-zero":
        target, what = tmp_path / "group_vars" / "gpus.yml", "is a character device (a link to /dev/zero)"
        target.symlink_to("/dev/zero")
    elif kind == "dev-urandom":
        target, what = tmp_path / "host_vars" / "h1", "is a character device (a link to /dev/urandom)"
        target.symlink_to("/dev/urandom")
    elif kind == "fifo-in-folder":
        (tmp_path / "group_vars" / "all").mkdir()
        (tmp_path / "group_vars" / "all" / "a.yml").write_text("site: x\n")
        target, what = tmp_path / "group_vars" / "all" / "b.yml", "is a FIFO (named pipe)"
        os.mkfifo(target)
    else:
        target = tmp_path / "host_vars" / "h2.yml"
        with open(target, "wb") as fh:
            fh.truncate(InventoryLimits().file_bytes + 1)  # sparse: nothing written
        what = f"is {InventoryLimits().file_bytes + 1:,} bytes, more than the limit of {InventoryLimits().file_bytes:,}"
    done = _list_hosts(inventory, tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith(f"sweep: error: {target}: {what}"), done.stderr
    assert done.stderr.count("\n") == 1


def test_a_vars_folder_with_a_link_back_up_is_refused_by_name(tmp_path):
    inventory = _fleet(tmp_path)
    (tmp_path / "group_vars" / "gpus").mkdir()
    (tmp_path / "group_vars" / "gpus" / "a.yml").write_text("site: x\n")
    (tmp_path / "group_vars" / "gpus" / "sub").symlink_to("../gpus")
    done = _list_hosts(inventory, tmp_path)
    assert (done.returncode, done.stderr.strip()) == (
        2, f"sweep: error: {tmp_path / 'group_vars' / 'gpus' / 'sub'}: is a link back to {tmp_path / 'group_vars' / 'gpus'}"
           ", a folder it is inside (a loop); remove the link")


def test_an_inventory_that_is_a_fifo_is_refused(tmp_path):
    inventory = tmp_path / "inventory.yml"
    os.mkfifo(inventory)
    done = _list_hosts(inventory, tmp_path)
    assert (done.returncode, done.stderr.split(";")[0]) == (
        2, f"sweep: error: {inventory}: is a FIFO (named pipe), not a regular file: sweep reads only regular "
           "files in an inventory")


def test_a_vars_file_linked_to_a_secret_is_not_echoed(tmp_path):
    inventory = _fleet(tmp_path)
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$SECRETSALT$hash:19000:0:99999:7:::\n")
    (tmp_path / "host_vars" / "h1").symlink_to(secret)
    done = _list_hosts(inventory, tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"sweep: error: {tmp_path / 'host_vars' / 'h1'}:1: holds a key that is not a "
                                  "variable name"), done.stderr
    assert "SECRET" not in done.stderr
    secret.write_text("root:$6$SECRETSALT$hash\n")  # a string, not a mapping
    done = _list_hosts(inventory, tmp_path)
    assert "variables file holds a str, not a mapping" in done.stderr and "SECRET" not in done.stderr


def test_an_ini_line_over_the_bound_is_refused_with_file_line_and_bound(tmp_path):
    inventory = tmp_path / "hosts"
    inventory.write_text("[gpus]\ngpu01\ngpu02 note=" + "x" * 10_000_000 + "\n")
    done = _list_hosts(inventory, tmp_path)
    assert (done.returncode, done.stderr.split(";")[0]) == (
        2, f"sweep: error: {inventory}:3: INI line is 10,000,011 characters long, more than the limit of 65,536")


def test_an_ini_line_within_the_bound_keeps_its_value(tmp_path):
    inventory = tmp_path / "hosts"
    value = "ab" * 30_000
    inventory.write_text(f"[gpus]\ngpu01 note='{value}' ansible_port=2222\n")
    host = load_inventory(inventory).hosts[0]
    assert (host.vars["note"], host.port) == (value, 2222)


# --- issue 22: an error about a setting names the file it came from -------------------------------


def test_a_missing_key_file_is_reported_against_the_host_vars_file_that_set_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    inventory = _fleet(tmp_path)
    (tmp_path / "host_vars" / "h2.yml").write_text(
        "ansible_host: 127.0.0.1\nansible_ssh_private_key_file: /nonexistent/gpu05_key\n")
    assert main(["run", str(inventory), "--out", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.startswith(
        f"sweep: error: {tmp_path / 'host_vars' / 'h2.yml'}:2: h2: private key file /nonexistent/gpu05_key does not exist")


def test_the_host_key_fix_texts_quote_the_address_they_suggest_a_command_for(tmp_path):
    """An address from ssh_config's HostName is not checked by the name rules; the command suggested to
    the operator still reads it as one word."""
    import io
    import shlex
    from types import SimpleNamespace

    import paramiko
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from sweep.collect.ssh import prober
    from sweep.collect.ssh.config import Hop
    from sweep.collect.ssh.hostkeys import HostKeyStore

    hop = Hop(address="gpu~1 `id`", port=2222, user="root", key_files=(), key_alias="gpu~1 `id`")
    client = SimpleNamespace(get_transport=lambda: None)
    text = prober._unknown_key("gpu01", hop, client, HostKeyStore([str(tmp_path / "known_hosts")])).message
    command = text.split("add it: ")[1].split(" >> ")[0]
    assert shlex.split(command) == ["ssh-keyscan", "-H", "-p", "2222", "gpu~1 `id`"]
    raw = Ed25519PrivateKey.generate().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                                     serialization.NoEncryption())
    key = paramiko.Ed25519Key.from_private_key(io.StringIO(raw.decode()))
    changed = paramiko.BadHostKeyException("[a;b]:22", key, key)
    text = prober._changed_key("gpu01", hop, "[a;b]:22", changed, HostKeyStore([])).message
    assert shlex.split(text.split("remove the old key with: ")[1]) == ["ssh-keygen", "-R", "[a;b]:22", "-f",
                                                                       "known_hosts"]
