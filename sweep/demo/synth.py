"""Derived captures: the real H200 recordings, changed the way real fleets drift.

The demo fleet and the tests need hosts in states one GPU cannot show at once (another driver,
ECC off, a lowered power cap, MIG layouts, eight GPUs). Each variant starts from a real capture
and edits only the raw answers that state changes, so the agent reads it through the same code
as the live driver. Every derived capture says in its `note` what was changed.

The edits of the GPUs' own state are here; the platform around them (PCI bus, links, fabric,
InfiniBand, host settings, the kernel log's Xid events) in `sweep.demo.hgx`.
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


def set_nvml(cap: Capture, key: str, value) -> None:
    """Set the NVML answer `key` ('driver', 'gpu3.temp') of `cap` to `value`."""
    cap["nvml"][key] = {"value": value}


def gpu_indexes(cap: Capture, gpus) -> list[int]:
    """The GPUs an edit changes: `gpus`, or every GPU of `cap` when None."""
    return list(range(gpu_count(cap))) if gpus is None else list(gpus)


def driver(version: str, cuda: int = 13000) -> Edit:
    """Another driver version (and its CUDA driver API version, 12080 = 12.8)."""

    def edit(cap):
        old = cap["nvml"]["driver"]["value"]
        set_nvml(cap, "driver", version)
        set_nvml(cap, "nvml_version", f"{cuda // 1000}.{version}")
        set_nvml(cap, "cuda_driver_version", cuda)
        f = cap["files"].get("/proc/driver/nvidia/version") or ""
        cap["files"]["/proc/driver/nvidia/version"] = f.replace(old, version)

    edit.__doc__ = f"driver {version}"
    return edit


def ecc(current: bool, pending: bool | None = None, gpus=None) -> Edit:
    def edit(cap):
        for i in gpu_indexes(cap, gpus):
            set_nvml(
                cap,
                f"gpu{i}.ecc_mode",
                [int(current), int(current if pending is None else pending)],
            )
            if not current:  # ECC off exposes the memory ECC reserved
                mem = dict(cap["nvml"][f"gpu{i}.mem"]["value"])
                mem["total"] = int(mem["total"] * 1.0625)
                mem["free"] = mem["total"] - mem["used"]
                set_nvml(cap, f"gpu{i}.mem", mem)

    edit.__doc__ = f"ECC {'on' if current else 'off'}" + (
        f", pending {pending}" if pending is not None else ""
    )
    return edit


def power_cap(watts: float, gpus=None) -> Edit:
    def edit(cap):
        for i in gpu_indexes(cap, gpus):
            set_nvml(cap, f"gpu{i}.enforced_power_limit", int(watts * 1000))
            set_nvml(cap, f"gpu{i}.power_limit", int(watts * 1000))

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
        for i in gpu_indexes(cap, gpus):
            set_nvml(cap, f"gpu{i}.mig_mode", [1, 1])
            set_nvml(cap, f"gpu{i}.max_mig", 7)
            gpu_uuid = cap["nvml"][f"gpu{i}.uuid"]["value"]
            for k, profile in enumerate(layout):
                p = f"gpu{i}.mig{k}."
                set_nvml(cap, p + "exists", None)
                set_nvml(cap, p + "name", f"NVIDIA H200 MIG {profile}")
                set_nvml(
                    cap,
                    p + "uuid",
                    "MIG-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_OID, f"{gpu_uuid}/{k}/{profile}")),
                )
                set_nvml(cap, p + "gi", k + 1)
                set_nvml(cap, p + "ci", 0)
                set_nvml(
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
        for i in gpu_indexes(cap, gpus):
            procs = list(cap["nvml"].get(f"gpu{i}.procs", {}).get("value") or [])
            procs.append({"pid": pid, "name": name, "usedGpuMemory": mib * 1048576})
            set_nvml(cap, f"gpu{i}.procs", procs)

    edit.__doc__ = f"foreign process {name} ({mib} MiB)"
    return edit


def thermal_slowdown(gpus=(0,), sm_mhz: int = 1035, temp_c: int = 91) -> Edit:
    def edit(cap):
        for i in gpu_indexes(cap, gpus):
            set_nvml(cap, f"gpu{i}.throttle_reasons", 0x40 | 0x8)
            set_nvml(cap, f"gpu{i}.temp", temp_c)
            set_nvml(cap, f"gpu{i}.clock_sm", sm_mhz)

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
            set_nvml(cap, f"gpu{i}.uuid", f"GPU-{u}")
            set_nvml(cap, f"gpu{i}.serial", str(1650000000000 + (u.int % 10**9)))

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
        set_nvml(cap, "count", n)
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
