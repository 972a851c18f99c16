"""The field tables: which health.json fields the probe diff and the run diff show, and under which
heading.

Paths are flattened health.json paths (`diff.flatten`) with every ``[index]`` written ``#``
(`generic`); in each table the first pattern that matches wins. The probe diff (`sweep diff A B`
of two probes) shows throttle evidence first and keeps volatile fields; the run diff (two run
folders, baselines) leaves volatile and derived fields out and sorts changes into kinds.
"""

from __future__ import annotations

import fnmatch
import re

from sweep.analysis.facts import own_paths

# --- the probe diff ------------------------------------------------------------------------------

# (category, glob patterns over flattened paths, "#" standing for any [index]). First match wins.
PROBE_CATEGORIES: list[tuple[str, tuple[str, ...]]] = [
    (
        "throttle evidence",
        (
            "gpus#.clock_event_reasons.active*",
            "gpus#.clocks.sm_mhz",
            "gpus#.power.draw_w",
            "gpus#.reason_counters_us.*",
            "load.summary#.*_fraction",
            "load.summary#.sm_mhz_median",
            "load.summary#.sm_mhz_max_allowed",
            "load.summary#.power_w_median",
            "load.summary#.enforced_limit_w",
        ),
    ),
    (
        "link errors",
        (
            "gpus#.nvlink.errors*",
            "gpus#.pcie.replay_counter",
            "kernel_log.xid*",
            "kernel_log.xid_lines",
            "kernel_log.sxid*",
            "kernel_log.boot*",
            "kernel_log.dropped",
        ),
    ),
    (
        "links and fabric",
        (
            "gpus#.pcie.*",
            "gpus#.nvlink.*",
            "gpus#.nvlinks_active",
            "gpus#.fabric.*",
            "pci.*",
            "gpus#.lost",
        ),
    ),
    ("power and clock policy", ("gpus#.power.*", "gpus#.clocks.*max*", "gpus#.clocks.*app*")),
    (
        "memory health and modes",
        (
            "gpus#.ecc.*",
            "gpus#.remapped_rows.*",
            "gpus#.retired_pages_pending",
            "gpus#.mig*",
            "gpus#.persistence_mode",
            "gpus#.compute_mode",
            "driver.confidential_compute",
        ),
    ),
    ("processes", ("gpus#.processes*",)),
    ("verdict", ("contracts#.status", "contracts#.message", "lowest_broken", "verdict")),
    (
        "other readings",
        (
            "gpus#.temperature_c",
            "gpus#.thermal.gpu_c",
            "gpus#.thermal.memory_c",
            "gpus#.utilization_*",
            "gpus#.clocks.mem_mhz",
            "gpus#.pstate",
            "gpus#.fan_*",
            "load.*",
        ),
    ),
    (
        "identity and software",
        (
            *(p for _, paths in own_paths() for p in paths),
            "driver.*",
            "gpus#.uuid",
            "gpus#.serial",
            "gpus#.vbios",
            "gpus#.name",
            "gpus#.pci_bus_id",
            "frameworks*",
            "mask.*",
            "environment.*",
            "topology.*",
            "host.*",
            "host_settings.*",
            "gpus#.thermal.*",
        ),
    ),
    ("other", ("*",)),
]
# Fields that differ on every run and say nothing about the machine.
PROBE_IGNORED = (
    "probe.*",
    "summary",
    "speed.samples*",
    "speed.wall_s",
    "speed.gpus#.figures.*.samples*",
    "contracts#.evidence*",
    "contracts#.title",
    "contracts#.fix",
    "gpus#.memory_used_bytes",
    "load.samples*",
    "load.pid",
    "load.exit_code",
    "gpus#.unsupported.*",
    "contracts#.consequence_of",
    "frameworks#.executable",
    "gpus#.clock_event_reasons.active_mask",
    "gpus#.processes#.used_memory_bytes",
    # the PCIe generation drops at idle to save power; where the log was read from is no fact of the
    # host
    "gpus#.pcie.gen",
    "kernel_log.tried*",
    "kernel_log.source",
    "kernel_log.docs",
    "kernel_log.catalogue*",
)  # the catalogue is the agent's, not the host's

# --- the run diff --------------------------------------------------------------------------------

