"""NVIDIA's Xid catalogue and the common NVSwitch SXids, as data: code -> (NVIDIA's resolution
bucket, what the event means).

The Xid rows follow NVIDIA's published catalogue (XID_CATALOGUE: every code it lists, 1-172, with
its "Resolution Bucket (Immediate Action)"), and the codes current drivers document past it
(`LATER`: each with where it was read, and no bucket where NVIDIA gives none: such a code is
reported as not judged, never put in a bucket by guesswork); the SXid rows follow the NVSwitch error
table NVIDIA ships with NVSentinel (SXID_CATALOGUE). The descriptions are sweep's own words. Codes
the catalogue lists without a bucket (162-172, added last) carry the bucket sweep chose, marked in
`SWEEP_CHOSEN`. The agent turns a bucket into the action an operator takes (`probe_agent.xid`).
"""

XID_CATALOGUE = {
    "name": "NVIDIA Xid Catalog (Analyzing Xid Errors with the Xid Catalog)",
    "url": "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html",
    "version": "Xid 1-173",
    "date": "2026-12-05",
}
SXID_CATALOGUE = {
    "name": (
        "NVSwitch SXid errors (NVIDIA Fabric Manager user guide; NVSentinel sxiderrorsmapping.csv)"
    ),
    "url": "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html",
    "version": "SXid 10001-30006, common codes",
    "date": "2025-10-29",
}

# Codes the catalogue lists as unused by current drivers: NVIDIA's bucket for all of them is
# CONTACT_SUPPORT. (A grid of codes, not one code a line: left as written by the formatter.)
# fmt: off
UNUSED = (
    1, 2, 3, 4, 5, 6, 7, 9, 10, 12, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 26, 27, 28, 29, 30,
    33, 34, 35, 36, 42, 47, 49, 50, 51, 52, 53, 55, 56, 57, 58, 59, 61, 65, 73, 81, 87, 90, 91,
    111, 112, 113, 114, 115, 116, 117, 118, 122, 123, 124, 125, 138,
)
# fmt: on

