"""The fleet as operators already describe it: a static Ansible inventory, read into frozen Hosts.

Formats: YAML and INI as ansible-core reads them, with host ranges (``gpu[01:64].dc1``); the
grammars are in `sweep.inventory.formats`.

Variables of a host, lowest precedence first (ansible-core's default ``VARIABLE_PRECEDENCE``):

1. ``all`` group vars in the inventory file;
2. other group vars in the inventory file, parent groups before children (then by
   ``ansible_group_priority``, then by name);
3. ``group_vars/all`` beside the inventory file;
4. ``group_vars/GROUP`` beside the inventory file, in the same group order;
5. host vars in the inventory file (a host defined twice keeps the later value, as in Ansible;
   when the two definitions give different ``ansible_host``, ``ansible_port`` or ``ansible_user``,
   an `InventoryWarning` names both lines; a port written ``gpu01:2222`` counts only on the host's
   first listing, as in Ansible, and a different one on a later listing is warned about);
6. ``host_vars/HOST`` beside the inventory file.

``group_vars/NAME`` is the first of ``NAME``, ``NAME.yml``, ``NAME.yaml``, ``NAME.json`` that exists;
a directory ``NAME/`` contributes its files in sorted order, later ones winning.

Connection variables become Host fields: ``ansible_host`` (or ``ansible_ssh_host``), ``ansible_port``
(or ``ansible_ssh_port``), ``ansible_user`` (or ``ansible_ssh_user``), ``ansible_private_key_file``
(or ``ansible_ssh_private_key_file``), ``ansible_python_interpreter`` (``auto*`` means ``python3``),
``ansible_ssh_common_args``. An empty ``ansible_host=`` is the empty address, as in Ansible (a sweep
records that host as failed, class ``dns``, naming the variable). As in Ansible's ssh plugin, the ``ansible_ssh_`` spelling wins when both
are set. Variables named ``sweep_*`` are sweep's own settings (``sweep_interpreters`` is
``settings["interpreters"]``). Values are frozen: mappings are read-only, lists become tuples.

Stricter than Ansible, because a silently dropped host is a host nobody checks: an unknown key in
a YAML group, a range such as ``gpu[05:01]``, a Jinja template or a vault value in a connection
variable are errors, not warnings; so are an address or user that OpenSSH 9.6 would refuse
(`sweep.inventory.names`: shell syntax that ssh_config's %h/%r would carry into a command), and a
vars file whose keys are not variable names. Files are read by `sweep.inventory.files` (regular
files only, bounded). Not supported by the builtin loader: inventory directories,
plugin inventories and vault-encrypted files (``loader="ansible"`` reads plugin inventories).
"""
from __future__ import annotations

import dataclasses
import gc
import os
import re
import shlex
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sweep.errors import InventoryError, InventoryWarning, LimitError
from sweep.inventory.formats import (
    IMPLICIT_GROUPS, GroupGraph, GroupMembers, InventoryLimits, value_kind, parse_ini, parse_yaml, sniff_yaml, Vaulted,
    yaml_load,
)
from sweep.inventory.command_line import VarLayers, ansible_bool, inline_hosts, is_inline
from sweep.inventory.files import read_text
from sweep.inventory.limit import match_hosts
from sweep.inventory.names import RULE_FIX, RULE_WHY, hostname_problem, ruser_problem

SETTINGS_PREFIX = "sweep_"
DEFAULT_PYTHON = "python3"
_YAML_SUFFIXES = (".yml", ".yaml", ".json")


@dataclass(frozen=True)
class Host:
    """One inventory host and how to reach it over SSH."""

    name: str
    address: str
    port: int | None
    user: str | None
    key_file: str | None
    python: str
    ssh_common_args: str | None
    proxy_jump: str | None
    groups: tuple[str, ...]
    vars: Mapping[str, Any] = field(hash=False, repr=False)
    settings: Mapping[str, Any] = field(hash=False, repr=False)
    ssh_extra_args: str | None = None
    become: bool = False  # ansible_become: run the agent through sudo -n as become_user
    become_user: str | None = None  # ansible_become_user (root when become and unset)
    # where ansible_ssh_common_args, ansible_ssh_extra_args and the key file variable were set (file:line)
    ssh_args_where: Mapping[str, str] = field(default_factory=dict, hash=False, repr=False, compare=False)


