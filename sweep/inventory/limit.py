"""Ansible host patterns for ``--limit``: which inventory hosts a pattern string selects.

Follows ansible-core's ``InventoryManager`` (``split_host_pattern``, ``order_patterns``,
``_match_one_pattern``) for the cases operators type:

- ``gpu01``, ``gpu``: a host name, or a group name (all hosts of the group and its children);
- ``gpu0*``, ``h200_rack?``: a shell glob, matched against group names and host names;
- ``~gpu0[1-3]$``: a regular expression (``re.match``, so anchored at the start only);
- ``all`` or ``*``: every host;
- ``a,b`` or ``a:b``: a union; ``&x`` keeps only hosts also in ``x``; ``!x`` removes them.
  As in Ansible, plain patterns are evaluated first, then the ``&`` ones, then the ``!`` ones,
  whatever order they were written in; with only ``&`` / ``!`` patterns, ``all`` is implied;
- ``gpu[0]``, ``gpu[2:5]``, ``gpu[-1]``: a subscript of the hosts a pattern matched. It is *not* a
  host range: ``gpu[01:04]`` is hosts 1 to 4 of group ``gpu``, as in Ansible;
- ``@file``: one pattern per line of a file (Ansible's retry-file syntax).

A subscript indexes the list Ansible's ``_enumerate_matches`` builds: the hosts of every group the
expression matches, in the order of the inventory's groups, each group's hosts in ``Group.get_hosts``
order (its own hosts, then its children's, breadth first: `sweep.inventory.formats.GroupGraph.members`),
then, for a glob, regex or a name no group has, the matching hosts in inventory order; duplicates
stay in that list, as in Ansible (``*[1]`` can be the host ``*[0]`` is). Where a group has nested
children on more than one branch, Ansible orders the deeper levels by iterating a ``set`` of Group
objects, so its own answer changes from run to run; sweep takes them breadth first in declaration order.

Stricter than Ansible: a ``~`` pattern must compile. Ansible splits ``~[unclosed`` at the bracket
into ``~`` (every host) and ``unclosed``; sweep refuses it with the regex error (exit 2). The hosts
come back in inventory order, whatever order the patterns had.
"""
from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from sweep.errors import LimitError
from sweep.text import plural

_SUBSCRIPT = re.compile(r"^(.+)\[(?:(-?[0-9]+)|([0-9]+)([:-])([0-9]*))\]$")
_COLON_SEPARATED = re.compile(r"(?:[^\s:\[\]]|\[[^\]]*\])+")
_HOST_WITH_PORT = re.compile(r"^(?:\[[^\]]+\]|(?:[\w.-]|\[[^\]]*\])+):[0-9]+$")
_GLOB_CHARS = (".", "?", "*", "[")


def split_patterns(limit: str) -> list[str]:
    """Split a ``--limit`` string into single patterns, reading ``@file`` entries."""
    if "," in limit:
        parts = limit.split(",")
    elif _is_one_address(limit.strip()):
        # colons inside an IPv6 address or a host:port are not separators (Ansible's rule)
        parts = [limit]
    else:
        parts = _COLON_SEPARATED.findall(limit)
        _check_nothing_dropped(limit, parts)
    patterns: list[str] = []
    for part in (p.strip() for p in parts):
        if part.startswith("@"):
            patterns.extend(_read_limit_file(part[1:]))
        elif part:
            patterns.append(part)
    return patterns


def _check_nothing_dropped(limit: str, parts: list[str]) -> None:
    """A ':'-list keeps every character but its separators; an unbalanced '[' or ']' would be dropped."""
    if re.sub(r"[\s:]", "", limit) == re.sub(r"[\s:]", "", "".join(parts)):
        return
    if limit.lstrip().startswith("~"):
        _compile_regex(limit.strip())
    raise LimitError(f"--limit '{limit}' has an unbalanced '[' or ']'",
                     fix="close the bracket (gpu[0], gpu[1:3]) or separate patterns with ','")


