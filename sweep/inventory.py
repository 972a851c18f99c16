"""The fleet as operators already describe it: a static Ansible inventory, read into frozen Hosts.

Formats, as ansible-core reads them (checked against ansible-core 2.19):

- YAML (``.yml``, ``.yaml``, ``.json``): groups with ``hosts`` / ``children`` / ``vars``, nested.
- INI (any other suffix; a file without one is YAML if it parses as a mapping of groups, else INI):
  ``[group]``, ``[group:children]``, ``[group:vars]``, ``gpu01 ansible_host=10.0.0.5 ansible_port=22``.
  Values, inline or in ``:vars`` sections, are typed with ``ast.literal_eval`` as ansible-core's
  parser does, whatever its docs say of ``:vars`` (``8`` is an int, ``True`` a bool, ``'08'`` the
  string 08; anything that is not a Python literal stays a string).
- Host ranges: ``gpu[01:64].dc1`` (zero padding kept), ``gpu[1:10:2]``, ``node[a:f]``;
  ``gpu01:2222`` sets ``ansible_port``.

Variables of a host, lowest precedence first (ansible-core's default ``VARIABLE_PRECEDENCE``):

1. ``all`` group vars in the inventory file;
2. other group vars in the inventory file, parent groups before children (then by
   ``ansible_group_priority``, then by name);
3. ``group_vars/all`` beside the inventory file;
4. ``group_vars/GROUP`` beside the inventory file, in the same group order;
5. host vars in the inventory file (a host defined twice keeps the later value, as in Ansible;
   when the two definitions give different ``ansible_host``, ``ansible_port`` or ``ansible_user``,
   an `InventoryWarning` names both lines);
6. ``host_vars/HOST`` beside the inventory file.

``group_vars/NAME`` is the first of ``NAME``, ``NAME.yml``, ``NAME.yaml``, ``NAME.json`` that exists;
a directory ``NAME/`` contributes its files in sorted order, later ones winning.

Connection variables become Host fields: ``ansible_host`` (or ``ansible_ssh_host``), ``ansible_port``
(or ``ansible_ssh_port``), ``ansible_user`` (or ``ansible_ssh_user``), ``ansible_private_key_file``
(or ``ansible_ssh_private_key_file``), ``ansible_python_interpreter`` (``auto*`` means ``python3``),
``ansible_ssh_common_args``. As in Ansible's ssh plugin, the ``ansible_ssh_`` spelling wins when both
are set. Variables named ``sweep_*`` are sweep's own settings (``sweep_interpreters`` is
``settings["interpreters"]``). Values are frozen: mappings are read-only, lists become tuples.

Stricter than Ansible, because a silently dropped host is a host nobody checks: an unknown key in
a YAML group, a range such as ``gpu[05:01]``, a Jinja template or a vault value in a connection
variable are errors, not warnings. Not supported by the builtin loader: inventory directories,
plugin inventories and vault-encrypted files (``loader="ansible"`` reads plugin inventories).
"""
from __future__ import annotations

import ast
import os
import re
import shlex
import string
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from sweep.errors import InventoryError, InventoryWarning, LimitError
from sweep.limit import match_hosts

SETTINGS_PREFIX = "sweep_"
_WATCHED_TWICE = ("ansible_host", "ansible_ssh_host", "ansible_port", "ansible_ssh_port", "ansible_user",
                  "ansible_ssh_user")
DEFAULT_PYTHON = "python3"
_YAML_SUFFIXES = (".yml", ".yaml", ".json")
_IMPLICIT_GROUPS = ("all", "ungrouped")


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
            named = [group for group in self.groups if group not in _IMPLICIT_GROUPS]
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
            }
            for h in self.hosts
        ]
        return {"path": str(self.path), "hosts": hosts,
                "groups": {name: list(members) for name, members in self.groups.items()}}


