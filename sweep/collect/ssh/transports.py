"""The SSH engine's two transports behind one Prober interface: sweep's own (paramiko) and OpenSSH's ssh.

Both share `Prober.probe` (deadline, retries, failure classes); they differ in how one attempt
connects. `make_prober` builds the one a run asks for (``--transport``).
"""
from __future__ import annotations

from typing import Sequence

from sweep.collect.ssh.prober import Prober, SSHOptions

TRANSPORTS = ("paramiko", "openssh")


def make_prober(transport: str, payload: bytes, agent_args: Sequence[str], options: SSHOptions,
                wrap=None) -> Prober:
    """A Prober for `transport` ("paramiko" or "openssh"); `wrap` (a sweep.collect.wrap.WrapSpec) runs the
    benchmark in the agent's envelope instead of a probe."""
    if transport == "openssh":
        from sweep.collect.ssh.openssh import OpenSSHProber

        return OpenSSHProber(payload, list(agent_args), options, wrap=wrap)
    return Prober(payload, list(agent_args), options, wrap=wrap)
