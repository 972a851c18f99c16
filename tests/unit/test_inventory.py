"""sweep.inventory and sweep.inventory.limit: Ansible inventories read as Ansible reads them."""
from __future__ import annotations

import dataclasses
import json
import sys
import warnings
from pathlib import Path

import pytest

from sweep.errors import InventoryError, InventoryWarning, LimitError
from sweep.inventory.model import Host, load_inventory, refuse_unrendered
from sweep.inventory.formats import expand_host_range
from sweep.inventory.limit import split_patterns

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "inventories"
EXAMPLES = Path(__file__).resolve().parents[2] / "inventories"
FLEET_FILES = ["fleet.yml", "fleet.ini"]

FLEET_HOSTS = [
    "bastion",
    "gpu01.dc1", "gpu02.dc1", "gpu03.dc1", "gpu04.dc1",
    "gpu05.dc1", "gpu06.dc1", "gpu07.dc1", "gpu08.dc1",
    "logina", "loginb",
    "spare1", "spare3", "spare5",
]
GPUS = tuple(FLEET_HOSTS[1:9])
FLEET_GROUPS = {  # each group's hosts in ansible's Group.get_hosts order (its own, then its children's)
    "all": ("bastion", "spare1", "spare3", "spare5", "logina", "loginb") + GPUS,
    "ungrouped": ("bastion",),
    "dc1": ("logina", "loginb") + GPUS,
    "gpu": GPUS,
    "h200_rack1": GPUS[:4],
    "h200_rack2": GPUS[4:],
    "canary": ("gpu03.dc1",),
    "login": ("logina", "loginb"),
    "spare": ("spare1", "spare3", "spare5"),
}


@pytest.fixture(autouse=True)
def fixed_home(monkeypatch):
    """'~' in key files expands against a fixed HOME, never the developer's."""
    monkeypatch.setenv("HOME", "/home/ops")


@pytest.fixture(params=FLEET_FILES)
def fleet(request):
    return load_inventory(FIXTURES / request.param)


def by_name(inventory):
    return {host.name: host for host in inventory.hosts}


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def error_of(path, loader="auto") -> str:
    """The error reading `path` gives, or (a template in a connection value) contacting its hosts does."""
    with pytest.raises(InventoryError) as caught:
        refuse_unrendered(load_inventory(path, loader=loader).select(None))
    return str(caught.value)


# --- hosts, groups and their order --------------------------------------------------------------


def test_hosts_come_in_order_of_first_appearance_with_ranges_expanded(fleet):
    assert [host.name for host in fleet.hosts] == FLEET_HOSTS


def test_groups_hold_their_hosts_and_their_childrens_hosts(fleet):
    assert dict(fleet.groups) == FLEET_GROUPS
    assert list(fleet.groups) == list(FLEET_GROUPS)  # order of first appearance


def test_host_groups_are_sorted_include_ancestors_and_leave_out_all_and_ungrouped(fleet):
    hosts = by_name(fleet)
    assert hosts["gpu03.dc1"].groups == ("canary", "dc1", "gpu", "h200_rack1")
    assert hosts["spare3"].groups == ("spare",)
    assert hosts["bastion"].groups == ()


def test_yaml_and_ini_describe_the_same_fleet():
    from_yaml, from_ini = (load_inventory(FIXTURES / name) for name in FLEET_FILES)
    assert from_yaml.hosts == from_ini.hosts
    assert from_yaml.groups == from_ini.groups


# --- connection fields --------------------------------------------------------------------------


def test_connection_fields(fleet):
    hosts = by_name(fleet)
    assert hosts["bastion"] == Host(
        name="bastion", address="10.0.0.2", port=None, user="ops", key_file=None,
        python="/usr/bin/python3.10", ssh_common_args=None, proxy_jump=None, groups=(),
        vars=hosts["bastion"].vars, settings=hosts["bastion"].settings,
    )
    gpu01 = hosts["gpu01.dc1"]
    assert (gpu01.address, gpu01.port, gpu01.user, gpu01.python) == ("127.0.0.5", 2201, "ops", "python3")
    assert gpu01.ssh_common_args == "-o ProxyJump=ops@bastion.dc1"
    assert gpu01.proxy_jump == "ops@bastion.dc1"
    assert hosts["gpu02.dc1"].key_file == "/home/ops/.ssh/gpu02_ed25519"  # host_vars/gpu02.dc1/ssh.yml
    assert (hosts["gpu08.dc1"].address, hosts["gpu08.dc1"].port) == ("gpu08.dc1", 2222)  # gpu08.dc1:2222
    logina = hosts["logina"]
    assert (logina.user, logina.python, logina.proxy_jump) == ("admin", "python3", "ops@jump2.dc1")
    assert logina.ssh_common_args == "-J ops@jump2.dc1 -o StrictHostKeyChecking=no"


@pytest.mark.parametrize(("common_args", "jump"), [
    ("-o ProxyJump=ops@bastion", "ops@bastion"),
    ("-oProxyJump=bastion:2222", "bastion:2222"),
    ("-o 'ProxyJump bastion'", "bastion"),
    ("-o proxyjump=a,b", "a,b"),
    ("-J bastion -o ServerAliveInterval=5", "bastion"),
    ("-Jbastion", "bastion"),
    ("-o ProxyJump=none", None),
    ("-o ProxyCommand='ssh -W %h:%p bastion'", None),
    ("-o StrictHostKeyChecking=no", None),
])
def test_proxy_jump_is_read_from_ssh_common_args(tmp_path, common_args, jump):
    path = write(tmp_path, "hosts.yml", f"all:\n  hosts:\n    gpu01:\n      ansible_ssh_common_args: \"{common_args}\"\n")
    host = load_inventory(path).hosts[0]
    assert (host.ssh_common_args, host.proxy_jump) == (common_args, jump)


