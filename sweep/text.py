"""Host-supplied text made safe to show: control characters become visible escapes, never raw bytes.

A hostname, process name or error message can hold ESC sequences, BEL or C1 controls that a
terminal would obey; shown through `visible` they read as `\\x1b` and so on.
"""
from __future__ import annotations

from typing import Any


def is_control(ch: str) -> bool:
    """C0, DEL, C1 (ESC, CSI, ...) and the Unicode line and paragraph separators."""
    return ch < " " or "\x7f" <= ch <= "\x9f" or ch in "\u2028\u2029"


def visible(text: Any, *, keep: str = "\n") -> str:
    """`text` with every control character but those in `keep` written as its escape."""
    s = "" if text is None else str(text)
    return "".join(ch if ch in keep or not is_control(ch) else ascii(ch)[1:-1] for ch in s)
