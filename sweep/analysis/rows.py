"""One health.json reduced to the rows of the fleet's frames: its host's columns (`host_facts`),
each GPU's row in the order `GPU_ROW` names (`gpu_facts`), and the processes the agent judged
foreign (`foreign_processes`).

The GPU row is declared once here (`GPU_FIELDS`, `LOAD_FIELDS`, `COMPUTED`, `SPEED_ENVELOPE` and
the fact table's own reads); `sweep.analysis.fleet` collects the rows of many files and types them
into frames (`GPU_COLUMNS`, `HOST_COLUMNS`).
"""

from __future__ import annotations

import linecache
from collections import Counter

from probe_agent.contracts import worst_link
from probe_agent.hostfacts import NO_CPUFREQ_POLICY
from sweep.analysis.fact import ACCEPTS_SOURCE
from sweep.analysis.facts import FACTS, GPU_READS, HOST_READS
from sweep.analysis.load_record import load_problem
from sweep.analysis.speed_record import (
    VALIDATED,
    read_contended,
    read_forced,
    read_reason,
    read_rejected,
    read_skipped,
    read_status,
)


def foreign_processes(health: dict, contracts: list) -> set:
    """(GPU index, pid) of the processes the agent itself judged foreign: its "processes" contract's
    evidence, which leaves out the probe's own (its --load child). Without that contract (a record
    it could not judge), every listed process but the load's own."""
    judged = next((c for c in contracts if c.get("name") == "processes"), {})
    if judged.get("status") == "ok":
        return set()
    listed = (
        (judged.get("evidence") or {}).get("processes")
        if judged.get("status") == "warning"
        else None
    )
    if isinstance(listed, list):
        return {(p.get("gpu"), p.get("pid")) for p in listed if isinstance(p, dict)}
    own = (health.get("load") or {}).get("pid")
    return {
        (g.get("index"), p.get("pid"))
        for g in health.get("gpus") or []
        for p in g.get("processes") or []
        if isinstance(p, dict) and p.get("pid") != own
    }


def dig(d, *keys):
    """The value under `keys` in nested dicts; None where a step is missing or not a dict."""
    for key in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


_LINKS: dict = {}  # (GPU indices, topology pairs) -> worst_link
_UNSEEN = object()


def _worst_link(topology: dict, gpus: list) -> str | None:
    """The agent's `worst_link` of a host, kept per (GPU indices, topology pairs), all it reads:
    the hosts of a fleet share a few topologies (computed, 30 us a host: 7% of reading a run)."""
    pairs = topology.get("pairs")
    try:
        key = (
            tuple(g.get("index") for g in gpus),
            tuple(pairs.items()) if isinstance(pairs, dict) else pairs,
        )
        got = _LINKS.get(key, _UNSEEN)
    except (TypeError, AttributeError):  # what no validated record holds: computed as it is
        return worst_link({"topology": topology, "gpus": gpus})
    if got is _UNSEEN:
        if len(_LINKS) >= 4096:
            _LINKS.clear()
        got = _LINKS[key] = worst_link({"topology": topology, "gpus": gpus})
    return got