def test_ssh_spellings_of_connection_variables_win_as_in_ansibles_ssh_plugin(tmp_path):
    path = write(tmp_path, "hosts.ini",
                 "gpu01 ansible_host=a ansible_ssh_host=b ansible_port=22 ansible_ssh_port=2200"
                 " ansible_user=x ansible_ssh_user=y ansible_private_key_file=/k1"
                 " ansible_ssh_private_key_file=/k2 ansible_python_interpreter=/usr/bin/python3.12\n")
    host = load_inventory(path).hosts[0]
    assert (host.address, host.port, host.user, host.key_file, host.python) == (
        "b", 2200, "y", "/k2", "/usr/bin/python3.12")


def test_defaults_without_connection_variables(tmp_path):
    host = load_inventory(write(tmp_path, "hosts", "gpu01\n")).hosts[0]
    assert (host.address, host.port, host.user, host.key_file, host.python, host.proxy_jump) == (
        "gpu01", None, None, None, "python3", None)


def test_port_given_as_a_quoted_string_becomes_an_int(tmp_path):
    host = load_inventory(write(tmp_path, "hosts.yml", "all:\n  hosts:\n    gpu01:\n      ansible_port: '2222'\n"))
    assert host.hosts[0].port == 2222


# --- variable precedence ------------------------------------------------------------------------


@pytest.mark.parametrize(("host", "level"), [
    ("bastion", "all"),           # 1. all vars in the inventory file
    ("logina", "dc1"),            # 2. parent group
    ("gpu05.dc1", "gpu"),         # 2. child group over its parent
    ("gpu02.dc1", "rack1"),       # 2. grandchild group
    ("gpu03.dc1", "canary"),      # 2. same depth: ansible_group_priority 10 beats rack1's default 1
    ("gpu01.dc1", "host-file"),   # 6. host_vars/ file over the inline host var (5.)
    ("spare1", "all"),
])
def test_precedence_of_inventory_vars(fleet, host, level):
    assert by_name(fleet)[host].vars["level"] == level


def test_group_vars_files_outrank_every_group_var_of_the_inventory_file(fleet):
    hosts = by_name(fleet)
    # h200_rack1 sets shadow=rack1-inventory in the inventory; group_vars/all.yml sets all-file: ansible's order
    assert hosts["gpu01.dc1"].vars["shadow"] == "all-file"
    assert hosts["gpu05.dc1"].vars["file_level"] == "rack2"  # group_vars/h200_rack2 (no suffix) over gpu/
    assert hosts["gpu01.dc1"].vars["file_level"] == "gpu"    # group_vars/gpu/ over group_vars/all.yml
    assert hosts["bastion"].vars["file_level"] == "all"


def test_group_vars_directory_files_merge_in_sorted_order_and_shadow_name_yml(fleet):
    gpu = by_name(fleet)["gpu01.dc1"]
    assert gpu.vars["gpu_model"] == "H200-SXM5"  # 20-override.yml after 10-base.yml; gpu.yml is never read
    assert "gpu_model" not in by_name(fleet)["logina"].vars


def test_host_vars_file_outranks_inline_host_vars(fleet):
    gpu01 = by_name(fleet)["gpu01.dc1"]
    assert (gpu01.vars["ansible_port"], gpu01.port) == (2201, 2201)  # inventory says 22


def test_host_defined_twice_with_different_addresses_merges_later_wins(tmp_path):
    path = write(tmp_path, "hosts.ini",
                 "[rack1]\ngpu01 ansible_host=10.0.0.1 ansible_port=22\n"
                 "[rack2]\ngpu01 ansible_host=10.0.0.9\n")
    with pytest.warns(InventoryWarning) as caught:
        inventory = load_inventory(path)
    assert [(h.name, h.address, h.port, h.groups) for h in inventory.hosts] == [
        ("gpu01", "10.0.0.9", 22, ("rack1", "rack2"))]
    assert [str(w.message) for w in caught] == [
        f"{path}:4: host 'gpu01' is defined twice with different ansible_host: '10.0.0.9' here, '10.0.0.1' at "
        f"{path}:2; as Ansible does, sweep uses the later one; remove one of the two definitions"]


def test_vars_file_in_a_directory_walks_subdirectories(tmp_path):
    path = write(tmp_path, "hosts.yml", "gpu:\n  hosts:\n    g1:\n")
    write(tmp_path, "group_vars/gpu/a/x.yml", "v: from-a\n")
    write(tmp_path, "group_vars/gpu/b.yaml", "v: from-b\nw: 1\n")
    write(tmp_path, "group_vars/gpu/.hidden.yml", "w: hidden\n")
    write(tmp_path, "group_vars/gpu/notes.txt", "w: notes\n")
    assert dict(load_inventory(path).hosts[0].vars) == {"v": "from-b", "w": 1}


# --- settings and frozen values -----------------------------------------------------------------


def test_sweep_prefixed_vars_become_settings(fleet):
    hosts = by_name(fleet)
    assert dict(hosts["gpu01.dc1"].settings) == {
        "timeout": 30, "expected_gpus": 8, "interpreters": ("/opt/venv/bin/python", "python3")}
    assert hosts["spare1"].settings["skip"] is True
    assert "expected_gpus" not in hosts["logina"].settings