def load_inventory(path: str | Path, loader: str = "auto") -> Inventory:
    """Read an Ansible inventory file; ``loader`` is "auto" (= "builtin") or "ansible" (ansible-core)."""
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
        return _load_with_ansible(path)
    return _load_builtin(path)


def expand_host_range(pattern: str, where: str | None = None) -> list[str]:
    """Expand Ansible host ranges: ``gpu[01:03]`` -> gpu01, gpu02, gpu03; ``n[a:c]``; ``[1:9:2]``."""
    head, bracket, rest = pattern.partition("[")
    if not bracket:
        return [pattern]
    body, closed, tail = rest.partition("]")

    def bad(problem: str, fix: str) -> InventoryError:
        return InventoryError(f"host range '{pattern}' {problem}", where=where, fix=fix)

    bounds = body.split(":")
    if not closed or len(bounds) not in (2, 3):
        raise bad("is not [begin:end] or [begin:end:step]", "write it like gpu[01:64] or gpu[1:9:2]")
    begin, end, step_text = bounds[0] or "0", bounds[1], bounds[2] if len(bounds) == 3 else "1"
    if not step_text.isdigit() or int(step_text) == 0:
        raise bad(f"has step '{step_text}'; the step must be a whole number of 1 or more",
                  "write it like gpu[1:9:2]")
    step = int(step_text)
    if begin.isdigit() and end.isdigit():
        width = len(begin) if begin.startswith("0") and len(begin) > 1 else 0
        if width and len(end) != width:
            raise bad(f"pads '{begin}' to {width} digits but not '{end}'",
                      f"give both ends the same width: [{begin.lstrip('0').zfill(len(end))}:{end}]")
        if int(begin) > int(end):
            raise bad(f"is empty: it begins at {begin}, after its end {end}",
                      f"write the lower bound first: [{end}:{begin}]")
        values = [str(number).zfill(width) for number in range(int(begin), int(end) + 1, step)]
    elif len(begin) == len(end) == 1 and begin in string.ascii_letters and end in string.ascii_letters:
        first, last = string.ascii_letters.index(begin), string.ascii_letters.index(end)
        if first > last:
            raise bad(f"is empty: it begins at '{begin}', after its end '{end}'",
                      f"write the lower bound first: [{end}:{begin}]")
        values = list(string.ascii_letters[first:last + 1:step])
    else:
        raise bad(f"has bounds '{begin}' and '{end}'; use two numbers or two single letters",
                  "write it like gpu[01:64] or node[a:f]")
    return [name for value in values for name in expand_host_range(head + value + tail, where)]


# --- the builtin loader: parse into a group graph, then resolve vars ---------------------------


@dataclass
class _Group:
    name: str
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    vars: dict[str, tuple[Any, str]] = field(default_factory=dict)  # name -> (value, file:line)
    priority: int = 1


