"""The host deadline: paramiko's timeouts are per read, so one thread shuts each attempt still
running at its end."""

from __future__ import annotations

import heapq
import itertools
import socket
import threading
import time

import paramiko

_WATCHDOG_IDLE_S = 5.0


class Watchdog:
    """One thread for the whole sweep: runs each registered closer when its deadline passes."""

    def __init__(self):
        self._cond = threading.Condition()
        # (deadline, token): a finished attempt leaves a pair here until its deadline comes up (the
        # attempt itself, with its closed client, is only in _live, so it is freed at unwatch)
        self._heap: list[tuple[float, int]] = []
        self._live: dict[int, "Attempt"] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, deadline: float, attempt: "Attempt") -> int:
        with self._cond:
            token = next(self._ids)
            self._live[token] = attempt
            # the thread sleeps until the earliest deadline in the heap: it needs waking only for
            # an earlier one (or an empty heap), not for each host of a sweep whose hosts share
            # one deadline length (a wake-up per host: a thread switch and the GIL, issue 52)
            wake = not self._heap or deadline < self._heap[0][0]
            heapq.heappush(self._heap, (deadline, token))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="sweep-watchdog", daemon=True
                )
                self._thread.start()
            elif wake:
                self._cond.notify()
            return token

    def unwatch(self, token: int) -> None:
        with self._cond:
            self._live.pop(token, None)

    def abort_all(self, reason: str = "interrupted") -> None:
        """Close every attempt in flight now (Ctrl-C)."""
        with self._cond:
            attempts = list(self._live.values())
            self._live.clear()
        for attempt in attempts:
            attempt.abort(reason)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][1] not in self._live:
                    heapq.heappop(self._heap)
                if not self._heap:
                    if not self._cond.wait(_WATCHDOG_IDLE_S) and not self._heap:
                        self._thread = None  # idle: the next watch() starts a new thread
                        return
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                _, token = heapq.heappop(self._heap)
                attempt = self._live.pop(token)
            attempt.abort("deadline")


class Attempt:
    """The sockets and clients of one try, so another thread can shut them all at once."""

    def __init__(self):
        self.aborted: str | None = None
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._clients: list[paramiko.SSHClient] = []
        self._processes: list = []

    def add(self, thing) -> None:
        """A socket, an SSHClient, or a process (anything with ``kill()``: a ProxyCommand, an
        ssh)."""
        with self._lock:
            if isinstance(thing, paramiko.SSHClient):
                self._clients.append(thing)
            elif hasattr(thing, "kill"):
                self._processes.append(thing)
            else:
                self._sockets.append(thing)
            aborted = self.aborted
        if aborted:
            self._shut()

    def abort(self, reason: str) -> None:
        with self._lock:
            if self.aborted is None:
                self.aborted = reason
        self._shut()

    def _shut(self) -> None:
        for process in list(self._processes):
            process.kill()
        for sock in list(self._sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        """Everything of the try ended: the clients from the last hop back (a tunnel's session
        closed while the hop that carries it still runs), each one's socket shut before its client
        is closed, so its transport thread, waiting in ``recv``, wakes at once (a socket closed
        under it would wait for its idle tick, `sweep.collect.ssh.packets.IDLE_TICK_S`)."""
        for process in self._processes:
            getattr(process, "close", process.kill)()  # a ProxyCommand is also reaped
        for client in reversed(self._clients):
            sock = getattr(client.get_transport(), "sock", None)
            if isinstance(sock, socket.socket):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            try:
                client.close()
            except Exception:
                pass
        for sock in self._sockets:
            try:
                sock.close()
            except OSError:
                pass