def test_hosts_are_frozen_hashable_and_their_vars_read_only(fleet):
    host = fleet.hosts[1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        host.port = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        host.vars["level"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        host.settings["timeout"] = 1  # type: ignore[index]
    assert len({*fleet.hosts}) == len(FLEET_HOSTS)


def test_snapshot_is_json_and_leaves_out_vars(fleet):
    snapshot = json.loads(json.dumps(fleet.snapshot()))
    assert snapshot["path"] == str(fleet.path)
    assert snapshot["groups"] == {name: list(members) for name, members in FLEET_GROUPS.items()}
    assert snapshot["hosts"][1] == {
        "name": "gpu01.dc1", "address": "127.0.0.5", "port": 2201, "user": "ops", "key_file": None,
        "python": "python3", "ssh_common_args": "-o ProxyJump=ops@bastion.dc1", "proxy_jump": "ops@bastion.dc1",
        "groups": ["dc1", "gpu", "h200_rack1"],
        "settings": {"timeout": 30, "expected_gpus": 8, "interpreters": ["/opt/venv/bin/python", "python3"]},
    }


# --- formats ------------------------------------------------------------------------------------


def test_ini_values_are_typed_as_ansible_types_them(tmp_path):
    path = write(tmp_path, "hosts.ini", (
        "[g]\n"
        "h1 a=23 b=True c='x y' d=\"'05'\" e=foo f=[1,2] g=07 h=None\n"
        "[g:vars]\n"
        "x=23\n"
        "y = True\n"
        "w=a b # not a comment\n"
        "z='quoted'\n"
    ))
    assert dict(load_inventory(path).hosts[0].vars) == {
        "a": 23, "b": True, "c": "x y", "d": "05", "e": "foo", "f": (1, 2), "g": "07", "h": None,
        "x": 23, "y": True, "w": "a b # not a comment", "z": "quoted",
    }


@pytest.mark.parametrize(("name", "text"), [
    ("hosts", "all:\n  hosts:\n    gpu01:\n    gpu02:\n"),           # no suffix, reads as YAML
    ("hosts", "gpu01\ngpu02\n"),                                     # no suffix, not a YAML mapping
    ("hosts", "[gpu]\ngpu01\ngpu02\n"),
    ("hosts.yaml", "gpu:\n  hosts:\n    gpu0[1:2]:\n"),
    ("hosts.json", '{"gpu": {"hosts": {"gpu01": null, "gpu02": {}}}}'),
    ("hosts.cfg", "gpu0[1:2]\n"),
])
def test_format_is_detected_by_suffix_then_content(tmp_path, name, text):
    assert [h.name for h in load_inventory(write(tmp_path, name, text)).hosts] == ["gpu01", "gpu02"]


def test_ini_children_may_be_declared_before_the_child_group(tmp_path):
    path = write(tmp_path, "hosts.ini", "[gpu:children]\nrack2\nrack1\n[rack1]\ng1\n[rack2]\ng2\n")
    assert dict(load_inventory(path).groups) == {
        "all": ("g1", "g2"), "ungrouped": (), "gpu": ("g1", "g2"), "rack1": ("g1",), "rack2": ("g2",)}


def test_yaml_hosts_and_children_may_be_single_strings(tmp_path):
    path = write(tmp_path, "hosts.yml", "gpu:\n  children: rack1\nrack1:\n  hosts: gpu01\n")
    assert load_inventory(path).groups["gpu"] == ("gpu01",)


def test_yaml_merge_keys_and_unsafe_tag(tmp_path):
    path = write(tmp_path, "hosts.yml", (
        "all:\n"
        "  hosts:\n"
        "    gpu01: &base\n"
        "      ansible_user: ops\n"
        "    gpu02:\n"
        "      <<: *base\n"
        "      note: !unsafe '{{ raw }}'\n"
    ))
    assert [(h.name, h.user) for h in load_inventory(path).hosts] == [("gpu01", "ops"), ("gpu02", "ops")]
    assert load_inventory(path).hosts[1].vars["note"] == "{{ raw }}"


# --- host ranges --------------------------------------------------------------------------------


@pytest.mark.parametrize(("pattern", "names"), [
    ("gpu[01:04].dc1", ["gpu01.dc1", "gpu02.dc1", "gpu03.dc1", "gpu04.dc1"]),
    ("gpu[1:10:2]", ["gpu1", "gpu3", "gpu5", "gpu7", "gpu9"]),
    ("node[a:f]", ["nodea", "nodeb", "nodec", "noded", "nodee", "nodef"]),
    ("gpu[8:11]", ["gpu8", "gpu9", "gpu10", "gpu11"]),
    ("gpu[008:010]", ["gpu008", "gpu009", "gpu010"]),
    ("r[1:2]-gpu[01:02]", ["r1-gpu01", "r1-gpu02", "r2-gpu01", "r2-gpu02"]),
    ("gpu[:2]", ["gpu0", "gpu1", "gpu2"]),
    ("n[a:e:2]", ["na", "nc", "ne"]),
    ("gpu01", ["gpu01"]),
])
def test_host_ranges_expand_as_ansible_expands_them(pattern, names):
    assert expand_host_range(pattern) == names


def test_a_range_with_a_port_gives_every_host_that_port(tmp_path):
    path = write(tmp_path, "hosts.ini", "gpu[1:3]:2222\n")
    assert [(h.name, h.port) for h in load_inventory(path).hosts] == [("gpu1", 2222), ("gpu2", 2222), ("gpu3", 2222)]


@pytest.mark.parametrize(("pattern", "message"), [
    ("gpu[05:01]", "host range 'gpu[05:01]' is empty: it begins at 05, after its end 01; "
                   "write the lower bound first: [01:05]"),
    ("node[f:a]", "host range 'node[f:a]' is empty: it begins at 'f', after its end 'a'; "
                  "write the lower bound first: [a:f]"),
    ("gpu[01:100]", "host range 'gpu[01:100]' pads '01' to 2 digits but not '100'; "
                    "give both ends the same width: [001:100]"),
    ("gpu[1:x]", "host range 'gpu[1:x]' has bounds '1' and 'x'; use two numbers or two single letters; "
                 "write it like gpu[01:64] or node[a:f]"),
    ("gpu[1:4:0]", "host range 'gpu[1:4:0]' has step '0'; the step must be a whole number of 1 or more; "
                   "write it like gpu[1:9:2]"),
    ("gpu[1]", "host range 'gpu[1]' is not [begin:end] or [begin:end:step]; write it like gpu[01:64] or gpu[1:9:2]"),
    ("gpu[1:2", "host range 'gpu[1:2' is not [begin:end] or [begin:end:step]; write it like gpu[01:64] or gpu[1:9:2]"),
])
def test_unreadable_host_ranges_are_errors(pattern, message):
    with pytest.raises(InventoryError) as caught:
        expand_host_range(pattern, where="hosts:3")
    assert str(caught.value) == f"hosts:3: {message}"


# --- --limit ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("limit", "names"), [  # in the order ansible -i fleet.yml LIMIT --list-hosts lists them
    (None, list(FLEET_GROUPS["all"])),
    ("", list(FLEET_GROUPS["all"])),
    ("all", list(FLEET_GROUPS["all"])),
    ("*", list(FLEET_GROUPS["all"])),
    ("h200_rack2", list(GPUS[4:])),
    ("gpu01.dc1", ["gpu01.dc1"]),
    ("gpu0*", list(GPUS)),
    ("h200*", list(GPUS)),
    ("gpu:!h200_rack2", list(GPUS[:4])),
    ("!h200_rack2,gpu", list(GPUS[:4])),              # plain patterns first, then exclusions
    ("gpu,&canary", ["gpu03.dc1"]),
    ("gpu:&h200_rack1:!gpu01.dc1", ["gpu02.dc1", "gpu03.dc1", "gpu04.dc1"]),
    ("!dc1", ["bastion", "spare1", "spare3", "spare5"]),  # only exclusions: 'all' is implied
    ("&login", ["logina", "loginb"]),
    ("~gpu0[1-3]", ["gpu01.dc1", "gpu02.dc1", "gpu03.dc1"]),
    ("~.*b$", ["loginb"]),
    ("spare5, login ,bastion", ["spare5", "logina", "loginb", "bastion"]),  # the patterns' order, as Ansible
    ("ungrouped", ["bastion"]),
    ("gpu[0]", ["gpu01.dc1"]),                       # a subscript of the group, not a host range
    ("gpu[1:3]", ["gpu02.dc1", "gpu03.dc1", "gpu04.dc1"]),
    ("gpu[-1]", ["gpu08.dc1"]),
    ("gpu[6:]", ["gpu07.dc1", "gpu08.dc1"]),
    ("*.dc1:&~gpu0[5-8]", list(GPUS[4:])),
    ("spare:!spare3", ["spare1", "spare5"]),                        # a host name in an '!' pattern
    ("*1", ["logina", "loginb", *GPUS, "spare1"]),                  # a glob: its groups' hosts, then the hosts it names
    ("~canary|spare1", ["gpu03.dc1", "spare1"]),                    # a regex: the same
])
def test_limit_selects_like_ansible(fleet, limit, names):
    assert [host.name for host in fleet.select(limit)] == names