@dataclass(frozen=True)
class Inventory:
    """The hosts of one inventory file, in order of first appearance, and its groups."""

    path: Path
    hosts: tuple[Host, ...]
    groups: Mapping[str, tuple[str, ...]] = field(hash=False)
    warnings: tuple[str, ...] = ()  # also issued as InventoryWarning when the file is read

    def select(self, limit: str | None) -> list[Host]:
        """The hosts an Ansible ``--limit`` pattern selects (all hosts for None or '')."""
        if not limit or not limit.strip():
            return list(self.hosts)
        chosen = set(match_hosts(limit, [host.name for host in self.hosts], self.groups))
        if not chosen:
            named = [group for group in self.groups if group not in IMPLICIT_GROUPS]
            listed = ", ".join(named[:6]) + (", ..." if len(named) > 6 else "")
            raise LimitError(
                f"--limit '{limit}' matches no host in {self.path}",
                fix=f"use a host name, a glob, or one of the groups {listed}" if named
                else "use a host name or a glob; this inventory has no groups",
            )
        return [host for host in self.hosts if host.name in chosen]

    def snapshot(self) -> dict:
        """A JSON-able record of the hosts and groups, for a run manifest (vars left out: secrets)."""
        hosts = [
            {
                "name": h.name, "address": h.address, "port": h.port, "user": h.user,
                "key_file": h.key_file, "python": h.python, "ssh_common_args": h.ssh_common_args,
                "proxy_jump": h.proxy_jump, "groups": list(h.groups), "settings": _thaw(h.settings),
                **({"become_user": h.become_user} if h.become else {}),
            }
            for h in self.hosts
        ]
        return {"path": str(self.path), "hosts": hosts,
                "groups": {name: list(members) for name, members in self.groups.items()}}


def load_inventory(path: str | Path, loader: str = "auto", *, limits: InventoryLimits = InventoryLimits(),
                   layers: VarLayers = VarLayers()) -> Inventory:
    """Read an Ansible inventory file; ``loader`` is "auto" (= "builtin") or "ansible" (ansible-core).

    `limits` bound what the builtin loader expands (YAML aliases, host ranges); loading is linear in
    the number of hosts (100,000 hosts and 200 host_vars files: bench/bench_inventory.py). `layers`: the
    command line's variables, under the inventory's (-u, --private-key, --become) and over them (-e). A
    `path` with a comma that names no file is an inline host list ('gpu01,gpu02:2222,'), as in Ansible.
    """
    if is_inline(path):
        return _load_inline(os.fspath(path), layers)
    path = Path(path)
    if loader not in ("auto", "builtin", "ansible"):
        raise InventoryError(f"unknown inventory loader {loader!r}", where=str(path),
                             fix="use loader 'auto', 'builtin' or 'ansible'")
    if not path.exists():
        raise InventoryError("inventory file not found", where=str(path),
                             fix="pass the path of an Ansible inventory file (YAML or INI)")
    if path.is_dir():
        raise InventoryError("is a directory, not an inventory file", where=str(path),
                             fix="pass the inventory file inside it, e.g. hosts.yml")
    if loader == "ansible":
        return _load_with_ansible(path, layers)
    collecting = gc.isenabled()
    gc.disable()  # hundreds of thousands of small objects, none of them cyclic garbage: full collections
    try:          # while loading grew with the heap (superlinear load time)
        return _load_builtin(path, limits, layers)
    finally:
        if collecting:
            gc.enable()


# --- the builtin loader: parse into a group graph, then resolve vars ---------------------------


def _load_inline(text: str, layers: VarLayers) -> Inventory:
    """An inline host list: its hosts in group ungrouped, ``name:port`` giving the port (Ansible's host_list)."""
    hosts = []
    for name, port in inline_hosts(text):
        merged = {**layers.under, **({"ansible_port": (port, repr(text))} if port else {}), **layers.over}
        hosts.append(_make_host(name, merged, {"ungrouped"}, listed=repr(text)))
    names = tuple(host.name for host in hosts)
    return _inventory(Path(text), hosts, MappingProxyType({"all": names, "ungrouped": names}))


