"""The fact table: one declaration per comparability key, and every consumer iterates it.

Each `Fact` says everything sweep knows about one key: its name and label, its scope (a host's
fact or a GPU's), the frame columns that hold its typed value (and, for a fact the frames did not
carry before, how to read that column from a health document), how to render it, its impact
text, the contract it belongs to, its Prometheus metric (or why it has none), its kind in audits
and baselines (with the health.json paths behind it), its history treatment and its expectations
key. The fleet frames, the classes (`sweep.analysis.keys`), impact, findings, `sweep diff`,
baselines, expectations, history, the export and the report read this table, so adding a fact is
one entry here, the agent's reader, the schema and a fixture (`tests/unit/test_facts.py` fails when
a consumer misses one).

Values are compared, indexed and diffed typed (`typed_value`); `render` makes text only for the
edge (the report, the terminal, Prometheus labels).
"""
from __future__ import annotations

import numbers
import re
from dataclasses import dataclass, field
from typing import Callable, Optional

from sweep.analysis import impact as texts
from sweep.analysis.names import fold_numbers
from sweep.analysis import speed_record
from sweep.analysis.speed_reference import LABELS as SPEED_LABELS, UNITS as SPEED_UNITS
from sweep.text import plural

NOT_RECORDED = "not recorded"


@dataclass(frozen=True)
class Metric:
    """A fact's Prometheus family: a gauge of one column (times `scale`), or an `_info` metric
    (value 1) whose labels carry the columns of `labels` ((label, column) pairs)."""

    name: str
    help: str
    column: Optional[str] = None
    scale: float = 1.0
    labels: tuple = ()


@dataclass(frozen=True)
class Fact:
    """One comparability key: everything each consumer needs to know about it."""

    name: str
    label: str
    scope: str                       # "host" or "gpu"
    columns: tuple                   # frame columns (of `hosts` or `gpus`) that hold the typed value
    render: Callable[[dict], str]    # a row of those columns -> its text (the edge only)
    impact: list                     # (when, text) rules of `sweep.analysis.impact`; the last always holds
    diff_kind: str                   # its kind in `sweep diff` of runs and in baselines (audit/fields.py)
    paths: tuple = ()                # flattened health.json paths ("#" = any index) that carry it
    metric: Optional[Metric] = None
    no_metric: Optional[str] = None  # why it has no metric, when it has none
    contract: Optional[str] = None   # the agent's contract this fact belongs to
    history: str = "value"           # "value": a change point when the typed value changes; "drift": a measured
                                     # figure, tracked run on run against the GPU's own first runs (no change point)
    expect: Optional[str] = None     # its rule in an expectations file (audit/expect.py), if any
    reads: dict = field(default_factory=dict)  # column -> (dtype, reader of a GPU dict / health doc)
    per_gpu: Optional[Callable] = None  # a row -> the text of one GPU in "700 W x7, 250 W x1 (GPU 3)"
    compares: bool = True            # splits the fleet into comparability classes


def onoff(value, unknown="unknown") -> str:
    return unknown if value is None else ("on" if value else "off")


def as_number(value) -> str:
    return "?" if value is None else f"{float(value):g}"


def _compact_layout(layout: str) -> str:
    """'1g.18gb+1g.18gb+3g.71gb' -> '2x 1g.18gb + 3g.71gb'."""
    counts = {}
    for part in layout.split("+"):
        counts[part] = counts.get(part, 0) + 1
    return " + ".join(f"{n}x {p}" if n > 1 else p for p, n in counts.items())


def _ecc(r) -> str:
    text = onoff(r["ecc_current"])
    if r["ecc_pending"] is not None and r["ecc_current"] is not None and r["ecc_pending"] != r["ecc_current"]:
        text += f" (pending {onoff(r['ecc_pending'])})"
    return text


def _mig(r) -> str:
    text = onoff(r["mig_current"])
    if r["mig_current"]:
        text = "on: " + (_compact_layout(r["mig_layout"]) if r["mig_layout"] else "no instances")
    if r["mig_pending"] is not None and r["mig_current"] is not None and r["mig_pending"] != r["mig_current"]:
        text += f" (pending {onoff(r['mig_pending'])})"
    return text


def _clocks(r) -> str:
    if texts.default_clocks(r):
        return "default"
    return f"app clocks {r['app_sm_mhz']} MHz"


def _power(r) -> str:
    enforced, default = as_number(r["power_enforced_w"]), as_number(r["power_default_w"])
    return f"{enforced} W" if enforced == default else f"{enforced} W (default {default} W)"


