"""The fleet as operators already describe it: static Ansible inventories, read into frozen Hosts.

Sources, as ``ansible -i SOURCE -i SOURCE ...`` takes them (`load_inventory`), read in order into
one group graph: a file (YAML or INI as ansible-core reads them: `sweep.inventory.formats`), an
inline host list (``'gpu01,gpu02:2222,'``), or a folder. A folder is read as Ansible's
InventoryManager reads
one: its entries in sorted order, folders recursively, leaving out what ansible-core's defaults
leave out (`inventory_files`: names starting with ``.``, ``group_vars``, ``host_vars``,
``vars_plugins``, and the extensions of ``INVENTORY_IGNORE_EXTS``: ``.pyc .pyo .swp .bak ~ .rpm .md
.txt .rst .orig .cfg .retry``). A file a folder holds that sweep cannot read is an error naming it
(Ansible warns and goes on: a host list that silently lost a file is a host nobody checks).

Variables of a host, lowest precedence first (ansible-core's default ``VARIABLE_PRECEDENCE``):

1. ``all`` group vars in the inventory files;
2. other group vars in the inventory files, parent groups before children (then by
   ``ansible_group_priority``, then by name);
3. ``group_vars/all`` of each source, in source order;
4. ``group_vars/GROUP`` of each source, source by source, each in the same group order;
5. host vars in the inventory files (a host defined twice keeps the later value, as in Ansible;
   when the two definitions give different ``ansible_host``, ``ansible_port`` or ``ansible_user``,
   an `InventoryWarning` names both lines; a port written ``gpu01:2222`` counts only on the host's
   first listing, as in Ansible, and a different one on a later listing is warned about);
6. ``host_vars/HOST`` of each source, in source order.

The ``group_vars/`` and ``host_vars/`` of a source are those beside a file, or inside a folder (a
folder's subfolders' are not read, as in Ansible); `sweep.inventory.vars_files` reads them.
Connection variables become Host fields (`sweep.inventory.host`); ``sweep_*`` variables are sweep's
own settings (``sweep_interpreters`` is ``settings["interpreters"]``). Values are frozen.

Hosts come in Ansible's orders: `Inventory.hosts` as ansible-core's inventory holds them (first
listing first), `Inventory.select` as ``ansible -i INV PATTERN --list-hosts`` lists them (no
pattern: ``all``'s order, ``Group.get_hosts``).

Stricter than Ansible, because a silently dropped host is a host nobody checks: an unknown key in
a YAML group, a range such as ``gpu[05:01]``, a vault value in a connection variable, an address or
user that OpenSSH 9.6 would refuse (`sweep.inventory.names`), a host name with a control character
and a vars file whose keys are not variable names are errors, not warnings; a Jinja template in a
connection variable is refused for the hosts about to be contacted (`refuse_unrendered`). Bounds:
`InventoryLimits` (`sweep.inventory.groups`). Files are read by `sweep.inventory.files` (regular
files only, bounded). Not supported by the builtin loader: plugin inventories, inventory scripts and
vault-encrypted files (``loader="ansible"`` reads them, `sweep.inventory.ansible_loader`).
"""

from __future__ import annotations

import dataclasses
import gc
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sweep.errors import InventoryError, InventoryWarning, LimitError
from sweep.inventory.ansible_loader import load_with_ansible
from sweep.inventory.command_line import VarLayers, inline_hosts, is_inline, without_secrets
from sweep.inventory.files import read_text
from sweep.inventory.formats import parse_ini, parse_yaml, sniff_yaml
from sweep.inventory.groups import IMPLICIT_GROUPS, GroupGraph, GroupMembers, InventoryLimits
from sweep.inventory.host import (  # noqa: F401 (Host, refuse_unrendered: re-exported)
    ADDRESS_VARS,
    DEFAULT_PYTHON,
    SETTINGS_PREFIX,
    Host,
    checked_address,
    make_host,
    refuse_unrendered,
    thaw,
)
from sweep.inventory.limit import match_hosts
from sweep.inventory.vars_files import YAML_SUFFIXES, VarsFolder
from sweep.inventory.yaml_lines import value_kind, yaml_load

