"""``loader="ansible"``: the inventory read by ansible-core's own InventoryManager and
VariableManager (plugin inventories, vault files), its hosts built as the builtin
loader builds them."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any

from sweep.errors import InventoryError
from sweep.inventory.command_line import VarLayers
from sweep.inventory.groups import name_problem
from sweep.inventory.host import Host, make_host


# variables ansible's VariableManager adds itself; they are not inventory data
_ANSIBLE_MAGIC = frozenset(
    {
        "ansible_check_mode",
        "ansible_config_file",
        "ansible_diff_mode",
        "ansible_facts",
        "ansible_forks",
        "ansible_inventory_sources",
        "ansible_playbook_python",
        "ansible_version",
        "group_names",
        "groups",
        "inventory_dir",
        "inventory_file",
        "inventory_hostname",
        "inventory_hostname_short",
        "omit",
        "playbook_dir",
    }
)


def load_with_ansible(
    sources: list[Path], layers: VarLayers = VarLayers()
) -> tuple[list[Host], dict]:
    """(hosts, groups -> their hosts in ansible's order) of `sources`, read by
    ansible-core itself."""
    path = sources[0] if len(sources) == 1 else ", ".join(map(str, sources))
    manager, found = _ansible_reads(sources, path)
    hosts = []
    for name, host_vars in found.items():
        problem = name_problem(str(name))
        if problem is not None:
            raise InventoryError(
                f"host name {str(name)!r} {problem}: it is not a valid inventory name",
                where=str(path),
                fix="write the name on one line, without control characters",
            )
        merged = {
            **layers.under,
            **{
                str(key): (value, str(path))
                for key, value in host_vars.items()
                if key not in _ANSIBLE_MAGIC
            },
            **layers.over,
        }
        groups = {str(group.name) for group in manager.hosts[name].get_groups()}
        hosts.append(make_host(str(name), merged, groups))
    return hosts, MappingProxyType(
        {
            str(name): tuple(str(h.name) for h in group.get_hosts())
            for name, group in manager.groups.items()
        }
    )


def _ansible_reads(sources: list[Path], path) -> tuple[Any, dict]:
    """ansible-core's InventoryManager of `sources` and each host's variables as it resolves them;
    an InventoryError naming the command to run where it is missing, fails or finds no host."""
    command = " ".join(f"-i {source}" for source in sources)
    try:
        from ansible.inventory.manager import InventoryManager
        from ansible.parsing.dataloader import DataLoader
        from ansible.vars.manager import VariableManager
    except ImportError:
        raise InventoryError(
            "loader 'ansible' needs ansible-core, which is not installed",
            where=str(path),
            fix="pip install ansible-core, or use the builtin loader",
        ) from None
    from ansible.errors import AnsibleError

    data_loader = DataLoader()
    try:
        manager = InventoryManager(loader=data_loader, sources=[str(source) for source in sources])
        variables = VariableManager(loader=data_loader, inventory=manager)
        found = {
            name: variables.get_vars(host=host, include_hostvars=False)
            for name, host in manager.hosts.items()
        }
    except AnsibleError as err:
        raise InventoryError(
            f"ansible-core cannot read it: {err}",
            where=str(path),
            fix=f"run 'ansible-inventory {command} --graph' for details",
        ) from None
    if not found:
        raise InventoryError(
            "ansible-core found no host in this inventory",
            where=str(path),
            fix=f"run 'ansible-inventory {command} --graph' to see ansible's warnings",
        )
    return manager, found