_ENGINE = "engine exception (the channel of one application was stopped)"
XIDS = {
    8: ("RESTART_APP", "GPU stopped processing: a channel idled out"),
    11: ("RESTART_APP", "invalid or corrupted push buffer stream"),
    13: (
        "RESTART_APP",
        "graphics engine exception: an application fault such as an out-of-range access",
    ),
    14: ("IGNORE", "fake error injected for testing"),
    25: ("RESTART_APP", "invalid or illegal push buffer stream"),
    31: ("RESTART_APP", "GPU memory page fault: an application's illegal address"),
    32: ("RESTART_APP", "invalid or corrupted push buffer stream (PBDMA)"),
    37: ("IGNORE", "driver firmware error (unimplemented firmware method)"),
    38: ("IGNORE", "driver firmware error (firmware watchdog timeout)"),
    39: ("RESTART_APP", "copy engine 0 " + _ENGINE),
    40: ("RESTART_APP", "copy engine 1 " + _ENGINE),
    41: ("RESTART_APP", "copy engine 2 " + _ENGINE),
    43: ("IGNORE", "GPU stopped processing for one application (its channel was reset)"),
    44: ("IGNORE", "graphics engine fault during a context switch"),
    45: ("WORKFLOW_XID_45", "preemptive cleanup after an earlier error: follows another Xid"),
    46: ("RESET_GPU", "GPU stopped processing (GPU timeout)"),
    48: ("WORKFLOW_XID_48", "double-bit ECC error: an uncorrectable memory error"),
    54: ("CHECK_MECHANICALS", "auxiliary power is not connected to the board"),
    60: ("RESTART_APP", "video processor (SEC2) exception"),
    62: ("RESET_GPU", "internal micro-controller halt"),
    63: ("IGNORE", "GPU memory row remapping or page retirement recorded"),
    64: ("RESET_GPU", "GPU memory row remapping or page retirement failed"),
    66: ("IGNORE", "illegal register access by the driver"),
    67: ("IGNORE", "illegal access by the driver (verification)"),
    68: ("RESTART_APP", "video decoder NVDEC0 exception"),
    69: ("RESTART_APP", "graphics engine class error"),
    70: ("RESTART_APP", "copy engine 3 " + _ENGINE),
    71: ("RESTART_APP", "copy engine 4 " + _ENGINE),
    72: ("RESTART_APP", "copy engine 5 " + _ENGINE),
    74: ("WORKFLOW_NVLINK_ERR", "NVLink error"),
    75: ("RESTART_APP", "copy engine 6 " + _ENGINE),
    76: ("RESTART_APP", "copy engine 7 " + _ENGINE),
    77: ("RESTART_APP", "copy engine 8 " + _ENGINE),
    78: ("UPDATE_SWFW", "vGPU start error"),
    79: ("RESTART_BM", "GPU has fallen off the bus"),
    80: ("RESTART_APP", "corrupted data sent to the GPU (push buffer CRC mismatch)"),
    82: ("RESTART_APP", "JPEG engine NVJPG0 error"),
    83: ("RESTART_APP", "video decoder NVDEC1 error"),
    84: ("RESTART_APP", "video decoder NVDEC2 error"),
    85: ("RESTART_APP", "copy engine 9 " + _ENGINE),
    86: ("RESTART_APP", "optical flow accelerator exception"),
    88: ("RESTART_APP", "video decoder NVDEC3 error"),
    89: ("RESTART_APP", "video decoder NVDEC4 error"),
    92: ("IGNORE", "high single-bit (corrected) ECC error rate"),
    93: ("IGNORE", "InfoROM wear limit passed (non-fatal)"),
    94: (
        "RESTART_APP",
        "contained memory error: only the applications using the bad memory were stopped",
    ),
    95: ("RESET_GPU", "uncontained memory error: every application on the GPU was affected"),
    96: ("RESTART_APP", "video decoder NVDEC5 error"),
    97: ("RESTART_APP", "video decoder NVDEC6 error"),
    98: ("RESTART_APP", "video decoder NVDEC7 error"),
    99: ("RESTART_APP", "JPEG engine NVJPG1 error"),
    100: ("RESTART_APP", "JPEG engine NVJPG2 error"),
    101: ("RESTART_APP", "JPEG engine NVJPG3 error"),
    102: ("RESTART_APP", "JPEG engine NVJPG4 error"),
    103: ("RESTART_APP", "JPEG engine NVJPG5 error"),
    104: ("RESTART_APP", "JPEG engine NVJPG6 error"),
    105: ("RESTART_APP", "JPEG engine NVJPG7 error"),
    106: ("IGNORE", "SMBPBI test message"),
    107: ("IGNORE", "SMBPBI test message (silent)"),
    108: ("IGNORE", "NVLink remote translation error (unused)"),
    109: ("RESET_GPU", "context switch timeout"),
    110: ("RESET_GPU", "security fault"),
    119: ("RESET_GPU", "GSP RPC timeout: the GPU's system processor stopped answering"),
    120: ("RESET_GPU", "GSP error"),
    121: ("IGNORE", "C2C (chip-to-chip link) error"),
    126: ("RESTART_APP", "copy engine 10 " + _ENGINE),
    127: ("RESTART_APP", "copy engine 11 " + _ENGINE),
    128: ("RESTART_APP", "copy engine 12 " + _ENGINE),
    129: ("RESTART_APP", "copy engine 13 " + _ENGINE),
    130: ("RESTART_APP", "copy engine 14 " + _ENGINE),
    131: ("RESTART_APP", "copy engine 15 " + _ENGINE),
    132: ("RESTART_APP", "copy engine 16 " + _ENGINE),
    133: ("RESTART_APP", "copy engine 17 " + _ENGINE),
    134: ("RESTART_APP", "copy engine 18 " + _ENGINE),
    135: ("RESTART_APP", "copy engine 19 " + _ENGINE),
    136: ("RESET_GPU", "NVLink training failed"),
    137: ("IGNORE", "NVLink privilege error"),
    139: ("RESTART_APP", "optical flow accelerator OFA1 error"),
    140: ("RESET_GPU", "unrecovered ECC error"),
    141: ("IGNORE", "CUDA fast path error"),
    142: ("CONTACT_SUPPORT", "video encoder NVENC3 error"),
    143: ("RESET_GPU", "GPU initialisation error"),
    144: ("WORKFLOW_NVLINK5_ERR", "NVLink SAW error"),
    145: ("WORKFLOW_NVLINK5_ERR", "NVLink RLW error"),
    146: ("WORKFLOW_NVLINK5_ERR", "NVLink TLW error"),
    147: ("WORKFLOW_NVLINK5_ERR", "NVLink TREX error"),
    148: ("WORKFLOW_NVLINK5_ERR", "NVLink NVLPW control error"),
    149: ("WORKFLOW_NVLINK5_ERR", "NVLink NETIR error"),
    150: ("WORKFLOW_NVLINK5_ERR", "NVLink MSE error"),
    151: ("RESTART_VM", "key rotation error (confidential computing)"),
    152: ("IGNORE", "DLA SMMU error"),
    153: ("IGNORE", "DLA timeout"),
    154: (
        "XID_154",
        "the GPU's recovery action changed: the line names the action (reset, reboot, drain)",
    ),
    155: ("RESET_GPU", "NVLink software-defined error"),
    156: ("RESET_GPU", "resource retirement event"),
    157: ("IGNORE", "resource retirement failure"),
    158: ("RESET_GPU", "GPU fatal timeout"),
    159: ("CHECK_UVM", "CHI non-data error"),
    160: ("IGNORE", "channel retirement event"),
    161: ("IGNORE", "channel retirement failure"),
    # listed without a bucket in the catalogue: sweep's choice (SWEEP_CHOSEN)
    162: ("IGNORE", "power smoothing circuitry re-engaged"),
    163: ("CONTACT_SUPPORT", "power smoothing circuitry disengaged"),
    164: ("CONTACT_SUPPORT", "power smoothing circuitry near the end of its lifetime"),
    165: ("CONTACT_SUPPORT", "power smoothing circuitry lifetime exhausted"),
    166: (
        "CONTACT_SUPPORT",
        "confidential-computing traffic before the link was set up for encryption",
    ),
    167: ("RESTART_BM", "PCIe fatal timeout"),
    168: ("CONTACT_SUPPORT", "reduced GPU memory capacity (errors in the write-protected region)"),
    169: ("RESET_GPU", "SEC2 micro-controller halt"),
    170: ("CONTACT_SUPPORT", "interrupt seen in confidential-computing mode"),
    171: ("WORKFLOW_XID_48", "uncorrectable DRAM error (details of an Xid 48)"),
    172: ("WORKFLOW_XID_48", "uncorrectable SRAM error (details of an Xid 48)"),
}
XIDS.update(
    {
        code: ("CONTACT_SUPPORT", "a code the catalogue lists as unused by current drivers")
        for code in UNUSED
    }
)
SWEEP_CHOSEN = frozenset(range(162, 173))

