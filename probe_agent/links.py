"""Per-GPU link reads through NVML: PCIe link, NVLink links and counters, GPU fabric, field values.

Each read goes through the Reader, so that "not supported" lands in the GPU's `unsupported` map.
"""

# nvmlDeviceGetFieldValues ids (nvml.h): read in one call per GPU.
FIELDS = (
    (38, "nvlink_crc_flit_errors"),
    (45, "nvlink_crc_data_errors"),
    (52, "nvlink_replay_errors"),
    (59, "nvlink_recovery_errors"),
    (82, "memory_temperature_c"),
)
# nvmlValueType_t -> the member of the value union that holds it.
# Per-link data-link-layer error counters (scopeId = link), where the legacy totals are not
# supported (Hopper).
NVLINK_DL_FIELDS = ((161, "replay"), (162, "recovery"), (163, "crc"))
VALUE_MEMBERS = {
    0: "dVal",
    1: "uiVal",
    2: "ulVal",
    3: "ullVal",
    4: "sllVal",
    5: "siVal",
    6: "usVal",
}
FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
MAX_NVLINKS = 18


def field_value(entry):
    """One nvmlFieldValue_t answer's value, or None when its own return code is an error."""
    if not isinstance(entry, dict) or entry.get("nvmlReturn") != 0:
        return None
    return (entry.get("value") or {}).get(VALUE_MEMBERS.get(entry.get("valueType"), "ullVal"))


def read_fields(r, p, h):
    """The field values FIELDS names, {name: value or None}; a field the GPU lacks is None."""
    answer = r.get(
        p + "fields", "field_values", "nvmlDeviceGetFieldValues", h, [f for f, _ in FIELDS]
    )
    out = {name: None for _, name in FIELDS}
    names = dict(FIELDS)
    for entry in answer or []:
        name = names.get(entry.get("fieldId")) if isinstance(entry, dict) else None
        if name is not None:
            out[name] = field_value(entry)
    return out


def read_nvlink_dl_errors(r, p, h, links):
    """Per-link replay / recovery / CRC counters in one call: ({name: total},
    {link: {name: n}} non-zero)."""

    ids = [(f, link) for link in range(links) for f, _ in NVLINK_DL_FIELDS]
    answer = r.get(p + "nvlink_dl_errors", "nvlink_dl_errors", "nvmlDeviceGetFieldValues", h, ids)
    names = dict(NVLINK_DL_FIELDS)
    totals, per_link = {}, {}
    for entry in answer or []:
        value = field_value(entry)
        name = names.get(entry.get("fieldId")) if isinstance(entry, dict) else None
        if value is None or name is None:
            continue
        totals[name] = totals.get(name, 0) + value
        if value:
            per_link.setdefault(str(entry.get("scopeId")), {})[name] = value
    return totals, per_link


def read_pcie(r, p, h):
    """Current and maximum PCIe link (NVML's max is the lesser of GPU and slot),
    the GPU's own max."""
    return {
        "gen": r.get(p + "pcie_gen", "pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration", h),
        "width": r.get(p + "pcie_width", "pcie_width", "nvmlDeviceGetCurrPcieLinkWidth", h),
        "max_gen": r.get(
            p + "pcie_max_gen", "pcie_max_gen", "nvmlDeviceGetMaxPcieLinkGeneration", h
        ),
        "max_width": r.get(
            p + "pcie_max_width", "pcie_max_width", "nvmlDeviceGetMaxPcieLinkWidth", h
        ),
        "gpu_max_gen": r.get(
            p + "pcie_gpu_max_gen", "pcie_gpu_max_gen", "nvmlDeviceGetGpuMaxPcieLinkGeneration", h
        ),
        "replay_counter": r.get(
            p + "pcie_replay", "pcie_replay_counter", "nvmlDeviceGetPcieReplayCounter", h
        ),
    }


def read_nvlink(r, p, h, fields):
    """Links that answer a state (they exist), which are active, and the error totals."""
    states = []
    for link in range(MAX_NVLINKS):
        state = r.get("%snvlink%d_state" % (p, link), "nvlink", "nvmlDeviceGetNvLinkState", h, link)
        if state is None:
            break
        states.append(bool(state))
    errors = {
        k[len("nvlink_") :]: fields.get(k)
        for k in (
            "nvlink_crc_flit_errors",
            "nvlink_crc_data_errors",
            "nvlink_replay_errors",
            "nvlink_recovery_errors",
        )
    }
    errors = {k: v for k, v in errors.items() if v is not None}
    per_link = {}
    if states and not errors:
        dl, per_link = read_nvlink_dl_errors(r, p, h, len(states))
        errors = {k + "_errors": v for k, v in dl.items()}
    return {
        "links": len(states),
        "active": sum(states),
        "inactive_links": [k for k, up in enumerate(states) if not up],
        "errors": errors or None,
        "errors_per_link": per_link,
    }


def read_fabric(r, p, h):
    """GPU fabric (NVSwitch) registration: the V form first, the older form where V is missing."""
    info = r.get(p + "fabric", "fabric", "nvmlDeviceGetGpuFabricInfoV", h)
    if info is None and r.unsupported.get("fabric") == "NVMLError_FunctionNotFound":
        del r.unsupported["fabric"]
        info = r.get(p + "fabric_v1", "fabric", "nvmlDeviceGetGpuFabricInfo", h)
    if not isinstance(info, dict):
        return {
            "state": None,
            "status": None,
            "clique_id": None,
            "cluster_uuid": None,
            "health_mask": None,
        }
    uuid = info.get("clusterUuid")
    return {
        "state": FABRIC_STATES.get(info.get("state"), str(info.get("state"))),
        "status": info.get("status"),
        "clique_id": info.get("cliqueId"),
        "cluster_uuid": "".join("%02x" % b for b in uuid) if isinstance(uuid, list) else None,
        "health_mask": info.get("healthMask"),
    }
