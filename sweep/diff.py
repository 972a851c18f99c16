"""What changed between two probes (health.json files): throttle evidence first.

`diff_health(a, b)` returns the changed fields, each with its category; the categories are shown
in the order a person debugging "it got slower" reads them: throttle evidence, then power
and clock policy, then memory health and modes, then identity and software, then the rest.
"""
from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.errors import HealthFileError

# (category, glob patterns over flattened paths, "#" standing for any [index]). First match wins.
CATEGORIES: list[tuple[str, tuple[str, ...]]] = [
    ("throttle evidence", ("gpus#.clock_event_reasons.active*", "gpus#.clocks.sm_mhz", "gpus#.clocks.mem_mhz",
                           "gpus#.power.draw_w", "gpus#.temperature_c", "gpus#.utilization_gpu_pct",
                           "gpus#.pstate", "gpus#.reason_counters_us.*", "load.summary*")),
    ("power and clock policy", ("gpus#.power.*", "gpus#.clocks.*")),
    ("memory health and modes", ("gpus#.ecc.*", "gpus#.remapped_rows.*", "gpus#.retired_pages_pending",
                                 "gpus#.mig*", "gpus#.persistence_mode", "gpus#.compute_mode",
                                 "driver.confidential_compute")),
    ("processes", ("gpus#.processes*",)),
    ("verdict", ("contracts#.status", "contracts#.message", "lowest_broken", "verdict")),
    ("identity and software", ("driver.*", "gpus#.uuid", "gpus#.serial", "gpus#.vbios", "gpus#.name",
                               "gpus#.pci_bus_id", "frameworks*", "mask.*", "environment.*", "topology.*",
                               "host.*")),
    ("other", ("*",)),
]
# Fields that differ on every run and say nothing about the machine.
IGNORED = ("probe.*", "summary", "contracts#.evidence*", "contracts#.title", "contracts#.fix",
           "gpus#.memory_used_bytes", "load.samples*", "load.pid", "load.exit_code", "gpus#.unsupported.*",
           "contracts#.consequence_of", "frameworks#.executable", "gpus#.clock_event_reasons.active_mask",
           "gpus#.processes#.used_memory_bytes")


@dataclass(frozen=True)
class Change:
    category: str
    path: str
    before: Any
    after: Any


def load_health(path: str | Path) -> dict:
    """A health.json, a host record holding one, or a provenance file's last probe."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise HealthFileError("no such file", where=str(path), fix="give the path of a health.json") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise HealthFileError(f"not JSON ({exc})", where=str(path), fix="give the path of a health.json") from None
    if isinstance(data, dict) and isinstance(data.get("health"), dict):
        data = data["health"]
    if not isinstance(data, dict) or data.get("kind") != "sweep.health":
        raise HealthFileError("not a sweep health.json (no kind 'sweep.health')", where=str(path),
                              fix="give a file written by the sweep agent or a run folder's hosts/*.json")
    major = str(data.get("schema_version", "")).split(".")[0]
    if major != "1":
        raise HealthFileError(f"health.json schema version {data.get('schema_version')} is not supported by this "
                              "sweep (it reads 1.x)", where=str(path), fix="upgrade sweep to read newer probes")
    return data


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts/lists as {path: leaf}; GPUs and contracts keyed by index / name."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for n, v in enumerate(value):
            key = v.get("name") if prefix == "contracts" else v.get("index", v.get("gpu", v.get("pid", n)))
            out.update(flatten(v, f"{prefix}[{key}]"))
    else:
        out[prefix] = value
    return out


def _generic(path: str) -> str:
    import re
    return re.sub(r"\[[^\]]*\]", "#", path)


def category(path: str) -> str | None:
    g = _generic(path)
    if any(fnmatch.fnmatchcase(g, p) for p in IGNORED):
        return None
    for name, patterns in CATEGORIES:
        if any(fnmatch.fnmatchcase(g, p) for p in patterns):
            return name
    return "other"


def diff_health(a: dict, b: dict) -> list[Change]:
    fa, fb = flatten(a), flatten(b)
    order = {name: n for n, (name, _) in enumerate(CATEGORIES)}
    changes = []
    for path in sorted(set(fa) | set(fb)):
        before, after = fa.get(path), fb.get(path)
        if before == after:
            continue
        cat = category(path)
        if cat is not None:
            changes.append(Change(cat, path, before, after))
    changes.sort(key=lambda c: (order[c.category], c.path))
    return changes
