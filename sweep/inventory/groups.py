"""The group graph an inventory declares (ansible's InventoryData), before variables are merged, and
the bounds on what an inventory may expand to (`InventoryLimits`).

Bounded, because an inventory of a few KB can otherwise take the controller's memory or its stack:

- hosts: at most ``InventoryLimits.hosts`` (200,000, or ``--max-range-hosts`` where that
  is higher) distinct hosts in all the sources together, and at most ten listings (a host
  in a group) per allowed
  host: 20 YAML lines ``pN-[00000:99999]`` are refused at the line that passes the bound, not built.
  Ansible has no such bound; 200,000 is twice the largest range one line may name.
- group nesting: at most ``InventoryLimits.group_depth`` (100) levels of children below ``all``, the
  bound sweep already puts on YAML nesting (`sweep.inventory.yaml_lines.MAX_YAML_DEPTH`). Ansible
  has none, and walks the groups recursively (a RecursionError near 1,000 levels). Every walk here
  is iterative, and the walk of `add_child` stops at the bound, so refusing 20,000 levels costs no
  more than reading them.
- host names: a name with a control character (a newline, a tab, an escape; Unicode's line and
  paragraph separators) is refused where it is written: it would read as two names in a limit file,
  a host list or a log line (``"h02\nprod01"`` must not select ``prod01``). Ansible accepts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sweep.errors import InventoryError

_WATCHED_TWICE = (
    "ansible_host",
    "ansible_ssh_host",
    "ansible_port",
    "ansible_ssh_port",
    "ansible_user",
    "ansible_ssh_user",
)
IMPLICIT_GROUPS = ("all", "ungrouped")
# NEL and Unicode's separators: line breaks to many readers
_LINE_BREAKING = frozenset("\x85\u2028\u2029")


@dataclass(frozen=True)
class InventoryLimits:
    """How far an inventory may expand: values added by YAML aliases per file, hosts per range,
    bytes per file and per INI line."""

    yaml_values: int = 1_000_000  # --max-yaml-values
    range_hosts: int = 100_000  # --max-range-hosts
    file_bytes: int = 64 * 2**20  # the inventory file, each group_vars / host_vars file
    ini_line: int = 64 * 2**10  # one INI line (shlex.split is quadratic in a word's length)
    # distinct hosts of all the sources (or range_hosts, if higher); 10 listings per host
    hosts: int = 200_000
    group_depth: int = 100  # levels of children below 'all'
    # inventory files one folder source may hold, its subfolders' included
    folder_files: int = 10_000

    @property
    def total_hosts(self) -> int:
        return max(self.hosts, self.range_hosts)


def name_problem(name: str) -> str | None:
    """Why `name` is not a host name sweep takes (a control or line-breaking character), or None."""
    if name.isprintable():
        return None
    for ch in name:
        if ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 or ch in _LINE_BREAKING:
            return f"holds the control character {ch!r}"
    return None


@dataclass
class _Group:
    name: str
    # an ordered set: membership tests stay O(1)
    hosts: dict[str, None] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    vars: dict[str, tuple[Any, str]] = field(default_factory=dict)  # name -> (value, file:line)
    priority: int = 1
    # parent -> where this group was made its child
    parent_where: dict[str, str] = field(default_factory=dict)


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
        self.listings = 0  # (host, group) pairs added, bounded with the hosts

    def add_group(self, name: str) -> _Group:
        return self.groups.setdefault(name, _Group(name))

    def add_child(self, parent: str, child: str, where: str) -> None:
        if child in self.groups[parent].children:
            return
        if (
            child == "all"
            or child == parent
            or child in self._ancestors_within_bound(parent, child, where)
        ):
            inside = (
                "every group is inside 'all'"
                if child == "all"
                else f"'{parent}' is already inside '{child}'"
            )
            raise InventoryError(
                f"group '{child}' cannot be a child of '{parent}': {inside}, so that makes a loop",
                where=where,
                fix=f"remove '{child}' from the children of '{parent}'",
            )
        self.groups[parent].children.append(child)
        self.groups[child].parents.append(parent)
        self.groups[child].parent_where[parent] = where

    def _ancestors_within_bound(self, parent: str, child: str, where: str) -> set[str]:
        """`parent`'s ancestors, walked level by level upwards; more levels than the
        bound are refused."""
        found: set[str] = set()
        level = [parent]
        for _ in range(self.limits.group_depth):
            level = list(
                dict.fromkeys(
                    up for name in level for up in self.groups[name].parents if up not in found
                )
            )
            if not level:
                return found
            found.update(level)
        raise _too_deep(child, self.limits.group_depth, where)

    def add_host(self, name: str, group: str, port: int | None, where: str) -> None:
        """List `name` in `group`; as in ansible's InventoryData.add_host, only the host's
        first listing sets its port (``gpu01:2222``): a port on a later listing is
        ignored, with a warning."""
        if not name.strip():
            raise InventoryError(
                f"empty host name in group '{group}'",
                where=where,
                fix="give the host a name (its address goes in ansible_host)",
            )
        self.listings += 1
        if name not in self.host_vars:
            problem = name_problem(name)
            if problem is not None:
                raise InventoryError(
                    f"host name {name!r} in group '{group}' {problem}: it is not a valid "
                    "inventory name",
                    where=where,
                    fix="write the name on one line, without control characters",
                )
            if len(self.host_vars) >= self.limits.total_hosts:
                raise InventoryError(
                    f"the inventory defines more than {self.limits.total_hosts:,} hosts",
                    where=where,
                    fix="split the inventory, or raise the limit with --max-range-hosts",
                )
            self.host_vars[name] = {}
            self.first_listing[name] = (port, where)
            if port is not None:
                self.host_vars[name]["ansible_port"] = (port, where)
        elif port is not None and port != self.first_listing[name][0]:
            first_port, first_where = self.first_listing[name]
            self.warnings.append(
                f"{where}: host '{name}' is listed again with port {port}; as Ansible does, sweep "
                "keeps its first listing's port "
                f"({first_port if first_port is not None else 'none'}, at {first_where}); set "
                "ansible_port on the host to change it"
            )
        if self.listings > 10 * self.limits.total_hosts:
            raise InventoryError(
                f"the inventory lists hosts in groups more than {10 * self.limits.total_hosts:,} "
                "times",
                where=where,
                fix="list each host in fewer groups (use children: groups)",
            )
        self.groups[group].hosts[name] = None

    def set_host_var(self, host: str, key: str, value: Any, where: str) -> None:
        before = self.host_vars[host].get(key)
        if (
            key in _WATCHED_TWICE
            and before is not None
            and before[0] != value
            and before[1] != where
        ):
            self.warnings.append(
                f"{where}: host '{host}' is defined twice with different {key}: {value!r} here, "
                f"{before[0]!r} at {before[1]}; as Ansible does, sweep uses the later one; "
                "remove one of the two definitions"
            )
        self.host_vars[host][key] = (value, where)

    def set_group_var(self, group: str, key: str, value: Any, where: str) -> None:
        if key != "ansible_group_priority":
            self.groups[group].vars[key] = (value, where)
            return
        try:
            self.groups[group].priority = int(value)
        except (TypeError, ValueError):
            raise InventoryError(
                f"ansible_group_priority of group '{group}' is {value!r}, not a number",
                where=where,
                fix="set it to a whole number; higher wins",
            ) from None

    def reconcile(self, where: str) -> None:
        """ansible's InventoryData.reconcile_inventory: parentless groups go under 'all';
        'ungrouped' holds exactly the hosts that are in no other group, appended in host order."""
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
        """The hosts of `group` in the order of ansible's Group.get_hosts: the group's own,
        then each descendant's, the descendants breadth first (ansible's _walk_relationship).
        Below the first level ansible iterates a set of groups; sweep takes each level in
        declaration order."""
        ordered, seen = [group, *self.groups[group].children], {group}
        frontier = list(dict.fromkeys(ordered))
        while frontier:
            seen.update(frontier)
            following = [
                child
                for name in frontier
                for child in self.groups[name].children
                if child not in seen
            ]
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

    def depths(self) -> dict[str, int]:
        """Each group's depth, the longest path from 'all' (ansible's Group.depth), in one pass over
        the graph in topological order (no recursion); a group deeper than the bound is refused."""
        waiting = {name: len(group.parents) for name, group in self.groups.items()}
        depth = {name: 0 for name, count in waiting.items() if not count}
        ready = list(depth)
        while ready:
            name = ready.pop()
            for child in self.groups[name].children:
                if depth[name] + 1 > depth.get(child, 0):
                    depth[child] = depth[name] + 1
                    if depth[child] > self.limits.group_depth:
                        raise _too_deep(
                            child,
                            self.limits.group_depth,
                            self.groups[child].parent_where.get(name),
                        )
                waiting[child] -= 1
                if not waiting[child]:
                    ready.append(child)
        return depth


def _too_deep(group: str, bound: int, where: str | None) -> InventoryError:
    return InventoryError(
        f"groups nest more than {bound} levels deep (at group '{group}')",
        where=where,
        fix="flatten the children: groups there",
    )


class GroupMembers(Mapping):
    """Every group of a GroupGraph -> its hosts in ansible's Group.get_hosts order
    (`GroupGraph.members`), each group's computed when first asked for: loading stays linear however
    deep the groups nest."""

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