# Codes past NVIDIA's catalogue page (1-172) that current drivers document: code -> (bucket or
# None, meaning), and where each was read. None: NVIDIA gives no resolution for it, so the agent
# judges it `unknown`.
LATER = {
    173: (None, "C2C (chip-to-chip) fatal link failure"),
}
LATER_SOURCE = {
    173: (
        "leptonai/gpud components/accelerator/nvidia/xid/xid.go at 4a8de33 (copied from NVIDIA's "
        "Xid documentation: 'C2C Fatal Link Failure'), read 2026-12-05"
    ),
}
XIDS.update(LATER)

# Xid 154 says the GPU's new recovery action as NVML's nvmlDeviceGpuRecoveryAction_t value, with
# words beside it that differ between drivers ("0x1 (PF FLR)", "0x1 (GPU Reset Required)", "0x2 (OS
# Reboot)"): the value decides.
RECOVERY_SOURCE = {
    "name": (
        "NVML nvmlDeviceGpuRecoveryAction_t (cuda.bindings.nvml.DeviceGpuRecoveryAction; NVML "
        "change log: BUS_RESET and SYSTEM_REBOOT added between v610 and v615; A100 memory error "
        "management: Error Recovery and Response Flags)"
    ),
    "url": (
        "https://nvidia.github.io/cuda-python/latest/cuda-bindings/module/generated/"
        "cuda.bindings.nvml.DeviceGpuRecoveryAction.html"
    ),
    "version": "NVML recovery-action values 0-7",
    "date": "2026-12-05",
}
RECOVERY_ACTIONS = {  # value -> (NVML name, NVIDIA's description)
    0: ("NONE", "no action needed"),
    1: ("GPU_RESET", "reset the GPU"),
    2: ("NODE_REBOOT", "reboot the node"),
    3: ("DRAIN_P2P", "drain peer-to-peer traffic"),
    4: ("DRAIN_AND_RESET", "drain P2P and reset the GPU"),
    5: ("RECOVER_IMEX_DOMAIN", "recover the IMEX domain"),
    6: ("BUS_RESET", "reset the GPU's PCIe bus"),
    7: ("SYSTEM_REBOOT", "reboot the system"),
}
# The words drivers print beside the value (as real kernel logs show them), for a line
# that gives no number
RECOVERY_WORDS = {
    "none": 0,
    "gpu reset required": 1,
    "pf flr": 1,
    "node reboot required": 2,
    "os reboot": 2,
    "drain p2p": 3,
    "drain and reset": 4,
}

