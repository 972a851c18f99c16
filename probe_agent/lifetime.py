"""Nothing a wrapped command starts outlives its run: its leftovers found, ended and accounted for.

Before it starts the command, the agent makes itself a child subreaper (Linux,
`prctl(PR_SET_CHILD_SUBREAPER)`): a descendant that daemonises (`setsid cmd &`, `( setsid cmd & )`,
`nohup cmd &`, a double fork) is then reparented to the agent instead of to init, and stays
findable as a process whose parent chain (/proc/PID/stat) reaches the agent.

When the command has exited (or was ended at its timeout, or when the session closed),
`end_leftovers` ends what is left: the command's process group (under `--emit`) and every
remaining descendant of the agent. SIGTERM first; what is still there after `grace` seconds gets
SIGKILL; the agent's own dead children are reaped (waitpid) as it goes. It returns exactly what
it ended (pid, command name, the last signal sent) and what it could not end and why (EPERM: a
descendant that became another user; still there after SIGKILL: asleep in the kernel, state D).

Without the subreaper (not Linux, or prctl refused) a process orphaned before the end is
reparented to init and cannot be found: `tracking` says so.
"""

import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
LEFTOVER_GRACE_S = 2.0  # SIGTERM -> SIGKILL for what the command left behind
KILL_WAIT_S = 2.0  # how long a SIGKILLed process may take to disappear before it is reported
POLL_S = 0.02
GONE = ("Z", "X", "x")  # zombie / dead: no longer running (a zombie child of ours is reaped)


def become_subreaper():
    """Make this process the child subreaper of its descendants; None on success, else why not."""
    if not sys.platform.startswith("linux"):
        return "not Linux"
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            return "prctl(PR_SET_CHILD_SUBREAPER) failed: %s" % os.strerror(ctypes.get_errno())
    except (OSError, AttributeError) as exc:
        return "prctl unavailable: %s" % exc
    return None


def read_stat(pid):
    """(state, ppid, pgrp, name) of a process from /proc/PID/stat, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    try:
        close = text.rindex(")")  # the name may hold spaces and ')'
        fields = text[close + 2 :].split()
        return fields[0], int(fields[1]), int(fields[2]), text[text.index("(") + 1 : close]
    except (ValueError, IndexError):
        return None


def process_table():
    """pid -> (state, ppid, pgrp, name) of every process this PID namespace shows."""
    table = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for entry in names:
        if entry.isdigit():
            info = read_stat(int(entry))
            if info is not None:
                table[int(entry)] = info
    return table


def descendants(root, table):
    """The pids of `table` whose parent chain reaches `root` (root itself excluded)."""
    children = {}
    for pid, info in table.items():
        children.setdefault(info[1], []).append(pid)
    found, todo = set(), list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in found and pid != root:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def reap(root, table):
    """waitpid each dead child of `root` (this process) in `table`; how many there were."""
    dead = [pid for pid, info in table.items() if info[1] == root and info[0] in GONE]
    for pid in dead if root == os.getpid() else ():
        try:
            os.waitpid(pid, os.WNOHANG)
        except (ChildProcessError, OSError):
            pass
    return len(dead)


def still_running(root, group):
    """(pid -> name of every running process to end: descendants of `root`, members of `group`;
    whether the scan is settled). A scan that met a dead child of ours is not: the children of a
    process that exits are reparented before it turns zombie, possibly after /proc was listed, so
    only the next scan is sure to see them (a double fork's parent exits right after its fork)."""
    table = process_table()
    dead = reap(root, table)
    targets = descendants(root, table)
    if group:
        targets.update(pid for pid, info in table.items() if info[2] == group)
    targets.discard(root)
    return {pid: table[pid][3] for pid in targets if table[pid][0] not in GONE}, dead == 0


def end_leftovers(root, group=None, grace=LEFTOVER_GRACE_S, tracking=None):
    """End every process the command left behind (see the module docstring); its
    provenance section."""
    sent, refused = {}, {}
    signum, deadline = signal.SIGTERM, None
    while True:
        live, settled = still_running(root, group)
        now = time.monotonic()
        if not live and settled:
            break
        if deadline is None:
            deadline = now + grace
        elif now >= deadline and signum == signal.SIGTERM:
            signum, deadline = signal.SIGKILL, now + KILL_WAIT_S
        elif now >= deadline:
            break
        for pid, name in live.items():
            if pid in refused or sent.get(pid, (None, None))[1] == signum:
                continue
            try:
                os.kill(pid, signum)
                sent[pid] = (name, signum)
            except ProcessLookupError:
                pass
            except PermissionError:
                refused[pid] = (name, "not permitted to signal it (EPERM): it runs as another user")
        time.sleep(POLL_S)
    live = still_running(root, group)[0] if sent or refused else {}
    not_ended = [
        {"pid": pid, "name": name, "why": refused[pid][1] if pid in refused else why_alive(pid)}
        for pid, name in sorted(live.items())
    ]
    ended = [
        {"pid": pid, "name": name, "signal": signal.Signals(signum).name}
        for pid, (name, signum) in sorted(sent.items())
        if pid not in live
    ]
    return {
        "tracking": tracking or "subreaper",
        "grace_s": grace,
        "ended": ended,
        "not_ended": not_ended,
    }


def why_alive(pid):
    info = read_stat(pid)
    if info is not None and info[0] == "D":
        return "still there %g s after SIGKILL: asleep in the kernel (state D)" % KILL_WAIT_S
    return "still there %g s after SIGKILL (state %s)" % (KILL_WAIT_S, info[0] if info else "?")


def tracking_of(subreaper_problem):
    """How leftovers were tracked, for the provenance: the subreaper, or why only
    the parent chain."""
    if subreaper_problem is None:
        return "subreaper"
    return (
        "parent chain only (no subreaper: %s): a process orphaned before the end is not found"
        % subreaper_problem
    )
