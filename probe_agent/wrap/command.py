"""`--wrap`'s command: started (stdio passed through, or its output's tail kept), waited for
under its timeout with signals passed on, tethered to the controller's session, and what it
leaves running ended.
"""

import os
import signal
import subprocess
import sys
import threading
import time

from probe_agent.lifetime import become_subreaper, end_leftovers, tracking_of


class OutputTail(threading.Thread):
    """Reads the command's stdout+stderr (`--emit`), keeps the last `limit` bytes
    and counts them all."""

    def __init__(self, limit):
        threading.Thread.__init__(self, name="sweep-output", daemon=True)
        self.limit, self.total, self.buf, self.pipe = limit, 0, bytearray(), None

    def run(self):
        while True:
            chunk = self.pipe.read1(65536) if hasattr(self.pipe, "read1") else self.pipe.read(65536)
            if not chunk:
                return
            self.total += len(chunk)
            self.buf += chunk
            del self.buf[: -self.limit]

    def section(self):
        return {
            "tail": bytes(self.buf).decode("utf-8", "replace"),
            "bytes": self.total,
            "truncated": self.total > len(self.buf),
            "tail_limit_bytes": self.limit,
        }


def run_command(command, on_start, capture=None, timeout=None, tether=False):
    """Start the command, wait for it; returns its command section.

    Without `capture` the command has the agent's stdio. With an OutputTail, it reads /dev/null,
    its output goes to the tail, and it runs in its own session: at `timeout` seconds its whole
    process group is ended. Whatever the command leaves running when it is over (its group, every
    descendant, daemonised or not) is ended too: `command.leftovers` (probe_agent/lifetime.py).
    With `tether`, the end of the agent's stdin (the controller closed the SSH session: Ctrl-C, its
    deadline) ends the command too.
    """
    section = {
        "argv": list(command),
        "cwd": os.getcwd(),
        "pid": None,
        "exit_code": None,
        "signal": None,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_s": 0.0,
        "error": None,
        "timeout_s": timeout,
        "timed_out": False,
    }
    t0 = time.monotonic()
    # before the command starts: what it orphans comes back to the agent
    subreaper = become_subreaper()
    proc = start_command(command, capture, section)
    if proc is None:
        return section, t0
    group = capture is not None
    if capture is not None:
        capture.pipe = proc.stdout
        capture.start()
    if tether:
        watch_stdin(proc, section)
    on_start(proc.pid, t0)
    rc = wait_forwarding(proc, group, timeout, section)
    section["wall_s"] = round(time.monotonic() - t0, 4)
    # the command is over: its process group and every descendant still running are ended
    left = end_leftovers(os.getpid(), proc.pid if group else None, tracking=tracking_of(subreaper))
    section["leftovers"] = left
    if left["ended"] or left["not_ended"]:
        section["leftover_killed"] = not left["not_ended"]
    if capture is not None:
        capture.join(2.0)
        left["output_open"] = capture.is_alive()  # held by a process the agent could not end
    if rc < 0:
        section["signal"] = signal_name(-rc)
        rc = 128 - rc
    section["exit_code"] = rc
    return section, t0


def start_command(command, capture, section):
    """The command's process (its output to `capture`, in a session of its own), or None with the
    error in `section` (127: not found, 126: not runnable)."""
    try:
        if capture is None:
            proc = subprocess.Popen(command)
        else:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    except OSError as exc:
        missing = isinstance(exc, FileNotFoundError)
        section["exit_code"] = 127 if missing else 126
        section["error"] = "%s: %s" % (
            command[0],
            "command not found" if missing else exc.strerror or exc,
        )
        if capture is None:
            sys.stderr.write("sweep-agent: %s\n" % section["error"])
        return None
    section["pid"] = proc.pid
    return proc


def wait_forwarding(proc, group, timeout, section):
    """Wait for the command (at `timeout`: TERM, then KILL 5 s later) while passing
    signals on; its status."""
    # After the exec (so that the command inherits default dispositions): a terminal's Ctrl-C
    # reaches the command through its process group, the agent outlives it to write the record;
    # a TERM or HUP sent to the agent alone is passed on.
    forward = lambda signum, frame: end(proc, group, signum)
    old = {}
    for name, handler in (
        ("SIGINT", signal.SIG_IGN),
        ("SIGQUIT", signal.SIG_IGN),
        ("SIGTERM", forward),
        ("SIGHUP", forward),
    ):
        sig = getattr(signal, name, None)
        if sig is not None:
            try:
                old[sig] = signal.signal(sig, handler)
            except (ValueError, OSError):
                pass
    try:
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            section["timed_out"] = True
            end(proc, group, signal.SIGTERM)
            try:
                return proc.wait(5.0)
            except subprocess.TimeoutExpired:
                end(proc, group, signal.SIGKILL)
                return proc.wait()
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def watch_stdin(proc, section):
    """A thread that ends the command's process group when the agent's stdin reaches its end."""

    def watch():
        try:
            while sys.stdin.buffer.read(65536):
                pass
        except (OSError, ValueError):
            pass
        if proc.poll() is None:
            section["ended_by"] = "the controller closed the session"
            end(proc, True, signal.SIGTERM)
            try:
                proc.wait(5.0)
            except subprocess.TimeoutExpired:
                end(proc, True, signal.SIGKILL)

    threading.Thread(target=watch, name="sweep-tether", daemon=True).start()


def end(proc, group, signum):
    """Send `signum` to the command (its whole process group when it has its own)."""
    try:
        if group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
    except OSError:
        pass


def signal_name(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return "signal %d" % n
