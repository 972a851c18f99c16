"""The report's lists and commands: node-set files, and the scheduler scripts
(`sweep.report.scripts`).

Written with every report, never run by sweep (`write_lists`)::

    pool.nodeset, held_out.nodeset, broken.nodeset
                                     each set as one folded node set (``gpu[01-04,07]``) on one
                                     line: srun --nodelist, sbatch --exclude, clush -w, nodeset -e
    drain.sh, resume.sh, kubectl.sh  from summary.json's "drain" (hosts, reason, taint per reason)
                                     and the pool's hosts: see `sweep.report.scripts`

A name that is no node name (`sweep.analysis.names.NODE_NAME`) is left out of the node sets, warned
about, and named in the scripts in a comment (escaped).
"""

from __future__ import annotations

import warnings
from pathlib import Path

from sweep.errors import InventoryWarning
from sweep.report.files import write_text
from sweep.report.scripts import comment, scheduler_scripts, word

__all__ = ["FILES", "write_lists", "word"]

FILES = {
    "pool_nodeset": "pool.nodeset",
    "held_out_nodeset": "held_out.nodeset",
    "broken_nodeset": "broken.nodeset",
    "drain": "drain.sh",
    "resume": "resume.sh",
    "kubectl": "kubectl.sh",
}


def write_lists(out: Path, summary: dict) -> dict:
    """Write the node-set files and the scripts of `summary` (its "host_sets" and "drain") into
    `out`."""
    sets, groups = summary["host_sets"], summary["drain"]
    files = {key: out / name for key, name in FILES.items()}
    for key, name in (
        ("pool_nodeset", "pool"),
        ("held_out_nodeset", "held_out"),
        ("broken_nodeset", "broken"),
    ):
        _warn_left_out(files[key], sets[name]["not_folded"])
        write_text(files[key], sets[name]["folded"] + "\n" if sets[name]["folded"] else "")
    scripts = scheduler_scripts(
        groups, sets["pool"]["hosts"], f"sweep report of {summary['generated_at']}"
    )
    for key, text in scripts.items():
        write_text(files[key], text)
    return files


def _warn_left_out(path: Path, names) -> None:
    for name in names:
        warnings.warn(
            f"{path}: host {comment(name)} left out: no node set can hold that name; "
            "name it by hand",
            InventoryWarning,
            stacklevel=3,
        )