def _load_builtin(path: Path, limits: InventoryLimits, layers: VarLayers = VarLayers()) -> Inventory:
    text, suffix, graph = read_text(path, limits.file_bytes), path.suffix.lower(), GroupGraph(limits)
    if suffix in _YAML_SUFFIXES:
        data = yaml_load(text, path, limits.yaml_values)
        if data is not None and not isinstance(data, dict):
            raise InventoryError(f"YAML inventory must be a mapping of group names, not {value_kind(data)}",
                                 where=f"{path}:1", fix="start the file with 'all:' and put groups under 'children:'")
    else:  # as ansible: YAML only without a suffix, and only if it reads as YAML groups
        data = sniff_yaml(text, limits.yaml_values, path) if not suffix else None
    if isinstance(data, dict):
        parse_yaml(data, path, graph)
    elif suffix not in _YAML_SUFFIXES:
        parse_ini(text, path, graph)
    if not graph.host_vars:
        raise InventoryError("no host is defined in this inventory", where=str(path),
                             fix="add hosts under a group: a 'hosts:' mapping in YAML, a line under [group] in INI")
    return _resolve(graph, path, layers)


def _resolve(graph: GroupGraph, path: Path, layers: VarLayers = VarLayers()) -> Inventory:
    groups = graph.groups
    graph.reconcile(str(path))
    direct: dict[str, set[str]] = {name: set() for name in graph.host_vars}
    for group in groups.values():
        for host in group.hosts:
            direct[host].add(group.name)
    for member_of in direct.values():
        member_of.discard("all")

    depth: dict[str, int] = {}

    def depth_of(name: str) -> int:  # longest path from 'all', ansible's Group.depth
        if name not in depth:
            depth[name] = max((depth_of(parent) + 1 for parent in groups[name].parents), default=0)
        return depth[name]

    base = path.parent
    group_dir, host_dir = _VarsFolder(base / "group_vars", graph.limits), _VarsFolder(base / "host_vars", graph.limits)
    group_files = {name: group_dir.vars(name) for name in groups}
    by_groups: dict[frozenset, tuple[set[str], dict]] = {}  # hosts of the same groups share their group vars
    frozen: dict[int, tuple[tuple, Any]] = {}  # id of a (value, where) pair -> (the pair, its frozen value)
    alike: dict[frozenset, tuple[Host, bool]] = {}  # groups -> a host of only those groups' vars, has it ansible_host
    hosts = []
    for name, member_of in direct.items():
        key = frozenset(member_of)
        if key not in by_groups:
            every = set().union(*({group} | graph.ancestors(group) for group in member_of)) - {"all"}
            chain = sorted(every, key=lambda g: (depth_of(g), groups[g].priority, g))
            merged = {**layers.under, **groups["all"].vars}
            for layer in (*(groups[g].vars for g in chain), group_files["all"], *(group_files[g] for g in chain)):
                merged.update(layer)
            by_groups[key] = (tuple(sorted(every - set(IMPLICIT_GROUPS))), merged)
        every, merged = by_groups[key]
        own, files = graph.host_vars[name], host_dir.vars(name)
        if own or files or layers.over:
            hosts.append(_make_host(name, {**merged, **own, **files, **layers.over}, every, frozen,
                                    graph.first_listing[name][1]))
            continue
        shared = alike.get(key)  # hosts with only their groups' vars differ in their name alone
        if shared is None:
            hosts.append(_make_host(name, merged, every, frozen, graph.first_listing[name][1]))
            alike[key] = (hosts[-1], any(merged.get(k, (None,))[0] is not None for k in _ADDRESS_VARS))
        else:
            template, addressed = shared
            address = template.address if addressed else _checked_address(name, "", None, "", graph.first_listing[name][1])
            hosts.append(dataclasses.replace(template, name=name, address=address))
    for text in graph.warnings:
        warnings.warn(InventoryWarning(text), stacklevel=3)
    return _inventory(path, hosts, GroupMembers(graph), tuple(graph.warnings))


def _inventory(path: Path, hosts: list[Host], members: Mapping[str, tuple[str, ...]],
               notes: tuple[str, ...] = ()) -> Inventory:
    """`members`: every group (in the inventory's group order) -> its hosts, in ansible's Group.get_hosts order."""
    return Inventory(path=path, hosts=tuple(hosts), groups=members, warnings=notes)


