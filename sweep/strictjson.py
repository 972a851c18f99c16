"""JSON from hosts, strictly: RFC 8259 in and out, nesting bounded, numbers a double cannot hold
named.

Every byte a host sends is hostile until validated, and one host's document must never stop the
sweep or the report for the others. So a host's health.json is read by `loads`, which

- refuses nesting deeper than `MAX_DEPTH` (a health.json nests 6 deep; Python's own encoder and
  decoder recurse and raise RecursionError near 1,000) with `DepthError`;
- turns every number a 64-bit double cannot hold (``1e999999``), and the non-standard tokens
  ``NaN``, ``Infinity`` and ``-Infinity``, into null, and says where in `Loaded.unknown_numbers`
  (the record keeps that list: the value is "not a number" or "unknown", never a crash);
- turns lone UTF-16 surrogates (``"\\ud800"``, which cannot be written as UTF-8) into U+FFFD.

`dumps` writes strict JSON only (``allow_nan=False``): a record on disk never holds ``NaN`` or
``Infinity``, which other readers (jq, browsers, Go, Rust) refuse.

`loads_known` reads back a document that `loads` already accepted once and that sweep wrote itself
(the store knows its own records by their SHA-256: `sweep.store`): orjson's parse alone, without
the walk. orjson refuses what no record sweep writes can hold (``NaN``, ``Infinity``, a number that
overflows a double, a lone surrogate, invalid UTF-8, nesting past 1,024 levels), and its encoder
refuses nesting past 254 levels (the document is encoded once to find out: a third of the parse's
time); such a document goes to `loads`, which names the fault. An integer past 2**63, which no
record holds either, orjson reads as a number (a float past 2**64), which the frames type as NA (no
exact column type holds it). So a forged digest list buys no crash (docs/security.md, run folders).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import orjson

from sweep.errors import SweepError

MAX_DEPTH = 64  # a health.json nests 6 deep; a record adds 1
INT_LIMIT = 2**63  # larger integers have no exact column type: they are unknown numbers
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_CONTAINERS = (dict, list)  # exactly: what json and orjson build
# a health.json is ~30 KB (8 GPUs); the strict parse costs ~1.3 s per MiB of numbers
STRICT_MAX_BYTES = 1 << 20
# every digit a 0, the rest a space
_DIGITS = bytes(0x30 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
_DIGIT_RUN = b"0" * 19
# an integer token of 19+ digits (maybe past what orjson keeps)
_LONG_INT = re.compile(rb"(?:^|[\[,:\s])-?\d{19}")


class DepthError(SweepError, ValueError):
    """The document nests deeper than the limit."""

    def __init__(self, depth: int | None, limit: int):
        self.depth, self.limit = depth, limit
        shown = (
            f"{depth} levels deep" if depth is not None else "deeper than Python's recursion limit"
        )
        super().__init__(f"nests {shown}, more than the {limit} levels a health.json may")


@dataclass
class Loaded:
    """A parsed document and the numbers in it that JSON wrote but a double cannot hold (now
    null)."""

    document: Any
    # {"path": "gpus[0].power.draw_w", "text": "NaN"}
    unknown_numbers: list[dict] = field(default_factory=list)
    # the caller's `fits` took it (valid, no deeper than the limit): no depth walk was needed
    fitted: bool = False


class _Unknown:
    """A number the host wrote that is not a finite double; replaced by None after parsing."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _float(text: str):
    value = float(text)
    return value if value - value == 0 else _Unknown(text)  # inf - inf is nan


def _int(text: str):
    if len(text) > 18:  # cheap test first: 18 digits always fit in 64 bits
        # int() refuses > 4300 digits
        if len(text) > 4000 or not -INT_LIMIT <= int(text) < INT_LIMIT:
            return _Unknown(text if len(text) <= 40 else text[:37] + "...")
    return int(text)


NOT_PARSED = object()  # `loads`'s `parsed` when the caller did not parse the text