def test_limit_from_a_file(fleet, tmp_path):
    path = write(tmp_path, "retry", "gpu03.dc1\n\nspare*\n")
    assert [host.name for host in fleet.select(f"@{path}")] == ["gpu03.dc1", "spare1", "spare3", "spare5"]


@pytest.mark.parametrize(("limit", "patterns"), [
    ("a,b:c", ["a", "b:c"]),
    ("gpu:!h200_rack2", ["gpu", "!h200_rack2"]),
    ("gpu[1:3]:spare", ["gpu[1:3]", "spare"]),
    ("fe80::1", ["fe80::1"]),
    ("gpu01:2222", ["gpu01:2222"]),
])
def test_split_patterns_keeps_ranges_ipv6_and_ports_whole(limit, patterns):
    assert split_patterns(limit) == patterns


def test_limit_matching_nothing_names_the_file_and_some_groups(fleet):
    with pytest.raises(LimitError) as caught:
        fleet.select("gpu9*")
    assert str(caught.value) == (
        f"--limit 'gpu9*' matches no host in {fleet.path}; use a host name, a glob, "
        "or one of the groups dc1, gpu, h200_rack1, h200_rack2, canary, login, ...")


def test_limit_matching_nothing_in_an_inventory_without_groups(tmp_path):
    inventory = load_inventory(write(tmp_path, "hosts", "gpu01\n"))
    with pytest.raises(LimitError) as caught:
        inventory.select("gpu:&spare")
    assert str(caught.value) == (
        f"--limit 'gpu:&spare' matches no host in {inventory.path}; "
        "use a host name or a glob; this inventory has no groups")


@pytest.mark.parametrize(("limit", "message"), [
    ("~gpu(", "--limit pattern '~gpu(' is not a valid regular expression "
              "(missing ), unterminated subpattern at position 3); fix the expression after '~', "
              "or use a glob such as 'gpu0*'"),
    ("canary[3]", "--limit pattern 'canary[3]' asks for host 3 of 'canary', which matches only 1 host; "
                  "use an index from 0 to 0, or a slice such as canary[0:3]"),
    ("@/nonexistent/retry", "--limit '@/nonexistent/retry' names a file that cannot be read "
                            "(No such file or directory); give the path of a file listing one host or group per line"),
    ("gpu[1", "--limit 'gpu[1' has an unbalanced '[' or ']'; close the bracket (gpu[0], gpu[1:3]) "
              "or separate patterns with ','"),
    ("~spare[1,5]", "--limit pattern '~spare[1' is not a valid regular expression (unterminated character set "
                    "at position 5); fix the expression after '~', or use a glob such as 'gpu0*'"),  # split as Ansible splits it
    (" ~gpu0[1-3", "--limit pattern '~gpu0[1-3' is not a valid regular expression (unterminated character set "
                   "at position 4); fix the expression after '~', or use a glob such as 'gpu0*'"),  # a regex's own error
])
def test_unreadable_limit_patterns(fleet, limit, message):
    with pytest.raises(LimitError) as caught:
        fleet.select(limit)
    assert str(caught.value) == message


