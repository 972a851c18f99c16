"""Host-supplied text made safe to show: control characters become visible escapes, never raw bytes.

A hostname, process name or error message can hold ESC sequences, BEL or C1 controls that a
terminal would obey, or Unicode bidi overrides (U+202A-E, U+2066-9) that reorder what a reader
sees ("Trojan Source"); shown through `visible` they read as `\\x1b`, `\\u202e` and so on, and
so do the characters that show nothing at all (zero-width spaces and joiners, U+2060-4, the BOM,
soft hyphen, Unicode tag characters U+E0000-7F, which can hide text in a name). The terminal, the
report's templates and the run diff all show host text through this one function; `json_text`
writes the `--json` outputs with the same characters as JSON escapes; `csv_cell` makes a value
inert in a spreadsheet (OWASP's advice on CSV injection).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

# characters that show nothing: soft hyphen, Arabic letter mark, Mongolian vowel separator,
# zero-width space/joiners and LRM/RLM, word joiner and invisible operators, BOM, the tag characters
INVISIBLE = "\u00ad\u061c\u180e\u200b-\u200f\u2060-\u2064\ufeff\U000e0000-\U000e007f"
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069" + INVISIBLE + "]")
# what json.dumps(ensure_ascii=False) leaves raw but a terminal obeys or hides (C0 it escapes
# itself)
_JSON_UNSAFE = re.compile(
    "[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff" + INVISIBLE + "]"
)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_STRIPPED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 host', '2 hosts', '3 classes': a count with its noun, never 'host(s)'."""
    return f"{n} {noun(n, word, many)}"


def noun(n: int, word: str, many: str | None = None) -> str:
    """The noun alone, as `plural` writes it after `n`: 'host' for 1, 'hosts' otherwise ('<b>3</b>
    hosts')."""
    return word if n == 1 else (many or word + "s")


def show_value(value: Any) -> str:
    """A field's value for a person: text as it is, anything else as JSON, None as a dash;
    escaped."""
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


def json_text(value: Any, indent: int | None = 1) -> str:
    """`value` as JSON for stdout (`--json`): readable UTF-8, but every control, bidi, invisible or
    lone-surrogate character written as its \\u escape, so the same data reads back."""
    return _JSON_UNSAFE.sub(_json_escape, json.dumps(value, indent=indent, ensure_ascii=False))


def _json_escape(m: re.Match) -> str:
    code = ord(m.group())
    if code > 0xFFFF:  # JSON escapes an astral character as its UTF-16 surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def csv_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: non-strings as they are (numbers stay numbers).

    Control characters (NUL, ESC, C1, line separators) are dropped; tab, CR and LF stay (the csv
    module quotes them); bidi overrides are written as visible ``\\u202e`` text; a cell that begins
    with ``=``, ``+``, ``-``, ``@``, tab or CR gets a leading ``'`` (OWASP), unless the whole
    cell is a number such as ``-12.5``.
    """
    if not isinstance(value, str):
        return value
    # U+0020..U+007E only: nothing to drop or show (most cells)
    if value.isascii() and value.isprintable():
        text = value
    else:
        text = _BIDI.sub(lambda m: ascii(m.group())[1:-1], _STRIPPED.sub("", value))
    if text.startswith(_FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def csv_cells(values: list) -> list:
    """`csv_cell` of each value, without a call for the common cell (None, or printable ASCII that
    starts no formula): a column of 80,000 host names in a quarter of the time."""
    return [
        value
        if value is None
        or (
            value.__class__ is str
            and value.isascii()
            and value.isprintable()
            and not value.startswith(_FORMULA_START)
        )
        else csv_cell(value)
        for value in values
    ]


# Where a value shown in an HTML table may wrap (issue 41: "2.11.0+cu13 / 0", "gpu[01- / 02,...]"
# broke mid-token): at spaces and after these separators, nowhere else (not at a hyphen, where a
# browser would).
BREAK_AFTER = ",/+;|"
_BREAKS = re.compile(r"(?<=[%s])(?=\S)|(\s+)" % re.escape(BREAK_AFTER))


def breakable_html(value: Any) -> str:
    """`value` as escaped HTML whose every token (the text between spaces and separators) is one
    unbreakable `<span class="nw">`, a <wbr> after each separator that no space follows
    (`<span class="nw">gpu[01-02,</span><wbr><span class="nw">04]</span>`): a line may end there
    only."""
    from markupsafe import escape

    out = []
    for part in _BREAKS.split(str(value)):
        if part is None:
            out.append("<wbr>")
        elif part.isspace():
            out.append(part)
        elif part:
            out.append(f'<span class="nw">{escape(part)}</span>')
    return "".join(out)


_NUMBERS = re.compile(r"(\d+)")


@functools.lru_cache(maxsize=1 << 17)
def host_key(name: str) -> tuple:
    """Natural order of host names: gpu2 before gpu10. Kept per name: a report sorts the same names
    again and again (534,608 calls for 30,000 hosts)."""
    return tuple(int(t) if t.isdigit() else t for t in _NUMBERS.split(name))
