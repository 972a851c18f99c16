"""The YAML and INI inventory formats, parsed into a group graph as ansible-core reads them.

Checked against ansible-core 2.19:

- YAML (``.yml``, ``.yaml``, ``.json``): groups with ``hosts`` / ``children`` / ``vars``, nested.
- INI (any other suffix; a file without one is YAML if it parses as a mapping of groups, else INI):
  ``[group]``, ``[group:children]``, ``[group:vars]``, ``gpu01 ansible_host=10.0.0.5 ansible_port=22``.
  Values, inline or in ``:vars`` sections, are typed with ``ast.literal_eval`` as ansible-core's
  parser does, whatever its docs say of ``:vars`` (``8`` is an int, ``True`` a bool, ``'08'`` the
  string 08; anything that is not a Python literal stays a string).
- Host ranges: ``gpu[01:64].dc1`` (zero padding kept), ``gpu[1:10:2]``, ``node[a:f]``;
  ``gpu01:2222`` sets ``ansible_port``.

Every value is kept with the file:line it came from; `sweep.inventory.model` merges them into Hosts.

Bounded, because an inventory can be a bomb (`InventoryLimits`): YAML aliases may add at most
``yaml_values`` values to a file once expanded (the billion laughs: 9 levels of 10 aliases are
10**9 values) and nest at most ``MAX_YAML_DEPTH`` deep; one host range may name at most
``range_hosts`` hosts (``h[0000000:9999999]``). Both are checked before anything is expanded. A file
may hold at most ``file_bytes`` (64 MiB) and must be a regular file (`sweep.inventory.files`); an INI
line at most ``ini_line`` (64 KiB) characters.
An empty host name is refused: it cannot be reached, and no record can be named after it.
"""
from __future__ import annotations

import ast
import re
import shlex
import string
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sweep.errors import InventoryError

_WATCHED_TWICE = ("ansible_host", "ansible_ssh_host", "ansible_port", "ansible_ssh_port", "ansible_user",
                  "ansible_ssh_user")
IMPLICIT_GROUPS = ("all", "ungrouped")
MAX_YAML_DEPTH = 100


@dataclass(frozen=True)
class InventoryLimits:
    """How far an inventory may expand: values added by YAML aliases per file, hosts per range, bytes per
    file and per INI line."""

    yaml_values: int = 1_000_000  # --max-yaml-values
    range_hosts: int = 100_000  # --max-range-hosts
    file_bytes: int = 64 * 2**20  # the inventory file, each group_vars / host_vars file
    ini_line: int = 64 * 2**10  # one INI line (shlex.split is quadratic in a word's length)


# --- host ranges --------------------------------------------------------------------------------


def expand_host_range(pattern: str, where: str | None = None, max_hosts: int | None = None) -> list[str]:
    """Expand Ansible host ranges: ``gpu[01:03]`` -> gpu01, gpu02, gpu03; ``n[a:c]``; ``[1:9:2]``.

    With `max_hosts`, a pattern that would name more hosts is refused before it is expanded.
    """
    if max_hosts is not None:
        size = host_range_size(pattern)
        if size > max_hosts:
            raise InventoryError(f"host range '{pattern}' makes {size:,} hosts, more than the limit of {max_hosts:,}",
                                 where=where, fix="split the range, or raise the limit with --max-range-hosts")
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