# --- errors: every message names the file, the line where known, and the fix --------------------


@pytest.mark.parametrize(("name", "text", "message"), [
    ("bad.yml", "all:\n  hosts:\n    gpu01:\n   bad: [\n",
     "bad.yml:4: not valid YAML: while parsing a block mapping: did not find expected key; "
     "fix the YAML there (indentation, a missing ':' or an unclosed quote)"),
    ("quote.yml", "all:\n  hosts:\n    'gpu01:\n",
     "quote.yml:3: not valid YAML: while scanning a quoted scalar: found unexpected end of stream; "
     "fix the YAML there (indentation, a missing ':' or an unclosed quote)"),
    ("colon.yml", "all:\n  children:\n    gpus:\n      hosts:\n        gpu01:\n          ansible_host: a\n"
                  "        gpu02\n          ansible_host: b\n",  # the line without its ':', not the one after it
     "colon.yml:7: not valid YAML: no ':' after 'gpu02': a key needs a ':' after it (or the line is indented under "
     "the one above by mistake); write 'gpu02:' (or fix the indentation)"),
    ("value.yml", "all:\n  hosts:\n    gpu01:\n      ansible_host: a\n      ansible_user root\n",
     "value.yml:5: not valid YAML: no ':' after 'ansible_user': a key needs a ':' after it (or the line is indented "
     "under the one above by mistake); write 'ansible_user: root' (or fix the indentation)"),
    ("tab.yml", "all:\n  hosts:\n    gpu01:\n\tansible_host: a\n",  # libyaml: "cannot start any token"
     "tab.yml:4: not valid YAML: a tab at column 1: YAML indents with spaces, never tabs; replace the tab with "
     "spaces"),
    ("tag.yml", "all:\n  hosts:\n    gpu01:\n      x: !foo bar\n",
     "tag.yml:4: not valid YAML: could not determine a constructor for the tag '!foo'; "
     "sweep reads plain YAML and ansible's !unsafe and !vault tags"),
    ("list.yml", "all:\n  children:\n    gpu:\n      hosts:\n        - gpu01\n        - gpu02\n",
     "list.yml:4: 'hosts' of group 'gpu' must be a mapping, not a list; write one 'gpu01:' per line, without '- '"),
    ("key.yml", "gpu:\n  host:\n    gpu01:\n",
     "key.yml:2: group 'gpu' has an unknown key 'host'; a group holds only 'hosts:', 'children:' and 'vars:'"),
    ("group.yml", "gpu:\n  - gpu01\n",
     "group.yml:1: group 'gpu' must be a mapping with hosts, children or vars, not a list; "
     "indent 'hosts:', 'children:' or 'vars:' under 'gpu:'"),
    ("top.yml", "- gpu01\n",
     "top.yml:1: YAML inventory must be a mapping of group names, not a list; "
     "start the file with 'all:' and put groups under 'children:'"),
    ("number.yml", "all:\n  hosts:\n    1234:\n",
     "number.yml:3: host name 1234 in group 'all' is not a string; quote it: '1234':"),
    ("hostvars.yml", "all:\n  hosts:\n    gpu01: [a]\n",
     "hostvars.yml:3: host 'gpu01' in group 'all' must map to its vars, not a list; "
     "indent 'name: value' lines under the host, or leave it empty"),
    ("plugin.yml", "plugin: amazon.aws.aws_ec2\nregions: [us-east-1]\n",
     "plugin.yml:1: is an inventory plugin configuration (plugin: amazon.aws.aws_ec2), not a host list; "
     "use loader='ansible' for plugin inventories"),
    ("range.yml", "gpu:\n  hosts:\n    gpu[05:01]:\n",
     "range.yml:3: host range 'gpu[05:01]' is empty: it begins at 05, after its end 01; "
     "write the lower bound first: [01:05]"),
    ("loop.yml", "a:\n  children:\n    b:\n      children:\n        a:\n",
     "loop.yml:3: group 'b' cannot be a child of 'a': 'a' is already inside 'b', so that makes a loop; "
     "remove 'b' from the children of 'a'"),
    ("priority.yml", "gpu:\n  vars:\n    ansible_group_priority: high\n  hosts:\n    g1:\n",
     "priority.yml:3: ansible_group_priority of group 'gpu' is 'high', not a number; set it to a whole number; higher wins"),
    ("empty.yml", "",
     "empty.yml: no host is defined in this inventory; "
     "add hosts under a group: a 'hosts:' mapping in YAML, a line under [group] in INI"),
    ("nohosts.yml", "all:\n  children:\n    gpu:\n",
     "nohosts.yml: no host is defined in this inventory; "
     "add hosts under a group: a 'hosts:' mapping in YAML, a line under [group] in INI"),
    ("section.ini", "[gpu rack]\ngpu01\n",
     "section.ini:1: invalid section header '[gpu rack]'; "
     "write [group], [group:children] or [group:vars], with no spaces inside"),
    ("type.ini", "[gpu:hostvars]\ngpu01\n",
     "type.ini:1: section [gpu:hostvars] has an unknown type 'hostvars'; use [gpu], [gpu:children] or [gpu:vars]"),
    ("hostvar.ini", "[gpu]\ngpu01 ansible_port\n",
     "hostvar.ini:2: expected key=value after host 'gpu01', got 'ansible_port'; "
     "write host variables as name=value; quote values with spaces: key='a b'"),
    ("quote.ini", "[gpu]\ngpu01 a='x\n",
     "quote.ini:2: cannot read host line \"gpu01 a='x\" (No closing quotation); "
     "close the quote; quote values with spaces as key='a b'"),
    ("child.ini", "[gpu:children]\nrack1\nrack2\n[rack1]\ng1\n",
     "child.ini:3: [gpu:children] lists group 'rack2', which is never defined; "
     "add a [rack2] section (it may be empty) or remove 'rack2'"),
    ("vars.ini", "[gpu]\ng1\n[rack9:vars]\nx=1\n",
     "vars.ini:3: [rack9:vars] is for group 'rack9', which is never defined; "
     "add a [rack9] section (it may be empty) or fix the group name"),
    ("varline.ini", "[gpu:vars]\njust_a_word\n",
     "varline.ini:2: expected key=value in [gpu:vars], got 'just_a_word'; write one variable per line as name=value"),
    ("childline.ini", "[gpu:children]\nrack1 rack2\n",
     "childline.ini:2: expected a group name in [gpu:children], got 'rack1 rack2'; list one child group name per line"),
    ("yaml.ini", "all:\n  hosts:\n",
     "yaml.ini:1: host pattern 'all:' ends in ':', which is reserved for a port (gpu01:2222); "
     "remove the ':'; if this file is YAML, name it .yml"),
    ("range.ini", "[gpu]\n\ngpu[05:01]\n",
     "range.ini:3: host range 'gpu[05:01]' is empty: it begins at 05, after its end 01; "
     "write the lower bound first: [01:05]"),
    ("loop.ini", "[a:children]\nb\n[b:children]\na\n",
     "loop.ini:4: group 'a' cannot be a child of 'b': 'b' is already inside 'a', so that makes a loop; "
     "remove 'a' from the children of 'b'"),
    ("empty.ini", "# nothing yet\n",
     "empty.ini: no host is defined in this inventory; "
     "add hosts under a group: a 'hosts:' mapping in YAML, a line under [group] in INI"),
    ("port.ini", "[gpu]\ngpu01 ansible_port=70000\n",
     "port.ini:2: gpu01: ansible_port is 70000, not a port number; set it to a whole number from 1 to 65535"),
    ("port.yml", "all:\n  hosts:\n    gpu01:\n      ansible_port: ssh\n",
     "port.yml:4: gpu01: ansible_port is 'ssh', not a port number; set it to a whole number from 1 to 65535"),
    ("jinja.yml", "all:\n  hosts:\n    gpu01:\n      ansible_host: '{{ inventory_hostname }}.mgmt'\n",
     "jinja.yml:4: gpu01: ansible_host is a Jinja template ('{{ inventory_hostname }}.mgmt'); "
     "sweep does not render templates; write the value of ansible_host out in the inventory"),
    ("vault.yml", "all:\n  hosts:\n    gpu01:\n      ansible_user: !vault |\n        $ANSIBLE_VAULT;1.1;AES256\n        61\n",
     "vault.yml:4: gpu01: ansible_user is vault-encrypted and sweep cannot decrypt it; "
     "set ansible_user in plain text for this host"),
    ("encrypted.yml", "$ANSIBLE_VAULT;1.1;AES256\n6162\n",
     "encrypted.yml: is vault-encrypted and sweep cannot decrypt it; "
     "keep connection details in a plain file; encrypt single values with !vault"),
])
def test_inventory_errors_name_file_line_and_fix(tmp_path, monkeypatch, name, text, message):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, name, text)
    assert error_of(name) == message