LINK_MEANING = {"PIX": "one PCIe switch", "PXB": "several PCIe switches", "PHB": "PCIe host bridge",
                "NODE": "host bridges of one NUMA node", "SYS": "across NUMA nodes"}


def _link(r) -> str:
    if r["gpus_selected"] is not None and r["gpus_selected"] < 2:
        return "single GPU"
    link = r["worst_link"]
    if link is None:
        return "unknown"
    return f"{link} ({'NVLink' if link.startswith('NV') else LINK_MEANING.get(link, '?')})"


def _framework(r) -> str:
    if r["torch"] is None:
        return "no torch found"
    return f"torch {r['torch']}, " + (f"CUDA {r['cuda_runtime']}" if r["cuda_runtime"] else "CPU-only")


def _present(r) -> str:
    """'8', '7 of 8 on the bus' (one fell off), '8 (bus not read)'."""
    count, bus = r["gpu_count"], r["gpus_on_bus"]
    if count is None:
        return "unknown"
    if bus is None:
        return f"{count} (bus not read)"
    return f"{count}" if bus == count else f"{count} of {bus} on the bus"


def _version(column, absent=NOT_RECORDED):
    return lambda r: r[column] if r[column] is not None else absent


def _gsp(r) -> str:
    if r["gsp_mode"] is None and r["gsp_version"] is None:
        return NOT_RECORDED
    if r["gsp_mode"] is False:
        return "off"
    return r["gsp_version"] or "on (version not read)"


def _hca_firmware(health) -> Optional[str]:
    """The firmware of the host's IB / RoCE HCAs (/sys/class/infiniband/*/fw_ver), their distinct
    versions joined by '/'; 'no HCA' on a host without one; None where it was not read."""
    ports = (health.get("host_settings") or {}).get("ib_ports")
    if not isinstance(ports, list):
        return None
    if not ports:
        return "no HCA"
    versions = sorted({p.get("fw_ver") for p in ports if isinstance(p, dict) and p.get("fw_ver")})
    return "/".join(versions) or None


def _port_rate(health, pick) -> Optional[float]:
    """The slowest (`pick` min) or fastest (max) rate in Gb/s of the host's ACTIVE IB / RoCE ports;
    None where no port is active or none was read (the impact rules compare these, not the text)."""
    ports = (health.get("host_settings") or {}).get("ib_ports")
    rates = [p["rate_gbps"] for p in ports if isinstance(p, dict) and p.get("state") == "ACTIVE"
             and type(p.get("rate_gbps")) in (int, float)] if isinstance(ports, list) else []
    return float(pick(rates)) if rates else None


def _firmware(health, name) -> Optional[str]:
    value = (health.get("firmware") or {}).get(name)
    return value if isinstance(value, str) and value else None


def _gpu_text(key, path):
    """A reader of a GPU's string field at `path` (a tuple of keys)."""
    def read(g):
        for step in path:
            g = g.get(step) if isinstance(g, dict) else None
        return g if isinstance(g, str) and g else None
    read.__name__ = f"read_{key}"
    return read


def _gsp_mode(g) -> Optional[bool]:
    mode = (g.get("gsp_firmware") or {}).get("enabled")
    return mode if isinstance(mode, bool) else None


# what a fleet that differs in any firmware version suffers (the impact of every firmware fact)
FIRMWARE = [(None, "firmware differs: a change-window left hosts half-upgraded ({value} vs {reference}); firmware "
                   "changes clocks, power management, error handling and link training, so the hosts may not behave "
                   "alike; finish the upgrade (or roll it back) on every host")]


def _m(name, help_text, column=None, scale=1.0, labels=()):
    return Metric(name, help_text, column, scale, tuple(labels))