def loads(
    text: str | bytes,
    max_depth: int = MAX_DEPTH,
    fits: Callable[[Any], bool] | None = None,
    parsed: Any = NOT_PARSED,
) -> Loaded:
    """Parse `text` as strict JSON (ValueError when it is not JSON; DepthError when it nests too
    deep).

    orjson first (a document of plain numbers, as the agent writes, costs C speed and one walk of
    its containers for the depth); the strict parse, which calls Python for every number, only where
    orjson refuses (NaN, Infinity, a number that overflows a double, a lone surrogate, not JSON) or
    an integer of 19 digits or more is written (orjson reads one past 2**64 as a float). That path
    is bounded: on a document over `STRICT_MAX_BYTES` it is refused (ValueError) instead, so no
    host's answer costs the controller more than about a second of CPU (a 15 MiB ``[0,0,...]`` took
    20 s).

    `fits`: a check of the document's shape that also bounds its depth to `max_depth`
    (`sweep.schema_depth`); a document orjson parses and `fits` takes needs no depth walk
    (`Loaded.fitted`). One it refuses is walked as any other.

    `parsed`: what ``orjson.loads(text)`` already returned to the caller (a transport parses the
    output to see that it is whole): used instead of parsing it again."""
    if isinstance(text, (bytearray, memoryview)):
        text = bytes(text)
    if not _long_int(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")):
        document = parsed
        if document is NOT_PARSED:
            try:
                document = orjson.loads(text)
            except orjson.JSONDecodeError:
                pass
        if document is not NOT_PARSED:
            if fits is not None and fits(document):
                return Loaded(document, fitted=True)
            loaded = Loaded(document)
            _walk(loaded, max_depth, False, False)
            return loaded
    if len(text) > STRICT_MAX_BYTES:
        # json's C parser without a Python call per number: what is wrong with a document that is
        # not JSON
        try:
            json.loads(text)
        except RecursionError:
            raise DepthError(None, max_depth) from None
        raise ValueError(
            f"{len(text) // 1024} KiB that only a strict parse reads (NaN, Infinity, a number a "
            f"double cannot hold, a lone surrogate, or not JSON), more than the "
            f"{STRICT_MAX_BYTES // 1024} KiB sweep parses strictly"
        )
    return _strict_loads(text, max_depth)


def _may_nest_past(document: Any, max_depth: int) -> bool:
    """False when `document` surely nests at most `max_depth` levels: orjson's indented text (C
    speed, 0.1 ms for a health.json where the walk took 0.5) has no line indented as the members of
    a container that deep; True (walk it) when it has one, or when orjson will not indent it (past
    254 levels)."""
    if type(document) not in _CONTAINERS:
        return False
    try:
        return b"\n" + b" " * (2 * max_depth) in orjson.dumps(document, option=orjson.OPT_INDENT_2)
    except orjson.JSONEncodeError:
        return True


def _long_int(text: bytes) -> bool:
    """Whether `text` holds an integer token of 19 digits or more: 19 digits in a row (a C-speed
    scan, 14 us for a health.json, where the regex alone took 1.9 ms), then the regex only where
    there are."""
    return _DIGIT_RUN in text.translate(_DIGITS) and _LONG_INT.search(text) is not None


def _strict_loads(text: str | bytes, max_depth: int) -> Loaded:
    if isinstance(text, (bytes, bytearray)):
        # RFC 8259: JSON between systems is UTF-8 (UnicodeDecodeError: ValueError)
        text = bytes(text).decode("utf-8")
    unknown: list[_Unknown] = []

    def mark(value):
        if isinstance(value, _Unknown):
            unknown.append(value)
        return value

    try:
        document = json.loads(
            text,
            parse_float=lambda s: mark(_float(s)),
            parse_int=lambda s: mark(_int(s)),
            parse_constant=lambda s: mark(_Unknown(s)),
        )
    except RecursionError:
        raise DepthError(None, max_depth) from None
    loaded = Loaded(document)
    _walk(loaded, max_depth, bool(unknown), bool(_SURROGATE_ESCAPE.search(text)))
    return loaded


def loads_known(text: bytes) -> Loaded:
    """`loads` for a document strict JSON accepted when it arrived and `dumps` wrote (sweep's own
    record, its bytes unchanged): orjson's parse only, no walk; what orjson refuses goes to
    `loads`."""
    try:
        document = orjson.loads(text)
        orjson.dumps(document)  # its encoder refuses nesting past 254 levels; a record nests 7
    # NaN, Infinity, 1e999, a lone surrogate, too deep
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return loads(text)  # ... or deeper than orjson encodes: the walk names the depth
    return Loaded(document)


def _walk(loaded: Loaded, max_depth: int, numbers: bool, surrogates: bool) -> None:
    """Check the depth without recursion; replace unknown numbers and lone surrogates where there
    are any."""
    root = loaded.document
    if not isinstance(root, (dict, list)):
        if isinstance(root, _Unknown):
            loaded.unknown_numbers.append({"path": "$", "text": root.text})
            loaded.document = None
        return
    fix = numbers or surrogates
    if not fix and not _may_nest_past(root, max_depth):
        return  # nothing to replace, and surely not too deep: no walk in Python
    stack: list[tuple[Any, int, Any]] = [(root, 1, "")]
    while stack:
        node, depth, path = stack.pop()
        if depth > max_depth:
            raise DepthError(_depth(node, depth), max_depth)
        items = node.items() if isinstance(node, dict) else enumerate(node)
        if not fix:
            values = node.values() if isinstance(node, dict) else node
            stack.extend((value, depth + 1, None) for value in values if type(value) in _CONTAINERS)
            continue
        if surrogates and isinstance(node, dict) and any(_has_surrogate(k) for k in node):
            cleaned = {_clean(k): v for k, v in node.items()}
            node.clear()
            node.update(cleaned)
            items = node.items()
        for key, value in list(items):
            where = f"{path}.{key}" if isinstance(node, dict) else f"{path}[{key}]"
            if isinstance(value, (dict, list)):
                stack.append((value, depth + 1, where))
            elif isinstance(value, _Unknown):
                loaded.unknown_numbers.append({"path": where.lstrip("."), "text": value.text})
                node[key] = None
            elif surrogates and isinstance(value, str) and _has_surrogate(value):
                node[key] = _clean(value)
    loaded.unknown_numbers.sort(key=lambda u: u["path"])


def _depth(node: Any, depth: int) -> int:
    """How deep `node` (found at `depth`) goes, without recursion."""
    deepest, stack = depth, [(node, depth)]
    while stack:
        node, at = stack.pop()
        deepest = max(deepest, at)
        values = node.values() if isinstance(node, dict) else node
        stack.extend((v, at + 1) for v in values if isinstance(v, (dict, list)))
    return deepest


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def _clean(text: str) -> str:
    return (
        "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
        if isinstance(text, str)
        else text
    )


def dumps(data: Any, *, indent: int | None = None) -> str:
    """Strict JSON text (ValueError for NaN or infinity, RecursionError for a cycle or absurd
    depth)."""
    return json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)


