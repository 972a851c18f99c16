"""The ssh engine: one connection per host, `forks` hosts at a time, through the run's transport:
paramiko (sweep's own, `sweep.collect.ssh.prober`) or the system ssh
(`sweep.collect.ssh.openssh`)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from sweep.collect.engines.base import EngineJob, FanOutEngine
from sweep.collect.fanout import FanOut
from sweep.collect.ssh.prober import Outcome, Prober
from sweep.collect.ssh.transports import make_prober
from sweep.text import visible


class SSHEngine(FanOutEngine):
    """The agent over SSH (`Prober`) in a bounded pool of threads (`FanOut`)."""

    name = "ssh"
    transport = "run"  # the run's --transport: paramiko or openssh
    reads_ssh_config = True
    become_applies = True
    wraps = True

    def __init__(self) -> None:
        self.job: EngineJob | None = None
        self._fan: FanOut | None = None
        self._prober: Prober | None = None
        self._checked: Prober | None = None

    def keep_checks(self, checker: Prober) -> None:
        self._checked = checker

    def bind(self, job: EngineJob) -> "SSHEngine":
        """Give the engine the agent and the run's options; command-line flags win over host
        settings."""
        self.job = job
        self._prober = make_prober(
            job.options.transport, job.payload, job.agent_args, job.options, wrap=job.wrap
        )
        if self._checked is not None:
            self._prober.adopt(self._checked)
        self._busy: dict = defaultdict(threading.Lock)
        self._fan = FanOut(self._probe, forks=job.forks, on_stop=self._prober.stop)
        return self

    def _probe(self, host: Any) -> Outcome:
        if self.job.wrap is None:
            return self._attempt(host)
        # one benchmark per host at a time, whatever its aliases
        with self._busy[(host.address, host.port)]:
            return self._attempt(host)

    def _attempt(self, host: Any) -> Outcome:
        try:
            return self._prober.probe(with_flags(host, self.job.given_flags()))
        except Exception as exc:  # sweep's own bug, met on one host's data: that host's failure
            now = time.time()
            return Outcome(
                host=host,
                status="failed",
                failure_class="agent_error",
                started_at=now,
                ended_at=now,
                message=(
                    f"{host.name}: sweep failed while probing this host ({type(exc).__name__}: "
                    f"{visible(exc, keep='')[:200]}); the other hosts are unaffected; please "
                    "report this as a sweep bug"
                ),
            )


def with_flags(host: Any, given: dict[str, Any]) -> Any:
    """The host with command-line timeouts laid over its sweep_* settings (flags win)."""
    if not given:
        return host
    return replace(host, settings=MappingProxyType({**dict(host.settings or {}), **given}))
