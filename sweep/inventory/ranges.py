"""Ansible host ranges (``gpu[01:64].dc1``, ``gpu[1:10:2]``, ``node[a:f]``) and
``host:port`` patterns.

One range may name at most `InventoryLimits.range_hosts` hosts, counted (`host_range_size`) before
anything is expanded (``h[0000000:9999999]`` is refused, not built).
"""

from __future__ import annotations

import re
import string

from sweep.errors import InventoryError


def expand_host_range(
    pattern: str, where: str | None = None, max_hosts: int | None = None
) -> list[str]:
    """Expand Ansible host ranges: ``gpu[01:03]`` -> gpu01, gpu02, gpu03; ``n[a:c]``; ``[1:9:2]``.

    With `max_hosts`, a pattern that would name more hosts is refused before it is expanded.
    """
    if max_hosts is not None:
        size = host_range_size(pattern)
        if size > max_hosts:
            raise InventoryError(
                f"host range '{pattern}' makes {size:,} hosts, more than the limit of "
                f"{max_hosts:,}",
                where=where,
                fix="split the range, or raise the limit with --max-range-hosts",
            )
    head, bracket, rest = pattern.partition("[")
    if not bracket:
        return [pattern]
    body, closed, tail = rest.partition("]")

    def bad(problem: str, fix: str) -> InventoryError:
        return InventoryError(f"host range '{pattern}' {problem}", where=where, fix=fix)

    bounds = body.split(":")
    if not closed or len(bounds) not in (2, 3):
        raise bad(
            "is not [begin:end] or [begin:end:step]", "write it like gpu[01:64] or gpu[1:9:2]"
        )
    begin, end, step_text = bounds[0] or "0", bounds[1], bounds[2] if len(bounds) == 3 else "1"
    if not step_text.isdigit() or int(step_text) == 0:
        raise bad(
            f"has step '{step_text}'; the step must be a whole number of 1 or more",
            "write it like gpu[1:9:2]",
        )
    values = _range_values(begin, end, int(step_text), bad)
    return [name for value in values for name in expand_host_range(head + value + tail, where)]


def _range_values(begin: str, end: str, step: int, bad) -> list[str]:
    """The values a range's bounds stand for: zero-padded numbers or single letters; `bad` makes
    the error for bounds that are neither, or out of order."""
    if begin.isdigit() and end.isdigit():
        width = len(begin) if begin.startswith("0") and len(begin) > 1 else 0
        if width and len(end) != width:
            raise bad(
                f"pads '{begin}' to {width} digits but not '{end}'",
                f"give both ends the same width: [{begin.lstrip('0').zfill(len(end))}:{end}]",
            )
        if int(begin) > int(end):
            raise bad(
                f"is empty: it begins at {begin}, after its end {end}",
                f"write the lower bound first: [{end}:{begin}]",
            )
        return [str(number).zfill(width) for number in range(int(begin), int(end) + 1, step)]
    elif (
        len(begin) == len(end) == 1
        and begin in string.ascii_letters
        and end in string.ascii_letters
    ):
        first, last = string.ascii_letters.index(begin), string.ascii_letters.index(end)
        if first > last:
            raise bad(
                f"is empty: it begins at '{begin}', after its end '{end}'",
                f"write the lower bound first: [{end}:{begin}]",
            )
        return list(string.ascii_letters[first : last + 1 : step])
    else:
        raise bad(
            f"has bounds '{begin}' and '{end}'; use two numbers or two single letters",
            "write it like gpu[01:64] or node[a:f]",
        )


def host_range_size(pattern: str) -> int:
    """How many names `pattern` expands to, counted without expanding (1 for what is
    not a valid range)."""
    size, rest = 1, pattern
    while "[" in rest:
        _, _, rest = rest.partition("[")
        body, closed, rest = rest.partition("]")
        bounds = body.split(":")
        if not closed or len(bounds) not in (2, 3):
            return size
        begin, end, step = bounds[0] or "0", bounds[1], bounds[2] if len(bounds) == 3 else "1"
        if not step.isdigit() or int(step) == 0:
            return size
        if begin.isdigit() and end.isdigit():
            span = int(end) - int(begin)
        elif (
            len(begin) == len(end) == 1
            and begin in string.ascii_letters
            and end in string.ascii_letters
        ):
            span = string.ascii_letters.index(end) - string.ascii_letters.index(begin)
        else:
            return size
        size *= max(0, span // int(step) + 1)
    return size


_HOST_PORT = (
    re.compile(r"^\[(.+)\]:([0-9]+)$"),
    re.compile(r"^((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)$"),
)


def host_pattern(
    pattern: str, where: str, max_hosts: int | None = None
) -> tuple[list[str], int | None]:
    """Split ``gpu[01:04]:2222`` into its expanded host names and port."""
    match = _HOST_PORT[0].match(pattern) or _HOST_PORT[1].match(pattern)
    if match:
        pattern, port = match.group(1), int(match.group(2))
    else:
        port = None
    return expand_host_range(pattern, where, max_hosts), port
