"""Inventories and host patterns against ansible-core, the program that owns their meaning.

Hypothesis generates inventories (groups, nested children, host ranges, ports, group and host
vars, ungrouped hosts; each written as YAML and as INI) and host patterns (names, globs, regexes,
subscripts, ``&``/``!``, both separators). For every one, sweep must select the same hosts as
ansible-core (order-insensitive) and resolve the same connection variables.

The bulk runs ansible-core in-process (InventoryManager, VariableManager: what the CLIs call);
`test_ansible_clis_agree_with_sweep_and_with_the_in_process_oracle` checks a sample against
``ansible-inventory --list`` and ``ansible -i INV PATTERN --list-hosts`` themselves.

One case is left out, and counted with ``event()``: a subscript of a group whose descendants
Ansible orders by iterating a ``set`` of Group objects (identity hashes): there Ansible's own
answer changes from one process to the next (docs: sweep/limit.py).

One extension is modelled, and counted: a term Ansible matches no host with (``node[1]`` without a
group ``node``) is read by sweep as ClusterShell's folded node set. The oracle asks Ansible the
same pattern with such a term replaced by a regex naming exactly the inventory hosts ClusterShell
expands it to (`with_folded_sets`); everything else must be Ansible's answer, and the warnings
sweep gives (``Could not match supplied host pattern, ignoring: X``) must be the ones Ansible gives.
"""
from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet

from sweep.errors import InventoryError, InventoryWarning, LimitError
from sweep.inventory.model import load_inventory
from helpers import require
from inventory_corpus import walk_is_ordered

try:
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager
except ImportError:  # pragma: no cover - require() below fails the tests under CI
    InventoryManager = None

