"""The inventory as an operator's command line gives it, with Ansible's and ClusterShell's meaning.

* `VarLayers`: the variables the command line sets, in the two places Ansible puts them:
  ``-u USER``, ``--private-key FILE``, ``--become`` and ``--become-user USER`` *under* every
  inventory variable (Ansible: "command line values (for example, -u my_user, these are not
  variables)" have the lowest precedence; ``ansible_user`` in the inventory wins over ``-u``), and
  ``-e`` extra vars *over* all of them ("extra vars always win precedence").
* `parse_extra_vars`: ``-e key=value key2='a b'``, ``-e '{"key": 1}'`` (YAML or JSON) and
  ``-e @vars.yml``, merged left to right as ``ansible -e`` merges them.
* `inline_hosts`: an inline inventory, ``sweep run 'gpu01,gpu02:2222,'`` (Ansible's ``host_list``
  plugin: a string with a comma that names no file); `nodeset_inventory`: ``-w gpu[01-08]``, a
  folded node set expanded as ClusterShell's ``nodeset -e`` does.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from sweep.errors import InventoryError
from sweep.inventory.keyvalue import parse_kv

# Ansible's boolean(): what true and false are written as
# (ansible.module_utils.parsing.convert_bool)
TRUE_WORDS = frozenset({"y", "yes", "on", "1", "true", "t"})
FALSE_WORDS = frozenset({"n", "no", "off", "0", "false", "f", ""})
# The one rule of what is a secret, by name, at any depth: a variable, a mapping key inside a
# variable's value. No value under such a name is written to the run folder or stdout
# (`without_secrets`); a key file's path (`..._key_file`) is a path, not a secret
SECRET = re.compile(
    r"pass|secret|token|credential|api_?key|private_?key(?!_?file)|(?:\A|_)pw(?:_|\Z)", re.I
)
INLINE_NAME = "inline"  # the run folder's name part for an inline inventory (reports/<time>-inline)
# `name:port` as ansible's parse_address reads it: a host name of labels that neither start nor end
# with - or _ (else the whole entry is the name), or a bracketed address
_LABEL = r"\w[\w-]*(?<![_-])"
_PORTED = re.compile(rf"\A(?:\[(?P<v6>[^\]]+)\]|(?P<host>{_LABEL}(?:\.{_LABEL})*)):(?P<port>\d+)\Z")


@dataclass(frozen=True)
class VarLayers:
    """Variables of the command line: `under` every inventory variable (``-u``,
    ``--private-key``, ``--become``, ``--become-user``), `over` all of them (``-e``); each name
    -> (value, where it was set)."""

    under: Mapping[str, tuple[Any, str]] = field(default_factory=dict)
    over: Mapping[str, tuple[Any, str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.under or self.over)

    def to_dict(self) -> dict:
        """As a run's manifest keeps it: values and where, secrets left out at any depth
        (`without_secrets`)."""
        return {
            layer: without_secrets({k: list(v) for k, v in getattr(self, layer).items()})
            for layer in ("under", "over")
        }

    @classmethod
    def from_dict(cls, kept: Mapping | None) -> "VarLayers":
        kept = kept or {}
        return cls(
            **{
                layer: {k: tuple(v) for k, v in (kept.get(layer) or {}).items()}
                for layer in ("under", "over")
            }
        )


def is_secret(name: Any) -> bool:
    """Whether a variable or key of this name holds a secret (`SECRET`: pass, secret, token,
    credential, api_key, private_key, pw)."""
    return isinstance(name, str) and SECRET.search(name) is not None


def without_secrets(value: Any) -> Any:
    """`value` (JSON-like) with every mapping entry whose key `is_secret` left out, at any depth:
    what every writer of the run folder and of stdout keeps of variables (the manifest's
    ``inventory_vars``, the inventory snapshot's ``settings``, ``--list-hosts --json``). Walked
    without recursion."""
    out: list = [None]
    stack = [(value, out, 0)]
    while stack:
        item, parent, slot = stack.pop()
        if isinstance(item, Mapping):
            kept: dict = {}
            parent[slot] = kept
            for key, inner in item.items():
                if not is_secret(key):
                    kept[key] = None
                    stack.append((inner, kept, key))
        elif isinstance(item, (list, tuple)):
            made = [None] * len(item)
            parent[slot] = made
            stack.extend((inner, made, n) for n, inner in enumerate(item))
        else:
            parent[slot] = item
    return out[0]


def command_line_vars(
    user: str | None = None,
    private_key: str | None = None,
    become: bool = False,
    become_user: str | None = None,
    extra: tuple[str, ...] | list[str] = (),
) -> VarLayers:
    """The VarLayers of ``-u``, ``--private-key``, ``--become``, ``--become-user`` and
    the ``-e`` values."""
    under: dict[str, tuple[Any, str]] = {}
    for var, value, flag in (
        ("ansible_user", user, "-u"),
        ("ansible_private_key_file", private_key, "--private-key"),
        ("ansible_become", True if become else None, "--become"),
        ("ansible_become_user", become_user, "--become-user"),
    ):
        if value is not None:
            under[var] = (
                os.path.abspath(os.path.expanduser(value)) if flag == "--private-key" else value,
                f"the command line ({flag})",
            )
    return VarLayers(under=under, over=parse_extra_vars(extra))


def parse_extra_vars(values: tuple[str, ...] | list[str]) -> dict[str, tuple[Any, str]]:
    """``-e`` values, merged left to right (a later one wins): name -> (value, where it was set)."""
    merged: dict[str, tuple[Any, str]] = {}
    for text in values:
        if not text:
            continue
        if text.startswith("@"):
            merged.update(_vars_file(Path(text[1:])))
        elif text[0] in "/.":
            raise InventoryError(
                f"-e {text!r} looks like a file name",
                where="-e",
                fix=f"put @ before a vars file's name: -e @{text}",
            )
        elif text[0] in "[{":
            merged.update({k: (v, "-e") for k, v in _yaml_mapping(text, "-e").items()})
        else:
            merged.update({k: (v, "-e") for k, v in parse_kv(text).items()})
    return merged


def _yaml_mapping(text: str, where: str) -> dict:
    from sweep.inventory.yaml_lines import yaml_load

    data = yaml_load(text, Path(where), 1_000_000)
    if not isinstance(data, dict):
        raise InventoryError(
            f"-e {text[:60]!r} could not be made into a mapping of variables",
            where=where,
            fix='give a mapping: -e \'{"key": "value"}\' or key=value',
        )
    return {str(k): v for k, v in data.items()}


def _vars_file(path: Path) -> dict[str, tuple[Any, str]]:
    from sweep.inventory.files import read_text
    from sweep.inventory.yaml_lines import yaml_load

    if not path.is_file():
        raise InventoryError(
            "extra vars file not found", where=str(path), fix="give -e @FILE a YAML or JSON file"
        )
    data = yaml_load(read_text(path, 64 * 2**20), path, 1_000_000)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InventoryError(
            "extra vars file holds no mapping of names to values",
            where=f"{path}:1",
            fix="write one 'name: value' per line",
        )
    lines = getattr(data, "key_lines", {})
    return {str(k): (v, f"{path}:{lines.get(k, 1)}") for k, v in data.items()}


def ansible_bool(name: str, var: str, value: Any, where: str) -> bool:
    """An inventory boolean (ansible_become) as Ansible reads it: true / yes / on / 1
    and their opposites."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS | FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    raise InventoryError(
        f"{name}: {var} is {value!r}, not a boolean",
        where=where or None,
        fix=f"set {var} to true or false",
    )


