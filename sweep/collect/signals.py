"""Ctrl-C and SIGTERM during a sweep: `Held` makes them wait while the run folder is between two
whole states; `sigterm_as_interrupt` ends a sweep on SIGTERM as Ctrl-C does."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


class Held:
    """Ctrl-C and SIGTERM wait while a run folder is between two whole states (the folder and its
    manifest, a record set aside, a session's end): a signal that comes meanwhile is delivered, by
    its own handler, at `release` (or at the end of a ``with`` block). Only in the main thread,
    where Python runs handlers."""

    _SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.caught: list[int] = []
        self.previous: dict | None = None
        if threading.current_thread() is threading.main_thread():
            self.previous = {
                sig: signal.signal(sig, lambda signum, frame: self.caught.append(signum))
                for sig in self._SIGNALS
            }

    def release(self) -> None:
        if self.previous is None:
            return
        previous, self.previous = self.previous, None
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in self.caught[:1]:
            if callable(previous[sig]):
                # KeyboardInterrupt, from Python's or sigterm_as_interrupt's handler
                previous[sig](sig, None)
            elif previous[sig] == signal.SIG_DFL:
                signal.raise_signal(sig)

    def __enter__(self) -> "Held":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


@contextmanager
def sigterm_as_interrupt():
    """SIGTERM (kill, systemd, a scheduler) ends the sweep as Ctrl-C does; only in the main
    thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        # once: a second one must not cut the drain short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
