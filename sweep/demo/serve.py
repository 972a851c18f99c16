"""`sweep demo --serve`: the demo fleet left running, with the exact commands to sweep it by hand.

`by_hand` writes the lines printed while the fleet serves: where its inventory and known_hosts
are, and `sweep run` / `--limit` / `sweep diff` commands that work as printed (each runs under the
fleet's own empty HOME and without an ssh-agent, so nothing of the user's ~/.ssh is read);
`serve_until_interrupted` waits for Ctrl-C (or SIGTERM) and returns, so that the fleet's context
manager stops every sshd.
"""

from __future__ import annotations

import shlex
import signal
from pathlib import Path

LIMIT = "rack_a:!gpu01"  # a pattern of the demo's groups: rack_a less its first host


def by_hand(fleet, demo_run: Path) -> list[str]:
    """The lines `sweep demo --serve` prints: the fleet's files and the commands to try on it (their
    run folders beside the demo's own, so that they outlive the fleet)."""
    q = lambda p: shlex.quote(str(p))
    prefix = (
        f"env -u SSH_AUTH_SOCK HOME={q(fleet.home)} sweep run {q(fleet.inventory_path)} "
        f"--known-hosts {q(fleet.known_hosts_path)} --connect-timeout 3"
    )
    mine, limited = (
        demo_run.parent / f"{demo_run.name}-{what}" for what in ("by-hand", "by-hand-rack_a")
    )
    return [
        f"the demo fleet is serving: {len(fleet.hosts)} sshd hosts on loopback, port {fleet.port}; "
        "Ctrl-C stops it",
        f"inventory: {fleet.inventory_path}",
        f"known_hosts: {fleet.known_hosts_path}",
        f"client key: {fleet.client_key_path}",
        "try:",
        f"  {prefix} --out {q(mine)}",
        f"  {prefix} --limit {q(LIMIT)} --out {q(limited)}",
        f"  sweep diff {q(demo_run)} {q(mine)}",
    ]


def serve_until_interrupted() -> None:
    """Block until Ctrl-C or SIGTERM; return normally (the caller's `with` stops the fleet)."""

    def stop(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, stop)
    try:
        while True:
            signal.pause()
    except KeyboardInterrupt:
        return
    finally:
        signal.signal(signal.SIGTERM, old)