def _connection(name: str, merged: Mapping[str, tuple[Any, str]], keys: tuple[str, ...]) -> tuple[str, str | None, str]:
    """`name`'s (variable, its value as text or None, file:line) among `keys`; the later spelling wins, as in ansible."""
    key = None
    for candidate in keys:
        pair = merged.get(candidate)
        if pair is not None and pair[0] is not None:
            key = candidate
    if key is None:
        return keys[0], None, ""
    value, where = merged[key]
    if type(value) is str and "{" not in value:  # the common case, fast (most hosts, 100,000 of them)
        return key, value, where
    if isinstance(value, Vaulted):
        raise InventoryError(f"{name}: {key} is vault-encrypted and sweep cannot decrypt it",
                             where=where, fix=f"set {key} in plain text for this host")
    if isinstance(value, str) and ("{{" in value or "{%" in value):
        raise InventoryError(f"{name}: {key} is a Jinja template ({value!r}); sweep does not render templates",
                             where=where, fix=f"write the value of {key} out in the inventory")
    if isinstance(value, (bool, Mapping, list, tuple)):
        raise InventoryError(f"{name}: {key} is {value_kind(value)}, not a single value", where=where,
                             fix=f"set {key} to a plain value")
    return key, _freeze(value) if isinstance(value, str) else str(value), where


def _make_host(name: str, merged: Mapping[str, tuple[Any, str]], groups: set[str] | tuple[str, ...],
               frozen_pairs: dict[int, tuple[tuple, Any]] | None = None, listed: str = "") -> Host:
    """Build a Host from merged vars, each var carried with the file:line it came from.

    `frozen_pairs` keeps the frozen value of each (value, where) pair across hosts: a group's vars
    are frozen once, not once per host (and a value shared through YAML aliases once, not per use).
    """

    def connection(*keys: str) -> tuple[str, str | None, str]:
        return _connection(name, merged, keys)

    port_key, port_text, port_where = connection("ansible_port", "ansible_ssh_port")
    port = None
    if port_text is not None:
        if not port_text.strip().isdigit() or not 0 < int(port_text) < 65536:
            raise InventoryError(f"{name}: {port_key} is {merged[port_key][0]!r}, not a port number",
                                 where=port_where, fix="set it to a whole number from 1 to 65535")
        port = int(port_text)
    _, common_args, common_where = connection("ansible_ssh_common_args")
    _, extra_args, extra_where = connection("ansible_ssh_extra_args")
    key_var, key_file, key_where = connection("ansible_private_key_file", "ansible_ssh_private_key_file")
    python = connection("ansible_python_interpreter")[1] or DEFAULT_PYTHON
    address_var, address, address_where = connection(*_ADDRESS_VARS)
    user = _checked_user(name, connection("ansible_user", "ansible_ssh_user"))
    become, become_user = _become(name, merged)
    address = _checked_address(name, address_var, address, address_where, listed)
    memo = {} if frozen_pairs is None else frozen_pairs
    values = {}
    for key, pair in merged.items():
        kept = memo.get(id(pair))
        if kept is None or kept[0] is not pair:
            kept = memo[id(pair)] = (pair, _freeze(pair[0]))
        values[key] = kept[1]
    frozen = MappingProxyType(values)
    return Host(
        name=name,
        address=address,
        port=port,
        user=user,
        key_file=os.path.expanduser(key_file) if key_file else None,
        python=DEFAULT_PYTHON if python.startswith("auto") else python,
        ssh_common_args=common_args,
        proxy_jump=_proxy_jump(common_args, name, common_where),
        ssh_extra_args=extra_args,
        become=become,
        become_user=become_user,
        ssh_args_where=MappingProxyType({"ansible_ssh_common_args": common_where,
                                         "ansible_ssh_extra_args": extra_where, key_var: key_where}),
        groups=groups if isinstance(groups, tuple) else tuple(sorted(set(groups) - set(IMPLICIT_GROUPS))),
        vars=frozen,
        settings=MappingProxyType({key[len(SETTINGS_PREFIX):]: value for key, value in frozen.items()
                                   if key.startswith(SETTINGS_PREFIX) and len(key) > len(SETTINGS_PREFIX)}),
    )


_BECOME_REFUSED = ("ansible_become_exe", "ansible_become_flags")


