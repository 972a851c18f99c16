"""Host facts read from /sys and /proc through the Source: the GPUs on the PCI bus, their bridges'
ACS, InfiniBand / RoCE ports, and the settings that change benchmarks (CPU governor, NUMA
balancing, transparent huge pages, IOMMU and pci= kernel arguments, modules).

Every read is one `src.fs(op, path)`: recorded by --record, answered by --replay, and read under
a root folder that tests fill with fake trees. A read that fails is kept as its error name in an
`unreadable` map: "not readable" is an answer.
"""

import re

PCI_DEVICES = "/sys/bus/pci/devices"
NVIDIA_VENDOR = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")  # VGA and 3D controllers; NVSwitches are bridges (0x0680)
BDF = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
LINK_FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
ACS_CAP_ID = 0x000D
ACS_BITS = (
    (0x1, "source_validation"),
    (0x2, "translation_blocking"),
    (0x4, "p2p_request_redirect"),
    (0x8, "p2p_completion_redirect"),
    (0x10, "upstream_forwarding"),
    (0x20, "p2p_egress_control"),
    (0x40, "direct_translated_p2p"),
)
KERNEL_ARGS = re.compile(
    r"^(iommu|intel_iommu|amd_iommu|iommu\.passthrough|iommu\.strict|pci|pcie_acs_override)="
)
MODULES = (
    "nvidia",
    "nvidia_uvm",
    "nvidia_peermem",
    "nv_peer_mem",
    "nouveau",
    "ib_core",
    "mlx5_core",
)
IB = "/sys/class/infiniband"


def text(answer):
    """The stripped text of a path answer, or None when it was not readable."""
    return answer["text"].strip() if "text" in answer else None


def norm_bus_id(bus_id):
    """'00000000:18:00.0' and '0000:18:00.0' -> '0000:18:00.0' (lower case, 4-digit domain)."""
    if not bus_id:
        return None
    m = re.match(r"^([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.?([0-7])?$", bus_id.strip())
    if not m:
        return bus_id.lower()
    return "%04x:%s:%s.%s" % (
        int(m.group(1), 16),
        m.group(2).lower(),
        m.group(3).lower(),
        m.group(4) or "0",
    )


def upstream(link_target):
    """The PCI addresses in a device's sysfs path, root port first, the device itself last."""
    return [c for c in (link_target or "").split("/") if BDF.match(c)]


def read_pci_gpus(src):
    """NVIDIA display / 3D controllers on the PCI bus, with their driver, link and bridges."""
    listing = src.fs("list", PCI_DEVICES)
    if "error" in listing:
        return {"readable": False, "error": listing["error"], "gpus": []}
    gpus = []
    for bdf in listing["list"]:
        base = "%s/%s" % (PCI_DEVICES, bdf)
        if text(src.fs("read", base + "/vendor")) != NVIDIA_VENDOR:
            continue
        cls = text(src.fs("read", base + "/class")) or ""
        if cls[:6] not in GPU_CLASSES:
            continue
        driver = src.fs("link", base + "/driver")
        path = src.fs("link", base)
        link = {}
        for name in LINK_FILES:
            link[name] = text(src.fs("read", "%s/%s" % (base, name)))
        gpus.append(
            {
                "bus_id": norm_bus_id(bdf),
                "device_id": text(src.fs("read", base + "/device")),
                "class": cls,
                "driver": driver["link"].rsplit("/", 1)[-1] if "link" in driver else None,
                "numa_node": to_int(text(src.fs("read", base + "/numa_node"))),
                "sysfs_link": link,
                "bridges": upstream(path.get("link"))[:-1],
            }
        )
    visible = src.fs("list", "/proc/driver/nvidia/gpus")
    return {
        "readable": True,
        "error": None,
        "gpus": gpus,
        "driver_gpus": [norm_bus_id(b) for b in visible["list"]] if "list" in visible else None,
        "driver_gpus_error": visible.get("error"),
    }


def gpu_functions(pci):
    """The bus's NVIDIA GPU functions as [{"address", "device", "class"}], or None when the bus
    could not be read."""
    if not pci.get("readable"):
        return None
    return [
        {"address": g["bus_id"], "device": g.get("device_id"), "class": g.get("class")}
        for g in pci["gpus"]
    ]


