"""The YAML and INI inventory formats, parsed into a `GroupGraph` as ansible-core reads them.

Checked against ansible-core 2.19:

- YAML (``.yml``, ``.yaml``, ``.json``): groups with ``hosts`` / ``children`` / ``vars``, nested.
- INI (any other suffix; a file without one is YAML if it parses as a mapping of groups, else INI):
  ``[group]``, ``[group:children]``, ``[group:vars]``,
  ``gpu01 ansible_host=10.0.0.5 ansible_port=22``. Values, inline or in ``:vars`` sections, are
  typed with ``ast.literal_eval`` as ansible-core's parser does, whatever its docs say of
  ``:vars`` (``8`` is an int, ``True`` a bool, ``'08'`` the string 08; anything that is not a
  Python literal stays a string).
- Host ranges (`sweep.inventory.ranges`): ``gpu[01:64].dc1``, ``gpu[1:10:2]``, ``node[a:f]``;
  ``gpu01:2222`` sets ``ansible_port``.

Every value is kept with the file:line it came from; `sweep.inventory.model` merges them into Hosts.
The YAML loader and its bounds are `sweep.inventory.yaml_lines`; the bounds on hosts, ranges and
group nesting are `sweep.inventory.groups.InventoryLimits`. An INI line may hold at most
``ini_line`` (64 KiB) characters. An empty host name is refused: it cannot be reached, and no record
can be named after it.
"""

from __future__ import annotations

import ast
import re
import shlex
import warnings
from pathlib import Path
from typing import Any

import yaml

from sweep.errors import InventoryError

# re-exported (sweep.audit.expect reads LineLoader here)
from sweep.inventory.groups import (  # noqa: F401
    IMPLICIT_GROUPS,
    GroupGraph,
    GroupMembers,
    InventoryLimits,
)
from sweep.inventory.ranges import expand_host_range, host_pattern, host_range_size  # noqa: F401
from sweep.inventory.yaml_lines import (  # noqa: F401
    MAX_YAML_DEPTH,
    LineLoader,
    LineMapping,
    Vaulted,
    load_yaml_node,
    value_kind,
    yaml_load,
)


def sniff_yaml(
    text: str, max_values: int | None = InventoryLimits.yaml_values, path: Path | None = None
) -> Any:
    """A file without a YAML suffix is YAML only if it parses as a mapping of groups."""
    try:
        data = load_yaml_node(text, path, max_values)
    except yaml.YAMLError:
        return None
    if isinstance(data, dict) and all(isinstance(v, (dict, type(None))) for v in data.values()):
        return data
    return None


def parse_yaml(data: LineMapping, path: Path, graph: GroupGraph) -> None:
    if isinstance(data.get("plugin"), str):
        raise InventoryError(
            f"is an inventory plugin configuration (plugin: {data['plugin']}), not a host list",
            where=f"{path}:{data.key_lines['plugin']}",
            fix="use loader='ansible' for plugin inventories",
        )
    for name, body in data.items():
        _yaml_group(name, body, f"{path}:{data.key_lines[name]}", path, graph)


def _yaml_group(name: Any, body: Any, where: str, path: Path, graph: GroupGraph) -> str:
    if not isinstance(name, str):
        raise InventoryError(
            f"group name {name!r} is not a string", where=where, fix=f"quote it: '{name}':"
        )
    graph.add_group(name)
    if body is None:
        return name
    if not isinstance(body, dict):
        raise InventoryError(
            f"group '{name}' must be a mapping with hosts, children or vars, not "
            f"{value_kind(body)}",
            where=where,
            fix=f"indent 'hosts:', 'children:' or 'vars:' under '{name}:'",
        )
    for key, section in body.items():
        here = f"{path}:{body.key_lines[key]}"
        if key not in ("hosts", "children", "vars"):
            raise InventoryError(
                f"group '{name}' has an unknown key '{key}'",
                where=here,
                fix="a group holds only 'hosts:', 'children:' and 'vars:'",
            )
        if isinstance(section, str):  # ansible reads "hosts: gpu01" as one host
            section = LineMapping({section: None})
            section.key_lines = dict.fromkeys(section, body.key_lines[key])
        if section is None:
            continue
        if not isinstance(section, dict):
            raise InventoryError(
                f"'{key}' of group '{name}' must be a mapping, not {value_kind(section)}",
                where=here,
                fix=f"write one '{_SECTION_EXAMPLES[key]}' per line, without '- '",
            )
        for item, value in section.items():
            line = f"{path}:{section.key_lines[item]}"
            if key == "vars":
                graph.set_group_var(name, str(item), value, line)
            elif key == "children":
                graph.add_child(name, _yaml_group(item, value, line, path, graph), line)
            else:
                _yaml_hosts(name, item, value, line, path, graph)
    return name


# What one entry of each section of a YAML group looks like, for the error of a section that is a
# list or a scalar.
_SECTION_EXAMPLES = {"hosts": "gpu01:", "children": "h200_rack1:", "vars": "ansible_user: ops"}


