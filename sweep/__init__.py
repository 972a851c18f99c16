"""sweep as a library: load an inventory, run a sweep, load a fleet, compare it, write a report.

    import sweep

    # Inventory: .hosts, .groups, .select(limit)
    inventory = sweep.load_inventory("inventory.yml")
    # RunResult: .run_dir, .ok, .failed, .exit_code
    run = sweep.run_sweep("inventory.yml", hosts=sweep.HostSelection(limit="dc1"),
                          ssh=sweep.SSHSettings(host_deadline=60))
    # Fleet: pandas frames of hosts, GPUs, contracts
    fleet = sweep.load_fleet([run.run_dir])
    # Assessment: classes, sections, verdict: judged.pool, judged.held_out, judged.broken,
    # judged.cause("gpu03"), judged.exit_code, judged.headline()
    judged = sweep.assess(fleet)
    # ReportResult: files written, exit code
    report = sweep.build_report([run.run_dir], "out/")
    # History: .changes, .drift (sweep history)
    history = sweep.build_history(["reports/"], "reports/history")
    # node_exporter textfile (sweep export prometheus)
    text = sweep.metrics_text(run.run_dir)

Every failure a user can act on is a `SweepError` (`sweep.errors`); a host that fails is data in
its record, never an exception. The names are imported on first use, so ``import sweep`` stays
cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
_API = {
    "load_inventory": "sweep.inventory.model",
    "Inventory": "sweep.inventory.model",
    "Host": "sweep.inventory.model",
    "run_sweep": "sweep.collect.run",
    "RunResult": "sweep.collect.run",
    "HostSelection": "sweep.collect.options",
    "SSHSettings": "sweep.collect.options",
    "AgentOptions": "sweep.collect.options",
    "load_fleet": "sweep.analysis.fleet",
    "Fleet": "sweep.analysis.fleet",
    "assess": "sweep.judgment",
    "Assessment": "sweep.judgment",
    "compare": "sweep.analysis.compare",
    "Findings": "sweep.analysis.compare",
    "build_report": "sweep.report.build",
    "ReportResult": "sweep.report.build",
    "build_history": "sweep.history.build",
    "History": "sweep.history.build",
    "metrics_text": "sweep.export.prometheus",
    "rules_text": "sweep.export.rules",
    "SweepError": "sweep.errors",
}
__all__ = ["__version__", *_API]

if TYPE_CHECKING:
    from sweep.judgment import Assessment, assess
    from sweep.analysis.compare import Findings, compare
    from sweep.analysis.fleet import Fleet, load_fleet
    from sweep.collect.options import AgentOptions, HostSelection, SSHSettings
    from sweep.collect.run import RunResult, run_sweep
    from sweep.errors import SweepError
    from sweep.export.prometheus import metrics_text
    from sweep.export.rules import rules_text
    from sweep.history.build import History, build_history
    from sweep.inventory.model import Host, Inventory, load_inventory
    from sweep.report.build import ReportResult, build_report


def __getattr__(name: str) -> Any:
    """Import a public name from its module the first time it is asked for (PEP 562)."""
    if name not in _API:
        raise AttributeError(f"module 'sweep' has no attribute {name!r}")
    value = getattr(importlib.import_module(_API[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
