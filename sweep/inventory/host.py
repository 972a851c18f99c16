"""One inventory host and how to reach it: a `Host` built from its merged variables, each carried
with the file:line it came from (`make_host`).

Connection variables become Host fields: ``ansible_host`` (or ``ansible_ssh_host``),
``ansible_port`` (or ``ansible_ssh_port``), ``ansible_user`` (or ``ansible_ssh_user``),
``ansible_private_key_file`` (or ``ansible_ssh_private_key_file``), ``ansible_python_interpreter``
(``auto*`` means ``python3``), ``ansible_ssh_common_args``; ``Host.origins`` names, for each field,
the variable and the file:line it was set at. As in Ansible's ssh plugin, the ``ansible_ssh_``
spelling wins when both are set.

A connection value that is a Jinja template (``ansible_user: "{{ kayobe_ansible_user }}"``) is not
rendered: the field stays empty and ``Host.unrendered`` keeps the text and where it is written.
Listings show it as it is; `refuse_unrendered` refuses the hosts about to be contacted, so a
template on hosts outside the limit stops nothing. A vault value, a list or a mapping in a
connection variable, an address or user that OpenSSH 9.6 would refuse (`sweep.inventory.names`)
are refused at once.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sweep.errors import InventoryError
from sweep.inventory.command_line import ansible_bool, without_secrets
from sweep.inventory.groups import IMPLICIT_GROUPS
from sweep.inventory.names import RULE_FIX, RULE_WHY, hostname_problem, ruser_problem
from sweep.inventory.yaml_lines import Vaulted, value_kind

SETTINGS_PREFIX = "sweep_"
DEFAULT_PYTHON = "python3"
ADDRESS_VARS = ("ansible_host", "ansible_ssh_host")


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
    # where ansible_ssh_common_args, ansible_ssh_extra_args and the key file variable
    # were set (file:line)
    ssh_args_where: Mapping[str, str] = field(
        default_factory=dict, hash=False, repr=False, compare=False
    )
    # field (address, port, user, key_file, python, ssh_common_args, become_user) ->
    # (variable, file:line)
    origins: Mapping[str, tuple[str, str]] = field(
        default_factory=dict, hash=False, repr=False, compare=False
    )
    # field -> (variable, its text, file:line) of a connection value left unrendered
    # (a Jinja template)
    unrendered: Mapping[str, tuple[str, str, str]] = field(
        default_factory=dict, hash=False, repr=False, compare=False
    )


LISTED_FIELDS = (
    "address",
    "port",
    "user",
    "key_file",
    "proxy_jump",
    "python",
    "become",
    "become_user",
)


def describe(host: Host) -> dict:
    """What sweep will connect to for `host`, JSON-able (``sweep run --list-hosts --json``): each
    field of LISTED_FIELDS, the variable and file:line each came from (``from``), the groups, and
    the values left unrendered (a Jinja template, shown as written). No variable is listed whole:
    passwords stay out."""
    origins = {
        name: f"{var} at {where}" if where else var for name, (var, where) in host.origins.items()
    }
    if "proxy_jump" not in origins and "ssh_common_args" in origins and host.proxy_jump:
        origins["proxy_jump"] = origins["ssh_common_args"]
    return without_secrets(
        {
            "name": host.name,
            **{name: getattr(host, name) for name in LISTED_FIELDS},
            "groups": list(host.groups),
            "from": {name: origins[name] for name in LISTED_FIELDS if name in origins},
            "unrendered": {
                name: {"variable": var, "value": text, "at": where}
                for name, (var, text, where) in host.unrendered.items()
            },
        }
    )


class _Template(InventoryError):
    """A connection value that is a Jinja template: (variable, text, file:line); caught
    where it is raised."""

    def __init__(self, key: str, text: str, where: str):
        super().__init__(
            f"{key} is a Jinja template ({text!r})",
            where=where,
            fix=f"write the value of {key} out",
        )
        self.args = (key, text, where)


def template_error(name: str, var: str, text: str, where: str) -> InventoryError:
    """The refusal of a host whose connection value `var` is the template `text`
    (sweep renders none)."""
    return InventoryError(
        f"{name}: {var} is a Jinja template ({text!r}); sweep does not render templates",
        where=where,
        fix=f"write the value of {var} out in the inventory",
    )


def refuse_unrendered(hosts) -> None:
    """Refuse the first of `hosts` (about to be contacted) with a connection
    value left unrendered."""
    for host in hosts:
        for var, text, where in host.unrendered.values():
            raise template_error(host.name, var, text, where)


def _connection(
    name: str, merged: Mapping[str, tuple[Any, str]], keys: tuple[str, ...]
) -> tuple[str, str | None, str]:
    """`name`'s (variable, its value as text or None, file:line) among `keys`; the later spelling
    wins, as in ansible."""
    key = None
    for candidate in keys:
        pair = merged.get(candidate)
        if pair is not None and pair[0] is not None:
            key = candidate
    if key is None:
        return keys[0], None, ""
    value, where = merged[key]
    # the common case, fast (most hosts, 100,000 of them)
    if type(value) is str and "{" not in value:
        return key, value, where
    if isinstance(value, Vaulted):
        raise InventoryError(
            f"{name}: {key} is vault-encrypted and sweep cannot decrypt it",
            where=where,
            fix=f"set {key} in plain text for this host",
        )
    if isinstance(value, str) and ("{{" in value or "{%" in value):
        raise _Template(key, value, where)
    if isinstance(value, (bool, Mapping, list, tuple)):
        raise InventoryError(
            f"{name}: {key} is {value_kind(value)}, not a single value",
            where=where,
            fix=f"set {key} to a plain value",
        )
    return key, freeze(value) if isinstance(value, str) else str(value), where


def make_host(
    name: str,
    merged: Mapping[str, tuple[Any, str]],
    groups: set[str] | tuple[str, ...],
    frozen_pairs: dict[int, tuple[tuple, Any]] | None = None,
    listed: str = "",
) -> Host:
    """Build a Host from merged vars, each var carried with the file:line it came from.

    `frozen_pairs` keeps the frozen value of each (value, where) pair across hosts: a group's vars
    are frozen once, not once per host (and a value shared through YAML aliases once, not per use).
    """
    connection = _ConnectionVars(name, merged)
    origins, unrendered = connection.origins, connection.unrendered
    port = _port(name, merged, connection("port", "ansible_port", "ansible_ssh_port"))
    _, common_args, common_where = connection("ssh_common_args", "ansible_ssh_common_args")
    _, extra_args, extra_where = connection("ssh_extra_args", "ansible_ssh_extra_args")
    key_var, key_file, key_where = connection(
        "key_file", "ansible_private_key_file", "ansible_ssh_private_key_file"
    )
    python = connection("python", "ansible_python_interpreter")[1] or DEFAULT_PYTHON
    address_var, address, address_where = connection("address", *ADDRESS_VARS)
    user = _checked_user(name, connection("user", "ansible_user", "ansible_ssh_user"))
    become, become_user = _become(name, merged, connection)
    if become:
        origins["become"] = ("ansible_become", merged.get("ansible_become", (None, ""))[1])
    address = (
        ""
        if "address" in unrendered
        else checked_address(name, address_var, address, address_where, listed)
    )
    frozen = _frozen_vars(merged, {} if frozen_pairs is None else frozen_pairs)
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
        ssh_args_where=MappingProxyType(
            {
                "ansible_ssh_common_args": common_where,
                "ansible_ssh_extra_args": extra_where,
                key_var: key_where,
            }
        ),
        origins=MappingProxyType(origins),
        unrendered=MappingProxyType(unrendered),
        groups=groups
        if isinstance(groups, tuple)
        else tuple(sorted(set(groups) - set(IMPLICIT_GROUPS))),
        vars=frozen,
        settings=_settings(frozen),
    )


class _ConnectionVars:
    """Reads a host's connection variables (`name, *keys` -> (var, value, where)), keeping where
    each came from (`origins`) and the templates it cannot render (`unrendered`)."""

    def __init__(self, name: str, merged: Mapping[str, tuple[Any, str]]):
        self.name, self.merged = name, merged
        self.origins: dict[str, tuple[str, str]] = {}
        self.unrendered: dict[str, tuple[str, str, str]] = {}

    def __call__(self, field_name: str, *keys: str) -> tuple[str, str | None, str]:
        try:
            found = _connection(self.name, self.merged, keys)
        except _Template as template:
            self.unrendered[field_name] = template.args
            return template.args[0], None, template.args[2]
        if found[1] is not None:
            self.origins[field_name] = (found[0], found[2])
        return found


def _settings(frozen: Mapping[str, Any]) -> MappingProxyType:
    """The host's sweep_* variables by their names without the prefix (sweep_forks -> forks)."""
    return MappingProxyType(
        {
            key[len(SETTINGS_PREFIX) :]: value
            for key, value in frozen.items()
            if key.startswith(SETTINGS_PREFIX) and len(key) > len(SETTINGS_PREFIX)
        }
    )