FACTS: tuple[Fact, ...] = (
    Fact("gpu_model", "GPU model", "gpu", ("name",), lambda r: r["name"] or "unknown", texts.RULES["gpu_model"],
         "gpu model", ("gpus#.name",), _m("sweep_gpu_info", "The GPU's model, value 1.", labels=(("model", "name"),)),
         expect="gpu_model"),
    Fact("memory", "GPU memory", "gpu", ("memory_total_bytes",),
         lambda r: "unknown" if r["memory_total_bytes"] is None else f"{r['memory_total_bytes'] // 2**20} MiB",
         texts.RULES["memory"], "ecc", ("gpus#.memory_total_bytes",),
         _m("sweep_gpu_memory_total_bytes", "GPU memory size.", "memory_total_bytes")),
    Fact("gpu_count", "GPUs selected", "host", ("gpus_selected",),
         lambda r: "unknown" if r["gpus_selected"] is None else
         plural(r["gpus_selected"], "GPU"), texts.RULES["gpu_count"], "gpus",
         ("mask.selected",), _m("sweep_host_gpus_selected", "GPUs the device mask selects (visible to CUDA).",
                                "gpus_selected"), contract="device_mask", expect="gpu_count"),
    Fact("driver", "Driver", "host", ("driver",), lambda r: r["driver"] or "unknown", texts.RULES["driver"], "driver",
         ("driver.version",), _m("sweep_host_driver_info", "NVIDIA driver and CUDA driver API versions of the host, "
                                 "value 1.", labels=(("driver_version", "driver"), ("cuda_driver_version",
                                                                                     "cuda_driver"))),
         contract="driver", expect="driver"),
    Fact("cuda_driver", "CUDA (driver)", "host", ("cuda_driver",), lambda r: f"CUDA {r['cuda_driver'] or '?'}",
         texts.RULES["cuda_driver"], "driver", ("driver.cuda_driver_version",), _m(
             "sweep_host_driver_info", "NVIDIA driver and CUDA driver API versions of the host, value 1.",
             labels=(("driver_version", "driver"), ("cuda_driver_version", "cuda_driver"))),
         contract="driver", expect="cuda_driver"),
    Fact("framework", "Framework build", "host", ("torch", "cuda_runtime"), _framework, texts.RULES["framework"],
         "framework", ("frameworks#.torch_version", "frameworks#.cuda_runtime"),
         _m("sweep_host_framework_info", "The framework build the probe found (torch and its CUDA runtime), "
                                         "value 1.", labels=(("torch", "torch"), ("cuda_runtime", "cuda_runtime"))),
         contract="framework"),
    Fact("ecc", "ECC", "gpu", ("ecc_current", "ecc_pending"), _ecc, texts.RULES["ecc"], "ecc",
         ("gpus#.ecc.current", "gpus#.ecc.pending_mode"), _m("sweep_gpu_ecc_enabled", "ECC mode now (1 on, 0 off).",
                                                            "ecc_current"),
         contract="memory", expect="ecc"),
    Fact("power_limit", "Power limit", "gpu", ("power_enforced_w", "power_default_w"), _power,
         texts.RULES["power_limit"], "power", ("gpus#.power.enforced_limit_w", "gpus#.power.default_limit_w"),
         _m("sweep_gpu_power_limit_enforced_watts", "Enforced power limit.", "power_enforced_w"), contract="power",
         expect="power_limit_w", per_gpu=lambda r: as_number(r["power_enforced_w"]) + " W"),
    Fact("mig", "MIG", "gpu", ("mig_current", "mig_pending", "mig_layout"), _mig, texts.RULES["mig"], "mig",
         ("gpus#.mig.current", "gpus#.mig.pending", "gpus#.mig_layout"),
         _m("sweep_gpu_mig_enabled", "MIG mode now (1 on, 0 off).", "mig_current"), contract="layout",
         expect="mig_layout"),
    Fact("persistence", "Persistence mode", "gpu", ("persistence_mode",), lambda r: onoff(r["persistence_mode"]),
         texts.RULES["persistence"], "modes", ("gpus#.persistence_mode",),
         _m("sweep_gpu_persistence_mode_enabled", "Persistence mode (1 on, 0 off).", "persistence_mode"),
         contract="layout", expect="persistence"),
    Fact("compute_mode", "Compute mode", "gpu", ("compute_mode",), lambda r: r["compute_mode"] or "unknown",
         texts.RULES["compute_mode"], "modes", ("gpus#.compute_mode",),
         _m("sweep_gpu_compute_mode_info", "The GPU's compute mode (DEFAULT, EXCLUSIVE_PROCESS, PROHIBITED), value 1.",
            labels=(("mode", "compute_mode"),)), contract="layout"),
    Fact("confidential_compute", "Confidential computing", "host", ("confidential_compute",),
         lambda r: onoff(r["confidential_compute"], "not reported"), texts.RULES["confidential_compute"], "modes",
         ("driver.confidential_compute",), _m("sweep_host_confidential_compute_enabled",
                                              "Confidential computing (1 on, 0 off).", "confidential_compute")),
    Fact("clock_policy", "Clock policy", "gpu", ("app_sm_mhz", "default_app_sm_mhz", "sm_max_mhz"), _clocks,
         texts.RULES["clock_policy"], "clock policy", ("gpus#.clocks.app_sm_mhz", "gpus#.clocks.default_app_sm_mhz"),
         _m("sweep_gpu_application_sm_clock_hertz", "Application SM clock setting.", "app_sm_mhz", 1e6),
         contract="clocks"),
    Fact("link", "Worst link", "host", ("worst_link", "gpus_selected"), _link, texts.RULES["link"], "topology",
         ("topology.worst_link_selected",), _m("sweep_host_worst_link_info", "The worst link between the selected "
                                               "GPUs (nvidia-smi topo -m: NV#, PIX, PXB, PHB, NODE, SYS), value 1.",
                                               labels=(("link", "worst_link"),)),
         contract="topology", expect="worst_link"),
    Fact("gpus_present", "GPUs present", "host", ("gpu_count", "gpus_on_bus"), _present, texts.RULES["gpus_present"],
         "gpus", ("driver.gpu_count",),
         _m("sweep_host_gpus_on_bus", "NVIDIA GPUs on the PCI bus (compare with the driver's count).", "gpus_on_bus"),
         contract="driver", expect="gpus"),
    Fact("pcie", "PCIe link", "gpu", ("pcie_max_gen", "pcie_width"), lambda r: "unknown" if r["pcie_width"] is None
         else f"gen{r['pcie_max_gen'] if r['pcie_max_gen'] is not None else '?'} x{r['pcie_width']}",
         texts.RULES["pcie"], "links", ("gpus#.pcie.max_gen", "gpus#.pcie.width"),
         _m("sweep_gpu_pcie_link_width", "Trained PCIe link width (lanes).", "pcie_width"),
         expect="pcie"),
    Fact("nvlinks", "NVLinks active", "gpu", ("nvlink_links", "nvlink_active"), lambda r: "none"
         if not r["nvlink_links"] else f"{r['nvlink_active']} of {r['nvlink_links']}", texts.RULES["nvlinks"],
         "links", ("gpus#.nvlink.links", "gpus#.nvlink.active"),
         _m("sweep_gpu_nvlinks_active", "NVLinks up.", "nvlink_active")),
    Fact("ib_rate", "IB/RoCE rate", "host", ("ib_rates", "ib_slowest_gbps", "ib_fastest_gbps"),
         lambda r: r["ib_rates"] or "not read",
         texts.RULES["ib_rate"], "host settings", ("host_settings.ib_ports#.rate*", "host_settings.ib_ports#.state"),
         _m("sweep_host_ib_rate_info", "The rates of the host's active InfiniBand / RoCE ports, value 1.",
            labels=(("rates", "ib_rates"),)), contract="host", expect="ib_rate_gbps",
         reads={"ib_slowest_gbps": ("Float64", lambda h: _port_rate(h, min)),
                "ib_fastest_gbps": ("Float64", lambda h: _port_rate(h, max))}),
    Fact("cpu_governor", "CPU governor", "host", ("cpu_governor",), lambda r: r["cpu_governor"] or "not exposed",
         texts.RULES["cpu_governor"], "host settings", ("host_settings.cpu_governor*",),
         _m("sweep_host_cpu_governor_info", "The CPU frequency governors of the host, value 1.",
            labels=(("governor", "cpu_governor"),)), contract="host", expect="cpu_governor"),
    # firmware and platform versions (schema 1.3): a mixed fleet is a half-done change window
    Fact("vbios", "VBIOS", "gpu", ("vbios",), _version("vbios"), FIRMWARE, "firmware", ("gpus#.vbios",),
         _m("sweep_gpu_vbios_info", "The GPU's VBIOS version, value 1.", labels=(("version", "vbios"),)),
         expect="vbios", reads={"vbios": ("category", _gpu_text("vbios", ("vbios",)))}),
    Fact("hca_firmware", "HCA firmware", "host", ("hca_firmware",), _version("hca_firmware"),
         FIRMWARE, "firmware", ("host_settings.ib_ports#.fw_ver",),
         _m("sweep_host_hca_firmware_info", "The firmware of the host's InfiniBand / RoCE HCAs, value 1.",
            labels=(("version", "hca_firmware"),)), expect="hca_firmware",
         reads={"hca_firmware": ("category", _hca_firmware)}),
    Fact("inforom", "InfoROM image", "gpu", ("inforom_image",), _version("inforom_image"), FIRMWARE,
         "firmware", ("gpus#.inforom_image",),
         _m("sweep_gpu_inforom_info", "The GPU's InfoROM image version, value 1.", labels=(("version", "inforom_image"),)),
         expect="inforom", compares=False,
         reads={"inforom_image": ("category", _gpu_text("inforom", ("inforom_image",)))}),
    Fact("gsp_firmware", "GSP firmware", "gpu", ("gsp_version", "gsp_mode"), _gsp, FIRMWARE,
         "firmware", ("gpus#.gsp_firmware.*",),
         _m("sweep_gpu_gsp_firmware_info", "The GPU's GSP firmware version (empty when GSP is off), value 1.",
            labels=(("version", "gsp_version"),)), expect="gsp_firmware", compares=False,
         reads={"gsp_version": ("category", _gpu_text("gsp", ("gsp_firmware", "version"))),
                "gsp_mode": ("boolean", _gsp_mode)}),
    Fact("bios", "System BIOS", "host", ("bios_version",), _version("bios_version"), FIRMWARE,
         "firmware", ("firmware.bios_version",),
         _m("sweep_host_bios_info", "The system BIOS version (/sys/class/dmi/id/bios_version), value 1.",
            labels=(("version", "bios_version"),)), expect="bios", compares=False,
         reads={"bios_version": ("category", lambda h: _firmware(h, "bios_version"))}),
    Fact("fabric_manager", "Fabric manager", "host", ("fabric_manager_version",),
         _version("fabric_manager_version", "not running"), FIRMWARE, "firmware",
         ("firmware.fabric_manager_version",),
         _m("sweep_host_fabric_manager_info", "The NVIDIA fabric manager's version where it runs, value 1.",
            labels=(("version", "fabric_manager_version"),)), contract="fabric", expect="fabric_manager",
         compares=False,
         reads={"fabric_manager_version": ("category", lambda h: _firmware(h, "fabric_manager_version"))}),
)