# Flattened paths ("#" = any [index]) that differ from probe to probe and say nothing about the
# machine.
RUN_VOLATILE = (
    "probe.*",
    "summary",
    "verdict",
    "lowest_broken",
    "contracts*",
    "mask.*",
    "load*",
    "gpus#.clocks.sm_mhz",
    "gpus#.clocks.mem_mhz",
    "gpus#.power.draw_w",
    "gpus#.temperature_c",
    "gpus#.utilization_gpu_pct",
    "gpus#.pstate",
    "gpus#.reason_counters_us.*",
    "gpus#.clock_event_reasons.*",
    "gpus#.processes*",
    "gpus#.memory_used_bytes",
    "gpus#.unsupported.*",
    "driver.unsupported.*",
    "gpus#.mig.devices*",
    "gpus#.index",
    "gpus#.thermal.gpu_c",
    "gpus#.thermal.memory_c",
    "gpus#.pcie.gen",
    "kernel_log.tried*",
    "kernel_log.source",
    "kernel_log.docs",
    "kernel_log.catalogue*",
    # measured figures differ on every run: `sweep diff` judges them by how far they moved (speed
    # kind)
    "speed*",
)
# (kind, patterns); the first match wins. Display order is KIND_ORDER.
RUN_KINDS: list[tuple[str, tuple[str, ...]]] = [
    *own_paths(),  # the fact table's firmware and platform versions, under their declared kind
    ("gpus", ("driver.gpu_count",)),
    ("gpu swap", ("gpus#.uuid", "gpus#.serial")),
    ("modes", ("driver.confidential_compute", "gpus#.persistence_mode", "gpus#.compute_mode")),
    ("driver", ("driver.*",)),
    (
        "ecc",
        (
            "gpus#.ecc.current",
            "gpus#.ecc.pending_mode",
            "gpus#.ecc.pending",
            "gpus#.memory_total_bytes",
        ),
    ),
    ("memory errors", ("gpus#.ecc.*", "gpus#.remapped_rows.*", "gpus#.retired_pages_pending")),
    ("power", ("gpus#.power.*",)),
    ("clock policy", ("gpus#.clocks.*",)),
    ("mig", ("gpus#.mig*",)),
    ("link errors", ("gpus#.nvlink.errors*", "gpus#.pcie.replay_counter", "kernel_log.*")),
    (
        "links",
        ("gpus#.pcie.*", "gpus#.nvlink.*", "gpus#.nvlinks_active", "gpus#.fabric.*", "pci.*"),
    ),
    ("topology", ("topology.*", "gpus#.pci_bus_id", "gpus#.numa_node")),
    ("host settings", ("host_settings.*",)),
    ("firmware", ("gpus#.vbios", "gpus#.slowdown_temperature_c", "gpus#.thermal.*")),
    ("gpu model", ("gpus#.name", "gpus#.compute_capability")),
    ("framework", ("frameworks*",)),
    ("host", ("host.*",)),
    ("environment", ("environment.*",)),
    ("other", ("*",)),
]
KIND_ORDER = (
    "gpus",
    "gpu swap",
    "driver",
    "links",
    "link errors",
    "ecc",
    "power",
    "clock policy",
    "mig",
    "modes",
    "topology",
    "firmware",
    "gpu model",
    "memory errors",
    "speed",
    "framework",
    "host settings",
    "host",
    "environment",
    "other",
)

_INDEX = re.compile(r"\[[^\]]*\]")


def generic(path: str) -> str:
    """``gpus[3].power.draw_w`` -> ``gpus#.power.draw_w``."""
    return _INDEX.sub("#", path)


def first_match(table: list[tuple[str, tuple[str, ...]]], generic_path: str) -> str:
    """The name of the first row of `table` with a pattern matching `generic_path`."""
    return next(
        name
        for name, patterns in table
        if any(fnmatch.fnmatchcase(generic_path, p) for p in patterns)
    )


def probe_category(path: str) -> str | None:
    """The heading a changed field has in a probe diff, or None for a field left out."""
    g = generic(path)
    if any(fnmatch.fnmatchcase(g, p) for p in PROBE_IGNORED):
        return None
    return first_match(PROBE_CATEGORIES, g)


def run_kind(path: str) -> str | None:
    """The kind of change a flattened health.json path is, or None for a volatile / derived
    field."""
    g = generic(path)
    if any(fnmatch.fnmatchcase(g, p) for p in RUN_VOLATILE):
        return None
    return first_match(RUN_KINDS, g)
