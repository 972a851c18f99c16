"""Every ``ansible_*`` variable ansible-core 2.19 acts on in sweep's ad-hoc script run, and what the
ansible engine does with it: one declaration per variable (`VARIABLES`).

ansible reads these from the inventory for each host, after sweep has read the same inventory: a
variable that names a program on the controller, an ssh option, a connection plugin or a host-key
policy would let an inventory value undo what sweep set up (``ANSIBLE_SSH_ARGS``' host-key checks,
the agent run on the host it names). Each variable is one of:

- ``read``: sweep reads it and checks it (`sweep.inventory.model`: addresses, users, ssh arguments,
  the interpreter, become) the same for every engine;
- ``refuse``: the run stops before any host is contacted, naming the host, the variable, the
  file:line that sets it and the fix, unless its value is one of `accepted`;
- ``trusted``: ansible may act on it and sweep lets it, for the reason given (docs/security.md
  lists them).

A Jinja template in any of them is refused as well: ansible renders it on the controller, where a
``lookup('pipe', ...)`` runs a program. The variables of the connection, shell and become plugins
that only a refused ``ansible_connection`` / ``ansible_shell_type`` / ``ansible_become_method``
would select are `UNREACHABLE` prefixes. tests/unit/test_ansible_vars.py holds the table to
ansible-core's own plugin options.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from sweep.errors import InventoryError

_TRUE = ("yes", "true", "on", "1", "y", "t")


@dataclass(frozen=True)
class AnsibleVar:
    """What the ansible engine does with one ansible_* variable, and why."""

    kind: str  # read | refuse | trusted
    why: str
    # refuse: the values (lower case) that ask for what sweep does anyway
    accepted: tuple[str, ...] = ()
    shape: str = ""  # refuse: a regular expression the whole value may match instead


def _read(why: str) -> AnsibleVar:
    return AnsibleVar("read", why)


def _refuse(why: str, *accepted: str) -> AnsibleVar:
    return AnsibleVar("refuse", why, accepted)


def _trusted(why: str) -> AnsibleVar:
    return AnsibleVar("trusted", why)


_PROGRAM = "names a program ansible runs on the controller"
_SSH_OPTIONS = (
    "hands ssh options to the scp / sftp ansible runs on the controller, past sweep's checks"
)
_PASSWORD = (
    "asks for password authentication, which ansible does through a program on the "
    "controller (sshpass)"
)
_SECRET = "a secret sent to the host's own sudo, nothing the controller runs"
_HOST_SIDE = (
    "a setting of the host's shell (temp folders, groups), on the host sweep's command "
    "runs on anyway"
)
_CHECKED = "read and checked by sweep.inventory, as for every engine"

VARIABLES: dict[str, AnsibleVar] = {
    # connection variables sweep reads itself
    **{
        var: _read(_CHECKED)
        for var in (
            "ansible_host",
            "ansible_ssh_host",
            "ansible_port",
            "ansible_ssh_port",
            "ansible_user",
            "ansible_ssh_user",
            "ansible_private_key_file",
            "ansible_ssh_private_key_file",
            "ansible_python_interpreter",
            "ansible_become",
            "ansible_become_user",
            "ansible_become_method",
            "ansible_become_exe",
            "ansible_become_flags",
        )
    },
    "ansible_ssh_common_args": _read(
        _CHECKED + "; its options are held to --transport openssh's rules"
    ),
    "ansible_ssh_extra_args": _read(
        _CHECKED + "; its options are held to --transport openssh's rules"
    ),
    # which plugin does the work
    "ansible_connection": _refuse(
        "chooses the connection plugin: 'local' would run the agent on the controller "
        "and record the controller's data under the host's name",
        "ssh",
        "smart",
    ),
    "ansible_shell_type": _refuse(
        "chooses how ansible writes the commands it runs; sweep's command is for sh", "sh"
    ),
    # ssh connection plugin
    "ansible_ssh_executable": _refuse(_PROGRAM + " instead of ssh"),
    "ansible_scp_executable": _refuse(_PROGRAM + " instead of scp"),
    "ansible_sftp_executable": _refuse(_PROGRAM + " instead of sftp"),
    "ansible_ssh_args": _refuse(
        "replaces sweep's ANSIBLE_SSH_ARGS, and with them the run's host-key checks and "
        "known_hosts files"
    ),
    "ansible_scp_extra_args": _refuse(_SSH_OPTIONS),
    "ansible_sftp_extra_args": _refuse(_SSH_OPTIONS),
    "ansible_host_key_checking": _refuse("turns host-key checking off when false", *_TRUE),
    "ansible_ssh_host_key_checking": _refuse("turns host-key checking off when false", *_TRUE),
    "ansible_ssh_pkcs11_provider": _refuse("names a shared library ssh loads on the controller"),
    "ansible_control_path": _refuse(
        "names the ssh master socket a host is reached through: another host's "
        "master would sweep one host through another host's connection"
    ),
    "ansible_control_path_dir": _refuse(
        "names the folder of the ssh master sockets (shared between hosts: one "
        "host swept through another host's connection)"
    ),
    "ansible_ssh_use_tty": _refuse(
        "a tty merges the agent's stderr into its stdout, which sweep reads as JSON",
        "no",
        "false",
        "off",
        "0",
        "n",
        "f",
    ),
    "ansible_password": _refuse(_PASSWORD),
    "ansible_ssh_pass": _refuse(_PASSWORD),
    "ansible_ssh_password": _refuse(_PASSWORD),
    "ansible_ssh_password_mechanism": _refuse(
        "chooses the program (sshpass or an askpass) ansible runs on the controller for a password"
    ),
    "ansible_sshpass_prompt": _refuse(_PASSWORD),
    "ansible_private_key": _refuse(
        "a key given as text, which sweep cannot check as it checks key files; "
        "use ansible_ssh_private_key_file"
    ),
    "ansible_ssh_private_key": _refuse(
        "a key given as text, which sweep cannot check as it checks key files; "
        "use ansible_ssh_private_key_file"
    ),
    "ansible_private_key_passphrase": _refuse(
        "a passphrase ansible hands to ssh through an askpass program on "
        "the controller; give it with --key-passphrase"
    ),
    "ansible_ssh_private_key_passphrase": _refuse(
        "a passphrase ansible hands to ssh through an askpass program "
        "on the controller; give it with --key-passphrase"
    ),
    "ansible_ssh_transfer_method": _trusted(
        "chooses sftp, scp or a pipe for copying the agent: each goes "
        "through ssh with sweep's options, the programs are not the inventory's"
    ),
    "ansible_pipelining": _trusted(
        "feeds modules on stdin; the script task sweep runs is not a module"
    ),
    "ansible_ssh_pipelining": _trusted(
        "feeds modules on stdin; the script task sweep runs is not a module"
    ),
    "ansible_ssh_retries": _trusted(
        "how often ansible retries a connection; inside --task-timeout"
    ),
    "ansible_ssh_timeout": _trusted(
        "ansible's connect timeout for the host; inside --task-timeout"
    ),
    "ansible_timeout": _trusted("ansible's connect timeout for the host; inside --task-timeout"),
    "ansible_ssh_verbosity": _trusted("ssh's debug lines, on ssh's stderr"),
    "ansible_sftp_batch_mode": _trusted("sftp stops at the first failed transfer, or not"),
    # the base of every task
    "ansible_shell_executable": AnsibleVar(
        "refuse",
        "is the first word of the command ansible hands to ssh, which ssh reads as its own "
        "options when it starts with '-' (-oProxyCommand=... runs a program on the controller); "
        "an absolute path is accepted",
        shape=r"/[\w./+-]+",
    ),
    "ansible_module_compression": _trusted("how modules are packed; the script task sends none"),
    # sh shell plugin
    **{
        var: _trusted(_HOST_SIDE)
        for var in (
            "ansible_remote_tmp",
            "ansible_async_dir",
            "ansible_admin_users",
            "ansible_common_remote_group",
            "ansible_shell_allow_world_readable_temp",
            "ansible_system_tmpdirs",
        )
    },
    # sudo become plugin (ansible_become_method other than sudo is refused by sweep.inventory)
    "ansible_become_password": _trusted(_SECRET),
    "ansible_become_pass": _trusted(_SECRET),
    "ansible_sudo_pass": _trusted(_SECRET),
    "ansible_sudo_exe": _refuse(
        "names the program run instead of sudo (as ansible_become_exe, refused)"
    ),
    "ansible_sudo_flags": _refuse(
        "gives sudo flags sweep does not set (as ansible_become_flags, refused)"
    ),
    "ansible_sudo_user": _refuse("becomes a user sweep does not check; use ansible_become_user"),
    "ansible_sudo_chdir": _trusted("the folder on the host sudo starts in"),
}
# variables of plugins only a refused ansible_connection / ansible_become_method would select
UNREACHABLE = (
    "ansible_paramiko_",
    "ansible_winrm_",
    "ansible_psrp_",
    "ansible_local_",
    "ansible_docker_",
    "ansible_su_",
    "ansible_runas_",
    "ansible_network_os",
    "ansible_connection_user",
)
# ansible_<lang>_interpreter: read for modules, which the script task runs none of
INTERPRETER = re.compile(r"ansible_\w+_interpreter\Z")
_JINJA = ("{{", "{%", "{#")


def is_template(value: Any) -> bool:
    """Whether ansible would render `value` as a Jinja template (a string, or one inside a list or
    mapping)."""
    if isinstance(value, str):
        return any(mark in value for mark in _JINJA)
    if isinstance(value, Mapping):
        return any(is_template(k) or is_template(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(is_template(item) for item in value)
    return False


def refusal(var: str, value: Any) -> str | None:
    """Why the ansible engine refuses `var` set to `value` (None: it does not)."""
    rule = VARIABLES.get(var)
    if rule is None and not (var.startswith(UNREACHABLE) or INTERPRETER.match(var)):
        return None  # no plugin of ansible-core's ssh run reads it
    if rule is not None and rule.kind == "read":
        return None  # sweep.inventory reads it and refuses what it must (templates too)
    if is_template(value):
        return (
            "is a Jinja template, which ansible renders on the controller (a lookup('pipe') "
            "runs a program there)"
        )
    if (
        rule is not None
        and rule.kind == "refuse"
        and str(value).strip().lower() not in rule.accepted
        and not (rule.shape and isinstance(value, str) and re.fullmatch(rule.shape, value))
    ):
        return rule.why
    return None


def check_hosts(hosts: Sequence[Any], inventory_path: Path | None) -> None:
    """Before any host is contacted: InventoryError for the first host with a refused ansible_*
    variable."""
    for host in hosts:
        for var, value in host.vars.items():
            if not var.startswith("ansible_"):
                continue
            why = refusal(var, value)
            if why is not None:
                rule = VARIABLES.get(var)
                accepted = rule.accepted if rule is not None else ()
                fix = (
                    f"set {var} to {accepted[0]} or drop it"
                    if accepted
                    else f"set {var} to an absolute path or drop it"
                    if rule is not None and rule.shape
                    else f"drop {var} for these hosts"
                )
                raise InventoryError(
                    f"{host.name}: {var} {why}; sweep's ansible engine refuses it",
                    where=where_set(inventory_path, host.name, var),
                    fix=f"{fix}, or sweep them with --engine ssh",
                )


def where_set(inventory_path: Path | None, host: str, var: str) -> str | None:
    """The file:line that sets `var` for `host`: the first line naming it in host_vars/HOST, the
    inventory file, then group_vars (Ansible's precedence, highest first); the inventory file (or
    None) when none does (an -e extra var)."""
    if inventory_path is None or not Path(inventory_path).is_file():
        return None
    base = Path(inventory_path).parent
    named = re.compile(rf"(?<![\w.-]){re.escape(var)}\s*[:=]".encode())
    candidates = [
        *_vars_files(base / "host_vars", host),
        Path(inventory_path),
        *sorted(p for p in (base / "group_vars").rglob("*") if p.is_file()),
    ]
    for path in candidates:
        try:
            with open(path, "rb") as fh:
                for number, line in enumerate(fh, 1):
                    if named.search(line):
                        return f"{path}:{number}"
        except OSError:
            continue
    return str(inventory_path)


def _vars_files(folder: Path, name: str) -> list[Path]:
    found = []
    for candidate in (name, f"{name}.yml", f"{name}.yaml", f"{name}.json"):
        path = folder / candidate
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.is_file())
        elif path.is_file():
            found.append(path)
    return found
