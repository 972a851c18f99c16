"""Become on the host (sudo -n), and every way it fails read back as one
`become_failed` with its cause.

Under become the host runs a small guard under the login user's python (`GUARD`): it starts
``sudo -n -u USER -- PYTHON -I -c BOOTSTRAP`` in a session of its own and passes its stderr on. The
bootstrap, once sudo has started it, says so on stderr (`STARTED_MARK`, which the guard swallows). A
sudo that has neither started the agent nor ended after `SUDO_WAIT_S` (a sudo that prompts, reads a
tty, or hangs in PAM) is ended with everything it started, and the guard says so (`HUNG_MARK`, exit
`HUNG_EXIT`) with what sudo wrote: nothing is left on the host, and the record has sudo's words, not
a timeout. A sudo that asked for a password is asked `sudo -n -l` once, so the record tells "no rule
at all" from "rules that do not cover the agent's python".

`refusal()` turns the guard's and sudo's words (and a login shell's "sudo: not found" in bash, dash,
zsh, busybox, fish and tcsh wording) into the HostFailure with the cause and its fix.
"""

from __future__ import annotations

import re
from typing import Any

from sweep.failures import HostFailure
from sweep.text import visible

SUDO = ("sudo", "-n")
SUDO_WAIT_S = 20.0  # at most: a sudo that has not started the agent by then never will
STARTED_MARK = "sweep-agent: started under become"
HUNG_MARK = "sweep-agent: sudo did not start the agent within"
MISSING_MARK = "sweep-agent: sudo is not installed"
LIST_MARK = "sweep-agent: sudo -n -l:"
HUNG_EXIT = 125

GUARD = r"""
import sys
if sys.version_info < (3, 8):
    sys.stderr.write('%(too_old)s: Python %%s; the agent needs 3.8 or later\n'
                     %% sys.version.split()[0])
    sys.exit(3)
import os, select, signal, subprocess, time
# the session gone: a write fails, the guard still ends sudo
signal.signal(signal.SIGPIPE, signal.SIG_IGN)
def say(data):
    try:
        os.write(2, data)
    except OSError:
        pass
wait_s = float(sys.argv[1]); mark = b'%(started)s\n'
try:
    p = subprocess.Popen(sys.argv[2:], stderr=subprocess.PIPE, start_new_session=True)
except OSError as exc:
    say(('%(missing)s (%%s; PATH=%%s)\n' %% (exc.strerror, os.environ.get('PATH', ''))).encode())
    sys.exit(127)
fd, said, started, end = p.stderr.fileno(), b'', False, time.monotonic() + wait_s
while True:
    ready = select.select([fd], [], [], None if started else max(0.0, end - time.monotonic()))[0]
    if not ready:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        say(said + ('\n%(hung)s %%.1f s; ended it\n' %% wait_s).encode())
        sys.exit(%(hung_exit)d)
    chunk = os.read(fd, 65536)
    if not chunk:
        break
    if started:
        say(chunk)
        continue
    said += chunk
    if mark in said:
        started = True
        say(said.replace(mark, b'', 1))
rc = p.wait()
if not started:
    say(said)
    if b'password is required' in said:
        try:
            listed = subprocess.run(['sudo', '-n', '-l'], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    timeout=5).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            listed = str(exc).encode()
        say(b'%(listed)s '
            + b' | '.join(l.strip() for l in listed.splitlines() if l.strip())[:2000] + b'\n')
sys.exit(rc if rc >= 0 else 128 - rc)
"""


def guard(too_old_mark: str) -> str:
    return GUARD % {
        "too_old": too_old_mark,
        "started": STARTED_MARK,
        "missing": MISSING_MARK,
        "hung": HUNG_MARK,
        "hung_exit": HUNG_EXIT,
        "listed": LIST_MARK,
    }


def become_user(host: Any) -> str | None:
    """The user the agent runs as on `host` through sudo (its ansible_become_user, root),
    or None: no become."""
    return (
        (getattr(host, "become_user", None) or "root") if getattr(host, "become", False) else None
    )


def sudo_wait(lifetime: float | None) -> float:
    """How long the guard lets sudo take to start the agent: half the host's lifetime, at
    most SUDO_WAIT_S."""
    return SUDO_WAIT_S if lifetime is None else max(0.5, min(SUDO_WAIT_S, lifetime / 2.0))


# a login shell that found no sudo (the agent's own guard says MISSING_MARK): bash "bash: line
# 1: sudo: command not found", dash "sh: 1: sudo: not found", busybox "sh: sudo: not found",
# zsh "zsh:1: command not found: sudo", fish "fish: Unknown command: sudo", tcsh "sudo:
# Command not found."
SHELL_NO_SUDO = re.compile(
    r"(?m)^(?:\S+: (?:line \d+: )?(?:\d+: )?sudo: (?:command )?not found"
    r"|\S+:\d+: command not found: sudo|fish: Unknown command: sudo|sudo: Command not found\.)$"
)
_SUDO_SAID = re.compile(r"(?m)^sudo: (.+)$")
_SUDO_NO_COMMAND = re.compile(r"^(\S+): command not found$")


