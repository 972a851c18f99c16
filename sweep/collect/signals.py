"""Ctrl-C and SIGTERM during a sweep: `Held` makes them wait while the run folder is between two
whole states; `Gate` does the same for many short holds (each record kept); `sigterm_as_interrupt`
ends a sweep on SIGTERM as Ctrl-C does."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _deliver(sig: int, handler) -> None:
    """A signal that waited, delivered as its own handler would have taken it: a Python handler is
    called (KeyboardInterrupt, from Python's or sigterm_as_interrupt's), the default action is taken
    (the handler already restored)."""
    if callable(handler):
        handler(sig, None)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(sig)


class Gate:
    """Ctrl-C and SIGTERM held off inside ``with gate:`` blocks, for many short holds (each record
    kept): its handlers are installed once, when it is made, and each block only counts, so a hold
    costs no system call (a `Held` per record installed and restored two handlers, four system
    calls and 35 us a host). A signal that comes while no
    block runs goes to its own handler at once; one that comes inside a block waits for the block's
    end. `close` gives the signals back to their handlers, where nothing replaced the gate's since
    (sigterm_as_interrupt's sets SIGTERM ignored after the first). Only in the main thread, where
    Python runs handlers; elsewhere it holds nothing."""

    def __init__(self):
        self.depth = 0
        self.caught: list[int] = []
        self.previous: dict = {}
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                handler = signal.getsignal(sig)
                if callable(handler) or handler == signal.SIG_DFL:  # an ignored one stays ignored
                    self.previous[sig] = handler
                    signal.signal(sig, self._take)

    def _take(self, signum: int, frame) -> None:
        if self.depth:
            self.caught.append(signum)
        else:
            self._give(signum)

    def _give(self, sig: int) -> None:
        handler = self.previous[sig]
        if not callable(handler):  # the default action: the gate is no longer in its way
            signal.signal(sig, handler)
            del self.previous[sig]
        _deliver(sig, handler)

    def __enter__(self) -> "Gate":
        self.depth += 1
        return self

    def __exit__(self, *exc) -> None:
        self.depth -= 1
        if not self.depth and self.caught:
            sig = self.caught[0]
            self.caught.clear()
            self._give(sig)

    def close(self) -> None:
        previous, self.previous = self.previous, {}
        for sig, handler in previous.items():
            if signal.getsignal(sig) == self._take:
                signal.signal(sig, handler)


class Held(Gate):
    """Ctrl-C and SIGTERM wait while a run folder is between two whole states (the folder and its
    manifest, a record set aside, a session's end): a `Gate` held from the start until `release`
    (or the end of a ``with`` block), which gives the signals back to their handlers first and then
    delivers one that came meanwhile. Only in the main thread, where Python runs handlers."""

    def __init__(self):
        super().__init__()
        self.depth = 1

    def release(self) -> None:
        if not self.depth:
            return
        self.depth = 0
        caught, previous = self.caught[:1], dict(self.previous)
        self.caught.clear()
        self.close()
        for sig in caught:
            _deliver(sig, previous[sig])

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
