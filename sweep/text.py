"""Host-supplied text made safe to show: control characters become visible escapes, never raw bytes.

A hostname, process name or error message can hold ESC sequences, BEL or C1 controls that a
terminal would obey; shown through `visible` they read as `\\x1b` and so on. The terminal, the
report's templates and the run diff all show host text through this one function.
"""
from __future__ import annotations

import json
import re
from typing import Any

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def is_control(ch: str) -> bool:
    """C0, DEL, C1 (ESC, CSI, ...) and the Unicode line and paragraph separators."""
    return ch < " " or "\x7f" <= ch <= "\x9f" or ch in "\u2028\u2029"


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 host', '2 hosts', '3 classes': a count with its noun, never 'host(s)'."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def show_value(value: Any) -> str:
    """A field's value for a person: text as it is, anything else as JSON, None as a dash; escaped."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return visible(value)
    return visible(json.dumps(value, ensure_ascii=False, sort_keys=True))


def visible(text: Any, *, keep: str = "\n") -> str:
    """`text` with every control character but those in `keep` written as its escape."""
    s = "" if text is None else str(text)
    if not _CONTROL.search(s):  # the common case: nothing to escape, no per-character work
        return s
    return _CONTROL.sub(lambda m: m.group() if m.group() in keep else ascii(m.group())[1:-1], s)