def _yaml_hosts(group: str, item: Any, value: Any, line: str, path: Path, graph: GroupGraph):
    """One entry under a group's `hosts:` (a name or a range pattern, with its
    vars) into `graph`."""
    if not isinstance(item, str):
        raise InventoryError(
            f"host name {item!r} in group '{group}' is not a string",
            where=line,
            fix=f"quote it: '{item}':",
        )
    if value is not None and not isinstance(value, dict):
        raise InventoryError(
            f"host '{item}' in group '{group}' must map to its vars, not {value_kind(value)}",
            where=line,
            fix="indent 'name: value' lines under the host, or leave it empty",
        )
    names, port = host_pattern(item, line, graph.limits.range_hosts)
    for host in names:
        graph.add_host(host, group, port, line)
        for var, var_value in (value or {}).items():
            graph.set_host_var(host, str(var), var_value, f"{path}:{value.key_lines[var]}")


# --- INI ----------------------------------------------------------------------------------------

_INI_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$")
_INI_CHILD = re.compile(r"^([^:\]\s]+)\s*(?:#.*)?$")


def parse_ini(text: str, path: Path, graph: GroupGraph) -> None:
    """Ansible's INI inventory grammar (ansible/plugins/inventory/ini.py), with its line numbers."""
    # undeclared group -> (state, where, parents)
    pending: dict[str, tuple[str, str, list[str]]] = {}
    group, state = "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), start=1):
        line, where = raw.strip(), f"{path}:{number}"
        if len(raw) > graph.limits.ini_line:
            raise InventoryError(
                f"INI line is {len(raw):,} characters long, more than the limit of "
                f"{graph.limits.ini_line:,}",
                where=where,
                fix="shorten it: move long values to group_vars/ or host_vars/ files (YAML)",
            )
        if not line or line[0] in "#;":
            continue
        section = _INI_SECTION.match(line)
        if section:
            group, state = section.group(1), section.group(2) or "hosts"
            if state not in ("hosts", "children", "vars"):
                raise InventoryError(
                    f"section [{group}:{state}] has an unknown type '{state}'",
                    where=where,
                    fix=f"use [{group}], [{group}:children] or [{group}:vars]",
                )
            if group not in graph.groups:
                if state == "vars" and group not in pending:
                    pending[group] = ("vars", where, [])
                graph.add_group(group)
            if group in pending and state != "vars":
                for parent in pending.pop(group)[2]:
                    graph.add_child(parent, group, where)
            continue
        if line.startswith("[") and (line.endswith("]") or "]" not in line):
            raise InventoryError(
                f"invalid section header {line!r}",
                where=where,
                fix="write [group], [group:children] or [group:vars], with no spaces inside",
            )
        if state == "hosts":
            _ini_host_line(line, group, where, graph)
        elif state == "vars":
            _ini_var_line(line, group, where, graph)
        else:
            _ini_child_line(line, group, where, graph, pending)
    for name, (state, where, parents) in pending.items():
        if state == "vars":
            raise InventoryError(
                f"[{name}:vars] is for group '{name}', which is never defined",
                where=where,
                fix=f"add a [{name}] section (it may be empty) or fix the group name",
            )
        raise InventoryError(
            f"[{parents[-1]}:children] lists group '{name}', which is never defined",
            where=where,
            fix=f"add a [{name}] section (it may be empty) or remove '{name}'",
        )


def _ini_var_line(line: str, group: str, where: str, graph: GroupGraph) -> None:
    """One `name=value` line of a [group:vars] section."""
    key, equals, value = line.partition("=")
    if not equals:
        raise InventoryError(
            f"expected key=value in [{group}:vars], got {line!r}",
            where=where,
            fix="write one variable per line as name=value",
        )
    graph.set_group_var(group, key.strip(), _ini_value(value.strip()), where)


def _ini_child_line(line: str, group: str, where: str, graph: GroupGraph, pending: dict) -> None:
    """One group name of a [group:children] section; a group not defined yet waits in `pending`."""
    child = _INI_CHILD.match(line)
    if not child:
        raise InventoryError(
            f"expected a group name in [{group}:children], got {line!r}",
            where=where,
            fix="list one child group name per line",
        )
    name = child.group(1)
    if name in graph.groups:
        graph.add_child(group, name, where)
    else:
        pending.setdefault(name, ("children", where, []))[2].append(group)


def _ini_host_line(line: str, group: str, where: str, graph: GroupGraph) -> None:

    try:
        words = shlex.split(line, comments=True)
    except ValueError as err:
        raise InventoryError(
            f"cannot read host line {line!r} ({err})",
            where=where,
            fix="close the quote; quote values with spaces as key='a b'",
        ) from None
    if not words:
        return
    pattern = words[0]
    if pattern.endswith(":"):
        raise InventoryError(
            f"host pattern '{pattern}' ends in ':', which is reserved for a port (gpu01:2222)",
            where=where,
            fix="remove the ':'; if this file is YAML, name it .yml",
        )
    if pattern == "---":
        raise InventoryError(
            "'---' starts a YAML document, not an INI host",
            where=where,
            fix="name the file .yml so it is read as YAML",
        )
    names, port = host_pattern(pattern, where, graph.limits.range_hosts)
    assignments = {}
    for word in words[1:]:
        key, equals, value = word.partition("=")
        if not equals:
            raise InventoryError(
                f"expected key=value after host '{pattern}', got {word!r}",
                where=where,
                fix="write host variables as name=value; quote values with spaces: key='a b'",
            )
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
