"""The SSH engine's transports behind one Prober interface: sweep's own (paramiko), OpenSSH's ssh,
and ``auto`` (the default): sweep's own for every host it can honour, ssh for the others, in one
run.

All share `Prober.probe` (deadline, retries, failure classes); they differ in how one attempt
connects. `make_prober` builds the one a run asks for (``--transport``).
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

from sweep.collect.ssh.config import NeedsOpenSSH
from sweep.collect.ssh.diagnosis import hosts_named
from sweep.collect.ssh.prober import Outcome, Prober, SSHOptions

TRANSPORTS = ("auto", "paramiko", "openssh")


def make_prober(
    transport: str, payload: bytes, agent_args: Sequence[str], options: SSHOptions, wrap=None
) -> Prober:
    """A Prober for `transport` ("auto", "paramiko" or "openssh"); `wrap` (a
    sweep.collect.wrap.WrapSpec) runs the benchmark in the agent's envelope instead of a probe."""
    if transport == "openssh":
        from sweep.collect.ssh.openssh import OpenSSHProber

        return OpenSSHProber(payload, list(agent_args), options, wrap=wrap)
    if transport == "auto":
        return AutoProber(payload, list(agent_args), options, wrap=wrap)
    return Prober(payload, list(agent_args), options, wrap=wrap)


class AutoProber(Prober):
    """sweep's own transport, except for the hosts whose settings ask for what only OpenSSH's ssh
    does (`NeedsOpenSSH`: an agent socket, GSSAPI, a cipher list, ...): those go through ssh, in the
    same run, and `notes()` names them with the reason. A config paramiko honours costs nothing
    more."""

    def __init__(self, payload: bytes, agent_args=(), options: SSHOptions = SSHOptions(), **kwargs):
        super().__init__(payload, agent_args, options, **kwargs)
        self.through_ssh: dict[str, str] = {}  # host name -> why
        self._openssh: Prober | None = None
        self._checked: set[str] = set()
        self._auto_lock = threading.Lock()

    def _through_ssh(self) -> Prober:
        with self._auto_lock:
            if self._openssh is None:
                from sweep.collect.ssh.openssh import OpenSSHProber

                self._openssh = OpenSSHProber(
                    self.payload,
                    self.agent_args,
                    self.options,
                    watchdog=self.watchdog,
                    wrap=self.wrap,
                )
            return self._openssh

    def check(self, host: Any) -> None:
        """As sweep's own transport checks; a host only ssh can reach is checked as ssh's and kept
        for it."""
        try:
            self.config.check(host)
        except NeedsOpenSSH as need:
            self._through_ssh().check(host)
            with self._auto_lock:
                self.through_ssh[host.name] = need.why
        with self._auto_lock:
            self._checked.add(host.name)

    def adopt(self, checked: Prober) -> None:
        """Also which hosts were checked, and which of them go through ssh (and why)."""
        super().adopt(checked)
        if self.config is checked.config:
            with checked._auto_lock:
                self._checked |= checked._checked
                self.through_ssh.update(checked.through_ssh)

    def probe(self, host: Any) -> Outcome:
        if host.name not in self._checked:
            self.check(host)
        if host.name in self.through_ssh:
            return self._through_ssh().probe(host)
        return super().probe(host)

    def stop(self) -> None:
        super().stop()
        if self._openssh is not None:
            self._openssh.stopping.set()

    def notes(self) -> list[str]:
        by_why: dict[str, list[str]] = {}
        for name, why in self.through_ssh.items():
            by_why.setdefault(why, []).append(name)
        return super().notes() + [
            f"{hosts_named(names)} through OpenSSH's ssh: {why}; --transport paramiko would "
            "refuse it instead"
            for why, names in sorted(by_why.items())
        ]
