"""``-e key=value`` text read as ansible-core reads it (``ansible.parsing.splitter.parse_kv``).

Ansible does not split like a shell: it splits at single spaces and at newlines only (a tab is part
of a word), keeps a quoted run of spaces in one word, keeps a Jinja2 ``{{ }}``, ``{% %}`` or
``{# #}`` block in one word, decodes Python escapes (``\\n``, ``\\t``, ``\\x41``, ``\\u00e9``,
``\\N{...}``) in each word, cuts the word at its first ``=`` not after a backslash, strips both
sides and removes one pair of matching quotes around the whole value only (``x='a b'`` is ``a b``;
``x=a'b c'`` keeps its quotes). tests/unit/test_command_line.py checks this module against
ansible-core itself on generated text. Where Ansible would keep a word without ``=`` as
``_raw_params`` (which no variable reads) or make an empty name, sweep refuses the text instead.
"""

from __future__ import annotations

import codecs
import re

from sweep.errors import InventoryError

_ESCAPE = re.compile(
    r"\\(?:U[0-9a-fA-F]{8}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|N\{[^}]+\}|[\\'\"abfnrtv])"
)
BLOCKS = (("{{", "}}"), ("{%", "%}"), ("{#", "#}"))
_NOT_KV_FIX = "give variables as key=value, as JSON (-e '{...}'), or as a file (-e @vars.yml)"


def parse_kv(text: str) -> dict[str, str]:
    """``key=value key2='a b'`` as Ansible's parse_kv reads it: values are strings; a word without
    ``=`` (or with nothing before it) is refused."""
    out = {}
    for word in split_words(text):
        try:
            decoded = _ESCAPE.sub(lambda m: codecs.decode(m.group(0), "unicode-escape"), word)
        except UnicodeDecodeError as err:
            raise InventoryError(
                f"-e: {word!r} has an escape Ansible cannot decode ({err.reason})",
                where="-e",
                fix="write the character itself, or a \\N{NAME} that Unicode names",
            ) from None
        pos = next(
            (i for i in range(1, len(decoded)) if decoded[i] == "=" and decoded[i - 1] != "\\"),
            None,
        )
        if pos is None or not decoded[:pos].strip():
            raise InventoryError(f"-e: {word!r} is not key=value", where="-e", fix=_NOT_KV_FIX)
        out[decoded[:pos].strip()] = _unquote(decoded[pos + 1 :].strip())
    return out


def _unquote(value: str) -> str:
    quoted = len(value) > 1 and value[0] == value[-1] and value[0] in "'\"" and value[-2] != "\\"
    return value[1:-1] if quoted else value


def _quote_after(token: str, quote: str | None) -> str | None:
    """The quote still open after `token` (None: none), given the one open before it; a quote after
    a backslash counts for nothing."""
    for i, ch in enumerate(token):
        if ch in "'\"" and (i == 0 or token[i - 1] != "\\"):
            quote = ch if quote is None else (None if ch == quote else quote)
    return quote


def split_words(text: str) -> list[str]:
    """The words of `text` as Ansible's split_args makes them (see the module docstring)."""
    words: list[str] = []
    quote = None
    depth = dict.fromkeys([o for o, _ in BLOCKS], 0)
    lines = text.split("\n")
    for n, line in enumerate(lines):
        continued = False
        for i, token in enumerate(line.split(" ")):
            if token == "" and i:
                # a second space stays with the word before
                words[-1:] = [(words[-1] if words else "") + " "]
                continue
            if token == "\\" and quote is None:
                continued = True
                continue
            was_quoted, in_block = quote is not None, any(depth.values())
            quote = _quote_after(token, quote)
            joined = True
            if quote is not None and not was_quoted and not in_block:
                words.append(token)
            elif in_block or quote is not None or was_quoted:
                words[-1] += token if i == 0 and was_quoted else (" " if i else "") + token
            else:
                joined = False
            for opening, closing in BLOCKS:
                before = depth[opening]
                depth[opening] = max(0, before + token.count(opening) - token.count(closing))
                if depth[opening] != before and not joined:
                    words.append(token)
                    joined = True
            if not joined and not any(depth.values()) and quote is None and token:
                words.append(token)
        if n < len(lines) - 1 and not continued:
            words[-1:] = [(words[-1] if words else "") + "\n"]
    if quote is not None or any(depth.values()):
        raise InventoryError(
            f"-e {text!r} cannot be split (an unclosed quote or Jinja2 block)",
            where="-e",
            fix='close the quote, or give the variables as JSON: -e \'{"key": "value"}\'',
        )
    return words