def to_int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def read_acs(src, bridges):
    """ACS control of each bridge (PCIe extended capability 0x000D); reading it needs root."""
    out = []
    for bdf in bridges:
        answer = src.fs("bytes", "%s/%s/config" % (PCI_DEVICES, bdf), 4096)
        row = {
            "bridge": norm_bus_id(bdf),
            "control": None,
            "enabled": None,
            "error": answer.get("error"),
        }
        if "hex" in answer:
            control = acs_control(bytes.fromhex(answer["hex"]))
            if control == "short":
                row["error"] = "config space beyond 64 bytes not readable (needs root)"
            elif control is not None:
                row["control"] = control
                row["enabled"] = [name for bit, name in ACS_BITS if control & bit]
        out.append(row)
    return out


def acs_control(config):
    """The ACS control register from a config-space dump; None without ACS,
    'short' when truncated."""
    if len(config) <= 256:
        return "short"
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(config) - 8 and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(config[offset : offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == ACS_CAP_ID:
            return int.from_bytes(config[offset + 6 : offset + 8], "little")
        offset = (header >> 20) & 0xFFC
    return None


def read_ib_ports(src):
    """Every InfiniBand / RoCE port: state, physical state, rate, link layer, and the
    NIC's PCI address."""
    devices = src.fs("list", IB)
    if "error" in devices:
        return None, devices["error"]
    ports = []
    for dev in devices["list"]:
        base = "%s/%s" % (IB, dev)
        pci = upstream(src.fs("link", base + "/device").get("link"))
        numa = to_int(text(src.fs("read", base + "/device/numa_node"))) if pci else None
        plist = src.fs("list", base + "/ports")
        firmware = text(src.fs("read", base + "/fw_ver"))
        for port in plist.get("list", []):
            pb = "%s/ports/%s" % (base, port)
            rate = text(src.fs("read", pb + "/rate"))
            m = re.match(r"^([0-9.]+) Gb/sec", rate or "")
            ports.append(
                {
                    "device": dev,
                    "port": to_int(port),
                    "pci_bus_id": norm_bus_id(pci[-1]) if pci else None,
                    "bridges": pci[:-1],
                    "numa_node": numa,
                    "state": strip_code(text(src.fs("read", pb + "/state"))),
                    "phys_state": strip_code(text(src.fs("read", pb + "/phys_state"))),
                    "rate": rate,
                    "rate_gbps": float(m.group(1)) if m else None,
                    "link_layer": text(src.fs("read", pb + "/link_layer")),
                    "fw_ver": firmware,
                }
            )
    return ports, None


DMI_BIOS = "/sys/class/dmi/id/bios_version"
FABRIC_MANAGER_VERSION = re.compile(r"version\D*?([0-9][0-9A-Za-z.-]*)", re.I)


def read_firmware(src, gpus):
    """The platform's firmware versions: the system BIOS (DMI) and, where the GPUs have a fabric
    (NVSwitch systems), the fabric manager's (`nv-fabricmanager --version`). `unreadable` names
    each one that could not be read."""
    unreadable = {}
    bios = src.fs("read", DMI_BIOS)
    if "error" in bios:
        unreadable["bios_version"] = bios["error"]
    manager = None
    if any((g.get("fabric") or {}).get("state") not in (None, "not_supported") for g in gpus):
        answer = src.command(["nv-fabricmanager", "--version"], timeout=5.0)
        m = (
            FABRIC_MANAGER_VERSION.search(answer.get("stdout") or "")
            if answer.get("rc") == 0
            else None
        )
        manager = m.group(1) if m else None
        if manager is None:
            unreadable["fabric_manager_version"] = "exit %s: %s" % (
                answer.get("rc"),
                first_text(answer),
            )
    return {
        "bios_version": text(bios) or None,
        "fabric_manager_version": manager,
        "unreadable": unreadable,
    }


def first_text(answer):
    lines = ((answer.get("stderr") or "") + (answer.get("stdout") or "")).strip().splitlines()
    return lines[0][:200] if lines else "no output"


def strip_code(value):
    """'4: ACTIVE' -> 'ACTIVE', '5: LinkUp' -> 'LinkUp'."""
    return value.split(":", 1)[1].strip() if value and ":" in value else value


# the reason written where sysfs lists no cpufreq policy: a reading (a VM, or scaling left to the
# firmware), not a failure
NO_CPUFREQ_POLICY = "no cpufreq policy (no frequency scaling exposed)"


def read_governors(src):
    policies = src.fs("list", "/sys/devices/system/cpu/cpufreq")
    if "error" in policies:
        return None, policies["error"]
    counts = {}
    for pol in policies["list"]:
        if not pol.startswith("policy"):
            continue
        gov = text(src.fs("read", "/sys/devices/system/cpu/cpufreq/%s/scaling_governor" % pol))
        counts[gov or "unreadable"] = counts.get(gov or "unreadable", 0) + 1
    if not counts:
        return None, NO_CPUFREQ_POLICY
    return counts, None


def read_host_settings(src, pci_gpus):
    """The host settings that change benchmarks; `unreadable` names each one that
    could not be read."""
    unreadable = {}

    def read(name, path):
        answer = src.fs("read", path)
        if "error" in answer:
            unreadable[name] = answer["error"]
            return None
        return answer["text"].strip()

    governors, err = read_governors(src)
    if err:
        unreadable["cpu_governor"] = err
    thp = read("transparent_hugepages", "/sys/kernel/mm/transparent_hugepage/enabled")
    m = re.search(r"\[(\w+)\]", thp or "")
    cmdline = read("kernel_args", "/proc/cmdline")
    modules = read("modules", "/proc/modules")
    loaded = (
        None
        if modules is None
        else {line.split()[0] for line in modules.splitlines() if line.strip()}
    )
    ports, err = read_ib_ports(src)
    if err and err != "FileNotFoundError":
        unreadable["ib_ports"] = err
    # switch ports below the root port
    bridges = sorted({b for g in pci_gpus for b in g.get("bridges", [])[1:]})
    return {
        "cpu_governor": governors,
        "numa_balancing": to_int(read("numa_balancing", "/proc/sys/kernel/numa_balancing")),
        "transparent_hugepages": m.group(1) if m else thp,
        "kernel_args": None
        if cmdline is None
        else [a for a in cmdline.split() if KERNEL_ARGS.match(a)],
        "modules": None if loaded is None else {name: name in loaded for name in MODULES},
        "ib_ports": ports if ports is not None else ([] if err == "FileNotFoundError" else None),
        "acs": read_acs(src, bridges),
        "unreadable": unreadable,
    }


LINK_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")
OLD_NAMES = {"SOC": "SYS"}  # older drivers' topo -m wrote SOC where current ones write SYS


def nearest_nics(gpus, pci_gpus, ports, topo):
    """Each GPU's nearest NIC: from `nvidia-smi topo -m` where its row names NIC columns (under
    whatever name the driver gives them, NICn mapped through the legend), else from the PCI paths of
    the InfiniBand ports. The first of equally near NICs, in the matrix's column order."""
    out = {}
    topo_nics = (topo or {}).get("nics") or {}
    legend = (topo or {}).get("nic_legend") or {}
    nics = {}
    for p in ports or []:
        nics.setdefault(p["device"], p)
    by_bus = {g["bus_id"]: g for g in pci_gpus}
    for nv in gpus:
        gpu_index, gpu = str(nv.get("index")), norm_bus_id(nv.get("pci_bus_id"))
        row = topo_nics.get(gpu_index)
        if row:
            name, level = min(row.items(), key=lambda kv: rank(kv[1]))
            out[gpu_index] = {
                "nic": legend.get(name, name),
                "link": level,
                "source": "nvidia-smi topo -m",
            }
            continue
        g = by_bus.get(gpu)
        if g is None or not nics:
            continue
        best = None
        for dev, port in nics.items():
            level = pci_distance(g, port)
            if best is None or rank(level) < rank(best[1]):
                best = (dev, level)
        if best:
            out[gpu_index] = {"nic": best[0], "link": best[1], "source": "sysfs"}
    return out


def rank(level):
    level = OLD_NAMES.get(level, level)
    return LINK_ORDER.index(level) if level in LINK_ORDER else len(LINK_ORDER)


def pci_distance(gpu, port):
    """topo -m's vocabulary from two sysfs paths: shared bridge PIX, shared switch
    PXB, shared root PHB."""
    gb = [b for b in gpu.get("bridges", [])]
    nb = port.get("bridges") or []
    if not gb or not nb:
        return "SYS" if gpu.get("numa_node") != port.get("numa_node") else "NODE"
    if gb[-1] == nb[-1]:
        return "PIX"
    if set(gb[1:]) & set(nb[1:]):
        return "PXB"
    if gb[0] == nb[0]:
        return "PHB"
    return (
        "NODE"
        if gpu.get("numa_node") is not None and gpu.get("numa_node") == port.get("numa_node")
        else "SYS"
    )