def test_errors_in_vars_files_name_that_file_and_line(tmp_path):
    inventory = write(tmp_path, "hosts.yml", "gpu:\n  hosts:\n    g1:\n")
    vars_file = write(tmp_path, "group_vars/gpu.yml", "- a\n- b\n")
    assert error_of(inventory) == (f"{vars_file}:1: variables file holds a list, not a mapping of names to values; "
                                   "write one 'name: value' per line")
    vars_file.write_text("a: 1\n b: 2\n")
    assert error_of(inventory) == (f"{vars_file}:2: not valid YAML: mapping values are not allowed in this context; "
                                   "fix the YAML there (indentation, a missing ':' or an unclosed quote)")
    vars_file.write_text("ansible_port: 'twenty-two'\n")
    assert error_of(inventory) == (f"{vars_file}:1: g1: ansible_port is 'twenty-two', not a port number; "
                                   "set it to a whole number from 1 to 65535")


def test_missing_file_directory_and_unknown_loader(tmp_path):
    assert error_of(tmp_path / "nope.yml") == (
        f"{tmp_path / 'nope.yml'}: inventory file not found; pass the path of an Ansible inventory file (YAML or INI) or folder")
    (tmp_path / "notes.md").write_text("[gpu]\ngpu01\n")  # an extension Ansible leaves out of a folder
    assert error_of(tmp_path) == (
        f"{tmp_path}: no host is defined in this inventory; add hosts under a group: a 'hosts:' mapping in YAML, "
        "a line under [group] in INI")
    assert error_of(FIXTURES / "fleet.yml", loader="fabric") == (
        f"{FIXTURES / 'fleet.yml'}: unknown inventory loader 'fabric'; use loader 'auto', 'builtin' or 'ansible'")


def test_ansible_loader_without_ansible_core_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ansible.inventory.manager", None)  # import fails as if not installed
    assert error_of(FIXTURES / "fleet.yml", loader="ansible") == (
        f"{FIXTURES / 'fleet.yml'}: loader 'ansible' needs ansible-core, which is not installed; "
        "pip install ansible-core, or use the builtin loader")


# --- the shipped examples -----------------------------------------------------------------------