def record_bytes(record: dict) -> bytes:
    """A host record as strict JSON bytes (one line): its health.json, parsed by `loads` (no NaN or
    infinity can come out of it: orjson refuses them, the strict parse makes them null) and
    re-encoded by orjson, 0.03 ms where json's encoder took 0.26; the rest, sweep's own fields,
    checked for NaN and infinity (ValueError, as `dumps` says it), which orjson would write as null,
    by a walk of their containers (json's encoder took 19 us a record, escaping the stderr tail
    only to throw the text away). Nesting past orjson's 254 levels (a cycle included) or an integer
    past 64 bits is a TypeError."""
    for key, value in record.items():
        if key != "health":
            _refuse_non_finite(value)
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


def _refuse_non_finite(data: Any, depth: int = 0) -> None:
    if isinstance(data, float):
        if data - data != 0:  # inf - inf and nan - nan are nan
            raise ValueError("Out of range float values are not JSON compliant")
    elif depth > 254:  # what orjson refuses to nest (a cycle ends here too)
        return
    elif isinstance(data, dict):
        for value in data.values():
            _refuse_non_finite(value, depth + 1)
    elif isinstance(data, (list, tuple)):
        for value in data:
            _refuse_non_finite(value, depth + 1)


def indented(data: Any) -> bytes:
    """Strict JSON text, indented for a reader (a run's manifest): checked as `dumps` checks it
    (json's C encoder, compact), written by orjson (C speed; json's indenting encoder is pure
    Python: 0.15 ms a host for a manifest that lists the inventory, written three times a run)."""
    json.dumps(data, allow_nan=False)
    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def finite_indented(data: Any) -> bytes:
    """``dumps(finite(data), indent=1)`` and a newline, as UTF-8: JSON text indented by one, every
    NaN or infinite float written as null. The walk that replaces them (0.07 s of a 10,000-host
    report's summary.json, twice the encoding's cost) runs only where the strict encoder meets one;
    the text is the same either way."""
    try:
        text = dumps(data, indent=1)
    except ValueError:  # a NaN or an infinity somewhere: null, as `finite` makes it
        text = dumps(finite(data), indent=1)
    return (text + "\n").encode("utf-8")


def finite(data: Any) -> Any:
    """A copy of `data` (dicts, lists, tuples, scalars) with every NaN or infinite float as None."""
    if isinstance(data, float):
        return data if data - data == 0 else None
    if isinstance(data, dict):
        return {key: finite(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(value) for value in data]
    return data
