"""The platform around the GPUs of a derived capture: an HGX-like host (`hgx_platform`) and the
edits that break it (a GPU off NVML, a narrow PCIe link, an NVLink down, GPU fabric not started,
a slow InfiniBand port, the CPU governor, a hot HBM, Xid events in the kernel log).

(schema 1.2) Values as read live on the H200s of tests/fixtures/{h200,x2}/i15 (thresholds, P0
range, fabric), and an HGX-like host around them: each GPU behind a PCIe switch it shares with a
400 Gb/s NDR port. The edits of the GPUs' own state, and `derive` that applies edits, are in
`sweep.demo.synth`.
"""

from __future__ import annotations

from sweep.demo.synth import Capture, Edit, gpu_count, gpu_indexes, set_nvml


def _bus_ids(cap: Capture) -> list[str]:
    """The GPUs' PCI addresses as sysfs names them ('0000:18:00.0'), in NVML order."""
    out = []
    for i in range(gpu_count(cap)):
        bus = cap["nvml"][f"gpu{i}.pci"]["value"]["busId"]
        domain, rest = bus.split(":", 1)
        out.append(f"{int(domain, 16):04x}:{rest.lower()}")
    return out


def _path(cap: Capture, op: str, path: str, answer: dict) -> None:
    cap.setdefault("paths", {})[f"{op} {path}"] = answer


def _bridges(bus: str, nic: bool = False) -> list[str]:
    """Root port, switch upstream port, switch downstream port (one for the GPU,
    one for its NIC)."""
    b = int(bus.split(":")[1], 16)
    return ["0000:00:01.0", f"0000:{b - 4:02x}:00.0", f"0000:{b - (2 if nic else 3):02x}:00.0"]


def _acs_config(control: int) -> str:
    """A config space holding only the ACS extended capability at 0x100 (its
    control register at +6)."""
    config = bytearray(0x108)
    config[0x100:0x104] = (0x000D | (1 << 16)).to_bytes(4, "little")
    config[0x106:0x108] = control.to_bytes(2, "little")
    return bytes(config).hex()


def hgx_platform(ib_rate: str = "400 Gb/sec (4X NDR)") -> Edit:
    """A healthy HGX-like host around the GPUs: all on the PCI bus, PCIe gen5 x16, 18 NVLinks each
    active, GPU fabric completed, temperatures well below their thresholds, an empty Xid log, the
    performance governor, NUMA balancing off, nvidia_peermem loaded, one 400 Gb/s port per GPU."""

    def edit(cap):
        buses = _bus_ids(cap)
        nics = [f"0000:{int(b.split(':')[1], 16) + 1:02x}:00.0" for b in buses]
        _pci_bus(cap, buses, nics)
        for i in range(len(buses)):
            _gpu_platform(cap, i)
        _host_settings(cap)
        _ib_ports(cap, buses, nics, ib_rate)
        cap["kernel_log"] = {
            "source": "/dev/kmsg",
            "events": [],
            "tried": {},
            "complete": True,
            "boot": dict(DEMO_BOOT),
        }

    edit.__doc__ = None  # the healthy platform every demo host has; not a change worth a note
    return edit


