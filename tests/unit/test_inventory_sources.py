"""Inventories as Ansible users keep them (issue 42), against ansible-core as the oracle: a folder as the
inventory, several -i sources, Ansible's host order, the resolved connection on view (--list-hosts
--json), templates refused only for hosts that are contacted; and the hostile inventories of issue 36
(a name with a newline, group nesting and host totals that would take the controller down)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.errors import InventoryError, InventoryWarning, LimitError
from sweep.inventory.formats import InventoryLimits
from sweep.inventory.model import load_inventory
from helpers import require

sys.path.insert(0, str(Path(__file__).resolve().parent))
import inventory_corpus as corpus  # noqa: E402

try:
    from ansible.inventory.manager import InventoryManager  # noqa: F401
except ImportError:  # pragma: no cover - require() fails the tests under CI
    InventoryManager = None


@pytest.fixture()
def ansible_present():
    require(InventoryManager is not None, "ansible-core (pip install ansible-core) is the oracle here")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """ansible's own CLIs with an empty configuration (ansible's defaults, whatever the machine has)."""
    config = write(cwd / "ansible.cfg", "")
    env = {"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin", "ANSIBLE_CONFIG": str(config),
           "ANSIBLE_HOME": str(cwd / ".ansible"), "ANSIBLE_LOCAL_TEMP": str(cwd / "tmp"), "ANSIBLE_NOCOLOR": "1",
           "HOME": str(cwd)}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def sweep_main(capsys, *argv: str) -> tuple[int, str, str]:
    from sweep.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def agreement(name: str, sources: list[Path]) -> corpus.Tally:
    tally = corpus.Tally()
    corpus.compare(name, sources, tally, lambda given: load_inventory(given))
    return tally


# --- the corpus of public inventories ----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(corpus.corpus()))
def test_public_inventories_list_the_hosts_ansible_lists_in_its_order(ansible_present, name):
    """Every pattern's host set and order, and every host's address/port/user, as ansible-core's."""
    tally = agreement(name, corpus.corpus()[name])
    assert tally.failures == []
    assert tally.loaded == 1 and tally.same_set == tally.patterns


def test_the_corpus_records_where_every_file_comes_from():
    manifest = json.loads((corpus.CORPUS / "manifest.json").read_text())
    kept = {entry["file"] for entry in manifest["files"]}
    on_disk = {str(p.relative_to(corpus.CORPUS)) for p in corpus.CORPUS.rglob("*")
               if p.is_file() and p.name not in ("manifest.json", "collect.py")}
    assert kept == on_disk
    for entry in manifest["files"]:
        assert entry["licence"] and entry["path"] and len(entry["commit"]) == 40 and "/" in entry["project"]
    assert len(manifest["inventories"]) >= 27
    assert {source for sources in manifest["inventories"].values() for source in sources} <= \
        kept | {str(Path(f).parent) for f in kept} | {str(Path(f).parent.parent) for f in kept} | \
        {str(p.relative_to(corpus.CORPUS)) for p in corpus.CORPUS.rglob("inventory") if p.is_dir()}


def test_kayobes_folder_inventories_load_as_ansible_loads_them(ansible_present, tmp_path, capsys, monkeypatch):
    """kayobe is run with -i ansible/inventory -i etc/kayobe/inventory: two folders, group_vars inside each."""
    monkeypatch.chdir(tmp_path)
    kayobe = corpus.CORPUS / "openstack+kayobe"
    sources = [kayobe / "ansible" / "inventory", kayobe / "etc" / "kayobe" / "inventory"]
    code, out, _ = sweep_main(capsys, "run", "-i", str(sources[0]), "-i", str(sources[1]), "--list-hosts")
    theirs = cli("ansible", "-i", str(sources[0]), "-i", str(sources[1]), "all", "--list-hosts", cwd=tmp_path)
    assert code == 0 and out == theirs.stdout == "  hosts (1):\n    localhost\n"
    theirs = json.loads(cli("ansible-inventory", "-i", str(sources[0]), "-i", str(sources[1]), "--host", "localhost",
                            cwd=tmp_path).stdout)
    (host,) = load_inventory(sources).hosts
    assert corpus.sweep_connection(host) == corpus.connection("localhost", theirs)
    assert host.python == theirs.get("ansible_python_interpreter", "python3")


# --- a folder, and several sources --------------------------------------------------------------


