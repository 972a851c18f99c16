"""Which host names and user names may reach ssh: OpenSSH's own rules, since its
fix for CVE-2023-51385.

OpenSSH 9.6 (ssh.c; ``misc.c`` in later releases, whose rules are the ones below) refuses a host
name or remote user given on the command line that holds shell syntax, because ``%h``, ``%n``
and ``%r`` are expanded unquoted into a ProxyCommand, a LocalCommand or a ``Match exec`` line
and run by ``$SHELL -c``:

- ``valid_hostname``: no leading ``-``; none of ``'`` `` ` `` ``"`` ``$`` ``\\`` ``;`` ``&`` ``<``
  ``>`` ``|`` ``(`` ``)`` ``{`` ``}`` ``,``; no whitespace, no control character.
- ``valid_ruser``: no leading ``-``; no control character; none of ``'`` `` ` `` ``"`` ``;`` ``&``
  ``<`` ``>`` ``|`` ``(`` ``)`` ``{`` ``}``; no whitespace followed by ``-``; no ``\\`` at the end.

The inventory is sweep's command line for ssh (``ansible_host``, the host name, ``ansible_user``,
the ProxyJump hosts of ``ansible_ssh_common_args``), and the system ssh (Debian 12's is 9.2) may
predate the fix: sweep applies the rules itself. Each function returns None for a valid value, else
the rule the value breaks, in words.
"""

from __future__ import annotations

import re

# none of them refused: the common case, fast
_PLAIN = re.compile(r"(?!-)[A-Za-z0-9._:%@+=/~*?#!^\[\]-]*\Z")
_HOST_REFUSED = frozenset("'`\"$\\;&<>|(){},")
_USER_REFUSED = frozenset("'`\";&<>|(){}")


def _control(ch: str) -> bool:
    return ord(ch) < 0x20 or ord(ch) == 0x7F  # C's iscntrl in the C locale


def hostname_problem(name: str) -> str | None:
    """Why OpenSSH's valid_hostname refuses `name`, or None when it accepts it."""
    if _PLAIN.match(name):
        return None
    if name.startswith("-"):
        return "starts with '-' (it would read as an ssh option)"
    for ch in name:
        if ch in _HOST_REFUSED:
            return f"holds {ch!r}"
        if ch.isspace() and ch.isascii():
            return f"holds whitespace ({ch!r})"
        if _control(ch):
            return f"holds the control character {ch!r}"
    return None


def ruser_problem(user: str) -> str | None:
    """Why OpenSSH's valid_ruser refuses `user`, or None when it accepts it."""
    if _PLAIN.match(user):
        return None
    if user.startswith("-"):
        return "starts with '-' (it would read as an ssh option)"
    for index, ch in enumerate(user):
        if _control(ch):
            return f"holds the control character {ch!r}"
        if ch in _USER_REFUSED:
            return f"holds {ch!r}"
        if ch.isspace() and ch.isascii() and user[index + 1 : index + 2] == "-":
            return "holds whitespace followed by '-' (it would read as an ssh option)"
        if ch == "\\" and index == len(user) - 1:
            return "ends with '\\'"
    return None


RULE_WHY = (
    "since its fix for CVE-2023-51385: ssh_config expands %h %n %r into commands the shell runs, "
    "as ProxyCommand and Match exec"
)
RULE_FIX = "fix the value there, or the tool that generates the inventory (docs/security.md)"