def _compile_regex(pattern: str):
    try:
        return re.compile(pattern[1:])
    except re.error as err:
        raise LimitError(
            f"--limit pattern '{pattern}' is not a valid regular expression ({err})",
            fix="fix the expression after '~', or use a glob such as 'gpu0*'",
        ) from None


def match_hosts(limit: str, hosts: Sequence[str], groups: Mapping[str, Sequence[str]]) -> list[str]:
    """Names of the ``hosts`` that ``limit`` selects, in inventory order.

    ``groups`` maps every group name (``all`` included) to its hosts, children's hosts included.
    Returns an empty list when nothing matches; raises LimitError for a pattern that cannot be read.
    """
    position = {name: index for index, name in enumerate(hosts)}
    patterns = split_patterns(limit)
    plain = [p for p in patterns if p[0] not in "&!"] or ["all"]
    ordered = plain + [p for p in patterns if p[0] == "&"] + [p for p in patterns if p[0] == "!"]
    selected: dict[str, None] = {}
    for pattern in ordered:
        if pattern in position:
            selected[pattern] = None
            continue
        matched = set(_match_one(pattern[1:] if pattern[0] in "&!" else pattern, position, groups))
        if pattern[0] == "!":
            selected = {name: None for name in selected if name not in matched}
        elif pattern[0] == "&":
            selected = {name: None for name in selected if name in matched}
        else:
            selected.update(dict.fromkeys(sorted(matched, key=position.__getitem__)))
    return sorted(selected, key=position.__getitem__)


def _match_one(pattern: str, position: Mapping[str, int], groups: Mapping[str, Sequence[str]]) -> list[str]:
    expression, subscript = _split_subscript(pattern)
    matches = _enumerate(expression, position, groups)
    if not matches or subscript is None:
        return matches
    start, end = subscript
    if end:
        return matches[start:(len(matches) - 1 if end == -1 else end) + 1]
    try:
        return [matches[start]]
    except IndexError:
        raise LimitError(
            f"--limit pattern '{pattern}' asks for host {start} of {expression!r}, "
            f"which matches only {plural(len(matches), 'host')}",
            fix=f"use an index from 0 to {len(matches) - 1}, or a slice such as {expression}[0:3]",
        ) from None


def _enumerate(expression: str, position: Mapping[str, int], groups: Mapping[str, Sequence[str]]) -> list[str]:
    """Hosts of the groups the expression names, plus hosts it names directly, in Ansible's order."""
    if expression == "~":
        raise LimitError("--limit pattern '~' has no regular expression after the '~'",
                         fix="write the expression after '~' (~gpu0[1-4]), or use 'all' for every host")
    matcher = (_compile_regex(expression) if expression.startswith("~")
               else re.compile(fnmatch.translate(expression))).match
    found: list[str] = []  # duplicates kept: a subscript indexes this list, as in Ansible
    matched_groups = [group for group in groups if matcher(group)]
    for group in matched_groups:
        found.extend(groups[group])
    if not matched_groups or expression[0] == "~" or any(c in expression for c in _GLOB_CHARS):
        found.extend(name for name in position if matcher(name))
    return found


def _split_subscript(pattern: str) -> tuple[str, tuple[int, int | None] | None]:
    if pattern.startswith("~"):
        return pattern, None
    match = _SUBSCRIPT.match(pattern)
    if not match:
        return pattern, None
    expression, index, start, _separator, end = match.groups()
    if index:
        return expression, (int(index), None)
    return expression, (int(start), int(end) if end else -1)


def _is_one_address(pattern: str) -> bool:
    if _HOST_WITH_PORT.match(pattern):
        return True
    try:
        return ipaddress.ip_address(pattern).version == 6
    except ValueError:
        return False


def _read_limit_file(name: str) -> list[str]:
    try:
        text = Path(name).read_text(encoding="utf-8")
    except OSError as err:
        raise LimitError(
            f"--limit '@{name}' names a file that cannot be read ({err.strerror})",
            fix="give the path of a file listing one host or group per line",
        ) from None
    return [line.strip() for line in text.splitlines() if line.strip()]