def _folder(root: Path) -> Path:
    """A folder as Ansible users keep one: files it reads (sorted, a subfolder's too) and files it leaves out."""
    inventory = root / "inventory"
    write(inventory / "20-racks.ini", "[rack_b]\ngpu05 ansible_host=10.0.0.5\ngpu04\n[gpu:children]\nrack_b\n")
    write(inventory / "10-gpu.yml", "all:\n  children:\n    gpu:\n      hosts:\n        gpu02:\n        gpu01:\n"
          "    login:\n      hosts:\n        login1:\n          ansible_port: 2201\n")
    write(inventory / "sub" / "spare", "[spare]\nspare9\n")
    for ignored in ("README.md", "notes.txt", "hosts.orig", "hosts.ini~", "old.bak", "ansible.cfg", "x.retry",
                    ".hidden", "hosts.swp", "doc.rst"):
        write(inventory / ignored, "[ignored]\nnot-a-host\n")
    write(inventory / "group_vars" / "gpu.yml", "ansible_user: ops\n")
    write(inventory / "group_vars" / "rack_b" / "net.yml", "ansible_user: rackops\nansible_port: 2222\n")
    write(inventory / "host_vars" / "gpu01.yml", "ansible_host: 10.9.9.1\n")
    write(inventory / "sub" / "group_vars" / "spare.yml", "ansible_user: never\n")  # a subfolder's: Ansible reads none
    return inventory


PATTERNS = ("all", "gpu", "rack_b:gpu", "login:gpu:!gpu04", "spare", "*", "g*:&rack_b", "ungrouped")


def _against_ansible(sources: list[Path], tmp_path: Path) -> None:
    manager, variables = corpus.ansible_inventory(sources)
    inventory = load_inventory(sources if len(sources) > 1 else sources[0])
    for pattern in PATTERNS:
        theirs = [h.name for h in manager.list_hosts(pattern)]
        try:
            ours = [h.name for h in inventory.select(pattern)]
        except LimitError:  # sweep's "matches no host" (exit 2) where ansible lists none
            ours = []
        assert ours == theirs, pattern
    by_name = {h.name: h for h in inventory.hosts}
    assert set(by_name) == set(manager.hosts)
    for name, host in manager.hosts.items():
        expected = corpus.connection(name, variables.get_vars(host=host, include_hostvars=False))
        assert corpus.sweep_connection(by_name[name]) == expected, name


def test_a_folder_is_read_as_ansible_reads_it(ansible_present, tmp_path):
    folder = _folder(tmp_path)
    _against_ansible([folder], tmp_path)
    inventory = load_inventory(folder)
    assert "not-a-host" not in {h.name for h in inventory.hosts}
    assert inventory.select("spare")[0].user is None  # sub/group_vars: not the folder's
    # rack_b is a child of gpu (level 2 below all), spare a child of all (level 1): its hosts come first
    assert [h.name for h in inventory.select(None)] == ["gpu02", "gpu01", "login1", "spare9", "gpu05", "gpu04"]


def test_several_sources_merge_as_ansible_merges_them(ansible_present, tmp_path):
    first = _folder(tmp_path / "a")
    second = write(tmp_path / "b" / "hosts.yml", "all:\n  children:\n    rack_b:\n      hosts:\n        gpu06:\n"
                   "        gpu04:\n          ansible_host: 10.0.4.4\n    extra:\n      hosts:\n        gpu01:\n")
    # a later source's group_vars for a shallower group wins over an earlier source's for a deeper one
    write(tmp_path / "b" / "group_vars" / "gpu.yml", "ansible_user: from-b\n")
    write(tmp_path / "b" / "host_vars" / "gpu05.yml", "ansible_port: 2205\n")
    _against_ansible([first, second], tmp_path)
    _against_ansible([second, first], tmp_path)
    inline = "inline9,gpu01:2022,"
    manager, _ = corpus.ansible_inventory([second, inline])
    with pytest.warns(InventoryWarning, match="listed again with port 2022"):  # as Ansible: the first listing's port
        merged = load_inventory([second, inline])
    assert [h.name for h in merged.select(None)] == [h.name for h in manager.list_hosts()]


