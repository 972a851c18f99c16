"""Derived captures: the real H200 recordings, changed the way real fleets drift.

The demo fleet and the tests need hosts in states one GPU cannot show at once (another driver,
ECC off, a lowered power cap, MIG layouts, eight GPUs). Each variant starts from a real capture
and edits only the raw answers that state changes, so the agent reads it through the same code
as the live driver. Every derived capture says in its `note` what was changed.
"""

from __future__ import annotations

import copy
import json
import uuid as uuidlib
from importlib import resources
from pathlib import Path
from typing import Callable

Capture = dict
Edit = Callable[[Capture], None]


def base_capture(name: str = "h200-idle") -> Capture:
    """A capture shipped in sweep/demo/captures/ (real H200 recordings and their conversions)."""
    path = resources.files("sweep.demo") / "captures" / f"{name}.json"
    return json.loads(path.read_text())


def gpu_count(cap: Capture) -> int:
    return cap["nvml"]["count"]["value"]


def _set(cap: Capture, key: str, value) -> None:
    cap["nvml"][key] = {"value": value}


def _gpus(cap: Capture, gpus) -> list[int]:
    return list(range(gpu_count(cap))) if gpus is None else list(gpus)


def driver(version: str, cuda: int = 13000) -> Edit:
    """Another driver version (and its CUDA driver API version, 12080 = 12.8)."""

    def edit(cap):
        old = cap["nvml"]["driver"]["value"]
        _set(cap, "driver", version)
        _set(cap, "nvml_version", f"{cuda // 1000}.{version}")
        _set(cap, "cuda_driver_version", cuda)
        f = cap["files"].get("/proc/driver/nvidia/version") or ""
        cap["files"]["/proc/driver/nvidia/version"] = f.replace(old, version)

    edit.__doc__ = f"driver {version}"
    return edit


def ecc(current: bool, pending: bool | None = None, gpus=None) -> Edit:
    def edit(cap):
        for i in _gpus(cap, gpus):
            _set(
                cap,
                f"gpu{i}.ecc_mode",
                [int(current), int(current if pending is None else pending)],
            )
            if not current:  # ECC off exposes the memory ECC reserved
                mem = dict(cap["nvml"][f"gpu{i}.mem"]["value"])
                mem["total"] = int(mem["total"] * 1.0625)
                mem["free"] = mem["total"] - mem["used"]
                _set(cap, f"gpu{i}.mem", mem)

    edit.__doc__ = f"ECC {'on' if current else 'off'}" + (
        f", pending {pending}" if pending is not None else ""
    )
    return edit


def power_cap(watts: float, gpus=None) -> Edit:
    def edit(cap):
        for i in _gpus(cap, gpus):
            _set(cap, f"gpu{i}.enforced_power_limit", int(watts * 1000))
            _set(cap, f"gpu{i}.power_limit", int(watts * 1000))

    edit.__doc__ = f"power cap {watts:g} W on GPUs {gpus if gpus is not None else 'all'}"
    return edit


MIG_PROFILES = {
    "1g.18gb": 18,
    "1g.35gb": 35,
    "2g.35gb": 35,
    "3g.71gb": 71,
    "4g.71gb": 71,
    "7g.141gb": 141,
}


def mig(layout: list[str], gpus=None) -> Edit:
    """MIG on, with one GPU instance (and compute instance) per profile in `layout`."""

    def edit(cap):
        for i in _gpus(cap, gpus):
            _set(cap, f"gpu{i}.mig_mode", [1, 1])
            _set(cap, f"gpu{i}.max_mig", 7)
            gpu_uuid = cap["nvml"][f"gpu{i}.uuid"]["value"]
            for k, profile in enumerate(layout):
                p = f"gpu{i}.mig{k}."
                _set(cap, p + "exists", None)
                _set(cap, p + "name", f"NVIDIA H200 MIG {profile}")
                _set(
                    cap,
                    p + "uuid",
                    "MIG-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_OID, f"{gpu_uuid}/{k}/{profile}")),
                )
                _set(cap, p + "gi", k + 1)
                _set(cap, p + "ci", 0)
                _set(
                    cap,
                    p + "mem",
                    {"total": MIG_PROFILES.get(profile, 18) * 10**9, "free": 0, "used": 0},
                )
            for k in range(len(layout), 7):
                cap["nvml"][f"gpu{i}.mig{k}.exists"] = {
                    "error": "NVMLError_NotFound",
                    "message": "Not Found",
                }

    edit.__doc__ = "MIG " + "+".join(layout)
    return edit


def foreign_process(
    pid: int = 48213, name: str = "python3 train.py", mib: int = 11264, gpus=(0,)
) -> Edit:
    def edit(cap):
        for i in _gpus(cap, gpus):
            procs = list(cap["nvml"].get(f"gpu{i}.procs", {}).get("value") or [])
            procs.append({"pid": pid, "name": name, "usedGpuMemory": mib * 1048576})
            _set(cap, f"gpu{i}.procs", procs)

    edit.__doc__ = f"foreign process {name} ({mib} MiB)"
    return edit