def _pci_bus(cap: Capture, buses: list[str], nics: list[str]) -> None:
    """The bus: each GPU behind a PCIe switch it shares with its NIC, ACS off on
    the switch ports."""
    devices = sorted(
        set(
            buses
            + nics
            + [b for g in buses for b in _bridges(g)]
            + [b for g in buses for b in _bridges(g, nic=True)]
        )
    )
    _path(cap, "list", "/sys/bus/pci/devices", {"list": devices})
    for d in devices:
        if d not in buses:
            _path(
                cap,
                "read",
                f"/sys/bus/pci/devices/{d}/vendor",
                {"text": "0x15b3\n" if d in nics else "0x1000\n"},
            )
    for i, bus in enumerate(buses):
        base = f"/sys/bus/pci/devices/{bus}"
        for name, value in (
            ("vendor", "0x10de"),
            ("class", "0x030200"),
            ("device", "0x2335"),
            ("numa_node", str(i // 4)),
            ("current_link_speed", "32.0 GT/s PCIe"),
            ("current_link_width", "16"),
            ("max_link_speed", "32.0 GT/s PCIe"),
            ("max_link_width", "16"),
        ):
            _path(cap, "read", f"{base}/{name}", {"text": value + "\n"})
        _path(cap, "link", f"{base}/driver", {"link": "../../../../bus/pci/drivers/nvidia"})
        _path(
            cap,
            "link",
            base,
            {"link": "../../../devices/pci0000:00/" + "/".join(_bridges(bus) + [bus])},
        )
        for bridge in _bridges(bus)[1:]:
            _path(cap, "bytes", f"/sys/bus/pci/devices/{bridge}/config", {"hex": _acs_config(0)})
    _path(cap, "list", "/proc/driver/nvidia/gpus", {"list": list(buses)})


def _gpu_platform(cap: Capture, i: int) -> None:
    """One GPU's link, thresholds, P0 range, HBM temperature, fabric and NVLinks, as read live."""
    p = f"gpu{i}."
    for key, value in (
        ("pcie_gen", 5),
        ("pcie_width", 16),
        ("pcie_max_gen", 5),
        ("pcie_max_width", 16),
        ("pcie_gpu_max_gen", 5),
        ("pcie_replay", 0),
        ("temp_shutdown", 95),
        ("temp_gpu_max", 87),
        ("temp_mem_max", 95),
        ("p0_range_sm", [345, 1980]),
        ("p0_range_mem", [3201, 3201]),
    ):
        set_nvml(cap, p + key, value)
    set_nvml(
        cap,
        p + "fields",
        [
            {"fieldId": f, "scopeId": 0, "valueType": 1, "nvmlReturn": 3, "value": {}}
            for f in (38, 45, 52, 59)
        ]
        + [
            {
                "fieldId": 82,
                "scopeId": 0,
                "valueType": 1,
                "nvmlReturn": 0,
                "value": {"uiVal": 38 + i % 3},
            }
        ],
    )
    set_nvml(
        cap,
        p + "fabric",
        {
            "version": 0x02000024,
            "clusterUuid": [0] * 16,
            "status": 0,
            "cliqueId": 0,
            "state": 3,
            "healthMask": 0,
        },
    )
    for k in range(18):
        set_nvml(cap, f"{p}nvlink{k}_state", 1)


def _host_settings(cap: Capture) -> None:
    _path(cap, "list", "/sys/devices/system/cpu/cpufreq", {"list": ["policy0", "policy1"]})
    for pol in ("policy0", "policy1"):
        _path(
            cap,
            "read",
            f"/sys/devices/system/cpu/cpufreq/{pol}/scaling_governor",
            {"text": "performance\n"},
        )
    _path(
        cap,
        "read",
        "/sys/kernel/mm/transparent_hugepage/enabled",
        {"text": "always [madvise] never\n"},
    )
    _path(
        cap,
        "read",
        "/proc/cmdline",
        {"text": "BOOT_IMAGE=/boot/vmlinuz root=/dev/md0 iommu=pt quiet\n"},
    )
    _path(
        cap,
        "read",
        "/proc/modules",
        {
            "text": "".join(
                f"{m} 1 0 - Live 0x0\n"
                for m in ("nvidia", "nvidia_uvm", "nvidia_peermem", "ib_core", "mlx5_core")
            )
        },
    )
    _path(cap, "read", "/proc/sys/kernel/numa_balancing", {"text": "0\n"})


def _ib_ports(cap: Capture, buses: list[str], nics: list[str], rate: str) -> None:
    """One InfiniBand port per GPU (mlx5_<i>), ACTIVE at `rate`, beside its GPU's switch."""
    _path(cap, "list", "/sys/class/infiniband", {"list": [f"mlx5_{i}" for i in range(len(buses))]})
    for i, (bus, nic) in enumerate(zip(buses, nics)):
        base = f"/sys/class/infiniband/mlx5_{i}"
        _path(
            cap,
            "link",
            f"{base}/device",
            {"link": "../../../devices/pci0000:00/" + "/".join(_bridges(bus, nic=True) + [nic])},
        )
        _path(cap, "read", f"{base}/device/numa_node", {"text": f"{i // 4}\n"})
        _path(cap, "list", f"{base}/ports", {"list": ["1"]})
        for name, value in (
            ("state", "4: ACTIVE"),
            ("phys_state", "5: LinkUp"),
            ("rate", rate),
            ("link_layer", "InfiniBand"),
        ):
            _path(cap, "read", f"{base}/ports/1/{name}", {"text": value + "\n"})


def gpu_off_nvml(gpu: int = 7) -> Edit:
    """A card still on the PCI bus that NVML no longer lists (fallen off the bus, or
    failed to initialise)."""

    def edit(cap):
        n = gpu_count(cap)
        for k in [k for k in cap["nvml"] if k.startswith(f"gpu{gpu}.")]:
            del cap["nvml"][k]
        for i in range(gpu + 1, n):  # NVML renumbers the GPUs after it
            for k in [k for k in cap["nvml"] if k.startswith(f"gpu{i}.")]:
                cap["nvml"][f"gpu{i - 1}." + k.split(".", 1)[1]] = cap["nvml"].pop(k)
        set_nvml(cap, "count", n - 1)

    edit.__doc__ = f"GPU {gpu} on the PCI bus but not listed by NVML"
    return edit


def pcie_width(width: int = 8, gpus=(3,)) -> Edit:
    def edit(cap):
        buses = _bus_ids(cap)
        for i in gpu_indexes(cap, gpus):
            set_nvml(cap, f"gpu{i}.pcie_width", width)
            if f"read /sys/bus/pci/devices/{buses[i]}/current_link_width" in cap.get("paths", {}):
                _path(
                    cap,
                    "read",
                    f"/sys/bus/pci/devices/{buses[i]}/current_link_width",
                    {"text": f"{width}\n"},
                )

    edit.__doc__ = f"PCIe x{width} on GPUs {list(gpus)}"
    return edit


def nvlink_down(gpu: int = 5, link: int = 3) -> Edit:
    """One NVLink of one GPU down: `nvidia-smi topo -m` then shows NV17 for that GPU's pairs."""

    def edit(cap):
        set_nvml(cap, f"gpu{gpu}.nvlink{link}_state", 0)
        topo = cap["commands"].get("nvidia-smi topo -m")
        if topo:
            lines = topo["stdout"].split("\n")
            for n, line in enumerate(lines):
                cells = line.split("\t")
                if cells[0] == f"GPU{gpu}":
                    cells = [c.replace("NV18", "NV17") for c in cells]
                elif cells[0].startswith("GPU") and len(cells) > gpu + 1:
                    cells[gpu + 1] = cells[gpu + 1].replace("NV18", "NV17")
                lines[n] = "\t".join(cells)
            topo["stdout"] = "\n".join(lines)

    edit.__doc__ = f"NVLink {link} of GPU {gpu} down"
    return edit


XID_TEXT = {
    79: "GPU has fallen off the bus.",
    48: (
        "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
        "partition 0, subpartition 0."
    ),
    13: "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
    31: (
        "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_14 faulted @ "
        "0x7f2f_cca58000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ"
    ),
    95: "Uncontained: FBHUB. RST: Yes, D-RST: No",
}
# The demo hosts' boot: booted 2026-11-30T06:00:00Z (the kernel log's times are seconds since then).
DEMO_BOOT = {"id": "8d3c6f0e-5b1a-4f7e-9c2d-0a1b2c3d4e5f", "booted_at": 1796018400}


def xid(
    code: int, gpu: int = 0, count: int = 1, first_s: float = 7312.5, every_s: float = 61.0
) -> Edit:
    """Xid events in the kernel log for one GPU, as NVRM writes them and /dev/kmsg stamps them
    (seconds since boot), folded as the agent reads them: `count` events, `every_s` apart."""

    def edit(cap):
        bus = _bus_ids(cap)[gpu][:-2]  # NVRM names the device without its function: 0000:18:00
        log = cap.setdefault(
            "kernel_log",
            {"source": "/dev/kmsg", "events": [], "tried": {}, "boot": dict(DEMO_BOOT)},
        )
        text = (
            f"NVRM: Xid (PCI:{bus}): {code}, pid=48213, name=python3, "
            f"{XID_TEXT.get(code, 'see the Xid catalogue')}"
        )
        last_s = first_s + every_s * (count - 1)
        log["events"] = list(log.get("events") or []) + [
            [f"[{first_s:12.6f}] {text}", f"[{last_s:12.6f}] {text}", count]
        ]

    edit.__doc__ = f"Xid {code} on GPU {gpu}" + (f", {count} times" if count > 1 else "")
    return edit


def fabric_state(state: int = 1) -> Edit:
    """GPU fabric not completed (1 not started, 2 in progress): the fabric manager is down."""

    def edit(cap):
        for i in range(gpu_count(cap)):
            set_nvml(
                cap,
                f"gpu{i}.fabric",
                {
                    "version": 0x02000024,
                    "clusterUuid": [0] * 16,
                    "status": 0,
                    "cliqueId": 0,
                    "state": state,
                    "healthMask": 0,
                },
            )

    edit.__doc__ = {1: "GPU fabric not started", 2: "GPU fabric in progress"}.get(
        state, f"fabric state {state}"
    )
    return edit


def ib_rate(port: int = 1, rate: str = "200 Gb/sec (4X HDR)") -> Edit:
    def edit(cap):
        _path(cap, "read", f"/sys/class/infiniband/mlx5_{port}/ports/1/rate", {"text": rate + "\n"})

    edit.__doc__ = f"mlx5_{port} at {rate}"
    return edit


def governor(name: str = "powersave") -> Edit:
    def edit(cap):
        for key in [k for k in cap.get("paths", {}) if k.endswith("/scaling_governor")]:
            cap["paths"][key] = {"text": name + "\n"}

    edit.__doc__ = f"CPU governor {name}"
    return edit


def hbm_temperature(celsius: int = 92, gpus=(4,)) -> Edit:
    """HBM near its maximum operating temperature (95 C on the H200)."""

    def edit(cap):
        for i in gpu_indexes(cap, gpus):
            fields = [dict(f) for f in cap["nvml"].get(f"gpu{i}.fields", {}).get("value") or []]
            fields = [f for f in fields if f.get("fieldId") != 82]
            fields.append(
                {
                    "fieldId": 82,
                    "scopeId": 0,
                    "valueType": 1,
                    "nvmlReturn": 0,
                    "value": {"uiVal": celsius},
                }
            )
            set_nvml(cap, f"gpu{i}.fields", fields)

    edit.__doc__ = f"HBM at {celsius} C on GPUs {list(gpus)}"
    return edit