def _who(host: Any) -> str:
    login = getattr(host, "user", None)
    return f"user {login}" if login else "the login user"


def _rule_fix(host: Any) -> str:
    return (
        f"give {_who(host)} a NOPASSWD rule for '{visible(host.python, keep='')}' in "
        "/etc/sudoers.d, or sweep the host without become (no --become, ansible_become: false)"
    )


def refusal(host: Any, exit_status: int | None, stderr: str) -> HostFailure | None:
    """Under become, the sudo that did not run the agent, with its cause and fix; None
    when sudo ran it."""
    user = become_user(host)
    if user is None or exit_status not in (1, 127, HUNG_EXIT):
        return None
    name, who = host.name, _who(host)
    if exit_status == HUNG_EXIT and HUNG_MARK in stderr:
        return _sudo_hung(name, user, who, stderr)
    if exit_status == 127 and (MISSING_MARK in stderr or SHELL_NO_SUDO.search(stderr)):
        return _no_sudo(name, user, who, stderr)
    said = [
        m.group(1).strip()
        for m in _SUDO_SAID.finditer(stderr)
        if not m.group(0).startswith(LIST_MARK)
    ]
    if not said:
        return None
    last = visible(said[-1], keep="")[:200]
    missing = _SUDO_NO_COMMAND.match(said[-1])
    if missing:
        return HostFailure(
            "no_python",
            (
                f"{name}: sudo finds no '{visible(missing.group(1), keep='')}' (sudo: {last}): "
                "sudo searches its own secure_path; set ansible_python_interpreter to the "
                "python's absolute path"
            ),
        )
    if "must have a tty" in last or "terminal is required" in last:
        return HostFailure(
            "become_failed",
            (
                f"{name}: sudo -n -u {user} refused to run the agent for {who} without a terminal "
                f"(sudo: {last}); sweep opens no terminal: add "
                f"'Defaults:{getattr(host, 'user', None) or 'USER'} !requiretty' in "
                "/etc/sudoers.d, or sweep the host without become"
            ),
        )
    return HostFailure(
        "become_failed",
        (
            f"{name}: sudo -n -u {user} refused to run the agent for {who} (sudo: "
            f"{last}{_listed(stderr, user)}); sweep never types a password: {_rule_fix(host)}"
        ),
    )


def _sudo_hung(name: str, user: str, who: str, stderr: str) -> HostFailure:
    """The guard ended a sudo that neither ran the agent nor ended (a prompt, a terminal read)."""
    words = [
        visible(line.strip(), keep="")
        for line in stderr.split(HUNG_MARK)[0].splitlines()
        if line.strip()
    ]
    said = f"it wrote: {' / '.join(words)[-200:]!r}" if words else "it wrote nothing"
    return HostFailure(
        "become_failed",
        (
            f"{name}: sudo -n -u {user} neither ran the agent nor ended within "
            f"{stderr.split(HUNG_MARK)[1].split(';')[0].strip()} ({said}): a sudo that "
            "prompts, reads a terminal or hangs; sweep ended it and what it started; make "
            f"sudo -n answer at once for {who} (a NOPASSWD rule, no password prompt in its PAM "
            "stack), or sweep the host without become"
        ),
    )


def _no_sudo(name: str, user: str, who: str, stderr: str) -> HostFailure:
    """The host has no sudo: the guard's mark, or the login shell's "command not found"."""
    line = next(
        (l for l in stderr.splitlines() if MISSING_MARK in l or SHELL_NO_SUDO.match(l)), ""
    ).strip()
    line = "sudo: " + line.split(MISSING_MARK, 1)[1].strip(" ()") if MISSING_MARK in line else line
    return HostFailure(
        "become_failed",
        (
            f"{name}: become ({user}) needs sudo, which is not installed on the host "
            f"({visible(line, keep='')[:200]}); install sudo and give {who} a "
            "NOPASSWD rule for the agent's python, or sweep the host without become"
        ),
    )


def _listed(stderr: str, user: str) -> str:
    """What `sudo -n -l` told the guard after a password was asked: no rule at all, or
    the rules there are."""
    line = next((l for l in stderr.splitlines() if l.startswith(LIST_MARK)), None)
    if line is None:
        return ""
    listed = line[len(LIST_MARK) :].strip()
    if not listed or "password is required" in listed:
        return (
            "; sudo -n -l: no rule without a password: not in sudoers, or every rule asks for one"
        )
    rules = re.split(r"may run the following commands on [^:]*:", listed, maxsplit=1)[-1]
    return (
        f"; sudo -n -l: its rules do not cover the agent's python as {user}: "
        f"{visible(rules, keep='')[:200].strip(' |')}"
    )
