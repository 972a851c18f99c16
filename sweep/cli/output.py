"""The CLI's two streams: results on stdout (`results`), progress and diagnostics on stderr
(`console`), never wrapped or cut when piped (README "Output streams"); host text made safe for the
terminal."""

from __future__ import annotations

from rich.console import Console, ConsoleDimensions
from rich.markup import escape

from sweep.text import visible

PIPE_WIDTH = 1_000_000  # a pipe or a file has no width: a line is as long as its text


class Stream(Console):
    """A console that wraps and cuts only on a terminal: piped or redirected output keeps every
    line and value whole (`sweep baseline show | grep 580.` sees the whole driver version)."""

    @property
    def size(self) -> ConsoleDimensions:
        return super().size if self.is_terminal else ConsoleDimensions(PIPE_WIDTH, 25)

    @size.setter
    def size(self, new: tuple) -> None:
        Console.size.fset(self, new)


results = Stream(highlight=False, emoji=False)  # ":end:" in host text stays text
console = Stream(stderr=True, highlight=False, emoji=False)


def safe(text) -> str:
    """Host-supplied text for the terminal: control characters shown as escapes, rich markup
    escaped."""
    return escape(visible(text))


def say(kind: str, text) -> None:
    """One line on stderr, whatever its length: `sweep: error: ...` / `sweep: warning: ...`."""
    console.print(f"sweep: {kind}: {safe(' '.join(str(text).splitlines()))}", soft_wrap=True)


def print_lines(texts) -> None:
    """Each text on stdout as one line of its own, made safe, whatever the terminal's width."""
    for text in texts:
        results.print(safe(text), soft_wrap=True)