def thermal_slowdown(gpus=(0,), sm_mhz: int = 1035, temp_c: int = 91) -> Edit:
    def edit(cap):
        for i in _gpus(cap, gpus):
            _set(cap, f"gpu{i}.throttle_reasons", 0x40 | 0x8)
            _set(cap, f"gpu{i}.temp", temp_c)
            _set(cap, f"gpu{i}.clock_sm", sm_mhz)

    edit.__doc__ = "HW thermal slowdown"
    return edit


def env(name: str, value: str | None) -> Edit:
    def edit(cap):
        if value is None:
            cap["env"].pop(name, None)
        else:
            cap["env"][name] = value

    edit.__doc__ = f"{name}={value!r}"
    return edit


def torch_build(version: str, cuda: str | None) -> Edit:
    """The framework inspector's answer for every recorded interpreter and mode."""

    def edit(cap):
        for key, answer in cap["commands"].items():
            if key.startswith("framework "):
                data = json.loads(answer["stdout"])
                data["torch_version"], data["cuda_runtime"] = version, cuda
                if cuda is None:
                    data["cudnn"] = None
                    if data.get("mode") == "deep":
                        data.update(cuda_available=False, device_count=0, arch_list=[], devices=[])
                answer["stdout"] = json.dumps(data)

    edit.__doc__ = f"torch {version} (CUDA {cuda})"
    return edit


def hang(key: str) -> Edit:
    """A driver query that never answers (tests the agent's deadline)."""

    def edit(cap):
        cap["nvml"][key] = {"hang": True}

    edit.__doc__ = f"{key} hangs"
    return edit


def identity(serial_seed: str) -> Edit:
    """Give the host's GPUs their own UUIDs, serials and PCI ids (a fleet has no twins)."""

    def edit(cap):
        for i in range(gpu_count(cap)):
            u = uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f"{serial_seed}/{i}")
            _set(cap, f"gpu{i}.uuid", f"GPU-{u}")
            _set(cap, f"gpu{i}.serial", str(1650000000000 + (u.int % 10**9)))

    edit.__doc__ = None
    return edit


NV_LINKS = "NV18"


def multi_gpu(n: int, links: Callable[[int, int], str] | None = None) -> Edit:
    """Clone GPU 0 into n GPUs on their own PCI ids, with a `nvidia-smi topo -m` matrix."""
    links = links or (lambda i, j: NV_LINKS)

    def edit(cap):
        nv = cap["nvml"]
        gpu0 = {k[len("gpu0.") :]: v for k, v in nv.items() if k.startswith("gpu0.")}
        for i in range(1, n):
            for k, v in gpu0.items():
                nv[f"gpu{i}.{k}"] = copy.deepcopy(v)
            pci = dict(nv[f"gpu{i}.pci"]["value"])
            pci["busId"] = f"00000000:{0x18 + 0x10 * i:02X}:00.0"
            pci["bus"] = 0x18 + 0x10 * i
            nv[f"gpu{i}.pci"] = {"value": pci}
            nv[f"gpu{i}.uuid"] = {
                "value": "GPU-"
                + str(uuidlib.uuid5(uuidlib.NAMESPACE_OID, f"{nv['gpu0.uuid']['value']}/{i}"))
            }
            nv[f"gpu{i}.minor"] = {"value": i}
        pci0 = dict(nv["gpu0.pci"]["value"])
        pci0["busId"] = "00000000:08:00.0"
        nv["gpu0.pci"] = {"value": pci0}
        _set(cap, "count", n)
        cap["commands"]["nvidia-smi topo -m"] = {
            "rc": 0,
            "stdout": _topo_matrix(n, links),
            "stderr": "",
        }
        perf = cap["commands"].get("nvidia-smi -q -d PERFORMANCE", {}).get("stdout", "")
        if perf:
            head, _, block = perf.partition("GPU 00000000:00:06.0\n")
            blocks = "".join(
                f"GPU {nv[f'gpu{i}.pci']['value']['busId']}\n{block}" for i in range(n)
            )
            cap["commands"]["nvidia-smi -q -d PERFORMANCE"]["stdout"] = (
                head.replace(
                    "Attached GPUs                                          : 1",
                    f"Attached GPUs : {n}",
                )
                + blocks
            )

    edit.__doc__ = f"{n} GPUs"
    return edit


