"""The contract chain: its order, titles, what each contract stands on, and one contract record.

Bottom-up: the driver (and the GPUs on the bus it must see), the GPU fabric right above it (CUDA
error 802 without it), driver-reported faults (Xid), the device mask and the framework, then the
state of each GPU (processes, thermal headroom, clocks, power, memory), the links between GPUs and
to the host (PCIe, NVLink), the topology the mask selects, the layout, and last the host settings
around the GPUs (CPU governor, IOMMU, network ports).
"""
TITLES = {
    "driver": "Kernel driver and NVML",
    "fabric": "GPU fabric (NVSwitch, fabric manager)",
    "xid": "Xid events in the kernel log",
    "device_mask": "Device mask (CUDA_VISIBLE_DEVICES)",
    "framework": "Framework build",
    "processes": "Other processes on the GPUs",
    "thermal": "Thermal headroom (GPU and HBM)",
    "clocks": "Clocks and clock-event reasons",
    "power": "Power ceiling",
    "memory": "Memory health (ECC, row remapping)",
    "links": "PCIe and NVLink links",
    "topology": "Topology between the selected GPUs",
    "layout": "MIG layout, modes and identity",
    "host": "Host settings and network ports",
}
# What each contract stands on: a broken contract below it makes it a consequence, not a clue.
# A contract not listed stands on the driver alone.
DEPENDS = {
    "driver": (),
    "device_mask": ("driver",),
    "framework": ("driver", "fabric", "device_mask"),
    "clocks": ("driver", "thermal"),
    "memory": ("driver", "xid"),
    "links": ("driver", "xid"),
    "topology": ("driver", "links"),
    "host": (),
}
READ_WITHOUT_NVML = ("driver", "framework", "xid", "host")


def plural(n, word, many=None):
    """'1 GPU', '8 GPUs', '2 other processes': never 'GPU(s)'."""
    return "%d %s" % (n, word if n == 1 else (many or word + "s"))


def contract(name, status, message, evidence=None, fix=None):
    return {"name": name, "title": TITLES[name], "status": status, "message": message,
            "fix": fix, "evidence": evidence or {}, "consequence_of": None}