def _port(
    name: str, merged: Mapping[str, tuple[Any, str]], found: tuple[str, str | None, str]
) -> int | None:
    port_key, port_text, port_where = found
    if port_text is None:
        return None
    if not port_text.strip().isdigit() or not 0 < int(port_text) < 65536:
        raise InventoryError(
            f"{name}: {port_key} is {merged[port_key][0]!r}, not a port number",
            where=port_where,
            fix="set it to a whole number from 1 to 65535",
        )
    return int(port_text)


def _frozen_vars(
    merged: Mapping[str, tuple[Any, str]], memo: dict[int, tuple[tuple, Any]]
) -> Mapping[str, Any]:
    values = {}
    for key, pair in merged.items():
        kept = memo.get(id(pair))
        if kept is None or kept[0] is not pair:
            kept = memo[id(pair)] = (pair, freeze(pair[0]))
        values[key] = kept[1]
    return MappingProxyType(values)


_BECOME_REFUSED = ("ansible_become_exe", "ansible_become_flags")


def _become(
    name: str, merged: Mapping[str, tuple[Any, str]], connection
) -> tuple[bool, str | None]:
    """(become, the user to become) from ansible_become, ansible_become_user and
    ansible_become_method: only sudo, run with -n (never a password prompt); a method, program or
    flags sweep would not honour are refused."""
    value, where = merged.get("ansible_become", (None, ""))
    if value is None or not ansible_bool(name, "ansible_become", value, where):
        return False, None
    method, method_where = merged.get("ansible_become_method", (None, ""))
    if method is not None and str(method) != "sudo":
        raise InventoryError(
            f"{name}: ansible_become_method is {method!r}: sweep becomes another user through "
            "sudo -n only (never a password prompt)",
            where=method_where or where or None,
            fix="set ansible_become_method: sudo for the hosts sweep sweeps (with a NOPASSWD "
            "sudoers rule), or sweep them without become",
        )
    for var in _BECOME_REFUSED:
        if merged.get(var, (None,))[0] is not None:
            raise InventoryError(
                f"{name}: {var} is set: sweep runs sudo -n itself and honours no other program "
                "or flags",
                where=merged[var][1] or None,
                fix=f"drop {var} for these hosts",
            )
    var, user, user_where = connection("become_user", "ansible_become_user")
    _checked_user(name, (var, user, user_where))
    return True, user or "root"


