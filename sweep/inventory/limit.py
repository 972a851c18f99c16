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
expression matches, in the order of the inventory's groups, each group's hosts in
``Group.get_hosts`` order (its own hosts, then its children's, breadth first:
`sweep.inventory.formats.GroupGraph.members`), then, for a glob, regex or a name no group has, the
matching hosts in inventory order; duplicates stay in that list, as in Ansible (``*[1]`` can be the
host ``*[0]`` is). Where a group has nested children on more than one branch, Ansible orders the
deeper levels by iterating a ``set`` of Group objects, so its own answer changes from run to run;
sweep takes them breadth first in declaration order.

Where Ansible's reading of a pattern matches no host, sweep reads it as ClusterShell's folded node
set, the form sweep prints its own host lists in (``gpu[01-02,04]``, ``gpu0[1-3].dc1``), and keeps
the inventory hosts it names. So Ansible's meaning comes first: ``gpu[1:3]`` and, with a group
``gpu``, ``gpu[1-3]`` are subscripts of that group as in Ansible; without one, ``gpu[1-3]`` names
gpu1, gpu2 and gpu3. Ansible splits ``gpu[01-02,04]`` at its comma into two pieces that match
nothing; when a reading of the whole string leaves such a piece unmatched, sweep reads it again with
brackets kept whole. A pattern that matches nothing either way is ignored with Ansible's own warning
(``Could not match supplied host pattern, ignoring: gpu99``, an `InventoryWarning`, given when the
limit still selects some host: otherwise "matches no host" is the one error); the names of a node
set that are not in the inventory are ignored with the same warning. A node set may name at most
100,000 hosts (`FOLDED_NAMES_MAX`).