def _become(name: str, merged: Mapping[str, tuple[Any, str]]) -> tuple[bool, str | None]:
    """(become, the user to become) from ansible_become, ansible_become_user and ansible_become_method: only
    sudo, run with -n (never a password prompt); a method, program or flags sweep would not honour are refused."""
    value, where = merged.get("ansible_become", (None, ""))
    if value is None or not ansible_bool(name, "ansible_become", value, where):
        return False, None
    method, method_where = merged.get("ansible_become_method", (None, ""))
    if method is not None and str(method) != "sudo":
        raise InventoryError(f"{name}: ansible_become_method is {method!r}: sweep becomes another user through "
                             "sudo -n only (never a password prompt)", where=method_where or where or None,
                             fix="set ansible_become_method: sudo for the hosts sweep sweeps (with a NOPASSWD "
                                 "sudoers rule), or sweep them without become")
    for var in _BECOME_REFUSED:
        if merged.get(var, (None,))[0] is not None:
            raise InventoryError(f"{name}: {var} is set: sweep runs sudo -n itself and honours no other program "
                                 "or flags", where=merged[var][1] or None, fix=f"drop {var} for these hosts")
    var, user, user_where = _connection(name, merged, ("ansible_become_user",))
    _checked_user(name, (var, user, user_where))
    return True, user or "root"


def _checked_address(name: str, var: str, address: str | None, where: str, listed: str = "") -> str:
    """The address ssh is given for `name` (its ansible_host, else its name; '' stays ''), if OpenSSH's
    valid_hostname accepts it: it is expanded as %h and %n into ProxyCommand and Match exec lines."""
    if address is None:
        var, address, where = "host name (no ansible_host)", name, listed
    problem = hostname_problem(address)
    if problem is not None:
        raise InventoryError(f"{name}: {var} {address!r} {problem}: OpenSSH refuses it as a host name "
                             f"(valid_hostname, {RULE_WHY})", where=where or None, fix=RULE_FIX)
    return address


def _checked_user(name: str, found: tuple[str, str | None, str]) -> str | None:
    """ansible_user (or ansible_ssh_user), if OpenSSH's valid_ruser accepts it (it is %r in ssh_config)."""
    var, user, where = found
    problem = None if user is None else ruser_problem(user)
    if problem is not None:
        raise InventoryError(f"{name}: {var} {user!r} {problem}: OpenSSH refuses it as a user name "
                             f"(valid_ruser, {RULE_WHY})", where=where or None, fix=RULE_FIX)
    return user


def _proxy_jump(common_args: str | None, name: str, where: str) -> str | None:
    """The jump host of ``-J host`` / ``-o ProxyJump=host`` in ansible_ssh_common_args."""
    if not common_args:
        return None
    try:
        words = shlex.split(common_args)
    except ValueError as err:
        raise InventoryError(f"{name}: ansible_ssh_common_args cannot be split ({err})", where=where,
                             fix="close the quote in ansible_ssh_common_args") from None
    jump = None
    for index, word in enumerate(words):
        following = words[index + 1] if index + 1 < len(words) else ""
        if word.startswith("-J"):
            jump = word[2:] or following
        elif word.startswith("-o"):
            option = word[2:] or following
            key, _, value = option.replace("=", " ", 1).partition(" ")
            if key.lower() == "proxyjump":
                jump = value.strip()
    return None if not jump or jump.lower() == "none" else jump


# --- group_vars and host_vars folders, and shared helpers ---------------------------------------


class _VarsFolder:
    """``group_vars/`` or ``host_vars/`` beside the inventory, listed once (not probed per host)."""

    def __init__(self, directory: Path, limits: InventoryLimits):
        self.directory, self.limits = directory, limits
        try:
            self.entries = frozenset(os.listdir(directory)) if directory.is_dir() else frozenset()
        except OSError:
            self.entries = frozenset()

    def vars(self, name: str) -> dict[str, tuple[Any, str]]:
        """Merged vars of ``NAME``, ``NAME.yml``, ``NAME.yaml`` or ``NAME.json`` (ansible's find_vars_files)."""
        if not self.entries:
            return {}
        files: list[Path] = []
        for candidate in (name, *(f"{name}{suffix}" for suffix in _YAML_SUFFIXES)):
            if candidate in self.entries:
                path = self.directory / candidate
                files = _files_below(path) if path.is_dir() else [path]
                break
        merged: dict[str, tuple[Any, str]] = {}
        for file in files:
            data = yaml_load(read_text(file, self.limits.file_bytes), file, self.limits.yaml_values)
            if data is None:
                continue
            if not isinstance(data, dict):
                # the kind, never the content: the file may be a link to a secret (/etc/shadow)
                kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
                raise InventoryError(f"variables file holds {kind}, not a mapping of names to values",
                                     where=f"{file}:1", fix="write one 'name: value' per line")
            _check_names(data, file)
            merged.update({str(key): (value, f"{file}:{data.key_lines[key]}") for key, value in data.items()})
        return merged