def _topo_matrix(n: int, links: Callable[[int, int], str]) -> str:
    """`nvidia-smi topo -m` for n GPUs, `links(i, j)` between GPUs i < j, half of them on each
    socket."""
    header = (
        "\t" + "\t".join(f"GPU{j}" for j in range(n)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    )
    rows = []
    for i in range(n):
        cells = ["X" if i == j else links(min(i, j), max(i, j)) for j in range(n)]
        half = "0-55,112-167" if i < n // 2 or n == 1 else "56-111,168-223"
        rows.append(
            f"GPU{i}\t " + "\t".join(cells) + f"\t{half}\t{0 if i < max(n // 2, 1) else 1}\t\tN/A"
        )
    legend = (
        "\n\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP "
        "interconnect\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
    )
    return header + "\n" + "\n".join(rows) + legend


def load_samples(n: int) -> Edit:
    """A load capture's samples on n GPUs, from the first sample the load computed (the recording's
    first seconds are its process starting on an idle GPU); the recording's own process is dropped
    from the process lists, so that a wrapped command replayed on it is alone on the GPUs."""

    def edit(cap):
        own = (cap.get("load") or {}).get("pid")
        for key, answer in cap["nvml"].items():
            if key.endswith(".procs") and isinstance(answer.get("value"), list):
                answer["value"] = [
                    p for p in answer["value"] if not (isinstance(p, dict) and p.get("pid") == own)
                ]
        samples = cap.get("samples") or []
        first = next(
            (k for k, s in enumerate(samples) if "idle" not in s["gpus"][0]["active_reasons"]), 0
        )
        cap["samples"] = [
            {"t": s["t"], "gpus": [dict(s["gpus"][0], index=i) for i in range(n)]}
            for s in samples[first:]
        ]

    edit.__doc__ = f"the load's samples on {n} GPUs"
    return edit


def replayed_load(n: int) -> Edit:
    """The real load recording's samples and load facts on n GPUs (`load_samples`), so that a host
    replaying this capture under ``sweep run --load S`` replays that load (the agent replays the
    samples a capture holds, whatever S is) instead of reporting no samples."""
    recording = base_capture("h200-load")

    def edit(cap):
        cap["load"] = dict(recording["load"])
        cap["samples"] = copy.deepcopy(recording["samples"])
        load_samples(n)(cap)
        cap["load"]["pid"] = None  # its process is not in this capture's process lists

    edit.__doc__ = f"the H200 load recording's samples on {n} GPUs, replayed under --load"
    return edit


def samples_as_probed() -> Edit:
    """Load samples that agree with the host's own NVML answers (run after the host's other edits):
    each GPU draws at most its enforced power limit, and a GPU the probe finds in a HW slowdown is
    in it, at its SM clock, in every sample."""
    from probe_agent.collect import decode_reasons

    def edit(cap):
        nvml = cap["nvml"]
        for s in cap.get("samples") or ():
            for g in s["gpus"]:
                i = g["index"]
                limit = (nvml.get(f"gpu{i}.enforced_power_limit") or {}).get("value")
                if isinstance(limit, (int, float)):
                    g["enforced_limit_w"] = limit / 1000.0
                    g["power_w"] = min(g["power_w"], limit / 1000.0)
                hw = [
                    r
                    for r in decode_reasons(
                        (nvml.get(f"gpu{i}.throttle_reasons") or {}).get("value") or 0
                    )
                    if r.startswith("hw_")
                ]
                if hw:
                    g["active_reasons"] = sorted(set(g["active_reasons"]) | set(hw))
                    g["sm_mhz"] = min(
                        g["sm_mhz"],
                        (nvml.get(f"gpu{i}.clock_sm") or {}).get("value") or g["sm_mhz"],
                    )

    edit.__doc__ = None  # a consequence of the other edits, not a change of its own
    return edit


def derive(base: Capture, edits: list[Edit], hostname: str | None = None) -> Capture:
    """A copy of `base` with `edits` applied, its note saying what changed."""
    cap = copy.deepcopy(base)
    for edit in edits:
        edit(cap)
    changes = [e.__doc__ for e in edits if e.__doc__]
    cap["note"] = (
        f"derived by sweep.demo.synth from: {base.get('note') or 'a recorded capture'}; changed: "
        + ("; ".join(changes) if changes else "nothing")
    )
    if hostname:
        cap["host"]["hostname"] = hostname
    return cap


def write(cap: Capture, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cap))
    return path


# ---------------------------------------------------------------- the platform around the GPUs
# (schema 1.2) Values as read live on the H200s of tests/fixtures/{h200,x2}/i15 (thresholds, P0
# range, fabric), and an HGX-like host around them: each GPU behind a PCIe switch it shares with a
# 400 Gb/s NDR port.


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
        _set(cap, p + key, value)
    _set(
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
    _set(
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
        _set(cap, f"{p}nvlink{k}_state", 1)


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
        _set(cap, "count", n - 1)

    edit.__doc__ = f"GPU {gpu} on the PCI bus but not listed by NVML"
    return edit


def pcie_width(width: int = 8, gpus=(3,)) -> Edit:
    def edit(cap):
        buses = _bus_ids(cap)
        for i in _gpus(cap, gpus):
            _set(cap, f"gpu{i}.pcie_width", width)
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
        _set(cap, f"gpu{gpu}.nvlink{link}_state", 0)
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
            _set(
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
        for i in _gpus(cap, gpus):
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
            _set(cap, f"gpu{i}.fields", fields)

    edit.__doc__ = f"HBM at {celsius} C on GPUs {list(gpus)}"
    return edit