Stricter than Ansible: a ``~`` pattern must compile. Ansible splits ``~[unclosed`` at the
bracket into ``~`` (every host) and ``unclosed``; sweep refuses it with the regex error (exit
2). The hosts come back in Ansible's order: each pattern's matches in the order it found them (a
group's in ``Group.get_hosts`` order, a glob's in inventory order), patterns in the order
Ansible evaluates them.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException
from ClusterShell.RangeSet import RangeSetException

from sweep.errors import InventoryWarning, LimitError
from sweep.text import plural

_SUBSCRIPT = re.compile(r"^(.+)\[(?:(-?[0-9]+)|([0-9]+)([:-])([0-9]*))\]$")
_COLON_SEPARATED = re.compile(r"(?:[^\s:\[\]]|\[[^\]]*\])+")
_HOST_WITH_PORT = re.compile(r"^(?:\[[^\]]+\]|(?:[\w.-]|\[[^\]]*\])+):[0-9]+$")
_GLOB_CHARS = (".", "?", "*", "[")
_FOLDED_COMMA = re.compile(r"\[[^\]]*,[^\]]*\]")  # gpu[01-02,04]: a comma inside brackets
_RANGE_ITEM = re.compile(r"^\s*([0-9]+)(?:-([0-9]+))?(?:/([0-9]+))?\s*$")
# names one folded node set may stand for (ClusterShell expands them all)
FOLDED_NAMES_MAX = 100_000


def split_patterns(limit: str, brackets_whole: bool = False) -> list[str]:
    """Split a ``--limit`` string into single patterns, reading ``@file`` entries.

    As Ansible splits it, or with `brackets_whole`, never at a comma inside brackets
    (a folded node set).
    """
    commas = (
        _top_level_commas(limit) if brackets_whole else [i for i, c in enumerate(limit) if c == ","]
    )
    if commas:
        parts = [limit[a + 1 : b] for a, b in zip([-1, *commas], [*commas, len(limit)])]
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
    """A ':'-list keeps every character but its separators; an unbalanced '[' or ']'
    would be dropped."""
    if re.sub(r"[\s:]", "", limit) == re.sub(r"[\s:]", "", "".join(parts)):
        return
    if limit.lstrip().startswith("~"):
        _compile_regex(limit.strip())
    raise LimitError(
        f"--limit '{limit}' has an unbalanced '[' or ']'",
        fix="close the bracket (gpu[0], gpu[1:3]) or separate patterns with ','",
    )


def _compile_regex(pattern: str):
    try:
        return re.compile(pattern[1:])
    except re.error as err:
        raise LimitError(
            f"--limit pattern '{pattern}' is not a valid regular expression ({err})",
            fix="fix the expression after '~', or use a glob such as 'gpu0*'",
        ) from None


def _top_level_commas(limit: str) -> list[int]:
    """Positions of the commas outside brackets."""
    depth, out = 0, []
    for index, char in enumerate(limit):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth <= 0:
            out.append(index)
    return out


@dataclass
class _Reading:
    """What one split of a --limit string selects: the hosts, the patterns that matched
    nothing, the warnings."""

    hosts: list[str]
    unmatched: int = 0
    warnings: list[str] = field(default_factory=list)


def match_hosts(limit: str, hosts: Sequence[str], groups: Mapping[str, Sequence[str]]) -> list[str]:
    """Names of the ``hosts`` that ``limit`` selects, in the order
    ``ansible -i INV LIMIT --list-hosts`` lists them.

    ``groups`` maps every group name (``all`` included) to its hosts, children's hosts included.
    Returns an empty list when nothing matches; raises LimitError for a pattern that cannot be read.
    A pattern that matches nothing is ignored with Ansible's warning (an `InventoryWarning`), unless
    nothing at all is selected: then the caller's one error line says so.
    """
    position = {name: index for index, name in enumerate(hosts)}
    reading = _evaluate(split_patterns(limit), position, groups)
    if reading.unmatched and _FOLDED_COMMA.search(limit):
        # Ansible splits gpu[01-02,04] at its comma into pieces that match nothing: read it whole
        reading = _evaluate(split_patterns(limit, brackets_whole=True), position, groups)
    # each once, as Ansible's display
    for message in dict.fromkeys(reading.warnings if reading.hosts else ()):
        # nothing selected: the caller's error says it all
        warnings.warn(message, InventoryWarning, stacklevel=2)
    return reading.hosts


def _evaluate(
    patterns: list[str], position: Mapping[str, int], groups: Mapping[str, Sequence[str]]
) -> _Reading:
    """Ansible's _evaluate_patterns: plain patterns, then the '&' ones, then the '!' ones (only
    '&'/'!': 'all' first); each plain pattern's new hosts appended in the order it matched them."""
    plain = [p for p in patterns if p[0] not in "&!"] or ["all"]
    ordered = plain + [p for p in patterns if p[0] == "&"] + [p for p in patterns if p[0] == "!"]
    selected: dict[str, None] = {}
    reading = _Reading([])
    for pattern in ordered:
        if pattern in position:
            selected[pattern] = None
            continue
        found, notes = _match_term(pattern[1:] if pattern[0] in "&!" else pattern, position, groups)
        reading.unmatched += not found
        reading.warnings += notes
        if pattern[0] == "!":
            matched = set(found)
            selected = {name: None for name in selected if name not in matched}
        elif pattern[0] == "&":
            matched = set(found)
            selected = {name: None for name in selected if name in matched}
        else:
            selected.update(dict.fromkeys(found))
    reading.hosts = list(selected)
    return reading


def _match_term(term: str, position: Mapping[str, int], groups: Mapping[str, Sequence[str]]):
    """(hosts, warnings) of one pattern without its '&' / '!': Ansible's reading, else
    a folded node set."""
    matches, expression, quiet = _match_one(term, position, groups)
    if matches:
        return matches, []
    folded = _folded(term, position)
    if folded is not None and folded[0]:
        found, missing = folded
        return found, [
            _ignoring(str(NodeSet.fromlist(missing, resolver=RESOLVER_NOGROUP)))
        ] if missing else []
    # Ansible is silent on an empty group or slice
    return [], [] if quiet else [_ignoring(expression)]


def _ignoring(text: str) -> str:
    return f"Could not match supplied host pattern, ignoring: {text}"


def _folded(term: str, position: Mapping[str, int]) -> tuple[list[str], list[str]] | None:
    """(inventory hosts, other names) of `term` read as a folded node set (gpu[01-02,04]), or None:
    not one (a regex, a glob, no bracket, or a form ClusterShell refuses)."""
    if term[:1] in ("~", "@") or "[" not in term or "*" in term or "?" in term:
        return None
    size = _folded_size(term)
    if size is None:
        return None
    if size > FOLDED_NAMES_MAX:
        raise LimitError(
            f"--limit pattern '{term}' names {size:,} hosts, more than {FOLDED_NAMES_MAX:,}",
            fix="narrow the range, or use a group or a glob (gpu0*)",
        )
    try:
        names = list(NodeSet(term, resolver=RESOLVER_NOGROUP))
    # ClusterShell's own, and gpu[-1]
    except (NodeSetException, RangeSetException, ValueError, TypeError):
        return None
    return [n for n in names if n in position], [n for n in names if n not in position]


def _folded_size(term: str) -> int | None:
    """How many names a node set such as gpu[01-04,08].dc1 stands for, counted before ClusterShell
    expands them (None: a bracket that holds no range list)."""
    total = 0
    for piece in re.split(r"[,!&^](?![^\[]*\])", term):
        size = 1
        for body in re.findall(r"\[([^\]]*)\]", piece):
            count = 0
            for item in body.split(","):
                found = _RANGE_ITEM.match(item)
                if not found:
                    return None
                start, end, step = found.groups()
                count += 1 if end is None else max(0, (int(end) - int(start)) // int(step or 1) + 1)
            size *= count
        total += size
    return total


def _match_one(pattern: str, position: Mapping[str, int], groups: Mapping[str, Sequence[str]]):
    """Ansible's reading of one pattern: (hosts, its expression without the subscript, whether
    Ansible would stay silent about it: a group or host matched before the subscript, or 'all')."""
    expression, subscript = _split_subscript(pattern)
    matches, named_group = _enumerate(expression, position, groups)
    quiet = named_group or bool(matches) or expression == "all"
    if not matches or subscript is None:
        return matches, expression, quiet
    start, end = subscript
    if end:
        return matches[start : (len(matches) - 1 if end == -1 else end) + 1], expression, quiet
    try:
        return [matches[start]], expression, quiet
    except IndexError:
        raise LimitError(
            f"--limit pattern '{pattern}' asks for host {start} of {expression!r}, "
            f"which matches only {plural(len(matches), 'host')}",
            fix=f"use an index from 0 to {len(matches) - 1}, or a slice such as {expression}[0:3]",
        ) from None


def _enumerate(expression: str, position: Mapping[str, int], groups: Mapping[str, Sequence[str]]):
    """Hosts of the groups the expression names, plus hosts it names directly, in Ansible's order;
    and whether a group matched."""
    if expression == "~":
        raise LimitError(
            "--limit pattern '~' has no regular expression after the '~'",
            fix="write the expression after '~' (~gpu0[1-4]), or use 'all' for every host",
        )
    matcher = (
        _compile_regex(expression)
        if expression.startswith("~")
        else re.compile(fnmatch.translate(expression))
    ).match
    found: list[str] = []  # duplicates kept: a subscript indexes this list, as in Ansible
    matched_groups = [group for group in groups if matcher(group)]
    for group in matched_groups:
        found.extend(groups[group])
    if not matched_groups or expression[0] == "~" or any(c in expression for c in _GLOB_CHARS):
        found.extend(name for name in position if matcher(name))
    return found, bool(matched_groups)


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
