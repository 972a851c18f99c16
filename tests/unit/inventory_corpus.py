"""The corpus of public inventories (tests/fixtures/inventories/corpus) against ansible-core, the oracle.

For every inventory of the manifest (a file, a folder, or several sources given as ansible's repeated
``-i``) and every pattern of `patterns` (all, each group, globs, ``&``/``!``, subscripts), sweep's host
list must be ansible-core's: the same set, and the same order wherever Ansible's own order is defined
(Group.get_hosts walks deeper levels of children through a set of Group objects: where more than one
group of a level brings new children, Ansible's order changes from one process to the next, and only
the set is compared). Each host's address, port and user must be what ``ansible-inventory --host``
resolves (a Jinja template compared unrendered, as ansible-inventory prints it).

``python tests/unit/inventory_corpus.py`` prints the agreement figures (the issue's before/after).
"""
from __future__ import annotations

import json
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "inventories" / "corpus"


def corpus() -> dict[str, list[Path]]:
    """Each inventory of the manifest: name -> its sources, in the order ansible is given them."""
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    return {name: [CORPUS / source for source in sources] for name, sources in manifest["inventories"].items()}


def ansible_inventory(sources: list[Path]):
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(s) for s in sources])
    return manager, VariableManager(loader=loader, inventory=manager)


def patterns(manager) -> list[str]:
    """all, ungrouped, every group, and a few combinations of the first groups and hosts."""
    groups = [g for g in manager.groups if g not in ("all", "ungrouped") and manager.groups[g].get_hosts()]
    hosts = list(manager.hosts)
    found = ["all", "*", "ungrouped", *groups]
    if groups:
        found += [f"all:!{groups[0]}", f"{groups[0]}[0]", f"{groups[0]}[1:]", f"{groups[-1]}:{groups[0]}"]
    if len(groups) > 1:
        found += [f"{groups[0]}:&{groups[1]}", f"{groups[1]},!{groups[0]}", f"{groups[1]}:{groups[0]}"]
    if hosts:
        found += [f"{hosts[0][:2]}*", f"~{hosts[-1][:3]}", f"{hosts[-1]}:{hosts[0]}"]
    return list(dict.fromkeys(found))


def walk_is_ordered(group) -> bool:
    """Whether Group._walk_relationship('child_groups', preserve_ordering=True) has one answer: at each
    level at most one group of the (unordered) frontier brings new children (test_inventory_oracle uses it too)."""
    seen, frontier = set(), {group, *group.child_groups}
    while frontier:
        seen |= frontier
        if sum(1 for g in frontier if any(c not in seen for c in g.child_groups)) > 1:
            return False
        frontier = {c for g in frontier for c in g.child_groups} - seen
    return True


def order_defined(manager, pattern: str) -> bool:
    """False when a group the pattern reaches has a host order Ansible leaves to set iteration."""
    import fnmatch
    import re

    from ansible.inventory.manager import split_host_pattern

    for term in split_host_pattern(pattern):
        term = term.lstrip("&!")
        regex = re.compile(term[1:]) if term.startswith("~") else re.compile(fnmatch.translate(term.split("[")[0]))
        names = ["all"] if term in ("all", "*") else [name for name in manager.groups if regex.match(name)]
        if any(not walk_is_ordered(manager.groups[name]) for name in names):
            return False
    return True


def connection(name: str, found: dict) -> dict:
    """Address, port and user as ansible's ssh connection takes them from the host's vars."""
    def first(*keys):
        return next((found[k] for k in keys if found.get(k) is not None), None)

    port, address = first("ansible_ssh_port", "ansible_port"), first("ansible_ssh_host", "ansible_host")
    user = first("ansible_ssh_user", "ansible_user")
    return {"address": name if address is None else str(address), "port": None if port is None else int(port),
            "user": None if user is None else str(user)}


@dataclass
class Tally:
    inventories: int = 0
    loaded: int = 0  # sweep loaded it
    patterns: int = 0
    same_set: int = 0
    same_order: int = 0
    order_undefined: int = 0
    hosts: int = 0
    same_connection: int = 0
    failures: list = field(default_factory=list)

    def line(self) -> str:
        ordered = self.patterns - self.order_undefined
        return (f"{self.inventories} inventories, {self.loaded} loaded by sweep; {self.patterns} patterns: "
                f"{self.same_set} same host set, {self.same_order} of {ordered} same order "
                f"({self.order_undefined} with no defined Ansible order); {self.hosts} hosts: "
                f"{self.same_connection} same address/port/user")


def sweep_connection(host) -> dict:
    unrendered = getattr(host, "unrendered", {}) or {}
    shown = {field_name: unrendered[field_name][0] for field_name in ("address", "port", "user")
             if field_name in unrendered}
    return {"address": host.address, "port": host.port, "user": host.user, **shown}


def compare(name: str, sources: list[Path], tally: Tally, load) -> None:
    """Add one inventory's agreement to `tally`; `load(sources)` is sweep's loader."""
    from sweep.errors import LimitError, SweepError

    manager, variables = ansible_inventory(sources)
    tally.inventories += 1
    asked = patterns(manager)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            inventory = load(sources)
    except SweepError as err:
        tally.patterns += len(asked)
        tally.hosts += len(manager.hosts)
        tally.failures.append(f"{name}: not loaded: {err}")
        return
    tally.loaded += 1
    for pattern in asked:
        tally.patterns += 1
        theirs = [h.name for h in manager.list_hosts(pattern)]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours = [h.name for h in inventory.select(pattern)]
        except LimitError:
            ours = []
        tally.same_set += set(ours) == set(theirs)
        if not order_defined(manager, pattern):
            tally.order_undefined += 1
        elif ours == theirs:
            tally.same_order += 1
        else:
            tally.failures.append(f"{name}: {pattern}: sweep {ours[:8]}, ansible {theirs[:8]}")
    by_name = {h.name: h for h in inventory.hosts}
    for host_name, host in manager.hosts.items():
        tally.hosts += 1
        expected = connection(host_name, variables.get_vars(host=host, include_hostvars=False))
        ours = sweep_connection(by_name[host_name]) if host_name in by_name else None
        if ours == expected:
            tally.same_connection += 1
        else:
            tally.failures.append(f"{name}: {host_name}: sweep {ours}, ansible {expected}")


def measure(load) -> Tally:
    tally = Tally()
    for name, sources in sorted(corpus().items()):
        compare(name, sources, tally, load)
    return tally


def _sweep_load(sources):
    from sweep.inventory.model import load_inventory

    from sweep.errors import SweepError

    try:
        return load_inventory(sources[0] if len(sources) == 1 else sources)
    except TypeError as err:  # a loader that takes one source only (before issue 42)
        raise SweepError(f"several sources: {err}") from None


if __name__ == "__main__":
    from ansible.utils.display import Display

    Display().verbosity = -1
    result = measure(_sweep_load)
    print(result.line())
    if "-v" in sys.argv:
        print("\n".join(result.failures))