def _rate(value, unit) -> str:
    """4.089e12 B/s -> '4089 GB/s'; 7.76e14 FLOP/s -> '776 TFLOP/s' (the edge only)."""
    if value is None:
        return "not measured"
    return f"{value / 1e9:.0f} GB/s" if unit == "B/s" else f"{value / 1e12:.1f} TFLOP/s"


SPEED_IMPACT = {
    "hbm": "the GPU's memory moves {value} against {reference}: every memory-bound kernel (attention, decode, "
           "optimizer steps) runs slower there, and a synchronous job waits for the slowest GPU",
    "pcie_h2d": "host-to-GPU copies run at {value} against {reference}: data loading, checkpoint restore and "
                "offload are slower on this GPU",
    "pcie_d2h": "GPU-to-host copies run at {value} against {reference}: checkpoint writes and offload are slower",
    "fp32": "FP32 FMA throughput is {value} against {reference}: the SMs run slower (clocks, power cap, "
            "slowdown), so every compute-bound kernel does",
    "bf16_gemm": "bf16 GEMM delivers {value} against {reference}: the matrix multiplies that set a training "
                 "step's pace run slower on this GPU",
    "p2p": "the slowest GPU pair copies at {value} against {reference}: tensor-parallel traffic and every "
           "collective wait for that pair",
    "allreduce": "all-reduce bus bandwidth is {value} against {reference}: data-parallel gradient exchange "
                 "takes longer on this host",
}


