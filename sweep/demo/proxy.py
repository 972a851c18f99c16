"""The loopback fleet's flaky network: a TCP relay in front of one sshd that drops, delays or cuts
connections (`sweep.demo.loopback.LocalFleet`'s hosts of kind flaky, slow_banner and
drop_mid_output)."""

from __future__ import annotations

import socket
import threading
import time


class DropProxy:
    """Closes its first `drops` connections at once (sshd's MaxStartups does that), then relays to
    sshd; waits `delay_s` before relaying (a slow banner); cuts a connection after `cut_after` bytes
    from sshd."""

    def __init__(
        self,
        listen: tuple[str, int],
        backend: tuple[str, int],
        drops: int,
        *,
        delay_s: float = 0.0,
        cut_after: int = 0,
    ):
        self.listen, self.backend, self.drops = listen, backend, drops
        self.delay_s, self.cut_after = delay_s, cut_after
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(listen)
        self._server.listen(64)
        self._closed = False
        self._links: list[socket.socket] = []
        threading.Thread(target=self._accept, name="fleet-drop-proxy", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            if self.drops > 0:
                self.drops -= 1
                conn.close()
                continue
            self._links.append(conn)
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        if self.delay_s:
            time.sleep(self.delay_s)
        try:
            upstream = socket.create_connection(self.backend, timeout=5)
        except OSError:
            conn.close()
            return
        upstream.settimeout(None)
        self._links.append(upstream)
        cut = (conn, upstream) if self.cut_after else None
        threading.Thread(target=_pipe, args=(conn, upstream), daemon=True).start()
        threading.Thread(
            target=_pipe, args=(upstream, conn, self.cut_after, cut), daemon=True
        ).start()

    def close(self) -> None:
        self._closed = True
        self._server.close()
        for sock in self._links:
            try:
                sock.close()
            except OSError:
                pass


def _pipe(src: socket.socket, dst: socket.socket, limit: int = 0, cut=None) -> None:
    sent = 0
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if limit and sent + len(data) >= limit:
                dst.sendall(data[: limit - sent])
                for sock in cut:  # the network drops the connection: both ends go, mid-stream (RST)
                    try:
                        sock.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                        )
                        # wakes the other relay thread out of recv()
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    sock.close()
                return
            sent += len(data)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
