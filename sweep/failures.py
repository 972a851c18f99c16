"""Why a host has no health record: the failure classes, declared once.

Each class carries the fix a user reads beside an unreachable host (`sweep.analysis.health`), and
whether it is transient: a failure the network, the host's state or the operator's own files cause,
that a later try may not meet (what `sweep run --resume RUN --retry-failed` retries when no class is
named). Every engine (ssh, ansible, slurm) classifies a failed host into one of the classes a probe
can end with (`FAILURE_CLASSES`); `not_probed` is a host the manifest lists without a record, and
`interrupted` an attempt Ctrl-C cut (the host stays pending). Records hold the class's value
(``"dns"``); `FailureClass("dns")` reads it back.

This module sits below both the collection and the analysis (pyproject.toml's layers), so the
engines that classify and the report that advises read the same table, and it imports no
transport: the ansible and slurm engines reach it without paramiko.
"""

from __future__ import annotations

import enum

from sweep.errors import SweepError


class FailureClass(str, enum.Enum):
    """One failure class: its value (as records hold it), whether it is transient, its fix."""

    # value, transient, probed (a probe attempt can end with it), fix
    DNS = ("dns", True, True, "fix the name in DNS or give the address in the inventory")
    REFUSED = ("refused", True, True, "start sshd on the host, or check the port and firewall")
    TIMEOUT = (
        "timeout",
        True,
        True,
        "check that the host is up and routable; raise the timeout for slow links",
    )
    HOST_KEY_UNKNOWN = (
        "host_key_unknown",
        True,
        True,
        "add the host key to known_hosts after checking its fingerprint",
    )
    HOST_KEY_CHANGED = (
        "host_key_changed",
        False,
        True,
        "find out why the host key changed (reinstall? another machine?) before trusting it",
    )
    AUTH = ("auth", False, True, "check the user and key the inventory names for this host")
    BECOME_FAILED = (
        "become_failed",
        False,
        True,
        "give the login user passwordless sudo for the agent's python (a NOPASSWD rule in "
        "/etc/sudoers.d), or sweep the host without become (--become, ansible_become)",
    )
    NO_PYTHON = (
        "no_python",
        False,
        True,
        "install python3 on the host, or name one with python= in the inventory",
    )
    PYTHON_TOO_OLD = (
        "python_too_old",
        False,
        True,
        "install python3 >= 3.8 on the host, or set ansible_python_interpreter to one",
    )
    AGENT_ERROR = (
        "agent_error",
        False,
        True,
        "read the message; run the agent by hand on the host with --no-json",
    )
    OUTPUT_TOO_LARGE = ("output_too_large", False, True, "probe the host alone and read its output")
    BAD_OUTPUT = ("bad_output", False, True, "probe the host alone and read its output")
    NOT_PROBED = ("not_probed", False, False, "finish the run: sweep run --resume RUN_DIR")
    INTERRUPTED = ("interrupted", False, False, "finish the run: sweep run --resume RUN_DIR")

    def __new__(cls, value: str, transient: bool, probed: bool, fix: str):
        member = str.__new__(cls, value)
        member._value_ = value
        member.transient, member.probed, member.fix = transient, probed, fix
        return member

    __str__ = str.__str__  # "dns", as records and messages write it (not "FailureClass.DNS")
    __format__ = str.__format__


# the classes a probe can end with, in the order manifests count them
FAILURE_CLASSES = tuple(c.value for c in FailureClass if c.probed)
# what --retry-failed retries when no class is named
TRANSIENT_CLASSES = tuple(c.value for c in FailureClass if c.probed and c.transient)


def fix_for(value: object) -> str | None:
    """The fix of the class a record names (None for a value no class has)."""
    try:
        return FailureClass(str(value)).fix
    except ValueError:
        return None


class HostFailure(SweepError):
    """One attempt's failure, already classified; `transient` ones are retried within the sweep."""

    def __init__(
        self,
        failure_class: str,
        message: str,
        *,
        transient: bool = False,
        exit_status: int | None = None,
        stderr: str = "",
    ):
        super().__init__(message)
        # an unknown class is a bug, found here
        self.failure_class = FailureClass(failure_class).value
        self.message = message
        self.transient = transient
        self.exit_status = exit_status
        self.stderr = stderr