def test_run_takes_several_inventory_options_and_a_folder(ansible_present, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = _folder(tmp_path)
    other = write(tmp_path / "more.ini", "[gpu]\ngpu09\n")
    for argv in (["-i", str(folder)], ["-i", str(folder), "-i", str(other)], [str(folder)]):
        for pattern in ("all", "rack_b:gpu"):
            code, out, err = sweep_main(capsys, "run", *argv, "--limit", pattern, "--list-hosts")
            theirs = cli("ansible", *(argv if argv[0] == "-i" else ["-i", *argv]), pattern, "--list-hosts",
                         cwd=tmp_path)
            assert (code, out) == (0, theirs.stdout), err


# --- the connection on view, and templates ------------------------------------------------------


def test_list_hosts_json_shows_the_connection_and_where_each_value_was_set(ansible_present, tmp_path, capsys,
                                                                           monkeypatch):
    monkeypatch.chdir(tmp_path)
    inventory = write(tmp_path / "hosts.yml", "all:\n  children:\n    gpu:\n      hosts:\n        gpu01:2222:\n"
                      "          ansible_host: 10.0.0.1\n          ansible_password: hunter2\n        gpu02:\n"
                      "      vars:\n        ansible_ssh_common_args: -J jump@bastion\n        ansible_become: true\n")
    write(tmp_path / "group_vars" / "gpu.yml", "ansible_user: ops\nansible_private_key_file: /keys/ops\n"
          "ansible_python_interpreter: /opt/py/bin/python3\n")
    code, out, err = sweep_main(capsys, "run", str(inventory), "--limit", "gpu01", "--list-hosts", "--json",
                                "-u", "nobody")
    assert code == 0, err
    assert "hunter2" not in out
    (host,) = json.loads(out)["hosts"]
    gv = tmp_path / "group_vars" / "gpu.yml"
    assert host == {
        "name": "gpu01", "address": "10.0.0.1", "port": 2222, "user": "ops", "key_file": "/keys/ops",
        "proxy_jump": "jump@bastion", "python": "/opt/py/bin/python3", "become": True, "become_user": "root",
        "groups": ["gpu"],
        "from": {"address": f"ansible_host at {inventory}:6", "port": f"ansible_port at {inventory}:5",
                 "user": f"ansible_user at {gv}:1", "key_file": f"ansible_private_key_file at {gv}:2",
                 "proxy_jump": f"ansible_ssh_common_args at {inventory}:10",
                 "python": f"ansible_python_interpreter at {gv}:3", "become": f"ansible_become at {inventory}:11"},
        "unrendered": {},
    }
    theirs = json.loads(cli("ansible-inventory", "-i", str(inventory), "--host", "gpu01",
                            cwd=tmp_path).stdout)
    assert (theirs["ansible_host"], theirs["ansible_port"], theirs["ansible_user"]) == ("10.0.0.1", 2222, "ops")
    code, out, err = sweep_main(capsys, "run", str(inventory), "--limit", "gpu02", "--list-hosts", "--json")
    (host,) = json.loads(out)["hosts"]
    assert (host["address"], host["port"], host["user"]) == ("gpu02", None, "ops")
    assert "address" not in host["from"] and host["from"]["user"] == f"ansible_user at {gv}:1"
    code, out, err = sweep_main(capsys, "run", str(inventory), "--list-hosts", "--json", "-u", "nobody",
                                "-e", "ansible_user=root")
    assert {h["from"]["user"] for h in json.loads(out)["hosts"]} == {"ansible_user at -e"}


def _kayobe_like(root: Path) -> Path:
    """kayobe's own group_vars file (ansible_user: "{{ kayobe_ansible_user }}") for controllers, and a localhost."""
    folder = root / "inventory"
    shutil.copy(corpus.CORPUS / "openstack+kayobe/ansible/inventory/group_vars/controllers/ansible-user",
                write(folder / "group_vars" / "controllers" / "ansible-user", ""))
    write(folder / "hosts", "localhost ansible_host=127.0.0.1\n[controllers]\nctl01 ansible_host=127.0.0.1\n")
    return folder


def test_a_template_is_refused_only_for_the_hosts_contacted(ansible_present, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = _kayobe_like(tmp_path)
    where = f"{folder / 'group_vars' / 'controllers' / 'ansible-user'}:3"
    code, out, err = sweep_main(capsys, "run", str(folder), "--limit", "localhost", "--list-hosts")
    assert (code, out) == (0, "  hosts (1):\n    localhost\n"), err
    code, out, err = sweep_main(capsys, "run", str(folder), "--limit", "controllers", "--list-hosts", "--json")
    (host,) = json.loads(out)["hosts"]
    assert code == 0 and host["user"] is None
    assert host["unrendered"] == {"user": {"variable": "ansible_user", "value": "{{ kayobe_ansible_user }}",
                                           "at": where}}
    theirs = json.loads(cli("ansible-inventory", "-i", str(folder), "--host", "ctl01", cwd=tmp_path).stdout)
    assert theirs["ansible_user"] == host["unrendered"]["user"]["value"]  # as ansible-inventory prints it
    code, out, err = sweep_main(capsys, "run", str(folder), "--limit", "controllers", "-o", str(tmp_path / "run"))
    assert code == 2 and not (tmp_path / "run").exists()
    assert (f"{where}: ctl01: ansible_user is a Jinja template ('{{{{ kayobe_ansible_user }}}}'); sweep does not "
            "render templates; write the value of ansible_user out in the inventory") in err
    from sweep.inventory.model import refuse_unrendered

    with pytest.raises(InventoryError):
        refuse_unrendered(load_inventory(folder).select("ctl01"))
    refuse_unrendered(load_inventory(folder).select("localhost"))


# --- hostile inventories (issue 36) ---------------------------------------------------------------


# an address of its own: the name is not what ssh is given, so OpenSSH's host name rules never see it
NEWLINE_NAME = 'all:\n  children:\n    rack_a:\n      hosts:\n        "h02\\nprod01":\n' \
               '          ansible_host: 127.0.0.1\n    rack_b:\n      hosts:\n        prod01:\n'


@pytest.mark.parametrize("loader", ["auto", "ansible"])
def test_a_host_name_with_a_newline_is_refused_naming_where(tmp_path, loader):
    if loader == "ansible":
        require(InventoryManager is not None, "ansible-core")
    inventory = write(tmp_path / "hosts.yml", NEWLINE_NAME)
    with pytest.raises(InventoryError) as caught:
        load_inventory(inventory, loader=loader)
    where = f"{inventory}:5" if loader == "auto" else str(inventory)
    assert str(caught.value).startswith(f"{where}: host name 'h02\\nprod01' ")
    assert "holds the control character '\\n'" in str(caught.value)


@pytest.mark.parametrize("engine", ["ssh", "ansible"])
def test_no_engine_sweeps_a_host_a_newline_smuggled_in(tmp_path, capsys, monkeypatch, engine):
    monkeypatch.chdir(tmp_path)
    inventory = write(tmp_path / "hosts.yml", NEWLINE_NAME)
    for argv in (["--list-hosts"], ["-o", str(tmp_path / "run")]):
        code, out, err = sweep_main(capsys, "run", str(inventory), "--engine", engine, "--limit", "rack_a", *argv)
        assert code == 2 and "prod01" not in out and f"{inventory}:5: host name 'h02\\nprod01'" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("levels", [900, 20_000])
def test_deeply_nested_ini_groups_are_refused_naming_the_line(tmp_path, levels):
    lines = [f"[g{n}:children]\ng{n + 1}" for n in range(levels)] + [f"[g{levels}]\nh1"]
    inventory = write(tmp_path / "hosts.ini", "\n".join(lines) + "\n")
    with pytest.raises(InventoryError) as caught:
        load_inventory(inventory)
    assert "groups nest more than 100 levels deep" in str(caught.value)
    assert str(caught.value).startswith(f"{inventory}:")


def test_bottom_up_nesting_is_refused_as_well(tmp_path):
    lines = [f"[g{n}:children]\ng{n + 1}" for n in reversed(range(1, 300))] + ["[g300]\nh1", "[g0:children]\ng1"]
    inventory = write(tmp_path / "hosts.ini", "[g1]\n" + "\n".join(lines) + "\n")
    with pytest.raises(InventoryError, match="groups nest more than 100 levels deep"):
        load_inventory(inventory)
    yaml_lines = ["all:\n  children:"] + [f"    g{n}:\n      children:\n        g{n + 1}:" for n in range(150)]
    nested = write(tmp_path / "deep.yml", "\n".join(yaml_lines) + "\n    g150:\n      hosts:\n        h1:\n")
    with pytest.raises(InventoryError, match=f"^{nested}:\\d+: groups nest more than 100 levels deep"):
        load_inventory(nested)


def test_the_hosts_an_inventory_expands_to_are_bounded(tmp_path):
    yaml_text = "all:\n  hosts:\n" + "".join(f"    p{n}-[00000:99999]:\n" for n in range(20))
    inventory = write(tmp_path / "hosts.yml", yaml_text)
    with pytest.raises(InventoryError) as caught:
        load_inventory(inventory)
    assert str(caught.value) == (f"{inventory}:5: the inventory defines more than 200,000 hosts; split the inventory,"
                                 " or raise the limit with --max-range-hosts")
    many_groups = "".join(f"[g{n}]\nh[000:999]\n" for n in range(20))
    listed = write(tmp_path / "hosts.ini", many_groups)
    with pytest.raises(InventoryError, match=f"^{listed}:22: the inventory lists hosts in groups more than 10,000"):
        load_inventory(listed, limits=InventoryLimits(range_hosts=1000, hosts=1000))
    assert len(load_inventory(listed, limits=InventoryLimits(range_hosts=1000, hosts=2000)).hosts) == 1000


def test_json_goes_with_list_hosts_and_the_ansible_engine_with_one_source(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = write(tmp_path / "a.ini", "[gpu]\ngpu01 ansible_host=127.0.0.1\n")
    second = write(tmp_path / "b.ini", "[gpu]\ngpu02 ansible_host=127.0.0.1\n")
    code, out, err = sweep_main(capsys, "run", str(first), "--json")
    assert (code, out) == (2, "") and "--json is the format of --list-hosts; add --list-hosts, or drop --json" in err
    code, out, err = sweep_main(capsys, "run", "-i", str(first), "-i", str(second), "--engine", "ansible",
                                "-o", str(tmp_path / "run"))
    assert code == 2 and "the ansible engine takes one inventory source" in err
    assert not (tmp_path / "run").exists()