def test_example_inventories_describe_the_same_fleet():
    from_yaml, from_ini = load_inventory(EXAMPLES / "example.yml"), load_inventory(EXAMPLES / "example.ini")
    assert from_yaml.hosts == from_ini.hosts and from_yaml.groups == from_ini.groups
    assert {group: len(hosts) for group, hosts in from_yaml.groups.items()} == {
        "all": 35, "ungrouped": 1, "gpu": 32, "h200_rack1": 16, "h200_rack2": 16, "login": 2}
    gpu32 = by_name(from_yaml)["gpu32.dc1.example.net"]
    assert (gpu32.port, gpu32.proxy_jump, gpu32.key_file, gpu32.settings["interpreters"]) == (
        2222, "gpuops@bastion.dc1.example.net", "/home/ops/.ssh/gpuops_ed25519",
        ("/opt/venv/bin/python", "/usr/bin/python3"))


# --- ansible-core itself, as the reference ------------------------------------------------------


@pytest.fixture
def ansible(tmp_path, monkeypatch):
    """ansible-core, kept away from the developer's ansible.cfg and ~/.ansible."""
    empty_config = write(tmp_path, "ansible.cfg", "")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(empty_config))
    monkeypatch.setenv("ANSIBLE_HOME", str(tmp_path / "ansible-home"))
    monkeypatch.setenv("ANSIBLE_LOCAL_TEMP", str(tmp_path / "ansible-tmp"))
    return pytest.importorskip("ansible")


REFERENCE_INVENTORIES = [FIXTURES / "fleet.yml", FIXTURES / "fleet.ini",
                         EXAMPLES / "example.yml", EXAMPLES / "example.ini"]


@pytest.mark.parametrize("path", REFERENCE_INVENTORIES, ids=lambda path: path.name)
def test_builtin_loader_matches_ansible_core(ansible, path):
    builtin, reference = load_inventory(path, loader="auto"), load_inventory(path, loader="ansible")
    assert builtin.hosts == reference.hosts  # names, order, connection fields, groups, every var
    assert builtin.groups == reference.groups


def test_ini_typing_matches_ansible_core(ansible, tmp_path):
    # ansible-core's docs say [group:vars] values are strings; its parser literal_evals them too
    path = write(tmp_path, "hosts.ini", "[g]\nh1 a=23 c='x y' d=\"'05'\" g=07\n[g:vars]\nx=23\ny=True\nw=a b # c\n")
    builtin, reference = load_inventory(path), load_inventory(path, loader="ansible")
    assert builtin.hosts == reference.hosts
    assert (builtin.hosts[0].vars["x"], builtin.hosts[0].vars["y"]) == (23, True)


@pytest.mark.parametrize("limit", [
    "gpu", "gpu0*", "gpu:!h200_rack2", "gpu,&canary", "!dc1", "~gpu0[1-3]", "*rack?", "gpu[1:3]",
    "dc1:!login:spare", "gpu[-1]", "login,gpu[0]", "*.dc1:&~gpu0[5-8]", "spare:!spare3", "*1", "~canary|spare1",
])
def test_limit_matches_ansible_core(ansible, limit):
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    path = FIXTURES / "fleet.ini"
    manager = InventoryManager(loader=DataLoader(), sources=[str(path)])
    manager.subset(limit)
    expected = {host.name for host in manager.get_hosts("all")}
    assert {host.name for host in load_inventory(path).select(limit)} == expected


# --- --limit: folded node sets, and patterns that match nothing (issue 22, item 5) ---------------


@pytest.mark.parametrize(("limit", "names"), [
    ("gpu[01-02,04].dc1", ["gpu01.dc1", "gpu02.dc1", "gpu04.dc1"]),        # the pool as sweep prints it
    ("h200_rack1:!gpu[01-02,04].dc1", ["gpu03.dc1"]),                      # a comma inside brackets is not a separator
    ("spare[1,5],bastion", ["spare1", "spare5", "bastion"]),
    ("login[a:b],spare[3-5]", ["logina", "loginb", "spare3", "spare5"]),  # a glob; an empty subscript of spare: hosts
    ("gpu[1:3]", ["gpu02.dc1", "gpu03.dc1", "gpu04.dc1"]),                # Ansible defines it: a subscript of group gpu
    ("spare[0-1]", ["spare1", "spare3"]),                                 # group spare exists: Ansible's subscript first
    ("h200_rack1,!gpu[01-02,04].dc1", ["gpu03.dc1"]),                     # split at the commas outside brackets only:
    ("!gpu[01-02,04].dc1,h200_rack1", ["gpu03.dc1"]),                     # before a bracket, after one,
    ("gpu[01-03,05].dc1,!gpu[02,05].dc1", ["gpu01.dc1", "gpu03.dc1"]),    # between two
    ("gpu[01-02,04].dc1,spare*", ["gpu01.dc1", "gpu02.dc1", "gpu04.dc1", "spare1", "spare3", "spare5"]),  # a last piece matched
])
def test_limit_reads_a_folded_node_set_where_ansible_matches_nothing(fleet, limit, names):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chosen = [host.name for host in fleet.select(limit)]
    assert chosen == names
    # spare[3-5]: Ansible's empty subscript of the spare hosts is warned of, then read as a node set
    assert [str(w.message) for w in caught if w.category is InventoryWarning] == (
        ["Could not match supplied host pattern, ignoring: spare4"] if "spare[3-5]" in limit else [])


