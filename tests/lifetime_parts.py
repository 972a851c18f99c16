"""What the wrapped-daemon tests share: a double fork that daemonises, and the processes that hold
a test's marker in their command line (read from /proc)."""
import os

from probe_agent import lifetime

DOUBLE_FORK = ("import os\n"
               "if os.fork(): os._exit(0)\n"
               "os.setsid()\n"
               "if os.fork(): os._exit(0)\n"
               "open('{pidfile}', 'w').write(str(os.getpid()))\n"
               "os.execvp('sleep', ['sleep', '{marker}'])\n")


def kill_marked(marker):
    """SIGKILL whatever still holds `marker` (a test's clean-up: only the test's own processes hold it)."""
    import signal

    for pid in marked_processes(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def marked_processes(marker):
    """pid -> state of every process whose command line holds `marker` (zombies included)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        info = lifetime.read_stat(int(entry))
        if marker in cmdline and info is not None:
            found[int(entry)] = info[0]
    return found


def running(marker):
    return {pid for pid, state in marked_processes(marker).items() if state not in lifetime.GONE}
