"""The operator's everyday options, each held to the meaning its owner gives it: inline inventories and
-e against ansible-core, -w against ClusterShell's `nodeset -e`, precedence against ansible's variables."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sweep.errors import InventoryError
from sweep.inventory.command_line import command_line_vars, nodeset_inventory, parse_extra_vars, parse_kv
from sweep.inventory.model import load_inventory

from helpers import require

from ansible.inventory.manager import InventoryManager  # ansible-core (the test extra) is the oracle
from ansible.parsing.dataloader import DataLoader
from ansible.parsing.splitter import parse_kv as ansible_parse_kv
from ansible.vars.manager import VariableManager

NAME = st.from_regex(r"\A[a-z][a-z0-9-]{0,8}(\.[a-z0-9]{1,4})?\Z")
ENTRY = st.tuples(NAME, st.one_of(st.none(), st.integers(1, 65535)))
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ansible_hosts(source: str, extra: dict | None = None) -> list[tuple[str, dict]]:
    """ansible-core's hosts of an inventory source, in its order, with each host's variables."""
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[source])
    variables = VariableManager(loader=loader, inventory=manager)
    variables._extra_vars = dict(extra or {})
    return [(host.name, variables.get_vars(host=host)) for host in manager.get_hosts()]


@SETTINGS
@given(st.lists(ENTRY, min_size=1, max_size=8), st.sampled_from([",", ", ", " ,"]), st.booleans())
def test_an_inline_inventory_names_the_hosts_and_ports_ansible_reads(entries, comma, trailing):
    text = comma.join(name if port is None else f"{name}:{port}" for name, port in entries) + ("," if trailing or
                                                                                              len(entries) == 1 else "")
    expected = [(name, found.get("ansible_port")) for name, found in _ansible_hosts(text)]
    ours = [(host.name, host.port) for host in load_inventory(text).hosts]
    assert ours == expected


def test_an_inline_inventory_is_ungrouped_and_a_file_with_a_comma_stays_a_file(tmp_path):
    inv = load_inventory("gpu01,gpu02,")
    assert [h.groups for h in inv.hosts] == [(), ()] and set(inv.groups["ungrouped"]) == {"gpu01", "gpu02"}
    path = tmp_path / "a,b.ini"
    path.write_text("[g]\nonly\n")
    assert [h.name for h in load_inventory(path).hosts] == ["only"]


WORD = st.from_regex(r"\A[A-Za-z0-9_./:@+-]{1,10}\Z")
QUOTED = st.from_regex(r"\A[A-Za-z0-9 _./:-]{0,10}\Z").map(lambda v: f"'{v}'")
PAIR = st.tuples(st.from_regex(r"\A[a-z_][a-z0-9_]{0,10}\Z"), st.one_of(WORD, QUOTED))


@SETTINGS
@given(st.lists(PAIR, min_size=1, max_size=6))
@example(pairs=[("_", "' '")])  # issue 39: found at random; shlex gave {'_': ''}, Ansible {'_': ' '}
def test_extra_vars_key_value_parse_as_ansibles_parse_kv(pairs):
    text = " ".join(f"{key}={value}" for key, value in pairs)
    assert parse_kv(text) == ansible_parse_kv(text)


# any text of the characters that matter to Ansible's splitter: blanks, tabs, newlines, quotes,
# backslashes (escapes, line continuations), '=' and Jinja2 braces
KV_TEXT = st.text(st.sampled_from(list("ab_=  \t\n'\"\\{}%#xn0")), max_size=24)


@settings(max_examples=300, deadline=None)
@given(KV_TEXT)
@example("_=' '")
@example("x=a'b c'  y=\"q  r\"")      # quotes count only around the whole value; two blanks part words as one
@example("k=a\tb=c")                   # a tab does not separate words
@example("k=\\n j=\\x41 i=\\u00e9")  # Python escapes are decoded
@example("k={{ a b }} j={% if x %}")   # a Jinja2 block is one word; an open one is an error
@example("a\\=b=c")                   # the first '=' not after a backslash cuts the word
@example("k=1 \\\nj=2")              # a backslash alone continues the line
def test_any_extra_vars_text_means_what_it_means_to_ansible_or_is_refused(text):
    try:
        expected = ansible_parse_kv(text)
    except Exception:  # AnsibleParserError (unbalanced), UnicodeDecodeError (a bad \N{...})
        expected = None
    if expected is None or "_raw_params" in expected or "" in expected:
        with pytest.raises(InventoryError):  # a word that is no key=value is refused, not dropped
            parse_kv(text)
    else:
        assert parse_kv(text) == expected


def test_quoted_blanks_and_escapes_in_extra_vars_reach_the_host_as_ansible_gives_them():
    assert parse_kv("ansible_user=' ' sweep_note=\"a  b\" sweep_tab=a\\tb") == {
        "ansible_user": " ", "sweep_note": "a  b", "sweep_tab": "a\tb"}
    with pytest.raises(InventoryError, match=r"cannot be split \(an unclosed quote or Jinja2 block\)"):
        parse_kv("a='b")


def test_extra_vars_merge_left_to_right_json_yaml_and_files(tmp_path):
    vars_file = tmp_path / "vars.yml"
    vars_file.write_text("ansible_user: ops\nsweep_deep: true\n")
    merged = parse_extra_vars(["ansible_user=a sweep_retries=2", f"@{vars_file}", '{"sweep_retries": 5}'])
    assert {k: v for k, (v, _) in merged.items()} == {"ansible_user": "ops", "sweep_retries": 5, "sweep_deep": True}
    assert merged["ansible_user"][1] == f"{vars_file}:1" and merged["sweep_retries"][1] == "-e"
    with pytest.raises(InventoryError, match=r"put @ before a vars file's name: -e @/etc/x"):
        parse_extra_vars(["/etc/x"])
    with pytest.raises(InventoryError, match=r"'oops' is not key=value"):
        parse_extra_vars(["a=1 oops"])


def test_command_line_vars_sit_under_the_inventory_and_extra_vars_over_it_as_in_ansible(tmp_path):
    inv = tmp_path / "hosts.ini"
    inv.write_text("[g]\nset ansible_user=inv ansible_become=false ansible_become_user=admin\nbare\n")
    layers = command_line_vars(user="cli", become=True, become_user="gpu", extra=["ansible_port=2200"])
    hosts = {h.name: h for h in load_inventory(inv, layers=layers).hosts}
    # ansible-core with the same -e: its variables say the same
    oracle = dict(_ansible_hosts(str(inv), {"ansible_port": "2200"}))
    assert (hosts["set"].user, hosts["set"].become, hosts["set"].port) == ("inv", False, 2200)
    assert oracle["set"]["ansible_user"] == "inv" and oracle["set"]["ansible_port"] == "2200"
    assert (hosts["bare"].user, hosts["bare"].become, hosts["bare"].become_user) == ("cli", True, "gpu")
    assert "ansible_user" not in oracle["bare"]  # -u is no variable: the connection falls back to it


def test_a_become_method_other_than_sudo_is_refused_naming_host_and_line(tmp_path):
    inv = tmp_path / "hosts.ini"
    inv.write_text("[g]\ngpu01\ngpu02 ansible_become_method=su\n")
    with pytest.raises(InventoryError) as err:
        load_inventory(inv, layers=command_line_vars(become=True))
    assert str(err.value).startswith(f"{inv}:3: gpu02: ansible_become_method is 'su': sweep becomes another user "
                                     "through sudo -n only (never a password prompt); set ansible_become_method: sudo")
    assert not load_inventory(inv).hosts[1].become  # without become the method is not read


@pytest.mark.parametrize("folded", ["gpu[01-08]", "gpu[01-03,07],login1", "rack[1-2]-n[01-02]", "n[9-11]"])
def test_w_expands_a_node_set_as_nodeset_e_does(folded, tmp_path):
    require(subprocess.run(["nodeset", "--version"], capture_output=True).returncode == 0, "needs ClusterShell")
    expected = subprocess.run(["nodeset", "-e", folded], capture_output=True, text=True, check=True).stdout.split()
    done = subprocess.run([sys.executable, "-m", "sweep.cli", "run", "-w", folded, "--list-hosts"],
                          capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert [line.strip() for line in done.stdout.splitlines()[1:]] == expected
    assert nodeset_inventory(folded) == ",".join(expected) + ","


def test_the_run_options_of_the_command_line_are_kept_for_resume():
    from sweep.collect.resume import OPTIONS, resolve

    layers = command_line_vars(user="ops", private_key="/k", become=True, extra=["a=1", "ansible_become_password=x"])
    kept = OPTIONS["inventory_vars"].kept(layers)
    assert "ansible_become_password" not in kept["over"]  # a secret is never written into the manifest
    assert json.loads(json.dumps(kept)) == kept
    asked = {name: option.default for name, option in OPTIONS.items()}
    again = resolve(asked, set(), {"inventory_vars": kept}).live["inventory_vars"]
    assert again.under["ansible_user"][0] == "ops" and again.under["ansible_become"][0] is True
    # a variable sweep does not read, and a secret: its name, no value (issue 53: a resume names both)
    assert again.over == {} and kept["dropped"] == ["a", "ansible_become_password"]