# ansible-core's defaults (ansible.inventory.manager.IGNORED, C.INVENTORY_IGNORE_EXTS;
# no IGNORE_PATTERNS)
IGNORED_NAMES = (r"^\.", r"^host_vars$", r"^group_vars$", r"^vars_plugins$")
IGNORED_EXTENSIONS = (
    ".pyc",
    ".pyo",
    ".swp",
    ".bak",
    "~",
    ".rpm",
    ".md",
    ".txt",
    ".rst",
    ".orig",
    ".cfg",
    ".retry",
)
_IGNORED = re.compile(
    "|".join([*IGNORED_NAMES, *(re.escape(ext) + "$" for ext in IGNORED_EXTENSIONS)])
)


@dataclass(frozen=True)
class Inventory:
    """The hosts of an inventory (as ansible-core holds them: first listing
    first) and its groups."""

    path: Path  # the first source: the run folder's name, messages
    hosts: tuple[Host, ...]
    groups: Mapping[str, tuple[str, ...]] = field(hash=False)
    warnings: tuple[str, ...] = ()  # also issued as InventoryWarning when the file is read
    sources: tuple[Path, ...] = ()  # every source, in the order given (() : path alone)

    def select(self, limit: str | None) -> list[Host]:
        """The hosts an Ansible ``--limit`` pattern selects, in the order
        ``ansible -i INV LIMIT --list-hosts`` lists them (None or '': every host, in the
        order of ``all``)."""
        by_name = {host.name: host for host in self.hosts}
        if not limit or not limit.strip():
            order = self.groups.get("all") if "all" in self.groups else None
            return (
                [by_name[name] for name in order if name in by_name] if order else list(self.hosts)
            )
        chosen = match_hosts(limit, [host.name for host in self.hosts], self.groups)
        if not chosen:
            named = [group for group in self.groups if group not in IMPLICIT_GROUPS]
            listed = ", ".join(named[:6]) + (", ..." if len(named) > 6 else "")
            raise LimitError(
                f"--limit '{limit}' matches no host in {self.path}",
                fix=f"use a host name, a glob, or one of the groups {listed}"
                if named
                else "use a host name or a glob; this inventory has no groups",
            )
        return [by_name[name] for name in chosen]

    def snapshot(self) -> dict:
        """A JSON-able record of the hosts and groups, for a run manifest (no secret:
        `without_secrets`)."""
        hosts = [
            {
                "name": h.name,
                "address": h.address,
                "port": h.port,
                "user": h.user,
                "key_file": h.key_file,
                "python": h.python,
                "ssh_common_args": h.ssh_common_args,
                "proxy_jump": h.proxy_jump,
                "groups": list(h.groups),
                "settings": without_secrets(thaw(h.settings)),
                **({"become_user": h.become_user} if h.become else {}),
            }
            for h in self.hosts
        ]
        return {
            "path": str(self.path),
            "hosts": hosts,
            **({"sources": [str(s) for s in self.sources]} if len(self.sources) > 1 else {}),
            "groups": {name: list(members) for name, members in self.groups.items()},
        }


def load_inventory(
    path: "str | os.PathLike[str] | Sequence[str | os.PathLike[str]]",
    loader: str = "auto",
    *,
    limits: InventoryLimits = InventoryLimits(),
    layers: VarLayers = VarLayers(),
) -> Inventory:
    """Read Ansible inventory sources (one, or a list: ``-i A -i B``); ``loader`` is "auto" (=
    "builtin") or "ansible" (ansible-core). A source is a file, a folder, or a string with a comma
    that names no file: an inline host list ('gpu01,gpu02:2222,'), as in Ansible.

    `limits` bound what the builtin loader expands (YAML aliases, host ranges, hosts, group
    nesting); loading is linear in the number of hosts (100,000 hosts and 200 host_vars files:
    bench/bench_inventory.py). `layers`: the command line's variables, under the inventory's (-u,
    --private-key, --become) and over them (-e).
    """
    given = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    if not given:
        raise InventoryError("no inventory source given", fix="pass an inventory file or folder")
    sources = [os.fspath(s) if is_inline(s) else Path(s) for s in given]
    if loader not in ("auto", "builtin", "ansible"):
        raise InventoryError(
            f"unknown inventory loader {loader!r}",
            where=str(sources[0]),
            fix="use loader 'auto', 'builtin' or 'ansible'",
        )
    for source in sources:
        if isinstance(source, Path) and not source.exists():
            raise InventoryError(
                "inventory file not found",
                where=str(source),
                fix="pass the path of an Ansible inventory file (YAML or INI) or folder",
            )
    first = Path(sources[0])
    if loader == "ansible":
        hosts, groups = load_with_ansible([Path(s) for s in sources], layers)
        return Inventory(
            path=first, hosts=tuple(hosts), groups=groups, sources=tuple(map(Path, sources))
        )
    collecting = gc.isenabled()
    # hundreds of thousands of small objects, none of them cyclic garbage: full collections
    gc.disable()
    try:  # while loading grew with the heap (superlinear load time)
        return _load_builtin(sources, limits, layers)
    finally:
        if collecting:
            gc.enable()


