"""The one reader of a health document's `load` summary (`sweep run --load`): one row per GPU, by
its index.

The schema check on arrival (`sweep.schema.READ_BY_CONTROLLER`) types each row's fields; this reader
takes what is a row (an object), keyed by its `gpu`, and nothing else, for every consumer: the fleet
frames, the Prometheus export, the expectations and the throttle evidence; and why a load measured
nothing (`load_problem`).
"""

from __future__ import annotations

from typing import Any


def load_summary(health: Any) -> dict:
    """GPU index -> its row of the load's summary ({} when the probe ran no load or the section is
    not one)."""
    load = health.get("load") if isinstance(health, dict) else None
    rows = load.get("summary") if isinstance(load, dict) else None
    return (
        {row.get("gpu"): row for row in rows if isinstance(row, dict)}
        if isinstance(rows, list)
        else {}
    )


def load_problem(health: dict):
    """Why the probe's --load measured nothing (None without a load section, or when it
    measured)."""
    load = health.get("load")
    if not isinstance(load, dict):
        return None
    code, error = load.get("exit_code"), load.get("error")
    if code not in (0, None) or (isinstance(error, str) and error):
        said = (
            f": {' '.join(error.split())[-200:]}"
            if isinstance(error, str) and error.strip()
            else ""
        )
        return f"the load exited {code}{said}"
    if not any(type(r.get("sm_mhz_median")) in (int, float) for r in load_summary(health).values()):
        return "no GPU sample under load"
    return None