def _speed_fact(name: str, scope: str, expect: str) -> Fact:
    """A figure of the speed tier (schema 1.4): measured, so its history is drift, never a change point,
    and it splits no class (two good GPUs never measure the same bytes per second)."""
    column, unit = f"speed_{name}", SPEED_UNITS[name]
    metric = (f"sweep_{scope}_speed_{name}_bytes_per_second" if unit == "B/s" else f"sweep_gpu_speed_{name}_flops")
    where = (f"speed.gpus#.figures.{name}.*",) if scope == "gpu" else (
        ("speed.p2p#.*",) if name == "p2p" else ("speed.allreduce.*",))
    reader = speed_record.gpu_figure(name) if scope == "gpu" else speed_record.host_figure(name)
    return Fact(name, SPEED_LABELS[name], scope, (column,), lambda r: _rate(r[column], unit),
                [(None, SPEED_IMPACT[name])], "speed", where,
                _m(metric, f"The speed tier's measured {SPEED_LABELS[name]} ({unit}), best of its repetitions.",
                   column), history="drift", expect=expect, compares=False, reads={column: ("Float64", reader)})


SPEED_FACTS = (_speed_fact("hbm", "gpu", "hbm_gbps_min"), _speed_fact("pcie_h2d", "gpu", "pcie_h2d_gbps_min"),
               _speed_fact("pcie_d2h", "gpu", "pcie_d2h_gbps_min"), _speed_fact("fp32", "gpu", "fp32_tflops_min"),
               _speed_fact("bf16_gemm", "gpu", "bf16_gemm_tflops_min"), _speed_fact("p2p", "host", "p2p_gbps_min"),
               _speed_fact("allreduce", "host", "allreduce_gbps_min"))