def host_range_size(pattern: str) -> int:
    """How many names `pattern` expands to, counted without expanding (1 for what is not a valid range)."""
    size, rest = 1, pattern
    while "[" in rest:
        _, _, rest = rest.partition("[")
        body, closed, rest = rest.partition("]")
        bounds = body.split(":")
        if not closed or len(bounds) not in (2, 3):
            return size
        begin, end, step = bounds[0] or "0", bounds[1], bounds[2] if len(bounds) == 3 else "1"
        if not step.isdigit() or int(step) == 0:
            return size
        if begin.isdigit() and end.isdigit():
            span = int(end) - int(begin)
        elif len(begin) == len(end) == 1 and begin in string.ascii_letters and end in string.ascii_letters:
            span = string.ascii_letters.index(end) - string.ascii_letters.index(begin)
        else:
            return size
        size *= max(0, span // int(step) + 1)
    return size


_HOST_PORT = (re.compile(r"^\[(.+)\]:([0-9]+)$"), re.compile(r"^((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)$"))


def _host_pattern(pattern: str, where: str, max_hosts: int | None = None) -> tuple[list[str], int | None]:
    """Split ``gpu[01:04]:2222`` into its expanded host names and port."""
    match = _HOST_PORT[0].match(pattern) or _HOST_PORT[1].match(pattern)
    if match:
        pattern, port = match.group(1), int(match.group(2))
    else:
        port = None
    return expand_host_range(pattern, where, max_hosts), port


# --- the group graph ----------------------------------------------------------------------------


@dataclass
class _Group:
    name: str
    hosts: dict[str, None] = field(default_factory=dict)  # an ordered set: membership tests stay O(1)
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    vars: dict[str, tuple[Any, str]] = field(default_factory=dict)  # name -> (value, file:line)
    priority: int = 1


class GroupGraph:
    """What an inventory file declares, before variables are merged (ansible's InventoryData)."""

    def __init__(self, limits: InventoryLimits = InventoryLimits()) -> None:
        self.limits = limits
        self.groups: dict[str, _Group] = {name: _Group(name) for name in IMPLICIT_GROUPS}
        self.groups["all"].children.append("ungrouped")
        self.groups["ungrouped"].parents.append("all")
        self.host_vars: dict[str, dict[str, tuple[Any, str]]] = {}
        self.first_listing: dict[str, tuple[int | None, str]] = {}  # host -> (port, file:line)
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
        """List `name` in `group`; as in ansible's InventoryData.add_host, only the host's first listing
        sets its port (``gpu01:2222``): a port on a later listing is ignored, with a warning."""
        if not name.strip():
            raise InventoryError(f"empty host name in group '{group}'", where=where,
                                 fix="give the host a name (its address goes in ansible_host)")
        if name not in self.host_vars:
            self.host_vars[name] = {}
            self.first_listing[name] = (port, where)
            if port is not None:
                self.host_vars[name]["ansible_port"] = (port, where)
        elif port is not None and port != self.first_listing[name][0]:
            first_port, first_where = self.first_listing[name]
            self.warnings.append(
                f"{where}: host '{name}' is listed again with port {port}; as Ansible does, sweep keeps its "
                f"first listing's port ({first_port if first_port is not None else 'none'}, at {first_where}); "
                "set ansible_port on the host to change it")
        self.groups[group].hosts[name] = None

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

    def reconcile(self, where: str) -> None:
        """ansible's InventoryData.reconcile_inventory: parentless groups go under 'all'; 'ungrouped'
        holds exactly the hosts that are in no other group, appended in host order."""
        for group in list(self.groups.values()):
            if group.name != "all" and not group.parents:
                self.add_child("all", group.name, where)
        ungrouped = self.groups["ungrouped"].hosts
        listed_in: dict[str, set[str]] = {name: set() for name in self.host_vars}
        for group in self.groups.values():
            for host in group.hosts:
                listed_in[host].add(group.name)
        for host, direct in listed_in.items():
            if direct - {"all", "ungrouped"}:
                ungrouped.pop(host, None)
            else:
                ungrouped[host] = None

    def members(self, group: str) -> tuple[str, ...]:
        """The hosts of `group` in the order of ansible's Group.get_hosts: the group's own, then each
        descendant's, the descendants breadth first (ansible's _walk_relationship). Below the first
        level ansible iterates a set of groups; sweep takes each level in declaration order."""
        ordered, seen = [group, *self.groups[group].children], {group}
        frontier = list(dict.fromkeys(ordered))
        while frontier:
            seen.update(frontier)
            following = [child for name in frontier for child in self.groups[name].children if child not in seen]
            ordered += following
            frontier = list(dict.fromkeys(following))
        return tuple(dict.fromkeys(host for name in ordered for host in self.groups[name].hosts))

    def ancestors(self, group: str) -> set[str]:
        found: set[str] = set()
        stack = list(self.groups[group].parents)
        while stack:
            parent = stack.pop()
            if parent not in found:
                found.add(parent)
                stack.extend(self.groups[parent].parents)
        return found


class GroupMembers(Mapping):
    """Every group of a GroupGraph -> its hosts in ansible's Group.get_hosts order (`GroupGraph.members`),
    each group's computed when first asked for: loading stays linear however deep the groups nest."""

    def __init__(self, graph: GroupGraph) -> None:
        self._graph, self._found = graph, {}

    def __getitem__(self, group: str) -> tuple[str, ...]:
        if group not in self._found:
            if group not in self._graph.groups:
                raise KeyError(group)
            self._found[group] = self._graph.members(group)
        return self._found[group]

    def __iter__(self):
        return iter(self._graph.groups)

    def __len__(self) -> int:
        return len(self._graph.groups)


# --- YAML ---------------------------------------------------------------------------------------


class LineMapping(dict):
    """A YAML mapping that remembers the line of each of its keys."""

    key_lines: dict[Any, int]


class Vaulted(str):
    """A ``!vault`` value: ciphertext sweep keeps but cannot read."""


# ansible-core parses YAML with libyaml where PyYAML has it (CSafeLoader), and libyaml refuses some
# documents the pure-Python parser accepts (``{p01:, p02:}``): the same parser, the same answer.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LineLoader(_SAFE_LOADER):  # type: ignore[valid-type,misc]
    """A safe loader (libyaml's where PyYAML has it, as ansible's) whose mappings are LineMappings
    (inventories here, expectations files in sweep.audit.expect).

    With `refuse_duplicates`, a key written twice in one mapping calls `duplicate_key` (which raises);
    otherwise the later one wins, as in YAML and Ansible.
    """

    refuse_duplicates = False

    def duplicate_key(self, key: Any, first_line: int, node: yaml.Node) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


def _construct_mapping(loader: LineLoader, node: yaml.MappingNode):
    data = LineMapping()
    yield data
    if loader.refuse_duplicates:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:  # explicit keys only: a key may override one merged in with '<<'
            if key_node.tag != "tag:yaml.org,2002:merge":
                key = loader.construct_object(key_node, deep=True)
                if key in seen:
                    loader.duplicate_key(key, seen[key], key_node)
                seen[key] = key_node.start_mark.line + 1
    data.update(loader.construct_mapping(node))  # flattens '<<' merges into node.value first
    data.key_lines = {loader.construct_object(key): key.start_mark.line + 1 for key, _ in node.value}


LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class _LineLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml where present, as Ansible: ~10x faster
    """The inventory's loader: LineMappings, and ansible's ``!unsafe`` / ``!vault`` tags."""

    refuse_duplicates = False


class _PureLineLoader(LineLoader):
    """The same in pure Python: its error messages are the ones users see (and tests pin)."""


for _loader in (_LineLoader, _PureLineLoader):
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    _loader.add_constructor("!unsafe", lambda loader, node: str(loader.construct_scalar(node)))
    _loader.add_constructor("!vault", lambda loader, node: Vaulted(loader.construct_scalar(node)))


def yaml_load(text: str, path: Path, max_values: int | None = InventoryLimits.yaml_values) -> Any:
    """The YAML document in `text`, its aliases bounded (`bounded_expansion`); InventoryError says why not."""
    try:
        return _load(text, _LineLoader, path, max_values)
    except yaml.YAMLError:
        pass
    try:  # the same text again, for the pure-Python parser's message
        return _load(text, _PureLineLoader, path, max_values)
    except yaml.MarkedYAMLError as err:
        # an unclosed quote or bracket is reported at the end of the file; its start is more useful
        at_end = err.context_mark and (any(end in (err.problem or "") for end in ("end of stream", "<stream end>"))
                                       or (err.problem_mark and not text[err.problem_mark.index:].strip()))
        mark = err.context_mark if at_end else err.problem_mark or err.context_mark
        context = f"{err.context}: " if err.context else ""
        fix = ("sweep reads plain YAML and ansible's !unsafe and !vault tags" if "tag" in (err.problem or "")
               else "fix the YAML there (indentation, a missing ':' or an unclosed quote)")
        raise InventoryError(f"not valid YAML: {context}{err.problem}",
                             where=f"{path}:{mark.line + 1}" if mark else str(path), fix=fix) from None
    except yaml.YAMLError as err:
        raise InventoryError(f"not valid YAML: {err}", where=str(path), fix="fix the YAML syntax") from None


def _load(text: str, loader_class, path: Path | None, max_values: int | None) -> Any:
    shallow(text, path)  # before composing: libyaml's composer recurses in C, and overflows its stack
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if "&" in text:  # no anchor, no alias: nothing to expand
            bounded_expansion(node, path, max_values)
        return loader.construct_document(node)
    finally:
        loader.dispose()


_FLOW = re.compile(r"[\[\]{}]")
_DEEP_INDENT = re.compile(r"^ {%d,}\S" % (4 * MAX_YAML_DEPTH), re.M)


def shallow(text: str, path: Path | None) -> None:
    """Refuse YAML that nests deeper than MAX_YAML_DEPTH (flow brackets, or block indentation) in one
    linear scan: a bracket inside a quoted value can only make the count err towards refusing."""
    depth = 0
    for match in _FLOW.finditer(text):
        if match.group() in "[{":
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise InventoryError(f"YAML nests deeper than {MAX_YAML_DEPTH} levels",
                                     where=f"{path}:{text.count(chr(10), 0, match.start()) + 1}",
                                     fix="flatten the values there")
        elif depth:
            depth -= 1
    deep = _DEEP_INDENT.search(text)
    if deep:
        raise InventoryError(f"YAML nests deeper than {MAX_YAML_DEPTH} levels (a line indented "
                             f"{4 * MAX_YAML_DEPTH} spaces or more)",
                             where=f"{path}:{text.count(chr(10), 0, deep.start()) + 1}", fix="flatten the values there")


def bounded_expansion(root: yaml.Node, path: Path | None, max_values: int | None) -> None:
    """Refuse a YAML document whose aliases expand it by more than `max_values` values, that nests
    deeper than MAX_YAML_DEPTH, or whose alias refers to a value holding it; linear in its nodes."""
    sizes: dict[int, int] = {}  # node -> values it stands for once its aliases are expanded
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        children = _children(node)
        if finished:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            continue
        if key in sizes:
            continue
        where = f"{path}:{node.start_mark.line + 1}"
        if key in on_path:
            raise InventoryError("a YAML alias refers to a value that holds it (a loop)", where=where,
                                 fix="remove the alias, or write the value out")
        if len(on_path) >= MAX_YAML_DEPTH:
            raise InventoryError(f"YAML nests deeper than {MAX_YAML_DEPTH} levels", where=where,
                                 fix="flatten the values there")
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise InventoryError("a YAML alias refers to a value that holds it (a loop)",
                                     where=f"{path}:{child.start_mark.line + 1}", fix="remove the alias, or write the value out")
            if id(child) not in sizes:
                stack.append((child, False))
    added = sizes[id(root)] - len(sizes)
    if max_values is not None and added > max_values:
        raise InventoryError(f"YAML aliases expand this file by more than {max_values:,} values (an alias bomb?)",
                             where=f"{path}:{root.start_mark.line + 1}",
                             fix="write the values out, or raise the limit with --max-yaml-values")


def _children(node: yaml.Node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return node.value
    return []


def sniff_yaml(text: str, max_values: int | None = InventoryLimits.yaml_values, path: Path | None = None) -> Any:
    """A file without a YAML suffix is YAML only if it parses as a mapping of groups."""
    try:
        data = _load(text, _LineLoader, path, max_values)
    except yaml.YAMLError:
        return None
    if isinstance(data, dict) and all(isinstance(v, (dict, type(None))) for v in data.values()):
        return data
    return None


def parse_yaml(data: LineMapping, path: Path, graph: GroupGraph) -> None:
    if isinstance(data.get("plugin"), str):
        raise InventoryError(f"is an inventory plugin configuration (plugin: {data['plugin']}), not a host list",
                             where=f"{path}:{data.key_lines['plugin']}", fix="use loader='ansible' for plugin inventories")
    for name, body in data.items():
        _yaml_group(name, body, f"{path}:{data.key_lines[name]}", path, graph)


def _yaml_group(name: Any, body: Any, where: str, path: Path, graph: GroupGraph) -> str:
    if not isinstance(name, str):
        raise InventoryError(f"group name {name!r} is not a string", where=where, fix=f"quote it: '{name}':")
    graph.add_group(name)
    if body is None:
        return name
    if not isinstance(body, dict):
        raise InventoryError(f"group '{name}' must be a mapping with hosts, children or vars, not {value_kind(body)}",
                             where=where, fix=f"indent 'hosts:', 'children:' or 'vars:' under '{name}:'")
    for key, section in body.items():
        here = f"{path}:{body.key_lines[key]}"
        if key not in ("hosts", "children", "vars"):
            raise InventoryError(f"group '{name}' has an unknown key '{key}'", where=here,
                                 fix="a group holds only 'hosts:', 'children:' and 'vars:'")
        if isinstance(section, str):  # ansible reads "hosts: gpu01" as one host
            section = LineMapping({section: None})
            section.key_lines = dict.fromkeys(section, body.key_lines[key])
        if section is None:
            continue
        if not isinstance(section, dict):
            example = {"hosts": "gpu01:", "children": "h200_rack1:", "vars": "ansible_user: ops"}[key]
            raise InventoryError(f"'{key}' of group '{name}' must be a mapping, not {value_kind(section)}",
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
                    raise InventoryError(f"host '{item}' in group '{name}' must map to its vars, not {value_kind(value)}",
                                         where=line, fix="indent 'name: value' lines under the host, or leave it empty")
                names, port = _host_pattern(item, line, graph.limits.range_hosts)
                for host in names:
                    graph.add_host(host, name, port, line)
                    for var, var_value in (value or {}).items():
                        graph.set_host_var(host, str(var), var_value, f"{path}:{value.key_lines[var]}")
    return name


# --- INI ----------------------------------------------------------------------------------------

_INI_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$")
_INI_CHILD = re.compile(r"^([^:\]\s]+)\s*(?:#.*)?$")


def parse_ini(text: str, path: Path, graph: GroupGraph) -> None:
    """Ansible's INI inventory grammar (ansible/plugins/inventory/ini.py), with its line numbers."""
    pending: dict[str, tuple[str, str, list[str]]] = {}  # undeclared group -> (state, where, parents)
    group, state = "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), start=1):
        line, where = raw.strip(), f"{path}:{number}"
        if len(raw) > graph.limits.ini_line:
            raise InventoryError(f"INI line is {len(raw):,} characters long, more than the limit of "
                                 f"{graph.limits.ini_line:,}", where=where,
                                 fix="shorten it: move long values to group_vars/ or host_vars/ files (YAML)")
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


def _ini_host_line(line: str, group: str, where: str, graph: GroupGraph) -> None:
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
    names, port = _host_pattern(pattern, where, graph.limits.range_hosts)
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


def value_kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {value!r}"
    return f"a {type(value).__name__}"
