"""sweep's paramiko transport: its key exchange and cipher first, and its packet reader.

Measured per host on the 300-host loopback bench (issue 52, docs/scaling.md): AES-GCM first saves
~1 ms of controller CPU over aes128-ctr + hmac-sha2-256; the reader below spares one thread and a
few dozen ``recv`` calls.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time

import paramiko

from sweep.collect.options import FAST_CIPHER, FAST_KEX


# The transport thread's tick once a session is under way. paramiko's 0.1 s woke each host's
# thread ten times a second, for a raised socket.timeout and a keepalive check under the GIL, all
# the while the agent ran: measured on the 300-host loopback fleet, 0.8 ms of controller CPU a host.
# Nothing waits on the tick: a closed try shuts its socket (`watchdog.Attempt.close`), the watchdog
# shuts one at its deadline, and either wakes the thread at once.
IDLE_TICK_S = 1.0


class SweepPacketizer(paramiko.Packetizer):
    """paramiko's Packetizer, less two costs per host that the profile shows (issue 52):

    - a packet is read in one or two ``recv`` calls of up to 64 KiB, the excess kept for the next
      packet (paramiko asks the socket for exactly the bytes it needs next: a header, then the
      rest, each into a growing ``bytes``);
    - the handshake's time limit is a deadline read on each socket timeout, not a `threading.Timer`
      thread started and cancelled for every host;
    - once the first packet is handled, the socket's timeout (the transport thread's tick: paramiko
      wakes on it to see whether it was closed) goes from paramiko's 0.1 s to `IDLE_TICK_S`.
    """

    _RECV = 65536

    def __init__(self, socket):
        super().__init__(socket)
        self._sock = socket
        self._handshake_deadline: float | None = None
        self._handshake_done = False

    def start_handshake(self, timeout):
        if self._handshake_deadline is None:
            self._handshake_deadline = time.monotonic() + float(timeout)

    def handshake_timed_out(self):
        return (
            self._handshake_deadline is not None
            and not self._handshake_done
            and time.monotonic() >= self._handshake_deadline
        )

    def complete_handshake(self):
        """paramiko calls it after every packet the transport thread handles."""
        if not self._handshake_done:
            self._handshake_done = True
            self._sock.settimeout(IDLE_TICK_S)

    def read_all(self, n, check_rekey=False):
        have = self._Packetizer__remainder
        while len(have) < n:
            if self.handshake_timed_out():
                raise EOFError()
            try:
                x = self._sock.recv(max(self._RECV, n - len(have)))
            except OSError as exc:  # socket.timeout, or EAGAIN (paramiko: a Linux quirk), is a tick
                if not isinstance(exc, socket.timeout) and exc.errno != errno.EAGAIN:
                    if self.closed:
                        raise EOFError() from None
                    raise
                if self.closed:
                    raise EOFError() from None
                if check_rekey and not have and self.need_rekey():
                    raise paramiko.packet.NeedRekeyException() from None
                self._check_keepalive()
                continue
            if not x:
                raise EOFError()
            have = have + x if have else x
        self._Packetizer__remainder = have[n:]
        return have[:n]


class FastTransport(paramiko.Transport):
    """curve25519 key exchange and AES-GCM first: measured here, AES-GCM saves ~1 ms of client CPU
    per host over aes128-ctr + hmac-sha2-256, whose MAC paramiko compares in pure Python. Packets
    go through `SweepPacketizer`."""

    def _parse_debug(self, m):
        """sshd's SSH_MSG_DEBUG (OpenSSH sends one at each public-key login: "key options: ..."),
        put in words only when paramiko's log takes DEBUG: paramiko's own formats it a byte at a
        time whether or not anything logs it (17 us for a 102-byte message)."""
        m.get_boolean()  # always_display
        msg = m.get_string()
        m.get_string()  # language
        if self.logger.isEnabledFor(logging.DEBUG):
            self._log(logging.DEBUG, f"Debug msg: {paramiko.util.safe_string(msg)}")

    def start_client(self, event=None, timeout=None):
        """paramiko's, its handshake waited for in one wait: paramiko's own wait woke ten times a
        second to see whether the transport had died, and the transport thread sets the event when
        it dies too (Transport.run's end)."""
        if event is not None:
            return super().start_client(event, timeout)
        done = threading.Event()
        super().start_client(done, timeout)  # with an event: the thread started, nothing waited
        done.wait(timeout)
        if not self.active:
            raise self.get_exception() or paramiko.SSHException("Negotiation failed.")
        return None

    def auth_publickey(self, username, key, event=None):
        """paramiko's, the server's answer waited for in one wait (the auth handler sets the event
        on an answer, and on the transport's end); paramiko's own wait then judges it at once."""
        if event is not None:
            return super().auth_publickey(username, key, event)
        done = threading.Event()
        super().auth_publickey(username, key, done)
        done.wait(self.auth_timeout)
        return self.auth_handler.wait_for_response(done)

    def __init__(self, sock, **kwargs):
        kwargs.setdefault("packetizer_class", SweepPacketizer)
        super().__init__(sock, **kwargs)
        opts = self.get_security_options()
        opts.kex = _first(opts.kex, FAST_KEX)
        opts.ciphers = _first(opts.ciphers, FAST_CIPHER)


def _first(names: tuple[str, ...], preferred: str) -> tuple[str, ...]:
    return (preferred, *(n for n in names if n != preferred)) if preferred in names else names