def inventory_files(folder: Path, limit: int = InventoryLimits.folder_files) -> list[Path]:
    """The files Ansible reads as inventories in `folder`: entries in sorted order, subfolders in
    place, ansible-core's ignored names and extensions left out; a link back up is refused."""
    found: list[Path] = []

    def visit(directory: Path, above: frozenset[str]) -> None:
        real = os.path.realpath(directory)
        if real in above:
            raise InventoryError(
                f"is a link back to {real}, a folder it is inside (a loop)",
                where=str(directory),
                fix="remove the link",
            )
        try:
            names = sorted(os.listdir(directory))
        except OSError as err:
            raise InventoryError(
                f"cannot be listed ({err.strerror})",
                where=str(directory),
                fix="check the folder's permissions",
            ) from None
        for name in names:
            if _IGNORED.search(name):
                continue
            child = directory / name
            if child.is_dir():
                if len(above) >= 20:
                    raise InventoryError(
                        "inventory folders nest more than 20 deep",
                        where=str(child),
                        fix="flatten the folder",
                    )
                visit(child, above | {real})
            else:
                found.append(child)
                if len(found) > limit:
                    raise InventoryError(
                        f"holds more than {limit:,} inventory files",
                        where=str(folder),
                        fix="pass the inventory files themselves, or fewer folders",
                    )

    visit(folder, frozenset())
    return found


# --- the builtin loader: parse every source into one group graph, then resolve vars --------------


def _load_builtin(
    sources: list, limits: InventoryLimits, layers: VarLayers = VarLayers()
) -> Inventory:
    graph = GroupGraph(limits)
    for source in sources:
        # an inline host list: its hosts in ungrouped (Ansible's host_list)
        if isinstance(source, str):
            for name, port in inline_hosts(source):
                graph.add_host(name, "ungrouped", port, repr(source))
            continue
        for file in inventory_files(source, limits.folder_files) if source.is_dir() else [source]:
            _parse_file(file, graph)
    if not graph.host_vars:
        where = str(sources[0]) if len(sources) == 1 else ", ".join(map(str, sources))
        raise InventoryError(
            "no host is defined in this inventory",
            where=where,
            fix="add hosts under a group: a 'hosts:' mapping in YAML, a line under [group] in INI",
        )
    return _resolve(graph, sources, layers)


def _parse_file(path: Path, graph: GroupGraph) -> None:
    limits = graph.limits
    text, suffix = read_text(path, limits.file_bytes), path.suffix.lower()
    if suffix in YAML_SUFFIXES:
        data = yaml_load(text, path, limits.yaml_values)
        if data is not None and not isinstance(data, dict):
            raise InventoryError(
                f"YAML inventory must be a mapping of group names, not {value_kind(data)}",
                where=f"{path}:1",
                fix="start the file with 'all:' and put groups under 'children:'",
            )
    else:  # as ansible: YAML only without a suffix, and only if it reads as YAML groups
        data = sniff_yaml(text, limits.yaml_values, path) if not suffix else None
    if isinstance(data, dict):
        parse_yaml(data, path, graph)
    elif suffix not in YAML_SUFFIXES:
        parse_ini(text, path, graph)