def host_facts(health: dict, contracts: list, gpus: list, picked: set) -> dict:
    """The columns of a probed host, by name."""
    driver, mask = health.get("driver") or {}, health.get("mask")
    names = sorted(
        {g.get("name") or "unknown" for g in gpus if g.get("index") in picked}
        or {g.get("name") or "unknown" for g in gpus}
    )
    framework_build = (health.get("frameworks") or [{}])[0]
    low = next((c for c in contracts if c.get("name") == health.get("lowest_broken")), {})
    framework = next((c for c in contracts if c.get("name") == "framework"), {})
    probe = health.get("probe") or {}
    row = {
        "hostname": dig(health, "host", "hostname"),
        "probe_complete": probe.get("complete"),
        "probe_mode": probe.get("mode"),
        "driver": driver.get("version"),
        "cuda_driver": driver.get("cuda_driver_version"),
        "nvml_error": driver.get("nvml_error"),
        "gpu_count": driver.get("gpu_count"),
        "confidential_compute": driver.get("confidential_compute"),
        "mask_state": dig(mask, "state"),
        "cuda_visible_devices": dig(mask, "cuda_visible_devices"),
        "gpus_selected": len(mask.get("selected") or ()) if isinstance(mask, dict) else len(gpus),
        "gpu_model": "/".join(names) if gpus else None,
        "torch": framework_build.get("torch_version"),
        "cuda_runtime": framework_build.get("cuda_runtime"),
        "framework_status": framework.get("status"),
        "worst_link_nvml": _worst_link(health.get("topology") or {}, gpus),
        "interpreter_named": any(
            isinstance(f, dict) and f.get("named") is True for f in health.get("frameworks") or ()
        ),
        "worst_link": dig(health, "topology", "worst_link_selected"),
        "lowest_broken": health.get("lowest_broken"),
        "verdict": health.get("verdict"),
        "lowest_message": low.get("message"),
        "lowest_fix": low.get("fix"),
        "summary": health.get("summary"),
        **_platform(health, contracts),
        "load_problem": load_problem(health),
    }
    # the opt-in tier: its columns stay NA (left out) without it
    if health.get("speed") is not None:
        row.update(
            speed_status=read_status(health),
            speed_reason=read_reason(health),
            speed_rejected=read_rejected(health),
            speed_forced=read_forced(health),
            speed_skipped=read_skipped(health),
            speed_contended=read_contended(health),
        )
    row.update(
        (column, read(health))
        for column, (_, read) in (
            HOST_READS if health.get("speed") is not None else HOST_PLAIN_READS
        ).items()
    )
    return row


# The GPU row, declared once: each section of a GPU's dict (None: the GPU's own keys) and the
# (column, key) pairs read from it as they are; then the medians under --load (health.json
# load.summary), the columns computed from a GPU's fields (_gpu_computed), the envelope sampled
# during the speed tier and the fact table's own reads. `GPU_ROW` names the values of a row in
# order, and the frame picks each of GPU_COLUMNS from it by name.
GPU_FIELDS = (
    (
        None,
        (
            ("index", "index"),
            ("uuid", "uuid"),
            ("name", "name"),
            ("pci_bus_id", "pci_bus_id"),
            ("memory_total_bytes", "memory_total_bytes"),
            ("temperature_c", "temperature_c"),
            ("mig_layout", "mig_layout"),
            ("persistence_mode", "persistence_mode"),
            ("retired_pages_pending", "retired_pages_pending"),
        ),
    ),
    (
        "power",
        (
            ("power_enforced_w", "enforced_limit_w"),
            ("power_default_w", "default_limit_w"),
            ("power_max_w", "max_limit_w"),
            ("power_draw_w", "draw_w"),
        ),
    ),
    (
        "ecc",
        (
            ("ecc_current", "current"),
            ("ecc_pending", "pending_mode"),
            ("ecc_volatile_uncorrected", "volatile_uncorrected"),
        ),
    ),
    (
        "clocks",
        (
            ("sm_mhz", "sm_mhz"),
            ("sm_max_mhz", "sm_max_mhz"),
            ("app_sm_mhz", "app_sm_mhz"),
            ("default_app_sm_mhz", "default_app_sm_mhz"),
        ),
    ),
    ("mig", (("mig_current", "current"), ("mig_pending", "pending"))),
    ("remapped_rows", (("remap_pending", "pending"), ("remap_failure", "failure"))),
    # the PCIe link, NVLinks, fabric state and HBM temperature
    (
        "pcie",
        (
            ("pcie_gen", "gen"),
            ("pcie_width", "width"),
            ("pcie_max_gen", "max_gen"),
            ("pcie_max_width", "max_width"),
            ("pcie_replays", "replay_counter"),
        ),
    ),
    ("nvlink", (("nvlink_links", "links"), ("nvlink_active", "active"))),
    ("fabric", (("fabric_state", "state"),)),
    ("thermal", (("memory_temperature_c", "memory_c"), ("memory_max_c", "memory_max_operating_c"))),
)
LOAD_FIELDS = (
    ("sm_load_mhz", "sm_mhz_median"),
    ("load_power_w", "power_w_median"),
    ("load_limit_w", "enforced_limit_w"),
    ("load_sw_power_cap", "sw_power_cap_fraction"),
    ("load_hw_slowdown", "hw_slowdown_fraction"),
)
COMPUTED = (
    "reasons_active",
    "idle",
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
    "compute_mode",
    "processes",
    "process_names",
    "nvlink_errors",
    "nvlink_error",
)
SPEED_ENVELOPE = {
    "speed_sm_mhz": "sm_mhz_median",
    "speed_power_w": "power_w_median",
    "speed_limit_w": "enforced_limit_w",
    "speed_sw_power_cap": "sw_power_cap_fraction",
    "speed_hw_slowdown": "hw_slowdown_fraction",
}
# the fact table's reads: those of the measured figures need the speed section, the others not
MEASURED = {c for f in FACTS if f.history == "drift" for c in f.reads}
GPU_PLAIN_READS = {c: spec for c, spec in GPU_READS.items() if c not in MEASURED}
GPU_MEASURED_READS = {c: spec for c, spec in GPU_READS.items() if c in MEASURED}
HOST_PLAIN_READS = {c: spec for c, spec in HOST_READS.items() if c not in MEASURED}
GPU_ROW = (
    "host",
    "selected",
    *(column for _, pairs in GPU_FIELDS for column, _ in pairs),
    *(column for column, _ in LOAD_FIELDS),
    *COMPUTED,
    *GPU_PLAIN_READS,
    *SPEED_ENVELOPE,
    *GPU_MEASURED_READS,
)