class _Graph:
    """What an inventory file declares, before variables are merged (ansible's InventoryData)."""

    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {name: _Group(name) for name in _IMPLICIT_GROUPS}
        self.groups["all"].children.append("ungrouped")
        self.groups["ungrouped"].parents.append("all")
        self.host_vars: dict[str, dict[str, tuple[Any, str]]] = {}
        self.warnings: list[str] = []

    def add_group(self, name: str) -> _Group:
        return self.groups.setdefault(name, _Group(name))

    def add_child(self, parent: str, child: str, where: str) -> None:
        if child in self.groups[parent].children:
            return
        if child == "all" or child == parent or child in self.ancestors(parent):
            inside = "every group is inside 'all'" if child == "all" else f"'{parent}' is already inside '{child}'"
            raise InventoryError(f"group '{child}' cannot be a child of '{parent}': {inside}, so that makes a loop",
                                 where=where, fix=f"remove '{child}' from the children of '{parent}'")
        self.groups[parent].children.append(child)
        self.groups[child].parents.append(parent)

    def add_host(self, name: str, group: str, port: int | None, where: str) -> None:
        self.host_vars.setdefault(name, {})
        if name not in self.groups[group].hosts:
            self.groups[group].hosts.append(name)
        if port is not None:
            self.host_vars[name]["ansible_port"] = (port, where)

    def set_host_var(self, host: str, key: str, value: Any, where: str) -> None:
        before = self.host_vars[host].get(key)
        if key in _WATCHED_TWICE and before is not None and before[0] != value and before[1] != where:
            self.warnings.append(
                f"{where}: host '{host}' is defined twice with different {key}: {value!r} here, "
                f"{before[0]!r} at {before[1]}; as Ansible does, sweep uses the later one; "
                "remove one of the two definitions")
        self.host_vars[host][key] = (value, where)

    def set_group_var(self, group: str, key: str, value: Any, where: str) -> None:
        if key != "ansible_group_priority":
            self.groups[group].vars[key] = (value, where)
            return
        try:
            self.groups[group].priority = int(value)
        except (TypeError, ValueError):
            raise InventoryError(f"ansible_group_priority of group '{group}' is {value!r}, not a number",
                                 where=where, fix="set it to a whole number; higher wins") from None

    def ancestors(self, group: str) -> set[str]:
        found: set[str] = set()
        stack = list(self.groups[group].parents)
        while stack:
            parent = stack.pop()
            if parent not in found:
                found.add(parent)
                stack.extend(self.groups[parent].parents)
        return found


def _load_builtin(path: Path) -> Inventory:
    text, suffix, graph = _read_text(path), path.suffix.lower(), _Graph()
    if suffix in _YAML_SUFFIXES:
        data = _yaml_load(text, path)
        if data is not None and not isinstance(data, dict):
            raise InventoryError(f"YAML inventory must be a mapping of group names, not {_kind(data)}",
                                 where=f"{path}:1", fix="start the file with 'all:' and put groups under 'children:'")
    else:  # as ansible: YAML only without a suffix, and only if it reads as YAML groups
        data = _sniff_yaml(text) if not suffix else None
    if isinstance(data, dict):
        _parse_yaml(data, path, graph)
    elif suffix not in _YAML_SUFFIXES:
        _parse_ini(text, path, graph)
    if not graph.host_vars:
        raise InventoryError("no host is defined in this inventory", where=str(path),
                             fix="add hosts under a group: a 'hosts:' mapping in YAML, a line under [group] in INI")
    return _resolve(graph, path)


def _resolve(graph: _Graph, path: Path) -> Inventory:
    groups = graph.groups
    for group in list(groups.values()):  # parentless groups hang under 'all', as in ansible
        if group.name != "all" and not group.parents:
            graph.add_child("all", group.name, str(path))
    direct: dict[str, set[str]] = {name: set() for name in graph.host_vars}
    for group in groups.values():
        for host in group.hosts:
            direct[host].add(group.name)
    for member_of in direct.values():  # 'ungrouped' holds exactly the hosts of no other group
        member_of.discard("all")
        if len(member_of) > 1:
            member_of.discard("ungrouped")
        elif not member_of:
            member_of.add("ungrouped")

    depth: dict[str, int] = {}

    def depth_of(name: str) -> int:  # longest path from 'all', ansible's Group.depth
        if name not in depth:
            depth[name] = max((depth_of(parent) + 1 for parent in groups[name].parents), default=0)
        return depth[name]

    base = path.parent
    group_files = {name: _vars_from_files(base / "group_vars", name) for name in groups}
    hosts = []
    for name, member_of in direct.items():
        every = set().union(*({group} | graph.ancestors(group) for group in member_of)) - {"all"}
        chain = sorted(every, key=lambda g: (depth_of(g), groups[g].priority, g))
        merged = dict(groups["all"].vars)
        for layer in (*(groups[g].vars for g in chain), group_files["all"],
                      *(group_files[g] for g in chain), graph.host_vars[name],
                      _vars_from_files(base / "host_vars", name)):
            merged.update(layer)
        hosts.append(_make_host(name, merged, every))
    for text in graph.warnings:
        warnings.warn(InventoryWarning(text), stacklevel=3)
    return _inventory(path, hosts, list(groups), tuple(graph.warnings))


