"""Run one function over many items in a bounded pool of threads, yielding results as they finish.

A plain pool of daemon threads pulling from a queue: at most `forks` items in flight, no thread per
item, and nothing that joins a hung worker at interpreter exit. `stop()` (Ctrl-C) stops launching
and calls `on_stop`, whose job is to make the work in flight return at once (the transport shuts
its sockets); `drain()` then collects what the in-flight items returned.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable, Generic, Iterable, Iterator, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

_POLL_S = 0.2  # the main thread wakes this often, so Ctrl-C is seen promptly


class FanOut(Generic[Item, Result]):
    """`work(item)` over items, `forks` at a time; `work` must return, not raise, for a host's
    trouble."""

    def __init__(
        self,
        work: Callable[[Item], Result],
        *,
        forks: int = 32,
        on_stop: Callable[[], None] | None = None,
        on_result: Callable[[Item, Result], None] | None = None,
    ):
        if forks < 1:
            raise ValueError("forks must be 1 or more")
        self.work = work
        self.forks = forks
        self.on_stop = on_stop
        self.on_result = on_result
        self.stopping = threading.Event()
        self._todo: queue.SimpleQueue = queue.SimpleQueue()
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._go = threading.Event()  # workers wait for it, so that all `forks` begin together
        self._outstanding = 0  # items not yet handed to the caller

    def run(self, items: Iterable[Item]) -> Iterator[tuple[Item, Result]]:
        """Yield (item, result) in completion order, in the calling thread, until all are done."""
        items = list(items)
        for item in items:
            self._todo.put(item)
        self._outstanding = len(items)
        # Thread.start() waits until the new thread runs; with the first workers already busy (and
        # the GIL with them) starting 200 took ~10 s here, and the last hosts began that much later
        for n in range(min(self.forks, len(items))):
            thread = threading.Thread(target=self._worker, name=f"sweep-fanout-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)
        self._go.set()
        while self._outstanding and not self.stopping.is_set():
            try:
                got = self._done.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            yield self._hand_over(got)

    def stop(self) -> None:
        """Launch nothing more, and ask the work in flight to end now (idempotent)."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        self._go.set()
        while True:  # what no worker took will never run
            try:
                self._todo.get_nowait()
            except queue.Empty:
                break
        if self.on_stop is not None:
            self.on_stop()

    def drain(self, timeout: float = 10.0) -> list[tuple[Item, Result]]:
        """After stop(): the results of the items that were in flight, waiting at most `timeout`
        s."""
        end = time.monotonic() + timeout
        got = []
        while time.monotonic() < end:
            try:
                got.append(self._hand_over(self._done.get(timeout=_POLL_S)))
            except queue.Empty:
                if not any(t.is_alive() for t in self._threads):
                    break
        while True:
            try:
                got.append(self._hand_over(self._done.get_nowait()))
            except queue.Empty:
                return got

    def _hand_over(self, got: tuple) -> tuple[Item, Result]:
        item, result, error = got
        self._outstanding -= 1
        if error is not None:
            self.stop()
            raise error
        if self.on_result is not None:
            self.on_result(item, result)
        return item, result

    def _worker(self) -> None:
        self._go.wait()
        while not self.stopping.is_set():
            try:
                item = self._todo.get_nowait()
            except queue.Empty:
                return
            try:
                self._done.put((item, self.work(item), None))
            except BaseException as exc:  # a bug in `work`: surfaced in the caller's thread
                self._done.put((item, None, exc))