_EMPTY: dict = {}
_SECTIONS = tuple((section, tuple(key for _, key in pairs)) for section, pairs in GPU_FIELDS[1:])
_OWN_KEYS = tuple(key for _, key in GPU_FIELDS[0][1])
_LOAD_KEYS = tuple(key for _, key in LOAD_FIELDS)
_ENVELOPE_KEYS = tuple(SPEED_ENVELOPE.values())
_PLAIN_READERS = tuple(
    (read, getattr(read, "keyed", False)) for _, read in GPU_PLAIN_READS.values()
)
_MEASURED_READERS = tuple(read for _, read in GPU_MEASURED_READS.values())
# the tier did not run on the host
_NO_SPEED = (None,) * (len(SPEED_ENVELOPE) + len(GPU_MEASURED_READS))


def host_maps(health: dict) -> tuple:
    """What `gpu_facts` reads of the host's `health` for each GPU, found once per host: each keyed
    reader's map (`facts.keyed_reader`), None for the readers of the GPU's own dict."""
    return tuple(read.host_map(health) if keyed else None for read, keyed in _PLAIN_READERS)


def gpu_facts(g: dict, load: dict, host: int, selected: bool, maps: tuple) -> list:
    """One GPU's row, its values in the order GPU_ROW names them. A reader of a host map keyed by
    GPU index (`facts.keyed_reader`) reads its map in `maps` (`host_maps` of the host's health) at
    the GPU's index. The part without the speed tier is one function generated from the
    declarations (`_plain_row`): 80,000 GPUs, no Python call per value."""
    row = _plain_row(g, load, host, selected, maps)
    measured = g.get(VALIDATED)  # the host ran the speed tier (speed_record.gpu_view)
    if measured is None:
        row.extend(_NO_SPEED)
    else:
        row.extend(map((measured.get("_envelope") or _EMPTY).get, _ENVELOPE_KEYS))
        row.extend([read(g) for read in _MEASURED_READERS])
    return row


def _reader_lines(n: int, read, keyed: bool) -> list:
    """The lines that leave reader `n`'s value of the GPU `g` in `r{n}`: its path's steps and its
    dtype's test inlined (`fact.path_reader`, `fact.keyed_reader`); a reader declared otherwise is
    called."""
    if keyed:
        lines, steps = [f"v = maps[{n}]", "v = v.get(key) if v is not None else None"], read.rest
    elif hasattr(read, "steps"):
        lines, steps = [f"v = get({read.steps[0]!r})"], read.steps[1:]
    else:
        return [f"r{n} = _readers[{n}](g)"]
    lines += [f"v = v.get({step!r}) if isinstance(v, dict) else None" for step in steps]
    return lines + [f"r{n} = v if {ACCEPTS_SOURCE[read.dtype]} else None"]


