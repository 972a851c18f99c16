"""The Ansible inventory a LocalFleet writes for its hosts: one YAML file of groups, their children
and vars, runs of consecutive names folded into Ansible ranges (``gpu[01:25]``, each host's
variables then in ``host_vars/``), aliases, and ``group_vars/all.yml`` with the login user and the
client key. sweep reads it back as it reads any operator's inventory (`sweep.inventory`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import yaml

if TYPE_CHECKING:
    from sweep.demo.loopback import FleetHost


def write_inventory(
    path: Path,
    hosts: Sequence[FleetHost],
    host_vars: Callable[[FleetHost], dict],
    *,
    folder: Path,
    key_path: Path,
    port: int,
    user: str | None = None,
    children: Mapping[str, Sequence[str]],
    group_vars: Mapping[str, Mapping],
) -> None:
    """`path`, and `folder`'s group_vars/all.yml and host_vars/: `hosts` in their groups under
    `children`, each with `host_vars(host)` (its address, its python), reached on `port` as `user`
    (default: the user running the fleet) with the client key at `key_path`."""
    groups: dict[str, list[FleetHost]] = {}
    for host in hosts:
        groups.setdefault(host.group, []).append(host)
    (folder / "group_vars" / "all.yml").write_text(
        yaml.safe_dump(
            {
                "ansible_user": user or _user(),
                "ansible_ssh_private_key_file": str(key_path),
            },
            sort_keys=False,
        )
    )
    parent_of = {child: parent for parent, kids in children.items() for child in kids}
    tree: dict = {}

    def node(group: str) -> dict:
        parent = parent_of.get(group)
        siblings = tree if parent is None else node(parent).setdefault("children", {})
        return siblings.setdefault(group, {})

    for group in [*children, *groups]:
        node(group)
    for group, values in group_vars.items():
        node(group)["vars"] = dict(values)
    for group, members in groups.items():
        entries = node(group).setdefault("hosts", {})
        for pattern, run in _ranges(members):
            if len(run) > 1:
                entries[pattern] = None
                for host in run:
                    (folder / "host_vars" / f"{host.name}.yml").write_text(
                        yaml.safe_dump(host_vars(host), sort_keys=False)
                    )
            else:
                entries[pattern] = host_vars(run[0])
        for host in members:
            for alias in host.aliases:
                entries[alias] = host_vars(host)
    vars_ = {"ansible_port": port} if port != 22 else {}
    body = {"all": {**({"vars": vars_} if vars_ else {}), "children": tree}}
    path.write_text(
        "# written by sweep's LocalFleet: real sshds on loopback\n"
        + yaml.safe_dump(body, sort_keys=False, default_flow_style=False)
    )


def _ranges(hosts: list[FleetHost]) -> list[tuple[str, list[FleetHost]]]:
    """Runs of consecutive names (gpu01, gpu02, ...) as Ansible ranges
    (gpu[01:25]); others alone."""
    out: list[tuple[str, list[FleetHost]]] = []
    run: list[FleetHost] = []
    key = None

    def flush():
        if len(run) >= 3:
            prefix = key[0]
            out.append(
                (f"{prefix}[{run[0].name[len(prefix) :]}:{run[-1].name[len(prefix) :]}]", list(run))
            )
        else:
            out.extend((h.name, [h]) for h in run)

    for host in hosts:
        match = re.fullmatch(r"(.*?)(\d+)", host.name)
        this = (match.group(1), len(match.group(2))) if match else None
        number = int(match.group(2)) if match else None
        if (
            run
            and this == key
            and this is not None
            and number == int(run[-1].name[len(key[0]) :]) + 1
        ):
            run.append(host)
            continue
        if run:
            flush()
        run, key = [host], this
    if run:
        flush()
    return out


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name