def _inventory(path: Path, hosts: list[Host], group_names: list[str], notes: tuple[str, ...] = ()) -> Inventory:
    def members(group: str) -> tuple[str, ...]:
        if group == "all":
            return tuple(host.name for host in hosts)
        if group == "ungrouped":
            return tuple(host.name for host in hosts if not host.groups)
        return tuple(host.name for host in hosts if group in host.groups)

    return Inventory(path=path, hosts=tuple(hosts),
                     groups=MappingProxyType({group: members(group) for group in group_names}), warnings=notes)


def _make_host(name: str, merged: Mapping[str, tuple[Any, str]], groups: set[str]) -> Host:
    """Build a Host from merged vars, each var carried with the file:line it came from."""

    def connection(*keys: str) -> tuple[str, str | None, str]:
        """(variable, its value as text or None, file:line); the later spelling wins, as in ansible."""
        present = [key for key in keys if merged.get(key, (None,))[0] is not None]
        if not present:
            return keys[0], None, ""
        key = present[-1]
        value, where = merged[key]
        if isinstance(value, _Vaulted):
            raise InventoryError(f"{name}: {key} is vault-encrypted and sweep cannot decrypt it",
                                 where=where, fix=f"set {key} in plain text for this host")
        if isinstance(value, str) and ("{{" in value or "{%" in value):
            raise InventoryError(f"{name}: {key} is a Jinja template ({value!r}); sweep does not render templates",
                                 where=where, fix=f"write the value of {key} out in the inventory")
        if isinstance(value, (bool, Mapping, list, tuple)):
            raise InventoryError(f"{name}: {key} is {_kind(value)}, not a single value", where=where,
                                 fix=f"set {key} to a plain value")
        return key, _freeze(value) if isinstance(value, str) else str(value), where

    port_key, port_text, port_where = connection("ansible_port", "ansible_ssh_port")
    port = None
    if port_text is not None:
        if not port_text.strip().isdigit() or not 0 < int(port_text) < 65536:
            raise InventoryError(f"{name}: {port_key} is {merged[port_key][0]!r}, not a port number",
                                 where=port_where, fix="set it to a whole number from 1 to 65535")
        port = int(port_text)
    _, common_args, common_where = connection("ansible_ssh_common_args")
    key_file = connection("ansible_private_key_file", "ansible_ssh_private_key_file")[1]
    python = connection("ansible_python_interpreter")[1] or DEFAULT_PYTHON
    frozen = _freeze({key: value for key, (value, _) in merged.items()})
    return Host(
        name=name,
        address=connection("ansible_host", "ansible_ssh_host")[1] or name,
        port=port,
        user=connection("ansible_user", "ansible_ssh_user")[1],
        key_file=os.path.expanduser(key_file) if key_file else None,
        python=DEFAULT_PYTHON if python.startswith("auto") else python,
        ssh_common_args=common_args,
        proxy_jump=_proxy_jump(common_args, name, common_where),
        groups=tuple(sorted(set(groups) - set(_IMPLICIT_GROUPS))),
        vars=frozen,
        settings=MappingProxyType({key[len(SETTINGS_PREFIX):]: value for key, value in frozen.items()
                                   if key.startswith(SETTINGS_PREFIX) and len(key) > len(SETTINGS_PREFIX)}),
    )


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


# --- YAML ---------------------------------------------------------------------------------------


class _Mapping(dict):
    """A YAML mapping that remembers the line of each of its keys."""

    key_lines: dict[Any, int]


class _Vaulted(str):
    """A ``!vault`` value: ciphertext sweep keeps but cannot read."""