def _vars_folders(
    sources: list, limits: InventoryLimits
) -> tuple[list[VarsFolder], list[VarsFolder]]:
    """(group_vars folders, host_vars folders) of the sources, in source order: a folder's own, a
    file's beside it."""
    bases = list(
        dict.fromkeys(
            Path(s) if Path(s).is_dir() else Path(s).parent
            for s in sources
            if not isinstance(s, str)
        )
    )
    return (
        [VarsFolder(base / "group_vars", limits) for base in bases],
        [VarsFolder(base / "host_vars", limits) for base in bases],
    )


def _groups_listing_each_host(graph: GroupGraph) -> dict[str, set[str]]:
    """host -> the groups that list it themselves (not through a child group), `all` left out."""
    direct: dict[str, set[str]] = {name: set() for name in graph.host_vars}
    for group in graph.groups.values():
        for host in group.hosts:
            direct[host].add(group.name)
    for member_of in direct.values():
        member_of.discard("all")
    return direct


def _group_vars(graph: GroupGraph, member_of: set, depth: dict, layers: VarLayers, group_files):
    """(the host's groups, ancestors included, implicit ones left out; the vars they give it) for
    a host listed by the groups `member_of`: Ansible's order, shallow groups first, then each
    vars folder's files in the same order, over the command line's `under` layer."""

    groups = graph.groups
    every = set().union(*({group} | graph.ancestors(group) for group in member_of)) - {"all"}
    chain = sorted(every, key=lambda g: (depth[g], groups[g].priority, g))
    merged = {**layers.under, **groups["all"].vars}
    folders = len(group_files["all"])
    for layer in (
        *(groups[g].vars for g in chain),
        *group_files["all"],
        *(files for index in range(folders) for files in (group_files[g][index] for g in chain)),
    ):
        merged.update(layer)
    return tuple(sorted(every - set(IMPLICIT_GROUPS))), merged


def _resolve(graph: GroupGraph, sources: list, layers: VarLayers = VarLayers()) -> Inventory:

    groups = graph.groups
    first = Path(sources[0])
    graph.reconcile(str(first))
    depth = graph.depths()
    direct = _groups_listing_each_host(graph)
    group_dirs, host_dirs = _vars_folders(sources, graph.limits)
    group_files = {name: [folder.vars(name) for folder in group_dirs] for name in groups}
    # hosts of the same groups share their group vars
    by_groups: dict[frozenset, tuple[set[str], dict]] = {}
    # id of a (value, where) pair -> (the pair, its frozen value)
    frozen: dict[int, tuple[tuple, Any]] = {}
    # groups -> a host of only those groups' vars, has it ansible_host
    alike: dict[frozenset, tuple[Host, bool]] = {}
    hosts = []
    for name, member_of in direct.items():
        key = frozenset(member_of)
        if key not in by_groups:
            by_groups[key] = _group_vars(graph, member_of, depth, layers, group_files)
        every, merged = by_groups[key]
        own = graph.host_vars[name]
        files = {k: v for folder in host_dirs for k, v in folder.vars(name).items()}
        if own or files or layers.over:
            hosts.append(
                make_host(
                    name,
                    {**merged, **own, **files, **layers.over},
                    every,
                    frozen,
                    graph.first_listing[name][1],
                )
            )
            continue
        shared = alike.get(key)  # hosts with only their groups' vars differ in their name alone
        if shared is None:
            hosts.append(make_host(name, merged, every, frozen, graph.first_listing[name][1]))
            alike[key] = (
                hosts[-1],
                any(merged.get(k, (None,))[0] is not None for k in ADDRESS_VARS),
            )
        else:
            template, addressed = shared
            address = (
                template.address
                if addressed or "address" in template.unrendered
                else checked_address(name, "", None, "", graph.first_listing[name][1])
            )
            hosts.append(dataclasses.replace(template, name=name, address=address))
    for text in graph.warnings:
        warnings.warn(InventoryWarning(text), stacklevel=4)
    return Inventory(
        path=first,
        hosts=tuple(hosts),
        groups=GroupMembers(graph),
        warnings=tuple(graph.warnings),
        sources=tuple(Path(s) for s in sources),
    )
