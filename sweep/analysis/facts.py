"""The fact table: one declaration per comparability key, and every consumer iterates it.

Each `Fact` (its class: `sweep.analysis.fact`) says everything sweep knows about one key: its name
and label, its scope (a host's fact or a GPU's), the frame columns that hold its typed value (and,
for a fact the frames did not carry before, how to read that column from a health document), how to
render it, its impact text, the contract it belongs to, its Prometheus metric (or why it has none),
its kind in audits and baselines (with the health.json paths behind it), its history treatment and
its expectations key. The fleet frames, the classes (`sweep.analysis.keys`), impact, findings,
`sweep diff`, baselines, expectations, history, the export and the report read this table, so adding
a fact is one entry here, the agent's reader, the schema and a fixture (`tests/unit/test_facts.py`
fails when a consumer misses one).

Values are compared, indexed and diffed typed (`typed_value`); `render` makes text only for the
edge (the report, the terminal, Prometheus labels).
"""
from __future__ import annotations

import numbers
import re
from typing import Optional

from sweep.analysis import impact as texts
from sweep.analysis.fact import NOT_RECORDED, Expect, Fact, Metric, keyed_reader, path_reader
from sweep.analysis.names import fold_numbers
from sweep.analysis import speed_record
from sweep.analysis.speed_reference import LABELS as SPEED_LABELS, UNITS as SPEED_UNITS
from sweep.text import plural


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
    if texts.clocks_unread(r):
        return "not read"
    if texts.default_clocks(r):
        return "default"
    return f"app clocks {r['app_sm_mhz']} MHz"


def _nearest_nic(r) -> str:
    """'NIC0 (PXB: several PCIe switches)', 'not read'."""
    if r["nearest_nic"] is None:
        return "not read"
    link = r["nearest_nic_link"]
    return r["nearest_nic"] + (f" ({link}: {LINK_MEANING[link]})" if link in LINK_MEANING else f" ({link or '?'})")


def _power(r) -> str:
    enforced, default = as_number(r["power_enforced_w"]), as_number(r["power_default_w"])
    return f"{enforced} W" if enforced == default else f"{enforced} W (default {default} W)"


LINK_MEANING = {"PIX": "one PCIe switch", "PXB": "several PCIe switches", "PHB": "PCIe host bridge",
                "NODE": "host bridges of one NUMA node", "SYS": "across NUMA nodes"}


def _link(r) -> str:
    if r["gpus_selected"] == 0:  # the mask selects none: no link between selected GPUs (a reading)
        return "no GPU selected"
    if r["gpus_selected"] is not None and r["gpus_selected"] < 2:
        return "single GPU"
    link = r["worst_link"]
    if link is None:
        return "unknown"
    return f"{link} ({'NVLink' if link.startswith('NV') else LINK_MEANING.get(link, '?')})"


def _nvlinks(r) -> str:
    """'18 of 18', 'none' (NVML: the GPU has no NVLink), 'not read'."""
    if texts.nvlinks_unread(r):
        return "not read"
    return "none" if not r["nvlink_links"] else f"{r['nvlink_active']} of {r['nvlink_links']}"


def _governor(r) -> str:
    """'performance', 'not exposed' (sysfs has no cpufreq: a VM, or scaling left to the firmware), 'not read'."""
    if texts.governor_unread(r):
        return "not read"
    return "not exposed" if r["cpufreq_exposed"] is False else r["cpu_governor"]


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


# what a fleet that differs in any firmware version suffers (the impact of every firmware fact)
FIRMWARE = [(None, "firmware differs: a change-window left hosts half-upgraded ({value} vs {reference}); firmware "
                   "changes clocks, power management, error handling and link training, so the hosts may not behave "
                   "alike; finish the upgrade (or roll it back) on every host")]
CPU_PLACEMENT = ("the GPU is attached to {value} instead of {reference}: a process pinned by the reference's "
                 "layout feeds this GPU across the CPU interconnect (slower host-to-GPU copies and launches); "
                 "pin each rank to its GPU's CPUs and NUMA node")
UPGRADE = "finish the firmware upgrade of the change window on this host (or approve this version)"


