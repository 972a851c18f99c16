"""The contract chain: one declaration per contract (`CONTRACTS`), in chain order, and one contract
record.

Bottom-up: the driver (and the GPUs on the bus it must see), the GPU fabric right above it (CUDA
error 802 without it), driver-reported faults (Xid), the device mask and the framework, then the
state of each GPU (processes, thermal headroom, clocks, power, memory), the links between GPUs and
to the host (PCIe, NVLink), the topology the mask selects, the layout, and last the host settings
around the GPUs (CPU governor, IOMMU, network ports).

Every reader of a contract's meaning iterates this table: the agent's chain (`contracts.evaluate`:
order, what is read without NVML, `consequence_of`), health-report.md (status marks), the published
schema's enums (tests/unit/test_contract_table.py asserts they equal it), and the controller
(`sweep.analysis.compare`: which contracts stop a benchmark; `sweep.analysis.health`: which
contracts' states are fleet findings of their own; `sweep.report.findings`: which findings are about
which contract; `sweep.export.prometheus`: the states). Adding a contract is one entry here, its
check in `contracts.CHECKS` and a fixture; the schema's contract names, lowest_broken names and
contracts.maxItems are generated from this table (`python -m sweep.schema --from-chain`), and
tests/unit/test_contract_declaration.py names whatever is missing.
"""

from collections import namedtuple

Contract = namedtuple(
    "Contract",
    (
        # as in health.json's contracts[].name and lowest_broken
        "name",
        # as a person reads it (health.json's contracts[].title)
        "title",
        # what it depends on: True when judged from NVML (not read while NVML is unusable)
        "needs_nvml",
        # the contracts it stands on: one of them broken makes it a consequence, not a clue
        "consequence_of",
        # broken as the lowest broken contract: the host cannot run a benchmark at all
        "blocks_benchmark",
        # (kind, title) of the fleet finding its own broken / warning state is, or None
        "finding",
        # kinds of the controller's findings (from the GPU facts) that are about it
        "findings",
    ),
)

CONTRACTS = (
    Contract("driver", "Kernel driver and NVML", False, (), True, None, ()),
    Contract(
        "fabric",
        "GPU fabric (NVSwitch, fabric manager)",
        True,
        ("driver",),
        True,
        ("fabric_not_ready", "GPU fabric not ready"),
        (),
    ),
    Contract(
        "xid",
        "Xid events in the kernel log",
        False,
        ("driver",),
        False,
        ("xid", "Xid events in the kernel log"),
        (),
    ),
    Contract(
        "device_mask", "Device mask (CUDA_VISIBLE_DEVICES)", True, ("driver",), True, None, ()
    ),
    Contract(
        "framework", "Framework build", False, ("driver", "fabric", "device_mask"), True, None, ()
    ),
    Contract(
        "processes",
        "Other processes on the GPUs",
        True,
        ("driver",),
        False,
        None,
        ("foreign_process",),
    ),
    Contract(
        "thermal",
        "Thermal headroom (GPU and HBM)",
        True,
        ("driver",),
        False,
        ("thermal_headroom", "Thermal headroom"),
        (),
    ),
    Contract(
        "clocks",
        "Clocks and clock-event reasons",
        True,
        ("driver", "thermal"),
        False,
        None,
        ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake", "sw_thermal_slowdown"),
    ),
    Contract("power", "Power ceiling", True, ("driver",), False, None, ()),
    Contract(
        "memory",
        "Memory health (ECC, row remapping)",
        True,
        ("driver", "xid"),
        False,
        None,
        ("row_remap_failure", "uncorrected_ecc", "row_remap_pending", "ecc_pending"),
    ),
    Contract(
        "links",
        "PCIe and NVLink links",
        True,
        ("driver", "xid"),
        False,
        ("links", "PCIe / NVLink link degraded"),
        (),
    ),
    Contract(
        "topology", "Topology between the selected GPUs", True, ("driver", "links"), False, None, ()
    ),
    Contract(
        "layout",
        "MIG layout, modes and identity",
        True,
        ("driver",),
        False,
        None,
        ("persistence_off",),
    ),
    Contract(
        "host",
        "Host settings and network ports",
        False,
        (),
        False,
        ("host_settings", "Host settings"),
        (),
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