class _LineLoader(yaml.SafeLoader):
    """SafeLoader that records key lines and accepts ansible's ``!unsafe`` / ``!vault`` tags."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode):
    data = _Mapping()
    yield data
    data.update(loader.construct_mapping(node))  # flattens '<<' merges into node.value first
    data.key_lines = {loader.construct_object(key): key.start_mark.line + 1 for key, _ in node.value}


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor("!unsafe", lambda loader, node: str(loader.construct_scalar(node)))
_LineLoader.add_constructor("!vault", lambda loader, node: _Vaulted(loader.construct_scalar(node)))


def _yaml_load(text: str, path: Path) -> Any:
    try:
        return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as err:
        # an unclosed quote or bracket is reported at the end of the file; its start is more useful
        at_end = any(end in (err.problem or "") for end in ("end of stream", "<stream end>")) and err.context_mark
        mark = err.context_mark if at_end else err.problem_mark or err.context_mark
        context = f"{err.context}: " if err.context else ""
        fix = ("sweep reads plain YAML and ansible's !unsafe and !vault tags" if "tag" in (err.problem or "")
               else "fix the YAML there (indentation, a missing ':' or an unclosed quote)")
        raise InventoryError(f"not valid YAML: {context}{err.problem}",
                             where=f"{path}:{mark.line + 1}" if mark else str(path), fix=fix) from None
    except yaml.YAMLError as err:
        raise InventoryError(f"not valid YAML: {err}", where=str(path), fix="fix the YAML syntax") from None


def _sniff_yaml(text: str) -> Any:
    """A file without a YAML suffix is YAML only if it parses as a mapping of groups."""
    try:
        data = yaml.load(text, Loader=_LineLoader)  # noqa: S506
    except yaml.YAMLError:
        return None
    if isinstance(data, dict) and all(isinstance(v, (dict, type(None))) for v in data.values()):
        return data
    return None


def _parse_yaml(data: _Mapping, path: Path, graph: _Graph) -> None:
    if isinstance(data.get("plugin"), str):
        raise InventoryError(f"is an inventory plugin configuration (plugin: {data['plugin']}), not a host list",
                             where=f"{path}:{data.key_lines['plugin']}", fix="use loader='ansible' for plugin inventories")
    for name, body in data.items():
        _yaml_group(name, body, f"{path}:{data.key_lines[name]}", path, graph)


def _yaml_group(name: Any, body: Any, where: str, path: Path, graph: _Graph) -> str:
    if not isinstance(name, str):
        raise InventoryError(f"group name {name!r} is not a string", where=where, fix=f"quote it: '{name}':")
    graph.add_group(name)
    if body is None:
        return name
    if not isinstance(body, dict):
        raise InventoryError(f"group '{name}' must be a mapping with hosts, children or vars, not {_kind(body)}",
                             where=where, fix=f"indent 'hosts:', 'children:' or 'vars:' under '{name}:'")
    for key, section in body.items():
        here = f"{path}:{body.key_lines[key]}"
        if key not in ("hosts", "children", "vars"):
            raise InventoryError(f"group '{name}' has an unknown key '{key}'", where=here,
                                 fix="a group holds only 'hosts:', 'children:' and 'vars:'")
        if isinstance(section, str):  # ansible reads "hosts: gpu01" as one host
            section = _Mapping({section: None})
            section.key_lines = dict.fromkeys(section, body.key_lines[key])
        if section is None:
            continue
        if not isinstance(section, dict):
            example = {"hosts": "gpu01:", "children": "h200_rack1:", "vars": "ansible_user: ops"}[key]
            raise InventoryError(f"'{key}' of group '{name}' must be a mapping, not {_kind(section)}",
                                 where=here, fix=f"write one '{example}' per line, without '- '")
        for item, value in section.items():
            line = f"{path}:{section.key_lines[item]}"
            if key == "vars":
                graph.set_group_var(name, str(item), value, line)
            elif key == "children":
                graph.add_child(name, _yaml_group(item, value, line, path, graph), line)
            else:
                if not isinstance(item, str):
                    raise InventoryError(f"host name {item!r} in group '{name}' is not a string",
                                         where=line, fix=f"quote it: '{item}':")
                if value is not None and not isinstance(value, dict):
                    raise InventoryError(f"host '{item}' in group '{name}' must map to its vars, not {_kind(value)}",
                                         where=line, fix="indent 'name: value' lines under the host, or leave it empty")
                names, port = _host_pattern(item, line)
                for host in names:
                    graph.add_host(host, name, port, line)
                    for var, var_value in (value or {}).items():
                        graph.set_host_var(host, str(var), var_value, f"{path}:{value.key_lines[var]}")
    return name


# --- INI ----------------------------------------------------------------------------------------

_INI_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$")
_INI_CHILD = re.compile(r"^([^:\]\s]+)\s*(?:#.*)?$")
_HOST_PORT = (re.compile(r"^\[(.+)\]:([0-9]+)$"), re.compile(r"^((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)$"))


def _parse_ini(text: str, path: Path, graph: _Graph) -> None:
    """Ansible's INI inventory grammar (ansible/plugins/inventory/ini.py), with its line numbers."""
    pending: dict[str, tuple[str, str, list[str]]] = {}  # undeclared group -> (state, where, parents)
    group, state = "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), start=1):
        line, where = raw.strip(), f"{path}:{number}"
        if not line or line[0] in "#;":
            continue
        section = _INI_SECTION.match(line)
        if section:
            group, state = section.group(1), section.group(2) or "hosts"
            if state not in ("hosts", "children", "vars"):
                raise InventoryError(f"section [{group}:{state}] has an unknown type '{state}'", where=where,
                                     fix=f"use [{group}], [{group}:children] or [{group}:vars]")
            if group not in graph.groups:
                if state == "vars" and group not in pending:
                    pending[group] = ("vars", where, [])
                graph.add_group(group)
            if group in pending and state != "vars":
                for parent in pending.pop(group)[2]:
                    graph.add_child(parent, group, where)
            continue
        if line.startswith("[") and (line.endswith("]") or "]" not in line):
            raise InventoryError(f"invalid section header {line!r}", where=where,
                                 fix="write [group], [group:children] or [group:vars], with no spaces inside")
        if state == "hosts":
            _ini_host_line(line, group, where, graph)
        elif state == "vars":
            key, equals, value = line.partition("=")
            if not equals:
                raise InventoryError(f"expected key=value in [{group}:vars], got {line!r}", where=where,
                                     fix="write one variable per line as name=value")
            graph.set_group_var(group, key.strip(), _ini_value(value.strip()), where)
        else:
            child = _INI_CHILD.match(line)
            if not child:
                raise InventoryError(f"expected a group name in [{group}:children], got {line!r}", where=where,
                                     fix="list one child group name per line")
            name = child.group(1)
            if name in graph.groups:
                graph.add_child(group, name, where)
            else:
                pending.setdefault(name, ("children", where, []))[2].append(group)
    for name, (state, where, parents) in pending.items():
        if state == "vars":
            raise InventoryError(f"[{name}:vars] is for group '{name}', which is never defined", where=where,
                                 fix=f"add a [{name}] section (it may be empty) or fix the group name")
        raise InventoryError(f"[{parents[-1]}:children] lists group '{name}', which is never defined",
                             where=where, fix=f"add a [{name}] section (it may be empty) or remove '{name}'")