def _approved(key: str) -> Expect:
    """The expectations rule of a firmware version: a glob or a list of globs of approved versions."""
    return Expect(key, "glob", fix=UPGRADE, noun="version")


def _info(name: str, help_text: str, *labels) -> Metric:
    return Metric(name, help_text, labels=tuple(labels))


_DRIVER_INFO = _info("sweep_host_driver_info", "NVIDIA driver and CUDA driver API versions of the host, value 1.",
                     ("driver_version", "driver"), ("cuda_driver_version", "cuda_driver"))

FACTS: tuple[Fact, ...] = (
    Fact(name="gpu_model", label="GPU model", scope="gpu", columns=("name",), render=lambda r: r["name"] or "unknown",
         impact=texts.RULES["gpu_model"], diff_kind="gpu model", paths=("gpus#.name",),
         metric=_info("sweep_gpu_info", "The GPU's model, value 1.", ("model", "name")),
         expect=Expect("gpu_model", "equal"), unread=lambda r: not r["name"]),
    Fact(name="memory", label="GPU memory", scope="gpu", columns=("memory_total_bytes",),
         render=lambda r: "unknown" if r["memory_total_bytes"] is None else f"{r['memory_total_bytes'] // 2**20} MiB",
         impact=texts.RULES["memory"], diff_kind="ecc", paths=("gpus#.memory_total_bytes",),
         metric=Metric("sweep_gpu_memory_total_bytes", "GPU memory size.", "memory_total_bytes"),
         unread=lambda r: r["memory_total_bytes"] is None),
    Fact(name="gpu_count", label="GPUs selected", scope="host", columns=("gpus_selected",),
         render=lambda r: "unknown" if r["gpus_selected"] is None else plural(r["gpus_selected"], "GPU"),
         impact=texts.RULES["gpu_count"], diff_kind="gpus", paths=("mask.selected",),
         metric=Metric("sweep_host_gpus_selected", "GPUs the device mask selects (visible to CUDA).", "gpus_selected"),
         contract="device_mask", expect=Expect("gpu_count", "equal"), unread=lambda r: r["gpus_selected"] is None),
    Fact(name="driver", label="Driver", scope="host", columns=("driver",), render=lambda r: r["driver"] or "unknown",
         impact=texts.RULES["driver"], diff_kind="driver", paths=("driver.version",), metric=_DRIVER_INFO,
         contract="driver", expect=Expect("driver", "glob"), unread=lambda r: not r["driver"]),
    Fact(name="cuda_driver", label="CUDA (driver)", scope="host", columns=("cuda_driver",),
         render=lambda r: f"CUDA {r['cuda_driver'] or '?'}", impact=texts.RULES["cuda_driver"], diff_kind="driver",
         paths=("driver.cuda_driver_version",), metric=_DRIVER_INFO, contract="driver",
         expect=Expect("cuda_driver", "glob"), unread=lambda r: not r["cuda_driver"]),
    Fact(name="framework", label="Framework build", scope="host", columns=("torch", "cuda_runtime"), render=_framework,
         impact=texts.RULES["framework"], diff_kind="framework",
         paths=("frameworks#.torch_version", "frameworks#.cuda_runtime"),
         metric=_info("sweep_host_framework_info", "The framework build the probe found (torch and its CUDA runtime), "
                      "value 1.", ("torch", "torch"), ("cuda_runtime", "cuda_runtime")), contract="framework"),
    Fact(name="ecc", label="ECC", scope="gpu", columns=("ecc_current", "ecc_pending"), render=_ecc,
         impact=texts.RULES["ecc"], diff_kind="ecc", paths=("gpus#.ecc.current", "gpus#.ecc.pending_mode"),
         metric=Metric("sweep_gpu_ecc_enabled", "ECC mode now (1 on, 0 off).", "ecc_current"), contract="memory",
         expect=Expect("ecc", "equal"), unread=lambda r: r["ecc_current"] is None),
    Fact(name="power_limit", label="Power limit", scope="gpu", columns=("power_enforced_w", "power_default_w"),
         render=_power, impact=texts.RULES["power_limit"], diff_kind="power",
         paths=("gpus#.power.enforced_limit_w", "gpus#.power.default_limit_w"),
         metric=Metric("sweep_gpu_power_limit_enforced_watts", "Enforced power limit.", "power_enforced_w"),
         contract="power", expect=Expect("power_limit_w", "equal", unit="watts"),
         per_gpu=lambda r: as_number(r["power_enforced_w"]) + " W",
         unread=lambda r: r["power_enforced_w"] is None),  # the default alone says nothing of the cap
    Fact(name="mig", label="MIG", scope="gpu", columns=("mig_current", "mig_pending", "mig_layout"), render=_mig,
         impact=texts.RULES["mig"], diff_kind="mig", paths=("gpus#.mig.current", "gpus#.mig.pending", "gpus#.mig_layout"),
         metric=Metric("sweep_gpu_mig_enabled", "MIG mode now (1 on, 0 off).", "mig_current"), contract="layout",
         expect=Expect("mig_layout", "equal"), unread=lambda r: r["mig_current"] is None),
    Fact(name="persistence", label="Persistence mode", scope="gpu", columns=("persistence_mode",),
         render=lambda r: onoff(r["persistence_mode"]), impact=texts.RULES["persistence"], diff_kind="modes",
         paths=("gpus#.persistence_mode",),
         metric=Metric("sweep_gpu_persistence_mode_enabled", "Persistence mode (1 on, 0 off).", "persistence_mode"),
         contract="layout", expect=Expect("persistence", "equal"), unread=lambda r: r["persistence_mode"] is None),
    Fact(name="compute_mode", label="Compute mode", scope="gpu", columns=("compute_mode",),
         render=lambda r: r["compute_mode"] or "unknown", impact=texts.RULES["compute_mode"], diff_kind="modes",
         paths=("gpus#.compute_mode",),
         metric=_info("sweep_gpu_compute_mode_info", "The GPU's compute mode (DEFAULT, EXCLUSIVE_PROCESS, PROHIBITED), "
                      "value 1.", ("mode", "compute_mode")), contract="layout",
         unread=lambda r: not r["compute_mode"]),
    Fact(name="confidential_compute", label="Confidential computing", scope="host", columns=("confidential_compute",),
         render=lambda r: onoff(r["confidential_compute"], "not reported"), impact=texts.RULES["confidential_compute"],
         diff_kind="modes", paths=("driver.confidential_compute",),
         metric=Metric("sweep_host_confidential_compute_enabled", "Confidential computing (1 on, 0 off).",
                       "confidential_compute")),
    Fact(name="clock_policy", label="Clock policy", scope="gpu", columns=("app_sm_mhz", "default_app_sm_mhz", "sm_max_mhz"),
         render=_clocks, impact=texts.RULES["clock_policy"], diff_kind="clock policy",
         paths=("gpus#.clocks.app_sm_mhz", "gpus#.clocks.default_app_sm_mhz"),
         metric=Metric("sweep_gpu_application_sm_clock_hertz", "Application SM clock setting.", "app_sm_mhz", 1e6),
         contract="clocks", unread=texts.clocks_unread),  # "default" only where the clocks say so
    Fact(name="link", label="Worst link", scope="host", columns=("worst_link", "gpus_selected"), render=_link,
         impact=texts.RULES["link"], diff_kind="topology", paths=("topology.worst_link_selected",),
         metric=_info("sweep_host_worst_link_info", "The worst link between the selected GPUs (nvidia-smi topo -m: NV#, "
                      "PIX, PXB, PHB, NODE, SYS), value 1.", ("link", "worst_link")),
         contract="topology", expect=Expect("worst_link", "equal"), unread=lambda r: r["worst_link"] is None and not (
             r["gpus_selected"] is not None and r["gpus_selected"] < 2)),
    Fact(name="gpus_present", label="GPUs present", scope="host", columns=("gpu_count", "gpus_on_bus"), render=_present,
         impact=texts.RULES["gpus_present"], diff_kind="gpus", paths=("driver.gpu_count",),
         metric=Metric("sweep_host_gpus_on_bus", "NVIDIA GPUs on the PCI bus (compare with the driver's count).",
                       "gpus_on_bus"), contract="driver", expect=Expect("gpus", "equal"),
         unread=lambda r: r["gpu_count"] is None),
    Fact(name="pcie", label="PCIe link", scope="gpu", columns=("pcie_max_gen", "pcie_width"),
         render=lambda r: "unknown" if r["pcie_width"] is None else
         f"gen{r['pcie_max_gen'] if r['pcie_max_gen'] is not None else '?'} x{r['pcie_width']}",
         impact=texts.RULES["pcie"], diff_kind="links", paths=("gpus#.pcie.max_gen", "gpus#.pcie.width"),
         metric=Metric("sweep_gpu_pcie_link_width", "Trained PCIe link width (lanes).", "pcie_width"),
         expect=Expect("pcie", "equal"), unread=lambda r: r["pcie_width"] is None),
    Fact(name="nvlinks", label="NVLinks active", scope="gpu", columns=("nvlink_links", "nvlink_active", "nvlink_error"),
         render=_nvlinks, impact=texts.RULES["nvlinks"], diff_kind="links",
         paths=("gpus#.nvlink.links", "gpus#.nvlink.active"),
         metric=Metric("sweep_gpu_nvlinks_active", "NVLinks up.", "nvlink_active"),
         unread=texts.nvlinks_unread),  # "none" only where NVML says the GPU has no NVLink
    Fact(name="ib_rate", label="IB/RoCE rate", scope="host", columns=("ib_rates", "ib_slowest_gbps", "ib_fastest_gbps"),
         render=lambda r: r["ib_rates"] or "not read", impact=texts.RULES["ib_rate"], diff_kind="host settings",
         paths=("host_settings.ib_ports#.rate*", "host_settings.ib_ports#.state"),
         metric=_info("sweep_host_ib_rate_info", "The rates of the host's active InfiniBand / RoCE ports, value 1.",
                      ("rates", "ib_rates")), contract="host", expect=Expect("ib_rate_gbps", "equal", unit="Gb/s"),
         reads={"ib_slowest_gbps": ("Float64", lambda h: _port_rate(h, min)),
                "ib_fastest_gbps": ("Float64", lambda h: _port_rate(h, max))},
         unread=lambda r: r["ib_rates"] is None),  # None: the ports were not read ("no active port" is a reading)
    Fact(name="cpu_governor", label="CPU governor", scope="host", columns=("cpu_governor", "cpufreq_exposed"),
         render=_governor, impact=texts.RULES["cpu_governor"],
         diff_kind="host settings", paths=("host_settings.cpu_governor*",),
         metric=_info("sweep_host_cpu_governor_info", "The CPU frequency governors of the host, value 1.",
                      ("governor", "cpu_governor")), contract="host", expect=Expect("cpu_governor", "glob"),
         unread=texts.governor_unread),  # "not exposed" (no cpufreq in sysfs) is a reading
    # firmware and platform versions (schema 1.3): a mixed fleet is a half-done change window
    Fact(name="vbios", label="VBIOS", scope="gpu", path="gpus#.vbios", impact=FIRMWARE, diff_kind="firmware",
         metric=_info("sweep_gpu_vbios_info", "The GPU's VBIOS version, value 1.", ("version", "vbios")),
         expect=_approved("vbios")),
    Fact(name="hca_firmware", label="HCA firmware", scope="host", columns=("hca_firmware",),
         render=_version("hca_firmware"), impact=FIRMWARE, diff_kind="firmware", paths=("host_settings.ib_ports#.fw_ver",),
         metric=_info("sweep_host_hca_firmware_info", "The firmware of the host's InfiniBand / RoCE HCAs, value 1.",
                      ("version", "hca_firmware")), expect=_approved("hca_firmware"),
         reads={"hca_firmware": ("category", _hca_firmware)}, unread=lambda r: r["hca_firmware"] is None),
    Fact(name="inforom", label="InfoROM image", scope="gpu", path="gpus#.inforom_image", column="inforom_image",
         impact=FIRMWARE, diff_kind="firmware",
         metric=_info("sweep_gpu_inforom_info", "The GPU's InfoROM image version, value 1.", ("version", "inforom_image")),
         expect=_approved("inforom"), compares=False),
    Fact(name="gsp_firmware", label="GSP firmware", scope="gpu", columns=("gsp_version", "gsp_mode"), render=_gsp,
         impact=FIRMWARE, diff_kind="firmware", paths=("gpus#.gsp_firmware.*",),
         metric=_info("sweep_gpu_gsp_firmware_info", "The GPU's GSP firmware version (empty when GSP is off), value 1.",
                      ("version", "gsp_version")), expect=_approved("gsp_firmware"), compares=False,
         reads={"gsp_version": ("category", path_reader("gpus#.gsp_firmware.version", "category")),
                "gsp_mode": ("boolean", path_reader("gpus#.gsp_firmware.enabled", "boolean"))}),
    Fact(name="bios", label="System BIOS", scope="host", path="firmware.bios_version", column="bios_version",
         impact=FIRMWARE, diff_kind="firmware",
         metric=_info("sweep_host_bios_info", "The system BIOS version (/sys/class/dmi/id/bios_version), value 1.",
                      ("version", "bios_version")), expect=_approved("bios"), compares=False),
    Fact(name="fabric_manager", label="Fabric manager", scope="host", path="firmware.fabric_manager_version",
         column="fabric_manager_version", render=_version("fabric_manager_version", "not running"), impact=FIRMWARE,
         diff_kind="firmware",
         metric=_info("sweep_host_fabric_manager_info", "The NVIDIA fabric manager's version where it runs, value 1.",
                      ("version", "fabric_manager_version")), contract="fabric", expect=_approved("fabric_manager"),
         compares=False),
    # where each GPU sits (nvidia-smi topo -m, schema 1.7): shown per GPU, never a comparability key (two
    # GPUs of one host have different CPUs and NICs by design); "not read" where the agent left the row unread
    Fact(name="cpu_affinity", label="CPU affinity", scope="gpu", path="topology.cpu_affinity.*",
         render=_version("cpu_affinity", "not read"), impact=[(None, CPU_PLACEMENT)], diff_kind="topology",
         contract="topology", compares=False, alike=False),
    Fact(name="numa_affinity", label="NUMA affinity", scope="gpu", path="topology.numa_affinity.*",
         render=_version("numa_affinity", "not read"), impact=[(None, CPU_PLACEMENT)], diff_kind="topology",
         contract="topology", compares=False, alike=False),
    Fact(name="nearest_nic", label="Nearest NIC", scope="gpu", columns=("nearest_nic", "nearest_nic_link"),
         render=_nearest_nic, diff_kind="topology", contract="topology", compares=False, alike=False,
         impact=[(None, "the GPU's nearest NIC is {value} instead of {reference}: GPUDirect RDMA traffic from this "
                        "GPU crosses more of the PCIe tree (or the CPU's root complex), so its share of a collective "
                        "across hosts is slower; check the NIC's cabling and the launcher's NIC-to-GPU mapping")],
         paths=("host_settings.nearest_nic.*.nic", "host_settings.nearest_nic.*.link"),
         metric=_info("sweep_gpu_nearest_nic_info", "The GPU's nearest NIC in nvidia-smi topo -m and its link to it "
                      "(PIX, PXB, PHB, NODE, SYS), value 1.", ("nic", "nearest_nic"), ("link", "nearest_nic_link")),
         reads={"nearest_nic": ("category", keyed_reader("host_settings.nearest_nic.*.nic", "category")),
                "nearest_nic_link": ("category", keyed_reader("host_settings.nearest_nic.*.link", "category"))},
         unread=lambda r: r["nearest_nic"] is None),
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


def _speed_fact(name: str, scope: str, floor: str) -> Fact:
    """A figure of the speed tier (schema 1.4): measured, so its history is drift, never a change point,
    and it splits no class (two good GPUs never measure the same bytes per second); its expectation is
    a floor (`floor`: the key, in GB/s or TFLOP/s)."""
    column, unit = f"speed_{name}", SPEED_UNITS[name]
    metric = (f"sweep_{scope}_speed_{name}_bytes_per_second" if unit == "B/s" else f"sweep_gpu_speed_{name}_flops")
    where = (f"speed.gpus#.figures.{name}.*",) if scope == "gpu" else (
        ("speed.p2p#.*",) if name == "p2p" else ("speed.allreduce.*",))
    reader = speed_record.gpu_figure(name) if scope == "gpu" else speed_record.host_figure(name)
    return Fact(name=name, label=SPEED_LABELS[name], scope=scope, columns=(column,),
                render=lambda r: _rate(r[column], unit), impact=[(None, SPEED_IMPACT[name])], diff_kind="speed",
                paths=where, metric=Metric(metric, f"The speed tier's measured {SPEED_LABELS[name]} ({unit}), best of "
                                           "its repetitions.", column),
                history="drift", expect=Expect(floor, "floor", unit="GB/s" if unit == "B/s" else "TFLOP/s"),
                compares=False, reads={column: ("Float64", reader)})


SPEED_FACTS = (_speed_fact("hbm", "gpu", "hbm_gbps_min"), _speed_fact("pcie_h2d", "gpu", "pcie_h2d_gbps_min"),
               _speed_fact("pcie_d2h", "gpu", "pcie_d2h_gbps_min"), _speed_fact("fp32", "gpu", "fp32_tflops_min"),
               _speed_fact("bf16_gemm", "gpu", "bf16_gemm_tflops_min"), _speed_fact("p2p", "host", "p2p_gbps_min"),
               _speed_fact("allreduce", "host", "allreduce_gbps_min"))
FACTS = FACTS + SPEED_FACTS


def derived(table: tuple) -> dict:
    """The views of a fact table that consumers iterate, by the module attribute each is (a test that
    declares another fact sets them all)."""
    return {"FACTS": tuple(table), "BY_NAME": {f.name: f for f in table},
            "LABELS": {f.name: f.label for f in table},  # every fact's label, in the table's order
            "COMPARED": {f.name: f.label for f in table if f.compares},  # the comparability keys: they split the fleet
            "GPU_FACTS": tuple(f for f in table if f.scope == "gpu"),
            "HOST_FACTS": tuple(f for f in table if f.scope == "host"),
            # columns a fact reads from a health document itself: name -> (dtype, reader), by scope
            "GPU_READS": {c: spec for f in table if f.scope == "gpu" for c, spec in f.reads.items()},
            "HOST_READS": {c: spec for f in table if f.scope == "host" for c, spec in f.reads.items()}}


_VIEWS = derived(FACTS)
BY_NAME: dict = _VIEWS["BY_NAME"]
LABELS: dict = _VIEWS["LABELS"]
COMPARED: dict = _VIEWS["COMPARED"]
GPU_FACTS: tuple = _VIEWS["GPU_FACTS"]
HOST_FACTS: tuple = _VIEWS["HOST_FACTS"]
GPU_READS: dict = _VIEWS["GPU_READS"]
HOST_READS: dict = _VIEWS["HOST_READS"]


def impact_of(key: str, value: str, reference: str, rows=(), ref_rows=()) -> str:
    """What a host with `value` for `key` suffers or gains against `reference` (the fact's impact
    rules, judging the typed `rows` behind each side: one per distinct value of its GPUs)."""
    fact = BY_NAME[key]
    return texts.impact(key, value, reference, fact.impact, rows, ref_rows, fact.unread or _every_row_read)


def _every_row_read(_row) -> bool:
    """The "not read" test of a fact whose text says what a gap means ("not recorded"): every row is read."""
    return False


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
        f"{c}:{dtypes.get(c, '')}" for c in f.columns) for f in FACTS)


def own_paths() -> list:
    """(kind, paths) of the facts the frames read through the table itself (`reads`): the audit
    field tables put them first, so that their kind is the table's."""
    return [(f.diff_kind, f.paths) for f in FACTS if f.reads and f.history == "value"]


def path_labels() -> dict:
    """A GPU-relative or host path of a fact (as audits name a changed field) -> the fact's label."""
    return {p.removeprefix("gpus#."): f.label for f in FACTS if f.reads and f.history == "value"
            for p in f.paths}