def is_inline(source: str | os.PathLike) -> bool:
    """Whether an inventory argument is an inline host list: a comma in it, and no such file
    (Ansible's host_list)."""
    text = os.fspath(source)
    return "," in text and not os.path.exists(text)


def inline_hosts(text: str) -> list[tuple[str, int | None]]:
    """The hosts of an inline inventory, in order, each once: (name, port of
    ``name:port``, else None)."""
    found: dict[str, int | None] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        match = _PORTED.match(entry)
        name, port = entry, None
        if match and 0 < int(match["port"]) < 65536:
            name, port = match["v6"] or match["host"], int(match["port"])
        found.setdefault(name, port)
    if not found:
        raise InventoryError(
            "the inline inventory names no host",
            where=repr(text),
            fix="name hosts separated by commas: sweep run 'gpu01,gpu02,'",
        )
    return list(found.items())


def nodeset_inventory(folded: str, max_hosts: int = 100_000) -> str:
    """``-w gpu[01-08],login1`` as an inline inventory ("gpu01,...,login1,"), expanded by
    ClusterShell's NodeSet."""
    from ClusterShell.NodeSet import NodeSet, NodeSetParseError, RangeSetParseError

    try:
        nodes = NodeSet(folded)
    except (NodeSetParseError, RangeSetParseError) as err:
        raise InventoryError(
            f"-w {folded!r} is not a node set ({err})",
            where="-w",
            fix="write a folded node set as clush takes it: -w gpu[01-08,10]",
        ) from None
    if len(nodes) > max_hosts:
        raise InventoryError(
            f"-w {folded!r} names {len(nodes)} hosts, more than {max_hosts}",
            where="-w",
            fix="name fewer hosts, or raise --max-range-hosts",
        )
    if not len(nodes):
        raise InventoryError(
            f"-w {folded!r} names no host", where="-w", fix="name hosts: -w gpu[01-08]"
        )
    return ",".join(nodes) + ","
