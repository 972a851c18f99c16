"""Read the raw facts of a host through a Source: driver, every GPU, processes, MIG, topology.

Each fact is stored with explicit units in its name (`_w`, `_mhz`, `_bytes`, `_c`). A query that
answers an NVML error is recorded in the GPU's `unsupported` map ({field: error name}), never
raised: "not supported" is an answer. `facts` is filled as reads complete, so that a probe cut
short by its deadline still emits what it has.
"""

import re

from probe_agent.links import read_fabric, read_fields, read_nvlink, read_pcie
from probe_agent.smi_text import parse_topo_matrix
from probe_agent.source import NVMLQueryError

# nvmlClocksEventReasons bits (nvml.h), in the order a person reads them.
CLOCK_EVENT_REASONS = (
    (0x1, "idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
TOPOLOGY_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
NVML_CLOCK_GRAPHICS = 0
# nvmlTemperatureThresholds_t
TEMP_SHUTDOWN, TEMP_SLOWDOWN, TEMP_MEM_MAX, TEMP_GPU_MAX = 0, 1, 2, 3


def decode_reasons(mask):
    if mask is None:
        return None
    return [name for bit, name in CLOCK_EVENT_REASONS if mask & bit]


class Reader(object):
    """Reads one value at a time, turning NVML errors into entries of an `unsupported` map."""

    def __init__(self, src, unsupported):
        self.src = src
        self.unsupported = unsupported

    def get(self, key, field, fn, *args):
        try:
            return self.src.nvml(key, fn, *args)
        except NVMLQueryError as exc:
            self.unsupported[field] = exc.name
            return None


def mw_to_w(value):
    return None if value is None else round(value / 1000.0, 2)


def read_driver(src, facts):
    """nvmlInit and the system-wide answers. Returns False when NVML is unusable."""
    driver = facts.setdefault("driver", {})
    try:
        src.nvml("nvmlInit", "nvmlInit")
    except NVMLQueryError as exc:
        driver["nvml_error"] = exc.name
        driver["nvml_error_message"] = exc.message
        return False
    errors = driver.setdefault("unsupported", {})
    r = Reader(src, errors)
    driver["version"] = r.get("driver", "version", "nvmlSystemGetDriverVersion")
    driver["nvml_version"] = r.get("nvml_version", "nvml_version", "nvmlSystemGetNVMLVersion")
    cuda = r.get("cuda_driver_version", "cuda_driver_version", "nvmlSystemGetCudaDriverVersion_v2")
    driver["cuda_driver_version"] = (
        None if cuda is None else "%d.%d" % (cuda // 1000, (cuda % 1000) // 10)
    )
    count = r.get("count", "gpu_count", "nvmlDeviceGetCount")
    driver["gpu_count"] = count
    cc = r.get("cc_state", "confidential_compute", "nvmlSystemGetConfComputeState")
    driver["confidential_compute"] = None if cc is None else bool(cc.get("ccFeature"))
    return True


def read_gpu(src, i):
    """Every per-GPU fact of GPU `i` (NVML index, which is PCI bus order)."""
    unsupported = {}
    r = Reader(src, unsupported)
    try:
        h = src.handle(i)
    except Exception as exc:  # a GPU that fell off the bus fails here
        return {"index": i, "unsupported": {"handle": type(exc).__name__}, "lost": True}
    p = "gpu%d." % i
    g = {"index": i, "unsupported": unsupported}
    read_identity(r, p, h, g)
    read_memory_health(r, p, h, g)
    g["power"] = read_power(r, p, h)
    g["clocks"] = read_clocks(r, p, h)
    fields = read_fields(r, p, h)
    g["clock_event_reasons"] = read_clock_event_reasons(r, p, h)
    g["temperature_c"] = r.get(p + "temp", "temperature", "nvmlDeviceGetTemperature", h, 0)
    g["slowdown_temperature_c"] = r.get(
        p + "temp_slowdown",
        "temperature_slowdown",
        "nvmlDeviceGetTemperatureThreshold",
        h,
        TEMP_SLOWDOWN,
    )
    g["thermal"] = read_thermal(r, p, h, g, fields)
    ps = r.get(p + "pstate", "pstate", "nvmlDeviceGetPerformanceState", h)
    g["pstate"] = None if ps is None else "P%d" % ps
    util = r.get(p + "util", "utilization", "nvmlDeviceGetUtilizationRates", h)
    g["utilization_gpu_pct"] = util.get("gpu") if util else None
    g["numa_node"] = r.get(p + "numa", "numa_node", "nvmlDeviceGetNumaNodeId", h)
    g["processes"] = read_processes(src, r, p, h)
    g["mig"] = read_mig(src, r, p, h)
    g["pcie"] = read_pcie(r, p, h)
    g["nvlink"] = read_nvlink(r, p, h, fields)
    g["nvlinks_active"] = g["nvlink"]["active"]
    g["fabric"] = read_fabric(r, p, h)
    g.update(read_firmware(r, p, h))
    return g


def read_identity(r, p, h, g):
    """What the GPU is and how it is set up: name, ids, VBIOS, PCI address,
    memory, modes; into `g`."""
    g["name"] = r.get(p + "name", "name", "nvmlDeviceGetName", h)
    g["uuid"] = r.get(p + "uuid", "uuid", "nvmlDeviceGetUUID", h)
    g["serial"] = r.get(p + "serial", "serial", "nvmlDeviceGetSerial", h)
    g["vbios"] = r.get(p + "vbios", "vbios", "nvmlDeviceGetVbiosVersion", h)
    pci = r.get(p + "pci", "pci_bus_id", "nvmlDeviceGetPciInfo", h)
    g["pci_bus_id"] = pci.get("busId") if isinstance(pci, dict) else None
    cc = r.get(p + "cc", "compute_capability", "nvmlDeviceGetCudaComputeCapability", h)
    g["compute_capability"] = "%d.%d" % tuple(cc) if cc else None
    mem = r.get(p + "mem", "memory", "nvmlDeviceGetMemoryInfo", h)
    g["memory_total_bytes"] = mem.get("total") if mem else None
    g["memory_used_bytes"] = mem.get("used") if mem else None
    pm = r.get(p + "persistence", "persistence_mode", "nvmlDeviceGetPersistenceMode", h)
    g["persistence_mode"] = None if pm is None else bool(pm)
    cm = r.get(p + "compute_mode", "compute_mode", "nvmlDeviceGetComputeMode", h)
    g["compute_mode"] = COMPUTE_MODES.get(cm, cm)


def read_clock_event_reasons(r, p, h):
    """The clock-event (throttle) reasons active now and those the GPU can report, decoded."""
    active = r.get(
        p + "throttle_reasons",
        "clock_event_reasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        h,
    )
    supported = r.get(
        p + "supported_throttle_reasons",
        "supported_clock_event_reasons",
        "nvmlDeviceGetSupportedClocksThrottleReasons",
        h,
    )
    return {
        "active_mask": active,
        "active": decode_reasons(active),
        "supported": decode_reasons(supported),
    }


def read_memory_health(r, p, h, g):
    """ECC mode and errors, remapped rows, retired pages of one GPU, into `g`."""
    ecc = r.get(p + "ecc_mode", "ecc_mode", "nvmlDeviceGetEccMode", h)
    g["ecc"] = {
        "current": None if ecc is None else bool(ecc[0]),
        # The ECC mode the GPU takes at its next reset (not "a change is pending"); `pending` is the
        # deprecated name of the same value (health schema 1.0), kept until schema 2.
        "pending_mode": None if ecc is None else bool(ecc[1]),
        "pending": None if ecc is None else bool(ecc[1]),
        "volatile_uncorrected": r.get(
            p + "ecc_vol_total_unc",
            "ecc_volatile_uncorrected",
            "nvmlDeviceGetTotalEccErrors",
            h,
            1,
            0,
        ),
        "aggregate_uncorrected": r.get(
            p + "ecc_agg_total_unc",
            "ecc_aggregate_uncorrected",
            "nvmlDeviceGetTotalEccErrors",
            h,
            1,
            1,
        ),
    }
    rows = r.get(p + "remapped_rows", "remapped_rows", "nvmlDeviceGetRemappedRows", h)
    g["remapped_rows"] = (
        None
        if rows is None
        else {
            "correctable": rows[0],
            "uncorrectable": rows[1],
            "pending": bool(rows[2]),
            "failure": bool(rows[3]),
        }
    )
    retired = r.get(
        p + "retired_pending", "retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus", h
    )
    g["retired_pages_pending"] = None if retired is None else bool(retired)


def read_power(r, p, h):
    """Power draw and limits of one GPU, in watts."""
    constraints = r.get(
        p + "power_constraints",
        "power_constraints",
        "nvmlDeviceGetPowerManagementLimitConstraints",
        h,
    )
    return {
        "draw_w": mw_to_w(r.get(p + "power_usage", "power_draw", "nvmlDeviceGetPowerUsage", h)),
        "enforced_limit_w": mw_to_w(
            r.get(
                p + "enforced_power_limit",
                "enforced_power_limit",
                "nvmlDeviceGetEnforcedPowerLimit",
                h,
            )
        ),
        "management_limit_w": mw_to_w(
            r.get(p + "power_limit", "power_limit", "nvmlDeviceGetPowerManagementLimit", h)
        ),
        "default_limit_w": mw_to_w(
            r.get(
                p + "default_power_limit",
                "default_power_limit",
                "nvmlDeviceGetPowerManagementDefaultLimit",
                h,
            )
        ),
        "min_limit_w": mw_to_w(constraints[0]) if constraints else None,
        "max_limit_w": mw_to_w(constraints[1]) if constraints else None,
    }


def read_firmware(r, p, h):
    """The GPU's firmware beside its VBIOS: the InfoROM image and the GSP
    firmware (version, mode)."""
    mode = r.get(p + "gsp_mode", "gsp_firmware_mode", "nvmlDeviceGetGspFirmwareMode", h)
    enabled = bool(mode[0]) if isinstance(mode, (list, tuple)) and len(mode) == 2 else None
    default = bool(mode[1]) if isinstance(mode, (list, tuple)) and len(mode) == 2 else None
    return {
        "inforom_image": r.get(
            p + "inforom_img", "inforom_image", "nvmlDeviceGetInforomImageVersion", h
        ),
        "gsp_firmware": {
            "version": r.get(
                p + "gsp_version", "gsp_firmware_version", "nvmlDeviceGetGspFirmwareVersion", h
            )
            if enabled is not False
            else None,
            "enabled": enabled,
            "default_enabled": default,
        },
    }


def read_thermal(r, p, h, g, fields):
    """GPU and memory (HBM) temperatures beside the thresholds NVML reports."""
    return {
        "gpu_c": g.get("temperature_c"),
        "gpu_slowdown_c": g.get("slowdown_temperature_c"),
        "gpu_shutdown_c": r.get(
            p + "temp_shutdown",
            "temperature_shutdown",
            "nvmlDeviceGetTemperatureThreshold",
            h,
            TEMP_SHUTDOWN,
        ),
        "gpu_max_operating_c": r.get(
            p + "temp_gpu_max",
            "temperature_gpu_max",
            "nvmlDeviceGetTemperatureThreshold",
            h,
            TEMP_GPU_MAX,
        ),
        "memory_c": fields.get("memory_temperature_c"),
        "memory_max_operating_c": r.get(
            p + "temp_mem_max",
            "temperature_memory_max",
            "nvmlDeviceGetTemperatureThreshold",
            h,
            TEMP_MEM_MAX,
        ),
    }


def read_clocks(r, p, h):
    clocks = {
        "sm_mhz": r.get(p + "clock_sm", "clock_sm", "nvmlDeviceGetClockInfo", h, NVML_CLOCK_SM),
        "mem_mhz": r.get(p + "clock_mem", "clock_mem", "nvmlDeviceGetClockInfo", h, NVML_CLOCK_MEM),
        "sm_max_mhz": r.get(
            p + "max_clock_sm", "max_clock_sm", "nvmlDeviceGetMaxClockInfo", h, NVML_CLOCK_SM
        ),
        "mem_max_mhz": r.get(
            p + "max_clock_mem", "max_clock_mem", "nvmlDeviceGetMaxClockInfo", h, NVML_CLOCK_MEM
        ),
        "app_sm_mhz": r.get(
            p + "app_clock_sm", "app_clock_sm", "nvmlDeviceGetApplicationsClock", h, NVML_CLOCK_SM
        ),
        "default_app_sm_mhz": r.get(
            p + "default_app_clock_sm",
            "default_app_clock_sm",
            "nvmlDeviceGetDefaultApplicationsClock",
            h,
            NVML_CLOCK_SM,
        ),
        # The P0 clock range: locked clocks (nvidia-smi -lgc / -lmc) narrow it where the
        # driver exposes it.
        "p0_sm_min_mhz": None,
        "p0_sm_max_mhz": None,
        "p0_mem_min_mhz": None,
        "p0_mem_max_mhz": None,
    }
    for name, clock in (("sm", NVML_CLOCK_GRAPHICS), ("mem", NVML_CLOCK_MEM)):
        rng = r.get(
            p + "p0_range_" + name,
            "p0_%s_range" % name,
            "nvmlDeviceGetMinMaxClockOfPState",
            h,
            clock,
            0,
        )
        if isinstance(rng, list) and len(rng) == 2:
            clocks["p0_%s_min_mhz" % name], clocks["p0_%s_max_mhz" % name] = rng
    return clocks


def read_processes(src, r, p, h):
    procs = r.get(p + "procs", "processes", "nvmlDeviceGetComputeRunningProcesses", h)
    if procs is None:
        return None
    out = []
    for proc in procs:
        if not isinstance(proc, dict):
            continue
        pid = proc.get("pid")
        name = proc.get("name")
        if name is None and pid is not None:
            name = r.get("process_name.%s" % pid, "process_name", "nvmlSystemGetProcessName", pid)
        used = proc.get("usedGpuMemory")
        out.append(
            {
                "pid": pid,
                "name": name,
                "used_memory_bytes": used
                if isinstance(used, int) and used >= 0 and used < 2**63
                else None,
            }
        )
    return out


def read_mig(src, r, p, h):
    mode = r.get(p + "mig_mode", "mig_mode", "nvmlDeviceGetMigMode", h)
    mig = {
        "current": None if mode is None else bool(mode[0]),
        "pending": None if mode is None else bool(mode[1]),
        "devices": [],
    }
    if not mig["current"]:
        return mig
    count = r.get(p + "max_mig", "max_mig_devices", "nvmlDeviceGetMaxMigDeviceCount", h) or 0
    for k in range(count):
        q = "%smig%d." % (p, k)
        try:
            # recorded: the slot is used
            src.nvml(q + "exists", "nvmlDeviceGetMigDeviceHandleByIndex", h, k)
            mh = src.mig_handle(h, k)
        except Exception:
            continue  # an empty slot answers NotFound
        name = r.get(q + "name", "mig_name", "nvmlDeviceGetName", mh)
        mem = r.get(q + "mem", "mig_memory", "nvmlDeviceGetMemoryInfo", mh)
        mig["devices"].append(
            {
                "index": k,
                "uuid": r.get(q + "uuid", "mig_uuid", "nvmlDeviceGetUUID", mh),
                "profile": profile_of(name),
                "gpu_instance_id": r.get(q + "gi", "mig_gi", "nvmlDeviceGetGpuInstanceId", mh),
                "compute_instance_id": r.get(
                    q + "ci", "mig_ci", "nvmlDeviceGetComputeInstanceId", mh
                ),
                "memory_total_bytes": mem.get("total") if mem else None,
            }
        )
    return mig


def profile_of(name):
    """'NVIDIA H200 MIG 1g.18gb' -> '1g.18gb'."""
    if not name:
        return None
    m = re.search(r"(\d+g\.\d+gb(?:\+me)?)", name)
    return m.group(1) if m else name


def read_topology(src, facts, count):
    """Link class of every GPU pair: `nvidia-smi topo -m` first (it knows NV#), NVML otherwise."""
    topo = {"source": None, "pairs": {}, "cpu_affinity": {}, "numa_affinity": {}, "unread": {}}
    facts["topology"] = topo
    if not count or count < 2:
        topo["source"] = "single_gpu" if count == 1 else None
        return topo
    answer = src.command(["nvidia-smi", "topo", "-m"], timeout=10.0)
    if answer.get("rc") == 0:
        parsed = parse_topo_matrix(answer.get("stdout", ""))
        if parsed["pairs"]:
            topo.update(parsed)
            topo["source"] = "nvidia-smi topo -m"
            return topo
    unsupported = facts.setdefault("driver", {}).setdefault("unsupported", {})
    r = Reader(src, unsupported)
    for i in range(count):
        for j in range(i + 1, count):
            level = r.get(
                "topo.%d.%d" % (i, j),
                "topology",
                "nvmlDeviceGetTopologyCommonAncestor",
                src.handle(i),
                src.handle(j),
            )
            if level is not None:
                topo["pairs"]["%d-%d" % (i, j)] = TOPOLOGY_LEVELS.get(level, str(level))
    topo["source"] = "nvml" if topo["pairs"] else None
    return topo