def _generate_plain_row():
    """`_plain_row(g, load, host, selected, maps)`: a GPU's row up to its speed columns, as one
    generated function (what `dataclasses` does for `__init__`): each section's values read by a
    `.get` in one list display, each fact reader's path inlined; `tests/unit/test_gpu_row.py`
    checks it against the declared readers."""
    values = ["host", "selected", *(f"get({key!r})" for key in _OWN_KEYS)]
    body = ["get = g.get", "key = str(get('index'))"]
    for n, (section, keys) in enumerate(_SECTIONS):
        body.append(f"s{n} = get({section!r}) or _EMPTY")
        values += [f"s{n}.get({key!r})" for key in keys]
    values += [f"load.get({key!r})" for key in _LOAD_KEYS]
    values.append("*_gpu_computed(g)")
    for n, (read, keyed) in enumerate(_PLAIN_READERS):
        body += _reader_lines(n, read, keyed)
        values.append(f"r{n}")
    body.append(f"return [{', '.join(values)}]")
    source = "def _plain_row(g, load, host, selected, maps):\n" + "".join(
        f"    {line}\n" for line in body
    )
    scope = {
        "_EMPTY": _EMPTY,
        "_gpu_computed": _gpu_computed,
        "_readers": tuple(read for read, _ in _PLAIN_READERS),
    }
    filename = "<sweep.analysis.rows._plain_row>"
    exec(compile(source, filename, "exec"), scope)  # noqa: S102
    # a traceback through the generated function shows its lines (what attrs does)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return scope["_plain_row"]


def _gpu_computed(g: dict) -> tuple:
    """The COMPUTED columns of one GPU, in COMPUTED's order."""
    active = dig(g, "clock_event_reasons", "active") or ()
    procs, compute_mode = g.get("processes"), g.get("compute_mode")
    nvlink = g.get("nvlink") or _EMPTY
    errors = nvlink.get("errors")
    return (
        ",".join(active),
        "idle" in active,
        "hw_slowdown" in active,
        "hw_thermal_slowdown" in active,
        "hw_power_brake_slowdown" in active,
        "sw_thermal_slowdown" in active,
        None if compute_mode is None else str(compute_mode),
        None if procs is None else len(procs),
        ",".join(str(p.get("name")) for p in procs) if procs else None,
        None if not errors else sum(v for v in errors.values() if isinstance(v, int)),
        (g.get("unsupported") or _EMPTY).get("nvlink") if nvlink.get("links") == 0 else None,
    )


_plain_row = _generate_plain_row()


def _platform(health: dict, contracts: list) -> dict:
    """GPUs on the PCI bus (and which NVML misses), CPU governor, IB/RoCE rates and ports down
    (schema 1.2)."""
    driver = next((c for c in contracts if c.get("name") == "driver"), {})
    pci = (driver.get("evidence") or {}).get("pci") or {}
    settings = health.get("host_settings") or {}
    governor = settings.get("cpu_governor")
    ports = settings.get("ib_ports")
    active = [p for p in ports or () if p.get("state") == "ACTIVE"]
    rates = Counter(f"{p['rate_gbps']:g}" for p in active if p.get("rate_gbps") is not None)
    return {
        "gpus_on_bus": pci.get("on_bus"),
        "gpus_missing": ",".join(pci.get("missing_from_nvml") or ()) or None,
        "cpu_governor": ",".join(sorted(governor)) if governor else None,
        "cpufreq_exposed": _cpufreq_exposed(settings),
        "ib_rates": None
        if ports is None
        else (
            " + ".join(
                f"{n}x {r} Gb/s" for r, n in sorted(rates.items(), key=lambda kv: -float(kv[0]))
            )
            or "no active port"
        ),
        "ib_ports_down": None if ports is None else len(ports) - len(active),
    }


# what the agent writes (host_settings.unreadable.cpu_governor) where sysfs has no cpufreq at all: a
# reading (FileNotFoundError: no /sys/devices/system/cpu/cpufreq at all; NO_CPUFREQ_POLICY: the
# folder lists no policy)
NO_CPUFREQ = ("FileNotFoundError", NO_CPUFREQ_POLICY)


def _cpufreq_exposed(settings: dict):
    """True where the host's CPU frequency governors were read, False where sysfs exposes none
    (no /sys/devices/system/cpu/cpufreq, or no policy in it: a VM, or scaling left to the
    firmware), None where they were not read (an older agent, a permission error, a capture
    without them)."""
    governor = settings.get("cpu_governor")
    if isinstance(governor, dict) and governor:
        return True
    why = (settings.get("unreadable") or {}).get("cpu_governor")
    return (
        False if governor is None and isinstance(why, str) and why.startswith(NO_CPUFREQ) else None
    )