def checked_address(name: str, var: str, address: str | None, where: str, listed: str = "") -> str:
    """The address ssh is given for `name` (its ansible_host, else its name; '' stays ''), if
    OpenSSH's valid_hostname accepts it: it is expanded as %h and %n into ProxyCommand and
    Match exec lines."""
    if address is None:
        var, address, where = "host name (no ansible_host)", name, listed
    problem = hostname_problem(address)
    if problem is not None:
        raise InventoryError(
            f"{name}: {var} {address!r} {problem}: OpenSSH refuses it as a host name "
            f"(valid_hostname, {RULE_WHY})",
            where=where or None,
            fix=RULE_FIX,
        )
    return address


def _checked_user(name: str, found: tuple[str, str | None, str]) -> str | None:
    """ansible_user (or ansible_ssh_user), if OpenSSH's valid_ruser accepts it (it is
    %r in ssh_config)."""
    var, user, where = found
    problem = None if user is None else ruser_problem(user)
    if problem is not None:
        raise InventoryError(
            f"{name}: {var} {user!r} {problem}: OpenSSH refuses it as a user name "
            f"(valid_ruser, {RULE_WHY})",
            where=where or None,
            fix=RULE_FIX,
        )
    return user


def _proxy_jump(common_args: str | None, name: str, where: str) -> str | None:
    """The jump host of ``-J host`` / ``-o ProxyJump=host`` in ansible_ssh_common_args."""
    if not common_args:
        return None
    try:
        words = shlex.split(common_args)
    except ValueError as err:
        raise InventoryError(
            f"{name}: ansible_ssh_common_args cannot be split ({err})",
            where=where,
            fix="close the quote in ansible_ssh_common_args",
        ) from None
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


_PLAIN = frozenset({str, int, float, bool, type(None)})


def freeze(value: Any) -> Any:
    """Deep read-only copy with plain types (drops ansible-core's tagged str/int subclasses)."""
    if type(value) in _PLAIN:
        return value
    if isinstance(value, Mapping):
        return MappingProxyType({freeze(key): freeze(item) for key, item in value.items()})
    if isinstance(value, (list, tuple, set, frozenset)):
        return tuple(freeze(item) for item in value)
    for plain in (bool, int, float, str):
        if isinstance(value, plain):
            return plain(value) if plain is not str else str.__str__(value)
    return value


def thaw(value: Any) -> Any:
    """A frozen value as plain JSON-able data."""
    if isinstance(value, Mapping):
        return {str(key): thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thaw(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