# SXid: code -> (bucket, what it means); the line itself says Fatal or Non-fatal.
SXIDS = {
    10003: ("RESET_FABRIC", "NVSwitch host: unhandled interrupt"),
    10004: ("CHECK_THERMALS", "NVSwitch thermal event started"),
    10005: ("IGNORE", "NVSwitch thermal event ended"),
    10006: ("RESET_FABRIC", "NVSwitch thermal shutdown"),
    10007: ("RESET_FABRIC", "NVSwitch host I/O failure"),
    10008: ("RESET_FABRIC", "NVSwitch firmware initialisation failure"),
    11004: (
        "CHECK_FM_CONFIG",
        "ingress access control (ACL) failure: check the fabric manager configuration",
    ),
    11012: ("IGNORE", "ingress header ECC limit (corrected)"),
    11021: ("IGNORE", "ingress remap table ECC limit (corrected)"),
    11022: ("IGNORE", "ingress route table ECC limit (corrected)"),
    11023: ("IGNORE", "ingress RLAN table ECC limit (corrected)"),
    12021: ("IGNORE", "egress crossbar header ECC limit (corrected)"),
    12023: ("IGNORE", "egress RAM header ECC limit (corrected)"),
    12028: ("RESET_FABRIC", "egress non-posted PRIV response error"),
    14017: ("RESET_FABRIC", "TSTATE ATO error"),
    15008: ("IGNORE", "route GLT ECC limit (corrected)"),
    15011: ("IGNORE", "route NVS ECC limit (corrected)"),
    19049: ("IGNORE", "NVLink TLC transmit ECC limit (corrected)"),
    19055: ("IGNORE", "NVLink TLC receive header RAM ECC limit (corrected)"),
    19057: ("IGNORE", "NVLink TLC receive data RAM ECC limit (corrected)"),
    19084: ("RESET_FABRIC", "NVLink TLC AN1 heartbeat timeout"),
    20001: ("IGNORE", "NVLink transmit replay"),
    20002: ("IGNORE", "NVLink transmit short recovery"),
    20003: ("IGNORE", "NVLink transmit long recovery"),
    20009: ("CHECK_LINK_MECHANICAL_CONNECTIONS", "NVLink receive short error rate"),
    20010: ("CHECK_LINK_MECHANICAL_CONNECTIONS", "NVLink receive long error rate"),
    20012: ("CHECK_LINK_MECHANICAL_CONNECTIONS", "NVLink receive CRC counter"),
    20034: ("RESET_GPU", "NVLink LTSSM fault (link up)"),
    20035: ("IGNORE", "NVLink LTSSM fault (link down)"),
    22003: ("RESET_FABRIC", "NVLink MINION halt"),
    22011: ("RESET_FABRIC", "NVLink MINION external error"),
    22012: ("WORKFLOW_NVLINK_POTENTIALY_FATAL_ERR", "NVLink MINION fatal link interrupt"),
    22013: ("IGNORE", "NVLink MINION non-fatal interrupt"),
    24007: ("RESET_GPU", "source track timeout"),
    25010: ("INVESTIGATE_LINK_SI", "NVLink ALI training failure"),
    26001: ("RESET_FABRIC", "NVSwitch SOE reset"),
    26006: ("RESET_FABRIC", "NVSwitch SOE halt"),
    28001: ("CHECK_THERMALS", "OSFP thermal warning"),
    28003: ("CHECK_THERMALS", "OSFP thermal overtemperature"),
}
