"""The one reader of a health document's `load` summary (`sweep run --load`): one row per GPU, by its index.

The schema check on arrival (`sweep.schema.READ_BY_CONTROLLER`) types each row's fields; this reader
takes what is a row (an object), keyed by its `gpu`, and nothing else, for every consumer: the fleet
frames, the Prometheus export, the expectations and the throttle evidence.
"""
from __future__ import annotations

from typing import Any


def load_summary(health: Any) -> dict:
    """GPU index -> its row of the load's summary ({} when the probe ran no load or the section is not one)."""
    load = health.get("load") if isinstance(health, dict) else None
    rows = load.get("summary") if isinstance(load, dict) else None
    return {row.get("gpu"): row for row in rows if isinstance(row, dict)} if isinstance(rows, list) else {}