def _ini_host_line(line: str, group: str, where: str, graph: _Graph) -> None:
    try:
        words = shlex.split(line, comments=True)
    except ValueError as err:
        raise InventoryError(f"cannot read host line {line!r} ({err})", where=where,
                             fix="close the quote; quote values with spaces as key='a b'") from None
    if not words:
        return
    pattern = words[0]
    if pattern.endswith(":"):
        raise InventoryError(f"host pattern '{pattern}' ends in ':', which is reserved for a port (gpu01:2222)",
                             where=where, fix="remove the ':'; if this file is YAML, name it .yml")
    if pattern == "---":
        raise InventoryError("'---' starts a YAML document, not an INI host", where=where,
                             fix="name the file .yml so it is read as YAML")
    names, port = _host_pattern(pattern, where)
    assignments = {}
    for word in words[1:]:
        key, equals, value = word.partition("=")
        if not equals:
            raise InventoryError(f"expected key=value after host '{pattern}', got {word!r}", where=where,
                                 fix="write host variables as name=value; quote values with spaces: key='a b'")
        assignments[key] = _ini_value(value)
    for host in names:
        graph.add_host(host, group, port, where)
        for key, value in assignments.items():
            graph.set_host_var(host, key, value, where)


def _ini_value(text: str) -> Any:
    """Type an INI value as ansible-core does: a Python literal if it is one, else the string."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return _ini_coerce(value)


def _ini_coerce(value: Any) -> Any:
    if isinstance(value, (list, tuple, set)):
        return [_ini_coerce(item) for item in value]
    if isinstance(value, dict):
        return {key: _ini_coerce(item) for key, item in value.items()}
    if value is ...:
        return "..."
    if isinstance(value, complex):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return value


# --- shared helpers -----------------------------------------------------------------------------


def _host_pattern(pattern: str, where: str) -> tuple[list[str], int | None]:
    """Split ``gpu[01:04]:2222`` into its expanded host names and port."""
    match = _HOST_PORT[0].match(pattern) or _HOST_PORT[1].match(pattern)
    if match:
        pattern, port = match.group(1), int(match.group(2))
    else:
        port = None
    return expand_host_range(pattern, where), port


def _vars_from_files(directory: Path, name: str) -> dict[str, tuple[Any, str]]:
    """Merged vars of ``group_vars/NAME`` or ``host_vars/NAME`` files (ansible's find_vars_files)."""
    if not directory.is_dir():
        return {}
    files: list[Path] = []
    for candidate in (directory / name, *(directory / f"{name}{suffix}" for suffix in _YAML_SUFFIXES)):
        if candidate.exists():
            files = _files_below(candidate) if candidate.is_dir() else [candidate]
            break
    merged: dict[str, tuple[Any, str]] = {}
    for file in files:
        data = _yaml_load(_read_text(file), file)
        if data is None:
            continue
        if not isinstance(data, dict):
            raise InventoryError(f"variables file holds {_kind(data)}, not a mapping of names to values",
                                 where=f"{file}:1", fix="write one 'name: value' per line")
        merged.update({str(key): (value, f"{file}:{data.key_lines[key]}") for key, value in data.items()})
    return merged


def _files_below(directory: Path) -> list[Path]:
    found: list[Path] = []
    for entry in sorted(os.listdir(directory)):
        child, suffix = directory / entry, os.path.splitext(entry)[1]
        if entry.startswith(".") or entry.endswith("~"):
            continue
        if child.is_dir() and not suffix:
            found.extend(_files_below(child))
        elif child.is_file() and (not suffix or suffix in _YAML_SUFFIXES):
            found.append(child)
    return found


def _read_text(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InventoryError("is not UTF-8 text", where=str(path), fix="save the file as UTF-8") from None
    except OSError as err:
        raise InventoryError(f"cannot be read ({err.strerror})", where=str(path),
                             fix="check the path and its permissions") from None
    if text.startswith("$ANSIBLE_VAULT"):
        raise InventoryError("is vault-encrypted and sweep cannot decrypt it", where=str(path),
                             fix="keep connection details in a plain file; encrypt single values with !vault")
    return text


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {value!r}"
    return f"a {type(value).__name__}"


def _freeze(value: Any) -> Any:
    """Deep read-only copy with plain types (drops ansible-core's tagged str/int subclasses)."""
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


def _load_with_ansible(path: Path) -> Inventory:
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
        merged = {str(key): (value, str(path)) for key, value in host_vars.items() if key not in _ANSIBLE_MAGIC}
        groups = {str(group.name) for group in manager.hosts[name].get_groups()}
        hosts.append(_make_host(str(name), merged, groups))
    return _inventory(path, hosts, [str(name) for name in manager.groups])
