"""Where a sweep stands and what it left: `RunProgress` (the progress callback's figures),
`RunResult` (the run folder and its counts, the exit code) and `Tally`, the counters kept as each
record arrives."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from sweep import exitcodes
from sweep.collect.outcome import Outcome
from sweep.failures import FAILURE_CLASSES
from sweep.inventory.model import Host


@dataclass(frozen=True)
class RunProgress:
    """Where a sweep stands; handed to the `progress` callback after each host is recorded."""

    total: int
    ok: int
    failed: int
    pending: int
    last: Outcome | None = None


@dataclass(frozen=True)
class RunResult:
    """The run folder and what it holds now (records of earlier sessions included, on --resume)."""

    run_dir: Path
    state: str  # "complete" or "interrupted"
    total: int
    ok: int
    failed: int
    pending: int  # hosts without a record (interrupted before they finished)
    resumed: int  # hosts already recorded before this session
    by_class: dict[str, int] = field(default_factory=dict)
    failures: tuple[tuple[str, str, str], ...] = ()  # (host, class, message) of this session
    options: dict = field(default_factory=dict)  # the run's options as its manifest keeps them now
    # (host, class): failed in an earlier session, not swept now
    earlier_failed: tuple[tuple[str, str], ...] = ()
    # --retry-failed: the classes asked for (None: not asked)
    retry_classes: tuple[str, ...] | None = None
    # --retry-failed: the hosts swept again, their old records set aside
    retried: tuple[str, ...] = ()

    @property
    def fully_swept(self) -> bool:
        return self.state == "complete" and self.failed == 0 and self.pending == 0

    @property
    def exit_code(self) -> int:
        if self.state == "interrupted":
            return exitcodes.INTERRUPTED
        return exitcodes.OK if self.fully_swept else exitcodes.INCOMPLETE


class Tally:
    """The hosts' states as records arrive: the progress callback's figures and the RunResult.

    Counters, kept as each record comes: a host's arrival costs the same at 100,000 hosts as at 10
    (rescanning every host's state per arrival made a sweep quadratic: ~270 s at 100,000 hosts)."""

    def __init__(
        self,
        hosts: list[Host],
        done: dict[str, dict],
        listed: set[str],
        progress: Callable[[RunProgress], None] | None,
        session: dict,
    ):
        self.total, self.resumed, self.progress = len(hosts), len(done), progress
        self.status: dict[str, tuple] = {}
        self.ok = 0
        self.by_class: Counter = Counter()  # failed hosts by failure class
        for name, rec in done.items():
            if name in listed:
                self._set(name, (rec.get("status"), (rec.get("failure") or {}).get("class")))
        self.failures: list[tuple[str, str, str]] = []
        # the manifest's entry for this session (its hosts_swept is counted here)
        self.session = session

    def _set(self, name: str, state: tuple) -> None:
        old = self.status.get(name)
        if old is not None:  # a host recorded twice: its last record counts
            self.ok -= old[0] == "ok"
            self.by_class[old[1]] -= old[0] == "failed"
        self.status[name] = state
        self.ok += state[0] == "ok"
        self.by_class[state[1]] += state[0] == "failed"

    def add(self, outcome: Outcome) -> None:
        self._set(outcome.host.name, (outcome.status, outcome.failure_class))
        self.session["hosts_swept"] += 1
        if outcome.status == "failed":
            self.failures.append((outcome.host.name, outcome.failure_class, outcome.message))
        self.report(outcome)

    def report(self, last: Outcome | None) -> None:
        if self.progress is not None:
            self.progress(
                RunProgress(
                    total=self.total,
                    ok=self.ok,
                    failed=len(self.status) - self.ok,
                    pending=self.total - len(self.status),
                    last=last,
                )
            )

    def counts(self, listed: int) -> dict[str, int]:
        return {
            "total": listed,
            "ok": self.ok,
            "failed": len(self.status) - self.ok,
            "pending": listed - len(self.status),
        }

    def result(self, run_dir: Path, state: str, options: dict) -> RunResult:
        by_class = {cls: self.by_class[cls] for cls in FAILURE_CLASSES if self.by_class[cls]}
        now = {host for host, *_ in self.failures}
        earlier = tuple(
            (name, cls)
            for name, (s, cls) in self.status.items()
            if s == "failed" and name not in now
        )
        return RunResult(
            run_dir=run_dir,
            state=state,
            total=self.total,
            ok=self.ok,
            failed=len(self.status) - self.ok,
            pending=self.total - len(self.status),
            resumed=self.resumed,
            by_class=by_class,
            failures=tuple(self.failures),
            options=options,
            earlier_failed=earlier,
        )