EXAMPLES = int(os.environ.get("SWEEP_HYPOTHESIS_EXAMPLES", "300"))
CLI_EXAMPLES = int(os.environ.get("SWEEP_HYPOTHESIS_CLI_EXAMPLES", "6"))
# derandomized by the suite's hypothesis profile (tests/conftest.py): CI sees the same examples every run
# (SWEEP_HYPOTHESIS_EXAMPLES=5000, or bench/bench_hypothesis.py, explores further);
# no 'explain' phase: on a failure it re-runs ansible hundreds of times to annotate the example
ORACLE = settings(max_examples=EXAMPLES, deadline=None, database=None,
                  phases=[Phase.explicit, Phase.generate, Phase.shrink],
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

GROUPS = ("gpu", "rack1", "rack2", "dc1", "login", "canary")
HOSTS = ("gpu01", "gpu02", "gpu03", "node1", "node2", "login1", "bastion", "spare5")
RANGES = ("gpu[01:03]", "node[1:3]", "n[a:c]", "gpu[02:04]", "gpu[1:9:4]")
CONNECTION_VALUES = {
    "ansible_host": ("10.0.0.5", "gpu.mgmt", ""),
    "ansible_ssh_host": ("10.0.9.9",),
    "ansible_port": (22, 2222),
    "ansible_ssh_port": (2200,),
    "ansible_user": ("ops", "root"),
    "ansible_ssh_user": ("admin",),
    "ansible_python_interpreter": ("/usr/bin/python3", "/opt/py/bin/python3.11", "auto_silent"),
    "ansible_private_key_file": ("/keys/id_ed25519",),
    "ansible_ssh_private_key_file": ("/keys/id_rsa",),
    "sweep_deep": (True, False),
    "color": ("blue", 3),
}
# ansible-core's own variables, not inventory data (the same list the loader='ansible' path drops)
MAGIC = {"ansible_check_mode", "ansible_config_file", "ansible_diff_mode", "ansible_facts", "ansible_forks",
         "ansible_inventory_sources", "ansible_playbook_python", "ansible_version", "group_names", "groups",
         "inventory_dir", "inventory_file", "inventory_hostname", "inventory_hostname_short", "omit",
         "playbook_dir"}


@dataclass
class Entry:
    pattern: str
    port: int | None
    vars: dict


@dataclass
class Group:
    name: str
    entries: list = field(default_factory=list)
    children: list = field(default_factory=list)
    vars: dict = field(default_factory=dict)
    nest: bool = False  # YAML: write its definition inside its first parent


@dataclass
class Model:
    groups: list
    ungrouped: list
    all_vars: dict
    under_all: bool  # YAML: groups under 'all: children:' rather than at the top level


variables = st.dictionaries(st.sampled_from(sorted(CONNECTION_VALUES)), st.none(), max_size=3).flatmap(
    lambda keys: st.fixed_dictionaries({k: st.sampled_from(CONNECTION_VALUES[k]) for k in keys}))
entries = st.builds(Entry, st.one_of(st.sampled_from(HOSTS), st.sampled_from(RANGES)),
                    st.one_of(st.none(), st.none(), st.sampled_from((2201, 2202))), variables)


@st.composite
def models(draw) -> Model:
    names = draw(st.lists(st.sampled_from(GROUPS), min_size=1, max_size=5, unique=True))
    groups = []
    for index, name in enumerate(names):
        later = names[index + 1:]
        children = draw(st.lists(st.sampled_from(later), unique=True, max_size=2)) if later else []
        groups.append(Group(name, draw(st.lists(entries, max_size=3)), children,
                            draw(variables), draw(st.booleans())))
    ungrouped = draw(st.lists(entries, max_size=2))
    if not ungrouped and not any(g.entries for g in groups):
        ungrouped = [draw(entries)]
    return Model(groups, ungrouped, draw(variables), draw(st.booleans()))


# --- the model written as YAML and as INI ------------------------------------------------------


def _yaml_hosts(items: list) -> dict:
    return {(e.pattern if e.port is None else f"{e.pattern}:{e.port}"): (dict(e.vars) or None) for e in items}


def to_yaml(model: Model) -> str:
    defined: set[str] = set()
    by_name = {g.name: g for g in model.groups}

    def body(group: Group) -> dict | None:
        defined.add(group.name)
        out = {}
        if group.vars:
            out["vars"] = dict(group.vars)
        if group.children:
            out["children"] = {child: (body(by_name[child]) if by_name[child].nest and child not in defined
                                       else None) for child in group.children}
        if group.entries:
            out["hosts"] = _yaml_hosts(group.entries)
        return out or None

    top = {}
    for group in model.groups:
        if group.name not in defined:
            top[group.name] = body(group)
    everything = {}
    if model.all_vars:
        everything["vars"] = dict(model.all_vars)
    if model.ungrouped:
        everything["hosts"] = _yaml_hosts(model.ungrouped)
    if model.under_all:
        if top:
            everything["children"] = top
        return yaml.safe_dump({"all": everything}, sort_keys=False)
    document = {"all": everything} if everything else {}
    document.update(top)
    return yaml.safe_dump(document, sort_keys=False)


def _ini_value(value) -> str:
    if value == "":
        return '""'
    return str(value)


def _ini_host(entry: Entry) -> str:
    words = [entry.pattern if entry.port is None else f"{entry.pattern}:{entry.port}"]
    words += [f"{key}={_ini_value(value)}" for key, value in entry.vars.items()]
    return " ".join(words)


def to_ini(model: Model) -> str:
    lines = [_ini_host(e) for e in model.ungrouped]
    if model.all_vars:
        lines += ["[all:vars]", *(f"{k}={_ini_value(v)}" for k, v in model.all_vars.items())]
    for group in model.groups:
        lines += [f"[{group.name}]", *(_ini_host(e) for e in group.entries)]
        if group.vars:
            lines += [f"[{group.name}:vars]", *(f"{k}={_ini_value(v)}" for k, v in group.vars.items())]
        if group.children:
            lines += [f"[{group.name}:children]", *group.children]
    return "\n".join(lines) + "\n"


# --- patterns -----------------------------------------------------------------------------------

atoms = st.one_of(
    st.sampled_from(GROUPS + ("nope",)), st.sampled_from(HOSTS), st.sampled_from(("all", "*")),
    st.sampled_from(("gpu*", "g*", "*1", "node?", "rack*", "n[ab]", "*.mgmt")),
    st.sampled_from(("~gpu0[12]", "~node", "~.*1$", "~rack", "~(login|canary)")),
)
subscripts = st.one_of(st.just(""), st.integers(-3, 4).map(lambda i: f"[{i}]"),
                       st.tuples(st.integers(0, 3), st.integers(0, 5)).map(lambda ab: f"[{ab[0]}:{ab[1]}]"),
                       st.integers(0, 3).map(lambda a: f"[{a}:]"))
terms = st.tuples(st.sampled_from(("", "", "&", "!")), atoms, subscripts).map(
    lambda t: t[0] + t[1] + ("" if t[1].startswith("~") else t[2]))
patterns = st.tuples(st.lists(terms, min_size=1, max_size=3), st.sampled_from((",", ":"))).map(
    lambda t: t[1].join(t[0]))


# --- the oracle: ansible-core in-process ---------------------------------------------------------


def ansible_inventory(path: Path):
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(path)])
    return manager, VariableManager(loader=loader, inventory=manager)