FACTS = FACTS + SPEED_FACTS


def derived(table: tuple) -> dict:
    """The views of a fact table that consumers iterate (module attributes of the same names)."""
    return {"FACTS": tuple(table), "BY_NAME": {f.name: f for f in table},
            "KEYS": {f.name: f.label for f in table},  # every fact, in the table's order
            "COMPARED": {f.name: f.label for f in table if f.compares},  # the keys that split the fleet
            "GPU_FACTS": tuple(f for f in table if f.scope == "gpu"),
            "HOST_FACTS": tuple(f for f in table if f.scope == "host"),
            # columns a fact reads from a health document itself: name -> (dtype, reader), by scope
            "GPU_READS": {c: spec for f in table if f.scope == "gpu" for c, spec in f.reads.items()},
            "HOST_READS": {c: spec for f in table if f.scope == "host" for c, spec in f.reads.items()}}


globals().update(derived(FACTS))
BY_NAME: dict
KEYS: dict
COMPARED: dict
GPU_FACTS: tuple
HOST_FACTS: tuple
GPU_READS: dict
HOST_READS: dict


def impact_of(key: str, value: str, reference: str, rows=(), ref_rows=()) -> str:
    """What a host with `value` for `key` suffers or gains against `reference` (the fact's impact
    rules, judging the typed `rows` behind each side: one per distinct value of its GPUs)."""
    return texts.impact(key, value, reference, globals()["BY_NAME"][key].impact, rows, ref_rows)


def mixed_text(fact: Fact, rows: list, gpus: list | None = None) -> str:
    """The text of a host whose GPUs disagree on `fact`: each value with how many GPUs have it, the most
    common first, and which GPUs have the others: "700 W x7, 250 W x1 (GPU 3)". `gpus[i]`: the GPU
    indexes of `rows[i]`; without them (a history index keeps the distinct values only) the values
    are listed, highest first: "700 W, 250 W"."""
    render = fact.per_gpu or fact.render
    if gpus is None:
        return ", ".join(sorted({render(r) for r in rows}, key=_natural, reverse=True))
    by_text: dict = {}
    for row, ix in zip(rows, gpus):
        by_text.setdefault(render(row), []).extend(ix)
    if len(by_text) == 1:
        return next(iter(by_text))
    ranked = sorted(by_text.items(), key=lambda t: (-len(t[1]), _first(t[1])))
    return ", ".join(f"{text} x{len(ix)}" + (f" (GPU {fold_numbers(ix)})" if n else "")
                     for n, (text, ix) in enumerate(ranked))


def _natural(text: str):
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", text)]


def _first(indexes):
    return min((int(i) for i in indexes if isinstance(i, numbers.Integral)), default=0)


def typed_value(fact: Fact, row: dict):
    """The typed value of one row of the fact's columns: a tuple, or None when none of them was read."""
    values = tuple(row[c] for c in fact.columns)
    return None if all(v is None for v in values) else values


def signature(dtypes: dict) -> str:
    """What the table declares, for caches built from it (the history index): each fact's name, scope,
    history treatment, columns and their dtypes (`dtypes`: column -> dtype of the fleet frames)."""
    return ";".join(f"{f.name}/{f.scope}/{f.history}/{int(f.compares)}/" + ",".join(
        f"{c}:{dtypes.get(c, '')}" for c in f.columns) for f in globals()["FACTS"])


def own_paths() -> list:
    """(kind, paths) of the facts the frames read through the table itself (`reads`): the audit
    field tables put them first, so that their kind is the table's."""
    return [(f.diff_kind, f.paths) for f in globals()["FACTS"] if f.reads and f.history == "value"]


def path_labels() -> dict:
    """A GPU-relative or host path of a fact (as audits name a changed field) -> the fact's label."""
    return {p.removeprefix("gpus#."): f.label for f in globals()["FACTS"] if f.reads and f.history == "value"
            for p in f.paths}