def _check_names(data: Mapping, file: Path) -> None:
    """Every key of a vars file is a name (letters, digits, '_', '-', '.'; Ansible templates use only the
    first three): a file that is not a vars file (a link to /etc/shadow parses as a mapping of its
    lines) is refused, and its content is not echoed."""
    for key in data:
        if not _VAR_NAME.match(str(key)):
            raise InventoryError("holds a key that is not a variable name (letters, digits, '_', '-', '.'): "
                                 "this is not a variables file", where=f"{file}:{data.key_lines[key]}",
                                 fix="check what the file (or the link) holds")


def _files_below(directory: Path, above: frozenset[str] = frozenset()) -> list[Path]:
    """The vars files of a ``NAME/`` folder, sorted, its subfolders' in place; a link back up is refused."""
    real = os.path.realpath(directory)
    if real in above:
        raise InventoryError(f"is a link back to {real}, a folder it is inside (a loop)", where=str(directory),
                             fix="remove the link")
    found: list[Path] = []
    for entry in sorted(os.listdir(directory)):
        child, suffix = directory / entry, os.path.splitext(entry)[1]
        if entry.startswith(".") or entry.endswith("~"):
            continue
        if child.is_dir() and not suffix:
            found.extend(_files_below(child, above | {real}))
        elif not suffix or suffix in _YAML_SUFFIXES:  # a FIFO or a device too: read_text names and refuses it
            found.append(child)
    return found


_ADDRESS_VARS = ("ansible_host", "ansible_ssh_host")
_VAR_NAME = re.compile(r"[A-Za-z0-9_.-]+\Z")
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _freeze(value: Any) -> Any:
    """Deep read-only copy with plain types (drops ansible-core's tagged str/int subclasses)."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, Mapping):
        return MappingProxyType({_freeze(key): _freeze(item) for key, item in value.items()})
    if isinstance(value, (list, tuple, set, frozenset)):
        return tuple(_freeze(item) for item in value)
    for plain in (bool, int, float, str):
        if isinstance(value, plain):
            return plain(value) if plain is not str else str.__str__(value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [_thaw(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


# --- the ansible-core loader --------------------------------------------------------------------

# variables ansible's VariableManager adds itself; they are not inventory data
_ANSIBLE_MAGIC = frozenset({
    "ansible_check_mode", "ansible_config_file", "ansible_diff_mode", "ansible_facts", "ansible_forks",
    "ansible_inventory_sources", "ansible_playbook_python", "ansible_version", "group_names", "groups",
    "inventory_dir", "inventory_file", "inventory_hostname", "inventory_hostname_short", "omit", "playbook_dir",
})


def _load_with_ansible(path: Path, layers: VarLayers = VarLayers()) -> Inventory:
    """Read the inventory with ansible-core's own InventoryManager and VariableManager."""
    try:
        from ansible.inventory.manager import InventoryManager
        from ansible.parsing.dataloader import DataLoader
        from ansible.vars.manager import VariableManager
    except ImportError:
        raise InventoryError("loader 'ansible' needs ansible-core, which is not installed", where=str(path),
                             fix="pip install ansible-core, or use the builtin loader") from None
    from ansible.errors import AnsibleError

    data_loader = DataLoader()
    try:
        manager = InventoryManager(loader=data_loader, sources=[str(path)])
        variables = VariableManager(loader=data_loader, inventory=manager)
        found = {name: variables.get_vars(host=host, include_hostvars=False) for name, host in manager.hosts.items()}
    except AnsibleError as err:
        raise InventoryError(f"ansible-core cannot read it: {err}", where=str(path),
                             fix=f"run 'ansible-inventory -i {path} --graph' for details") from None
    if not found:
        raise InventoryError("ansible-core found no host in this inventory", where=str(path),
                             fix=f"run 'ansible-inventory -i {path} --graph' to see ansible's warnings")
    hosts = []
    for name, host_vars in found.items():
        merged = {**layers.under, **{str(key): (value, str(path)) for key, value in host_vars.items()
                                     if key not in _ANSIBLE_MAGIC}, **layers.over}
        groups = {str(group.name) for group in manager.hosts[name].get_groups()}
        hosts.append(_make_host(str(name), merged, groups))
    return _inventory(path, hosts, MappingProxyType({str(name): tuple(str(h.name) for h in group.get_hosts())
                                                    for name, group in manager.groups.items()}))