def ansible_hosts(manager, pattern):
    """Host names ansible selects for `pattern` (a string or a list of patterns), or None when ansible refuses it."""
    try:
        return {h.name for h in manager.list_hosts(pattern)}
    except AnsibleError:
        return None


MISMATCH = "Could not match supplied host pattern, ignoring: "


@contextmanager
def ansible_warnings(manager):
    """The "Could not match ..." warnings ansible-core gives while the block runs (its caches emptied first)."""
    from ansible.inventory import manager as module

    manager.clear_pattern_cache()
    seen: list[str] = []
    real = module.display.warning
    with mock.patch.object(module.display, "warning", lambda msg, *a, **k: (seen.append(msg), real(msg, *a, **k))):
        yield seen


def mismatches(messages) -> set[str]:
    return {str(m) for m in messages if str(m).startswith(MISMATCH)}


def sweep_select(inventory, pattern: str):
    """(host names, or None when sweep refuses the pattern; the "Could not match" warnings it gave)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InventoryWarning)
        try:
            names = {h.name for h in inventory.select(pattern)}
        except LimitError:
            names = None
    return names, mismatches(w.message for w in caught if issubclass(w.category, InventoryWarning))


def folded_set(term: str) -> list[str]:
    """The names ClusterShell reads in a pattern (gpu[01-03]), or [] for one it does not read as a node set."""
    if term[:1] in ("~", "@") or "[" not in term or "*" in term or "?" in term:
        return []
    try:
        return list(NodeSet(term, resolver=RESOLVER_NOGROUP))
    except Exception:  # NodeSetException, and a ValueError for gpu[-1]: not a node set
        return []


def with_folded_sets(manager, pattern: str) -> list[str]:
    """`pattern` as ansible terms, each term ansible matches no host with and that ClusterShell reads as
    a node set naming inventory hosts replaced by a regex matching exactly those hosts."""
    from ansible.inventory.manager import split_host_pattern

    terms = []
    for term in split_host_pattern(pattern):
        prefix, body = (term[0], term[1:]) if term[0] in "&!" else ("", term)
        try:
            matched = term in manager.hosts or bool(manager._match_one_pattern(body))
        except AnsibleError:
            matched = True  # ansible refuses it: so must sweep
        found = [] if matched else [n for n in folded_set(body) if n in manager.hosts]
        terms.append(f"{prefix}~({'|'.join(map(re.escape, found))})$" if found else term)
        if found:
            event("a term ansible matches nothing with, read as a folded node set")
    manager.clear_pattern_cache()
    return terms


def connection(name: str, found: dict) -> dict:
    """What ansible's ssh connection would use, from a host's resolved vars: the ansible_ssh_ spelling
    first (C.MAGIC_VARIABLE_MAPPING), the inventory name as the address when none is set."""
    def first(*keys):
        return next((found[k] for k in keys if found.get(k) is not None), None)

    python = first("ansible_python_interpreter") or "python3"
    port = first("ansible_ssh_port", "ansible_port")
    key = first("ansible_ssh_private_key_file", "ansible_private_key_file")
    address = first("ansible_ssh_host", "ansible_host")
    return {"address": name if address is None else str(address), "port": None if port is None else int(port),
            "user": first("ansible_ssh_user", "ansible_user"), "key_file": key,
            "python": "python3" if python.startswith("auto") else python}


def sweep_connection(host) -> dict:
    return {"address": host.address, "port": host.port, "user": host.user, "key_file": host.key_file,
            "python": host.python}


def _thaw(value):
    if isinstance(value, dict) or hasattr(value, "items"):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def ansible_vars(manager, variables) -> dict:
    out = {}
    for name, host in manager.hosts.items():
        found = variables.get_vars(host=host, include_hostvars=False)
        out[name] = {k: v for k, v in found.items() if k not in MAGIC}
    return out


def order_defined(manager, pattern: str) -> bool:
    """False when a subscript in `pattern` indexes a host list whose order Ansible leaves to set order."""
    from ansible.inventory.manager import PATTERN_WITH_SUBSCRIPT, split_host_pattern

    for term in split_host_pattern(pattern):
        term = term.lstrip("&!")
        match = PATTERN_WITH_SUBSCRIPT.match(term) if not term.startswith("~") else None
        if not match:
            continue
        regex = re.compile(fnmatch.translate(match.group(1)))
        if any(not walk_is_ordered(g) for name, g in manager.groups.items() if regex.match(name)):
            return False
    return True


# what sweep warns of while it reads an inventory that Ansible reads silently: each names the file, the line
# and the host, and says what sweep does about it (as Ansible does)
READ_WARNING = re.compile(r"(?P<path>.+):\d+: host '(?P<host>[^']*)' is (defined twice with different \w+: "
                          r".* sweep uses the later one; .*|listed again with port .* sweep keeps its first listing's "
                          r"port .*)")


def load_warned(path: Path):
    """load_inventory(path), asserting each InventoryWarning it gives is one of READ_WARNING's, for a host it read."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InventoryWarning)
        inventory = load_inventory(path)
    for warned in caught:
        found = READ_WARNING.fullmatch(str(warned.message))
        assert warned.category is InventoryWarning and found, str(warned.message)
        assert found["path"] == str(path) and found["host"] in {h.name for h in inventory.hosts}, str(warned.message)
    return inventory


