"""The line-keeping YAML loader: every mapping remembers the line of each key (inventories,
vars files, and the expectations files of `sweep.audit.expect`), with ansible's ``!unsafe``
and ``!vault`` tags.

Bounded, because a YAML file can be a bomb: aliases may add at most ``max_values`` values to a file
once expanded (the billion laughs: 9 levels of 10 aliases are 10**9 values) and a document nests at
most `MAX_YAML_DEPTH` deep; both are checked before anything is constructed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from sweep.errors import InventoryError

MAX_YAML_DEPTH = 100
DEFAULT_MAX_VALUES = 1_000_000  # InventoryLimits.yaml_values, --max-yaml-values


class LineMapping(dict):
    """A YAML mapping that remembers the line of each of its keys."""

    key_lines: dict[Any, int]


class Vaulted(str):
    """A ``!vault`` value: ciphertext sweep keeps but cannot read."""


# ansible-core parses YAML with libyaml where PyYAML has it (CSafeLoader), and libyaml refuses some
# documents the pure-Python parser accepts (``{p01:, p02:}``): the same parser, the same answer.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LineLoader(_SAFE_LOADER):  # type: ignore[valid-type,misc]
    """A safe loader (libyaml's where PyYAML has it, as ansible's) whose mappings are LineMappings
    (inventories here, expectations files in sweep.audit.expect).

    With `refuse_duplicates`, a key written twice in one mapping calls `duplicate_key` (which
    raises); otherwise the later one wins, as in YAML and Ansible.
    """

    refuse_duplicates = False

    def duplicate_key(
        self, key: Any, first_line: int, node: yaml.Node
    ) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


def _construct_mapping(loader: LineLoader, node: yaml.MappingNode):
    data = LineMapping()
    yield data
    if loader.refuse_duplicates:
        seen: dict[Any, int] = {}
        # explicit keys only: a key may override one merged in with '<<'
        for key_node, _ in node.value:
            if key_node.tag != "tag:yaml.org,2002:merge":
                key = loader.construct_object(key_node, deep=True)
                if key in seen:
                    loader.duplicate_key(key, seen[key], key_node)
                seen[key] = key_node.start_mark.line + 1
    data.update(loader.construct_mapping(node))  # flattens '<<' merges into node.value first
    data.key_lines = {
        loader.construct_object(key): key.start_mark.line + 1 for key, _ in node.value
    }


LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


# libyaml where present, as Ansible: ~10x faster
class _LineLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """The inventory's loader: LineMappings, and ansible's ``!unsafe`` / ``!vault`` tags."""

    refuse_duplicates = False


class _PureLineLoader(LineLoader):
    """The same in pure Python: its error messages are the ones users see (and tests pin)."""


for _loader in (_LineLoader, _PureLineLoader):
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    _loader.add_constructor("!unsafe", lambda loader, node: str(loader.construct_scalar(node)))
    _loader.add_constructor("!vault", lambda loader, node: Vaulted(loader.construct_scalar(node)))


def yaml_load(text: str, path: Path, max_values: int | None = DEFAULT_MAX_VALUES) -> Any:
    """The YAML document in `text`, its aliases bounded (`bounded_expansion`);
    InventoryError says why not."""
    try:
        return _load(text, _LineLoader, path, max_values)
    except yaml.YAMLError:
        pass
    try:  # the same text again, for the pure-Python parser's message
        return _load(text, _PureLineLoader, path, max_values)
    except yaml.MarkedYAMLError as err:
        # an unclosed quote or bracket is reported at the end of the file; its start is more useful
        at_end = err.context_mark and (
            any(end in (err.problem or "") for end in ("end of stream", "<stream end>"))
            or (err.problem_mark and not text[err.problem_mark.index :].strip())
        )
        mark = err.context_mark if at_end else err.problem_mark or err.context_mark
        context = f"{err.context}: " if err.context else ""
        fix = (
            "sweep reads plain YAML and ansible's !unsafe and !vault tags"
            if "tag" in (err.problem or "")
            else "fix the YAML there (indentation, a missing ':' or an unclosed quote)"
        )
        said = plain_yaml_problem(err, text)
        if said is not None:
            (problem, fix), mark, context = said[:2], said[2], ""
        else:
            problem = err.problem
        raise InventoryError(
            f"not valid YAML: {context}{problem}",
            where=f"{path}:{mark.line + 1}" if mark else str(path),
            fix=fix,
        ) from None
    except yaml.YAMLError as err:
        raise InventoryError(
            f"not valid YAML: {err}", where=str(path), fix="fix the YAML syntax"
        ) from None


def plain_yaml_problem(err: yaml.MarkedYAMLError, text: str):
    """(problem, fix, mark) in plain words for the YAML mistakes people make most, at the line they
    made them on, or None: a tab (libyaml: "found character that cannot start any token"), a key
    without its ':' (reported on the line after the key, where the scanner gave up)."""
    at = err.problem_mark
    if at is not None and at.index < len(text) and text[at.index] == "\t":
        return (
            f"a tab at column {at.column + 1}: YAML indents with spaces, never tabs",
            "replace the tab with spaces",
            at,
        )
    if "could not find expected ':'" in (err.problem or "") and err.context_mark is not None:
        start = err.context_mark
        line = text.splitlines()[start.line] if start.line < len(text.splitlines()) else ""
        word = line[start.column :].strip()[:60]
        key, _, rest = word.partition(" ")
        written = f"{key}: {rest.strip()}" if rest.strip() else f"{key}:"
        return (
            f"no ':' after {key!r}: a key needs a ':' after it (or the line is indented under the "
            "one above by mistake)",
            f"write '{written}' (or fix the indentation)",
            start,
        )
    return None


def load_yaml_node(text: str, path: Path | None, max_values: int | None) -> Any:
    """`text`'s YAML document with the inventory loader (libyaml), bounded; yaml.YAMLError
    when it is not YAML."""
    return _load(text, _LineLoader, path, max_values)


def _load(text: str, loader_class, path: Path | None, max_values: int | None) -> Any:
    # before composing: libyaml's composer recurses in C, and overflows its stack
    shallow(text, path)
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if "&" in text:  # no anchor, no alias: nothing to expand
            bounded_expansion(node, path, max_values)
        return loader.construct_document(node)
    finally:
        loader.dispose()


_FLOW = re.compile(r"[\[\]{}]")
_DEEP_INDENT = re.compile(r"^ {%d,}\S" % (4 * MAX_YAML_DEPTH), re.M)


def shallow(text: str, path: Path | None) -> None:
    """Refuse YAML that nests deeper than MAX_YAML_DEPTH (flow brackets, or block
    indentation) in one linear scan: a bracket inside a quoted value can only make the count
    err towards refusing."""
    depth = 0
    for match in _FLOW.finditer(text):
        if match.group() in "[{":
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise InventoryError(
                    f"YAML nests deeper than {MAX_YAML_DEPTH} levels",
                    where=f"{path}:{text.count(chr(10), 0, match.start()) + 1}",
                    fix="flatten the values there",
                )
        elif depth:
            depth -= 1
    deep = _DEEP_INDENT.search(text)
    if deep:
        raise InventoryError(
            f"YAML nests deeper than {MAX_YAML_DEPTH} levels (a line indented "
            f"{4 * MAX_YAML_DEPTH} spaces or more)",
            where=f"{path}:{text.count(chr(10), 0, deep.start()) + 1}",
            fix="flatten the values there",
        )


def bounded_expansion(root: yaml.Node, path: Path | None, max_values: int | None) -> None:
    """Refuse a YAML document whose aliases expand it by more than `max_values` values, that nests
    deeper than MAX_YAML_DEPTH, or whose alias refers to a value holding it; linear in its nodes."""
    sizes: dict[int, int] = {}  # node -> values it stands for once its aliases are expanded
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        children = _children(node)
        if finished:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            continue
        if key in sizes:
            continue
        where = f"{path}:{node.start_mark.line + 1}"
        if key in on_path:
            raise InventoryError(
                "a YAML alias refers to a value that holds it (a loop)",
                where=where,
                fix="remove the alias, or write the value out",
            )
        if len(on_path) >= MAX_YAML_DEPTH:
            raise InventoryError(
                f"YAML nests deeper than {MAX_YAML_DEPTH} levels",
                where=where,
                fix="flatten the values there",
            )
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise InventoryError(
                    "a YAML alias refers to a value that holds it (a loop)",
                    where=f"{path}:{child.start_mark.line + 1}",
                    fix="remove the alias, or write the value out",
                )
            if id(child) not in sizes:
                stack.append((child, False))
    added = sizes[id(root)] - len(sizes)
    if max_values is not None and added > max_values:
        raise InventoryError(
            f"YAML aliases expand this file by more than {max_values:,} values (an alias bomb?)",
            where=f"{path}:{root.start_mark.line + 1}",
            fix="write the values out, or raise the limit with --max-yaml-values",
        )


def _children(node: yaml.Node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return node.value
    return []


def value_kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {value!r}"
    return f"a {type(value).__name__}"