@pytest.mark.parametrize(("limit", "names", "warned"), [
    ("h200_rack1:gpu99", list(GPUS[:4]), ["gpu99"]),
    ("h200_rack1:!gpu99:&h200*", list(GPUS[:4]), ["gpu99"]),
    ("h200_rack1:!gpu99:&nope", [], []),                                  # nothing selected: the error alone
    ("gpu0[1-9].dc1:&h200_rack2", list(GPUS[4:]), []),                   # Ansible's glob matches: no warning
    ("spare[1-9]", ["spare3", "spare5"], []),                            # Ansible's subscript of group spare
    ("h200_rack1:spare0[7-9]", list(GPUS[:4]), ["spare0"]),              # Ansible's words: the subscript's expression
    ("login[a:b]:spare[1-4]", ["logina", "loginb", "spare3", "spare5"], []),
    ("spare[3-5]", ["spare3", "spare5"], ["spare4"]),                    # an empty subscript, then the node set
    ("bastion,spare[5-7]", ["bastion", "spare5"], ["spare[6-7]"]),  # the names of a node set the inventory lacks
    ("h200_rack1:node[1-100000]", list(GPUS[:4]), ["node"]),             # 100,000 names: not past the bound
    ("h200_rack1:gpu0*[10:12]", list(GPUS[:4]), []),                     # a glob's empty slice: Ansible is silent
    ("h200_rack1:gpu98:gpu99", list(GPUS[:4]), ["gpu98", "gpu99"]),      # each pattern that matches nothing
    # never read as a node set (ClusterShell would find gpu01.dc1 in each): a name without brackets, a glob, a regex
    ("h200_rack2:gpu99^gpu01.dc1", list(GPUS[4:]), ["gpu99^gpu01.dc1"]),
    ("h200_rack2:gpu9*[1]^gpu01.dc1", list(GPUS[4:]), ["gpu9*[1]^gpu01.dc1"]),
    ("h200_rack2:gpu9?[1]^gpu01.dc1", list(GPUS[4:]), ["gpu9?[1]^gpu01.dc1"]),
    ("h200_rack2:~gpu9[1]^gpu01.dc1", list(GPUS[4:]), ["~gpu9[1]^gpu01.dc1"]),
])
def test_limit_warns_as_ansible_of_what_matches_nothing(fleet, limit, names, warned):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            chosen = [host.name for host in fleet.select(limit)]
        except LimitError:
            chosen = []
    assert chosen == names
    assert [str(w.message) for w in caught if w.category is InventoryWarning] == [
        f"Could not match supplied host pattern, ignoring: {text}" for text in warned]


def test_an_empty_group_in_a_limit_is_no_warning_as_in_ansible(tmp_path):
    inventory = load_inventory(write(tmp_path, "hosts", "[empty]\n[g]\nh1\n"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [host.name for host in inventory.select("g:empty")] == ["h1"]
    assert [str(w.message) for w in caught if w.category is InventoryWarning] == []


def test_a_limit_file_line_starting_with_at_is_a_pattern_never_a_node_set(fleet, tmp_path):
    path = write(tmp_path, "retry", "h200_rack2\n@gpu9[1]^gpu01.dc1\n")  # ClusterShell would find gpu01.dc1 in it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [host.name for host in fleet.select(f"@{path}")] == list(GPUS[4:])
    assert [str(w.message) for w in caught if w.category is InventoryWarning] == [
        "Could not match supplied host pattern, ignoring: @gpu9[1]^gpu01.dc1"]


def test_host_names_starting_with_x_are_plain_patterns(tmp_path):
    inventory = load_inventory(write(tmp_path, "hosts", "[xe]\nXE9680-01\nXE9680-02\n[other]\nh1\n"))
    assert [host.name for host in inventory.select("XE9680-01")] == ["XE9680-01"]
    assert [host.name for host in inventory.select("XE*:!XE9680-02")] == ["XE9680-01"]


def test_a_sites_clustershell_groups_never_widen_a_limit(fleet, monkeypatch):
    """'@rack' inside a node set is text: sweep never asks the site's group source (groups.conf) what it holds."""
    import ClusterShell.NodeSet
    from ClusterShell.NodeUtils import GroupResolver, GroupSource

    site = GroupResolver(GroupSource("site", {"rack": "gpu01.dc1,gpu02.dc1"}))
    monkeypatch.setattr(ClusterShell.NodeSet, "RESOLVER_STD_GROUP", site)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [host.name for host in fleet.select("gpu0[5-6].dc1^@rack")] == ["gpu05.dc1", "gpu06.dc1"]
    assert [str(w.message) for w in caught if w.category is InventoryWarning] == [
        "Could not match supplied host pattern, ignoring: @rack"]


def test_a_regex_limit_needs_an_expression(fleet):
    with pytest.raises(LimitError) as caught:
        fleet.select("~")
    assert str(caught.value) == ("--limit pattern '~' has no regular expression after the '~'; "
                                 "write the expression after '~' (~gpu0[1-4]), or use 'all' for every host")


@pytest.mark.parametrize(("limit", "size"), [
    ("node[1-100000000]", 100_000_000),
    ("node[1-100000,200000,300000]", 100_002),     # a range's names, one name each
    ("node[1-100000,100001-100005]", 100_005),     # the ranges of one bracket add up
    ("node[1-100000,9-1,7]", 100_001),             # a reversed range names no host
    ("node[1-200000/2,7-9/3]", 100_001),           # a step: every 2nd, every 3rd
    ("rack[1-2]-node[1-60000]", 120_000),          # two brackets in one name multiply
    ("node[1-60000]!node[1-50000]", 110_000),      # ClusterShell expands both sides of a difference
    ("node[1-60000]^node[1-40001]", 100_001),      # or of a symmetric difference
])
def test_a_folded_node_set_is_bounded_before_it_is_expanded(fleet, limit, size):
    with pytest.raises(LimitError) as caught:
        fleet.select(limit)
    assert str(caught.value) == (f"--limit pattern '{limit}' names {size:,} hosts, more than 100,000; "
                                 "narrow the range, or use a group or a glob (gpu0*)")