def check(tmp_path: Path, model: Model, chosen: list[str]) -> None:
    for name, text in (("hosts.yml", to_yaml(model)), ("hosts.ini", to_ini(model))):
        path = tmp_path / name
        path.write_text(text)
        manager, variables = ansible_inventory(path)
        inventory = load_warned(path)
        where = f"{name}:\n{text}"
        assert [h.name for h in inventory.hosts] == list(manager.hosts), where
        expected_vars = ansible_vars(manager, variables)
        for host in inventory.hosts:
            assert _thaw(host.vars) == expected_vars[host.name], f"{host.name} in {where}"
            assert sweep_connection(host) == connection(host.name, expected_vars[host.name]), f"{host.name} in {where}"
        for pattern in chosen:
            if not order_defined(manager, pattern):
                event("subscript of a group Ansible orders by set iteration: not compared")
                continue
            with ansible_warnings(manager) as said:
                expected = ansible_hosts(manager, with_folded_sets(manager, pattern))
            names, warned = sweep_select(inventory, pattern)
            if not expected:  # nothing selected: sweep's one error line, not ansible's warnings
                assert names is None and not warned, f"--limit {pattern!r} on {where}"
                event("ansible selects nothing or refuses: sweep refuses too")
            else:
                assert names == expected, f"--limit {pattern!r} on {where}"
                assert warned == mismatches(said), f"--limit {pattern!r} on {where}"


@pytest.fixture(scope="module")
def ansible_present():
    require(InventoryManager is not None, "ansible-core (pip install ansible-core) is the oracle here")


