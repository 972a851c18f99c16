"""The contract chain: one declaration per contract (`CONTRACTS`), in chain order, and one contract
record.

Bottom-up: the driver (and the GPUs on the bus it must see), the GPU fabric right above it (CUDA
error 802 without it), driver-reported faults (Xid), the device mask and the framework, then the
state of each GPU (processes, thermal headroom, clocks, power, memory), the links between GPUs and
to the host (PCIe, NVLink), the topology the mask selects, the layout, and last the host settings
around the GPUs (CPU governor, IOMMU, network ports).

Every reader of a contract's meaning iterates this table: the agent's chain (`contracts.evaluate`:
order, what is read without NVML, `consequence_of`), health-report.md (status marks), the published
schema's enums (tests/unit/test_contract_table.py asserts they equal it), docs/agent.md's table and
the README's line of contracts (each contract's words: `broken_when`, `warning_when`), and the
controller (`sweep.analysis.compare`: which contracts stop a benchmark; `sweep.analysis.health`:
which contracts' states are fleet findings of their own; `sweep.report.findings`: which findings are
about which contract; `sweep.export.prometheus`: the states). Adding a contract is one entry here,
its check in `contracts.CHECKS` and a fixture; the schema's contract names, lowest_broken names and
contracts.maxItems, docs/agent.md's table and the README's line are generated from this table
(`python -m sweep.schema --from-chain`), and tests/unit/test_contract_declaration.py names whatever
is missing.
"""

from collections import namedtuple

Contract = namedtuple(
    "Contract",
    (
        "name",  # as in health.json's contracts[].name and lowest_broken
        "title",  # as a person reads it (health.json's contracts[].title)
        # what it depends on: True when judged from NVML (not read while NVML is unusable)
        "needs_nvml",
        # the contracts it stands on: one of them broken makes it a consequence, not a clue
        "consequence_of",
        # broken as the lowest broken contract: the host cannot run a benchmark at all
        "blocks_benchmark",
        "finding",  # (kind, title) of the fleet finding its own broken / warning state is, or None
        "findings",  # kinds of the controller's findings (from the GPU facts) that are about it
        "broken_when",  # when it is broken, in words (docs/agent.md's table is generated from it)
        "warning_when",  # when it is a warning, the same; a contract says at least one of the two
    ),
    defaults=("", ""),
)

