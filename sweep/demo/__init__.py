"""The demo: a loopback fleet of real sshd servers replaying H200 captures, swept like any
fleet (`sweep demo`).

Demo runs go to their own folder, `DEMO_REPORTS` (``reports/demo/<UTC time>-demo``), not beside the
operator's runs: ``sweep history --root reports/`` reads the run folders directly under reports/
only, and the history index a run keeps current is that of its own parent folder, so a demo fleet's
hosts never show up as changes of the operator's fleet.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from sweep.collect.run import RunResult

DEMO_REPORTS = Path("reports") / "demo"  # under the current directory, like sweep run's reports/


def run_demo(
    hosts: int,
    out: Path | None,
    sweep: Callable[[dict], "RunResult"],
    work: Path,
    say: Callable[[str], None] = print,
    then: Callable[["RunResult", object], None] | None = None,
) -> tuple["RunResult", list]:
    """Start `hosts` replaying hosts (and 3 unreachable ones) with their keys and configs under
    `work`, sweep them with `sweep(run_sweep options)`, call `then(result, fleet)` while the fleet
    still runs (`sweep demo --serve` serves it there), tear the fleet down; the run's result and the
    fleet's hosts (`sweep.demo.fleet.off_design` tells whether each ended as designed)."""
    from sweep.demo.fleet import demo_fleet
    from sweep.demo.loopback import LocalFleet
    from sweep.store import default_run_dir
    from sweep.text import plural

    fleet_hosts = demo_fleet(work / "captures", count=hosts)
    say(f"starting {plural(len(fleet_hosts), 'loopback sshd host')} ...")
    with LocalFleet(fleet_hosts, work / "fleet") as fleet:
        options = dict(
            inventory_path=fleet.inventory_path,
            out=out or default_run_dir("demo", DEMO_REPORTS),
            ssh=fleet.ssh_settings(connect_timeout=3.0, host_deadline=15.0),
        )
        old_home = os.environ.get("HOME")
        os.environ["HOME"] = str(fleet.home)  # the fleet's own ssh state, not the user's
        try:
            result = sweep(options)
        finally:
            if old_home is not None:
                os.environ["HOME"] = old_home
        if then is not None:
            then(result, fleet)
        return result, fleet_hosts
