"""The value checks of an expectations file (`sweep.audit.expect`): each takes the file's value and
its key and
returns the typed value, or raises `TypeProblem` saying how to write it (the caller adds the file
and line)."""

from __future__ import annotations

import re
from typing import Any, Callable

from sweep.errors import ConfigError


def type_name(v: Any) -> str:
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
        type(None): "null",
    }.get(type(v), type(v).__name__)


def strings(what: str, example: str) -> Callable:
    def check(v, key):
        items = [v] if isinstance(v, str) else v
        if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
            bad = (
                next((i for i in items if not isinstance(i, str)), v)
                if isinstance(items, list) and items
                else v
            )
            hint = (
                " (quote version numbers)"
                if isinstance(bad, (int, float)) and not isinstance(bad, bool)
                else ""
            )
            raise TypeProblem(
                f"must be {what} or a list of them, not {type_name(bad)} ({bad!r}){hint}",
                f"write e.g. {key}: [{example}]",
            )
        return sorted(set(items), key=items.index)

    return check


def number(unit: str, example: str, integer: bool = False) -> Callable:
    def check(v, key):
        ok = isinstance(v, int) if integer else isinstance(v, (int, float))
        if isinstance(v, bool) or not ok:
            raise TypeProblem(
                f"must be {'a whole number' if integer else 'a number'} of {unit}, "
                f"not {type_name(v)} ({v!r})",
                f"write e.g. {key}: {example}",
            )
        if v <= 0:
            raise TypeProblem(f"must be above 0, not {v!r}", f"write e.g. {key}: {example}")
        return float(v) if not integer else int(v)

    return check


def boolean(v, key):
    if not isinstance(v, bool):
        raise TypeProblem(
            f"must be true or false, not {type_name(v)} ({v!r})",
            f"write {key}: true or {key}: false",
        )
    return v


def layout(v, key):
    """MIG layout: off (MIG disabled), a "3g.71gb+3g.71gb" string or a list of profiles."""
    if v is False or (isinstance(v, str) and v.strip().lower() == "off"):
        return "off"
    items = v.split("+") if isinstance(v, str) else v
    if (
        not isinstance(items, list)
        or not items
        or not all(isinstance(i, str) and i.strip() for i in items)
    ):
        raise TypeProblem(
            f"must be off, a layout like '3g.71gb+3g.71gb' or a list of MIG profiles, "
            f"not {type_name(v)} ({v!r})",
            f"write e.g. {key}: off, or {key}: [3g.71gb, 3g.71gb]",
        )
    return "+".join(sorted(i.strip() for i in items))


def pcie(v, key):
    """A PCIe link as gen and width: 'gen5x16' (also 'Gen5 x16')."""
    m = re.match(r"^\s*gen\s*(\d)\s*x\s*(\d{1,2})\s*$", v, re.I) if isinstance(v, str) else None
    if not m:
        raise TypeProblem(
            f"must be a PCIe link like gen5x16, not {type_name(v)} ({v!r})",
            f"write e.g. {key}: gen5x16",
        )
    return f"gen{int(m.group(1))}x{int(m.group(2))}"


class TypeProblem(ConfigError):
    """An expectations value of the wrong type; the caller adds the file and line."""

    def __init__(self, message: str, fix: str):
        super().__init__(message, fix=fix)