CONTRACTS = (
    Contract(
        "driver",
        "Kernel driver and NVML",
        False,
        (),
        True,
        None,
        (),
        broken_when="NVML cannot load or initialise (no driver, module not loaded, "
        "driver/library mismatch, permission denied), or sees no GPU; an NVIDIA "
        "GPU on the PCI bus (sysfs, class 0x0300/0x0302) that NVML does not list "
        "(fallen off the bus, failed to initialise), named by bus id",
    ),
    Contract(
        "fabric",
        "GPU fabric (NVSwitch, fabric manager)",
        True,
        ("driver",),
        True,
        ("fabric_not_ready", "GPU fabric not ready"),
        (),
        broken_when="the GPU fabric (NVSwitch) is not started or still in progress, or "
        "completed with an error: CUDA error 802, fabric manager down",
    ),
    Contract(
        "xid",
        "Xid events in the kernel log",
        False,
        ("driver",),
        False,
        ("xid", "Xid events in the kernel log"),
        (),
        broken_when="an Xid or NVSwitch SXid event in the kernel log since boot whose "
        "repair, by NVIDIA's Xid catalogue (every code 1-172, carried as data in "
        "`probe_agent/xid_catalogue.py` with its version and date), is more than "
        "restarting the application: hardware inspection, reboot (79, "
        "fabric-reset SXids), reset the GPU (48, 95, 119/120, 140, ...), update "
        'the driver stack; a code the catalogue lacks is "not in the catalogue"; '
        "counted per device and code with its first and last time",
        warning_when="an event whose repair is to check the application (13, 31, 94, ...); "
        "informational ones (63, 92, SXid non-fatal) are noted, `ok`; `unknown` "
        "when no kernel log can be read",
    ),
    Contract(
        "device_mask",
        "Device mask (CUDA_VISIBLE_DEVICES)",
        True,
        ("driver",),
        True,
        None,
        (),
        broken_when="`CUDA_VISIBLE_DEVICES` set but empty, naming no GPU or one GPU twice, "
        "or `CUDA_DEVICE_ORDER` neither `PCI_BUS_ID` nor `FASTEST_FIRST` (CUDA "
        "then sees none)",
        warning_when="an invalid entry (CUDA stops there), an entry CUDA reads loosely (`0 "
        "1` is 0)",
    ),
    Contract(
        "framework",
        "Framework build",
        False,
        ("driver", "fabric", "device_mask"),
        True,
        None,
        (),
        broken_when="CPU-only or ROCm wheel, CUDA runtime of a newer major than the driver, "
        "arch list without the GPU's compute capability, (`--deep`) "
        "`cuda.is_available()` false",
        warning_when="runtime minor newer than the driver",
    ),
    Contract(
        "processes",
        "Other processes on the GPUs",
        True,
        ("driver",),
        False,
        None,
        ("foreign_process",),
        warning_when="any compute process that is not the probe's own",
    ),
    Contract(
        "thermal",
        "Thermal headroom (GPU and HBM)",
        True,
        ("driver",),
        False,
        ("thermal_headroom", "Thermal headroom"),
        (),
        broken_when="GPU at its slowdown or shutdown threshold, HBM at its maximum operating "
        "temperature",
        warning_when="GPU or HBM within 5 C of slowdown",
    ),
    Contract(
        "clocks",
        "Clocks and clock-event reasons",
        True,
        ("driver", "thermal"),
        False,
        None,
        ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake", "sw_thermal_slowdown"),
        broken_when="HW slowdown, HW thermal slowdown, HW power brake active (facility faults)",
        warning_when="SW thermal, application clocks changed, SM or memory clock locked "
        "below the GPU's maximum (P0 range); SW power cap is expected under "
        "load and never an alarm",
    ),
    Contract(
        "power",
        "Power ceiling",
        True,
        ("driver",),
        False,
        None,
        (),
        broken_when="enforced limit below the default",
        warning_when="enforced above the default",
    ),
    Contract(
        "memory",
        "Memory health (ECC, row remapping)",
        True,
        ("driver", "xid"),
        False,
        None,
        ("row_remap_failure", "uncorrected_ecc", "row_remap_pending", "ecc_pending"),
        broken_when="row-remap failure, uncorrected ECC errors",
        warning_when="ECC off, ECC change pending, row remap / page retirement pending",
    ),
    Contract(
        "links",
        "PCIe and NVLink links",
        True,
        ("driver", "xid"),
        False,
        ("links", "PCIe / NVLink link degraded"),
        (),
        broken_when="PCIe width below the link's maximum (any time); PCIe generation below "
        'the maximum under `--load` (at idle it drops to save power: "not '
        'judged"); an NVLink down that peers expect (NV18 with one link down is '
        "NV17)",
        warning_when="NVLinks present but none active",
    ),
    Contract(
        "topology",
        "Topology between the selected GPUs",
        True,
        ("driver", "links"),
        False,
        None,
        (),
        warning_when="the selected GPUs talk over PCIe although the host has NVLink",
    ),
    Contract(
        "layout",
        "MIG layout, modes and identity",
        True,
        ("driver",),
        False,
        None,
        ("persistence_off",),
        warning_when="MIG change pending, persistence off, compute mode not default",
    ),
    Contract(
        "host",
        "Host settings and network ports",
        False,
        (),
        False,
        ("host_settings", "Host settings"),
        (),
        warning_when="CPU governor not `performance`, NUMA balancing on, IOMMU translation "
        "on without `iommu=pt`, nouveau loaded, `nvidia_peermem` missing beside "
        "network ports, an IB/RoCE port down or slower than the host's others, "
        "ACS P2P redirect on a PCIe switch port above a GPU",
    ),
)
BY_NAME = {c.name: c for c in CONTRACTS}

# A contract's status, in order of alarm, and how health-report.md marks it.
STATUSES = (
    ("ok", "ok"),
    ("warning", "warning"),
    ("broken", "BROKEN"),
    ("not_applicable", "n/a"),
    ("unknown", "unknown"),
)
STATUS_NAMES = tuple(s for s, _ in STATUSES)


def plural(n, word, many=None):
    """'1 GPU', '8 GPUs', '2 other processes': never 'GPU(s)'."""
    return "%d %s" % (n, word if n == 1 else (many or word + "s"))


def contract(name, status, message, evidence=None, fix=None):
    return {
        "name": name,
        "title": BY_NAME[name].title,
        "status": status,
        "message": message,
        "fix": fix,
        "evidence": evidence or {},
        "consequence_of": None,
    }
