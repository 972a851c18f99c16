"""ProxyCommand as OpenSSH runs it: ``exec COMMAND`` by the user's shell, its stdin and stdout the
connection.

paramiko's own ProxyCommand splits the line with shlex (no shell: pipes, ``$VAR`` and ``&&`` break)
and spins on a closed pipe; this one is read like a socket (EOF is ``b""``), runs in a session of
its own, and `kill()` ends the whole process group (``ssh -W`` and what it started) at the host's
deadline.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import tempfile

from sweep.text import visible


class ShellProxyCommand:
    """The socket-like end of a ProxyCommand, for paramiko's Transport."""

    def __init__(self, command: str):
        self.command = command
        self._stderr = tempfile.TemporaryFile()
        shell = os.environ.get("SHELL") or "/bin/sh"
        self.process = subprocess.Popen(
            [shell, "-c", f"exec {command}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            bufsize=0,
            start_new_session=True,
        )
        self.timeout: float | None = None

    def send(self, data: bytes) -> int:
        try:
            return os.write(self.process.stdin.fileno(), data)
        except OSError as exc:
            raise OSError(
                exc.errno, f"ProxyCommand {self.command!r} stopped reading ({exc.strerror})"
            ) from None

    def recv(self, size: int) -> bytes:
        ready, _, _ = select.select([self.process.stdout], [], [], self.timeout)
        if not ready:
            raise socket.timeout()
        try:
            return os.read(self.process.stdout.fileno(), size)
        except (OSError, ValueError):  # ValueError: `close` took the pipe while select woke
            return b""

    def settimeout(self, timeout: float | None) -> None:
        self.timeout = timeout

    def kill(self) -> None:
        """End the command and everything it started."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        self.kill()
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._stderr.close()

    def said(self) -> str:
        """The last line the command wrote on stderr (host text: made visible)."""
        try:
            self._stderr.seek(0)
            text = self._stderr.read()[-2000:].decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return visible(lines[-1][:300], keep="") if lines else ""

    @property
    def closed(self) -> bool:
        return self.process.poll() is not None

    @property
    def _closed(self) -> bool:
        return self.closed