@ORACLE
@given(model=models(), chosen=st.lists(patterns, min_size=1, max_size=6))
def test_sweep_reads_inventories_and_patterns_as_ansible_does(ansible_present, tmp_path, model, chosen):
    check(tmp_path, model, chosen)


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    config = cwd / "ansible.cfg"  # an empty configuration: ansible's defaults, whatever the machine has
    config.write_text("")
    env = dict(os.environ, ANSIBLE_CONFIG=str(config), ANSIBLE_HOME=str(cwd / ".ansible"),
               ANSIBLE_LOCAL_TEMP=str(cwd / "tmp"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@settings(ORACLE, max_examples=CLI_EXAMPLES)
@given(model=models(), pattern=patterns)
def test_ansible_clis_agree_with_sweep_and_with_the_in_process_oracle(ansible_present, tmp_path, model, pattern):
    path = tmp_path / "hosts.yml"
    path.write_text(to_yaml(model))
    manager, variables = ansible_inventory(path)
    listed = _cli("ansible-inventory", "-i", str(path), "--list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    document = json.loads(listed.stdout)
    hostvars = document.pop("_meta")["hostvars"]  # hosts without vars are left out of it
    in_process = ansible_vars(manager, variables)
    assert {h for group in document.values() for h in group.get("hosts", ())} == set(in_process)
    inventory = load_warned(path)
    for host in inventory.hosts:
        found = hostvars.get(host.name, {})
        assert {k: v for k, v in found.items() if k not in MAGIC} == in_process[host.name]
        assert sweep_connection(host) == connection(host.name, found)
    asked = ",".join(with_folded_sets(manager, pattern))
    hosts = _cli("ansible", "-i", str(path), asked, "--list-hosts", cwd=tmp_path)
    ours, warned = sweep_select(inventory, pattern)
    if hosts.returncode != 0:
        assert ansible_hosts(manager, asked) is None, hosts.stderr
        assert ours is None
        return
    names = {line.strip() for line in hosts.stdout.splitlines()[1:] if line.strip()}
    assert names == (ansible_hosts(manager, asked) or set())
    if order_defined(manager, pattern):
        assert ours == (names or None)
        assert warned == ({line.split("]: ", 1)[1] for line in hosts.stderr.splitlines()
                           if line.startswith("[WARNING]: " + MISMATCH)} if names else set())


# --- the disagreements of issue 14, one by one ---------------------------------------------------


def test_a_regex_that_does_not_compile_is_refused_not_read_as_every_host(ansible_present, tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text("[gpu]\ngpu01\ngpu02\n")
    # ansible splits '~[unclosed' at the bracket into '~' (every host) and 'unclosed': sweep refuses it
    assert {h.name for h in InventoryManager(loader=DataLoader(), sources=[str(path)]).list_hosts("~[unclosed")} \
        == {"gpu01", "gpu02"}
    with pytest.raises(LimitError) as caught:
        load_inventory(path).select("~[unclosed")
    assert str(caught.value) == ("--limit pattern '~[unclosed' is not a valid regular expression "
                                 "(unterminated character set at position 0); fix the expression after '~', "
                                 "or use a glob such as 'gpu0*'")


@pytest.mark.parametrize("pattern", ["gpu[0]", "gpu[1:3]", "gpu[-1]", "gpu[2:]", "gpu*[3]", "all[4]", "rack*[1:2]"])
def test_subscripts_pick_the_hosts_ansible_picks(ansible_present, tmp_path, pattern):
    # hosts listed before their group's children, children's hosts after the group's own,
    # and a host that sorts early in the file but comes late in the group
    path = tmp_path / "hosts.ini"
    path.write_text("gpu09\n[rack2]\ngpu05\ngpu06\n[gpu]\ngpu09\ngpu01\n[gpu:children]\nrack1\nrack2\n"
                    "[rack1]\ngpu03\ngpu02\n")
    manager = InventoryManager(loader=DataLoader(), sources=[str(path)])
    assert [h.name for h in load_inventory(path).select(pattern)] == [h.name for h in manager.list_hosts(pattern)]


def test_a_later_host_port_keeps_the_first_as_ansible_does(ansible_present, tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text("[a]\ngpu01:2201\n[b]\ngpu01:2202\ngpu02\n[c]\ngpu02:2203\n")
    with pytest.warns(InventoryWarning) as caught:
        inventory = load_inventory(path)
    assert [re.sub(r".*: host ('\w+') is listed again with port (\d+);.*", r"\1 \2", str(w.message)) for w in caught] \
        == ["'gpu01' 2202", "'gpu02' 2203"]
    assert [(h.name, h.port) for h in inventory.hosts] == [("gpu01", 2201), ("gpu02", None)]
    manager, variables = ansible_inventory(path)
    assert [ansible_vars(manager, variables)[n].get("ansible_port") for n in ("gpu01", "gpu02")] == [2201, None]


def test_an_empty_ansible_host_is_the_empty_string_as_in_ansible(ansible_present, tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text("[gpu]\ngpu01 ansible_host=\ngpu02 ansible_host=''\n")
    manager, variables = ansible_inventory(path)
    assert {n: v["ansible_host"] for n, v in ansible_vars(manager, variables).items()} == {"gpu01": "", "gpu02": ""}
    assert [h.address for h in load_inventory(path).hosts] == ["", ""]


def test_a_flow_mapping_that_libyaml_refuses_is_refused_by_sweep_too(ansible_present, tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text("all:\n  hosts: {p01:, p02:}\n")
    assert not InventoryManager(loader=DataLoader(), sources=[str(path)]).hosts
    with pytest.raises(InventoryError) as caught:
        load_inventory(path)
    assert str(caught.value).startswith(f"{path}:2: not valid YAML: ")


# --- sweep run --list-hosts, against ansible --list-hosts ----------------------------------------

FLEET = Path(__file__).resolve().parents[1] / "fixtures" / "inventories" / "fleet.ini"


@pytest.mark.parametrize("pattern", ["all", "gpu:!h200_rack2", "h200*[1:2],login", "~spare[13]"])
def test_run_list_hosts_prints_what_ansible_lists_and_contacts_nothing(ansible_present, tmp_path, monkeypatch,
                                                                      capsys, pattern):
    from sweep.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["run", str(FLEET), "--limit", pattern, "--list-hosts"]) == 0
    ours = capsys.readouterr().out.splitlines()
    theirs = _cli("ansible", "-i", str(FLEET), pattern, "--list-hosts", cwd=tmp_path).stdout.splitlines()
    assert ours == theirs  # "  hosts (N):", then the hosts in Ansible's order
    assert not (tmp_path / "reports").exists()  # no run folder: nothing was swept


def test_run_list_hosts_of_two_shards_splits_the_hosts(tmp_path, monkeypatch, capsys):
    from sweep.cli import main

    monkeypatch.chdir(tmp_path)
    shards = []
    for index in (1, 2):
        assert main(["run", str(FLEET), "--limit", "gpu", "--shard", f"{index}/2", "--list-hosts"]) == 0
        shards.append(capsys.readouterr().out.splitlines()[1:])
    assert sorted(shards[0] + shards[1]) == sorted(f"    gpu0{i}.dc1" for i in range(1, 9))
    assert not set(shards[0]) & set(shards[1])


# --- patterns that match nothing, folded node sets and @FILE, against ansible's CLI (issue 22) ----


def _sweep_list_hosts(capsys, inventory: Path, limit: str) -> tuple[int, list[str], set[str]]:
    """(exit code, `sweep run --list-hosts` stdout lines, its "Could not match" warnings)."""
    from sweep.cli import main

    code = main(["run", str(inventory), "--limit", limit, "--list-hosts"])
    out, err = capsys.readouterr()
    return code, out.splitlines(), {line.split("sweep: warning: ", 1)[1] for line in err.splitlines()
                                    if line.startswith("sweep: warning: " + MISMATCH)}


def _ansible_list_hosts(tmp_path: Path, inventory: Path, *args: str) -> tuple[list[str], set[str]]:
    done = _cli("ansible", "-i", str(inventory), *args, "--list-hosts", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), {line.split("]: ", 1)[1] for line in done.stderr.splitlines()
                                      if line.startswith("[WARNING]: " + MISMATCH)}


def _same_hosts(ours: list[str], theirs: list[str]) -> None:
    assert ours == theirs  # "  hosts (N):", then the hosts in Ansible's order


@pytest.mark.parametrize("pattern", ["h200_rack1:gpu99", "gpu:!nope:!gpu99", "gpu,&h200*,!rack9", "login:spare0[1-3]",
                                     "~spare[13]:bastion9"])
def test_run_list_hosts_warns_of_what_matches_nothing_as_ansible_does(ansible_present, tmp_path, monkeypatch,
                                                                      capsys, pattern):
    monkeypatch.chdir(tmp_path)
    code, ours, warned = _sweep_list_hosts(capsys, FLEET, pattern)
    theirs, said = _ansible_list_hosts(tmp_path, FLEET, pattern)
    assert code == 0
    _same_hosts(ours, theirs)
    assert warned == said and said  # the same "Could not match supplied host pattern, ignoring: X" lines


def test_the_issues_patterns_against_ansible(ansible_present, tmp_path, monkeypatch, capsys):
    """`rack_a:!gpu0[1-3]`: Ansible reads gpu0[1-3] as a subscript of 'gpu0', which matches nothing, and
    ignores it; sweep reads it as the node set gpu01-gpu03 and leaves them out, exactly as Ansible does
    when those hosts are named. `rack_a:gpu99`: both list rack_a with the same warning."""
    monkeypatch.chdir(tmp_path)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    rack_a:\n      hosts: {gpu01: , gpu02: , gpu03: , gpu04: }\n"
                         "    rack_b:\n      hosts: {gpu05: , gpu06: }\n")
    theirs, said = _ansible_list_hosts(tmp_path, inventory, "rack_a:!gpu0[1-3]")
    assert said == {MISMATCH + "gpu0"} and len(theirs) == 5  # Ansible: all four, gpu0[1-3] ignored
    code, ours, warned = _sweep_list_hosts(capsys, inventory, "rack_a:!gpu0[1-3]")
    assert code == 0 and not warned
    _same_hosts(ours, _ansible_list_hosts(tmp_path, inventory, "rack_a:!gpu01:!gpu02:!gpu03")[0])
    assert ours[1:] == ["    gpu04"]
    code, ours, warned = _sweep_list_hosts(capsys, inventory, "rack_a:gpu99")
    theirs, said = _ansible_list_hosts(tmp_path, inventory, "rack_a:gpu99")
    _same_hosts(ours, theirs)
    assert warned == said == {MISMATCH + "gpu99"}
    # the folded pool sweep prints is accepted: Ansible splits it at its comma into two pieces it ignores
    code, ours, _ = _sweep_list_hosts(capsys, inventory, "gpu[01-02,04]")
    assert code == 0 and ours[1:] == ["    gpu01", "    gpu02", "    gpu04"]
    assert _ansible_list_hosts(tmp_path, inventory, "gpu[01-02,04]")[1] == {MISMATCH + "gpu[01-02", MISMATCH + "04]"}


def test_limit_at_the_reports_host_files_lists_what_ansible_lists(ansible_present, tmp_path, monkeypatch, capsys):
    import fleet_variants as fv
    from sweep.report.build import build_report

    monkeypatch.chdir(tmp_path)
    fv.write_run(tmp_path / "run", fv.must_show_fleet())
    summary = build_report([tmp_path / "run"], tmp_path / "run" / "report").summary
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu]\ngpu[01:44]\n")
    for name, hosts in (("held_out.txt", [h["host"] for h in summary["held_out"]]),
                        ("pool.txt", summary["pool"]["hosts"])):
        limit = f"@run/report/{name}"
        code, ours, warned = _sweep_list_hosts(capsys, inventory, limit)
        theirs, said = _ansible_list_hosts(tmp_path, inventory, "--limit", limit, "all")
        assert code == 0 and not warned and not said
        _same_hosts(ours, theirs)
        assert sorted(line.strip() for line in ours[1:]) == sorted(hosts)
