"""The built-in demo fleet: 44 eight-GPU H200 hosts in the states real fleets drift into.

Every host replays a capture derived (sweep.demo.synth) from the real H200 recording in
sweep/demo/h200-idle.json, with the samples of the real load recording (h200-load.json) for
``sweep run --load`` (made to agree with the host's own power limit and HW slowdown). `sweep demo`,
the README's first command, sweeps it over real loopback sshd servers; the tests use the same fleet.
"""

from __future__ import annotations

from pathlib import Path

from sweep.demo import hgx, synth
from sweep.demo.loopback import FleetHost

OLD_DRIVER = ("580.95.05", 13000)


def _all_nv(i: int, j: int) -> str:
    return "NV18"


# host number -> (edits, why) ; hosts not listed are healthy twins of the reference.
def _variants() -> dict[int, tuple[list, str]]:
    return {
        5: ([synth.ecc(False)], "ECC off"),
        6: ([synth.ecc(False)], "ECC off"),
        7: ([synth.ecc(False)], "ECC off"),
        11: ([synth.power_cap(250)], "250 W power cap"),
        12: ([synth.power_cap(250)], "250 W power cap"),
        13: ([synth.power_cap(250, gpus=[3])], "250 W cap on one card"),
        17: ([synth.mig(["3g.71gb", "3g.71gb"], gpus=range(8))], "MIG 2x3g.71gb"),
        18: ([synth.mig(["1g.18gb"] * 7, gpus=range(8))], "MIG 7x1g.18gb"),
        21: (
            [
                synth.foreign_process(
                    pid=48213, name="python3 orphan_eval.py", mib=11264, gpus=[2]
                ),
                hgx.xid(31, gpu=2, count=240, first_s=9050.25, every_s=30.0),
            ],
            "foreign process holding 11 GiB, whose page faults logged Xid 31 240 times",
        ),
        25: ([synth.thermal_slowdown(gpus=[6])], "HW thermal slowdown"),
        # the probe's environment, not the host's (issue 49): swept over SSH, both are judged on
        # what NVML read and end in the pool, named with their fix and how to probe a job's
        # environment; never drained
        29: ([synth.env("CUDA_VISIBLE_DEVICES", "")], "empty device mask in the SSH session"),
        33: ([synth.torch_build("2.5.1+cpu", None)], "CPU-only torch in the login python3"),
        37: ([synth.driver(*OLD_DRIVER)], "driver 580.95.05"),
        38: ([synth.driver(*OLD_DRIVER)], "driver 580.95.05"),
        39: ([synth.driver(*OLD_DRIVER)], "driver 580.95.05"),
        40: ([synth.driver(*OLD_DRIVER)], "driver 580.95.05"),
        # issue 15: the failures fleet health checkers catch
        3: ([hgx.gpu_off_nvml(gpu=7)], "GPU on the bus missing from NVML"),
        9: ([hgx.pcie_width(8, gpus=[3])], "PCIe x8 on GPU 3"),
        15: ([hgx.nvlink_down(gpu=5, link=3)], "NVLink down on GPU 5"),
        19: ([hgx.xid(79, gpu=2, first_s=20417.75)], "Xid 79"),
        23: (
            [
                hgx.xid(48, gpu=1, count=2, first_s=3600.5, every_s=4.0),
                hgx.xid(95, gpu=1, count=1870, first_s=3604.5, every_s=2.0),
            ],
            "Xid 48, then Xid 95 1870 times",
        ),
        27: ([hgx.fabric_state(1)], "GPU fabric not started"),
        31: ([hgx.ib_rate(port=1, rate="200 Gb/sec (4X HDR)")], "IB port at 200 Gb/s"),
        35: ([hgx.governor("powersave")], "CPU governor powersave"),
        36: ([hgx.hbm_temperature(92, gpus=[4])], "HBM near slowdown"),
    }


def demo_fleet(
    workdir: str | Path, count: int = 40, unreachable: bool = True, base: str = "h200-idle"
) -> list[FleetHost]:
    """Write one capture per host into `workdir` and return the fleet's hosts.

    Hosts gpu01..gpu{count} replay captures (two racks); with `unreachable`, gpu41 is down
    (refused), gpu42 never sends a banner (timeout) and gpu43's host key changed.
    """
    workdir = Path(workdir)
    base = synth.base_capture(base)
    # a capture without samples of its own gets the load recording's, so that --load replays a load
    load, agree = (
        ([synth.replayed_load(8)], [synth.samples_as_probed()])
        if not base.get("samples")
        else ([], [])
    )
    variants = _variants()
    hosts = []
    half = count // 2
    for n in range(1, count + 1):
        name = f"gpu{n:02d}"
        edits, _ = variants.get(n, ([], "healthy"))
        cap = synth.derive(
            base,
            [
                synth.multi_gpu(8, _all_nv),
                hgx.hgx_platform(),
                *load,
                synth.identity(name),
                *edits,
                *agree,
            ],
            hostname=name,
        )
        path = synth.write(cap, workdir / f"{name}.json")
        hosts.append(FleetHost(name, group="rack_a" if n <= half else "rack_b", capture=str(path)))
    if unreachable:
        hosts += [
            FleetHost(f"gpu{count + 1:02d}", "dead", group="rack_b"),
            FleetHost(f"gpu{count + 2:02d}", "blackhole", group="rack_b"),
            FleetHost(f"gpu{count + 3:02d}", "changed_key", group="rack_b"),
        ]
    return hosts


# What each kind of demo host is built to end as: None (a health.json) or its failure class.
DESIGNED = {
    "healthy": None,
    "dead": "refused",
    "blackhole": "timeout",
    "changed_key": "host_key_changed",
}


def off_design(hosts: list[FleetHost], result) -> list[str]:
    """The hosts of a demo sweep (`result`, a RunResult) that did not end as their kind is built to:
    '<host>: expected ..., got ...'. Empty when the demo ran as designed."""
    failed = {host: (cls, message) for host, cls, message in result.failures}
    odd = []
    for host in hosts:
        want = DESIGNED.get(host.kind)
        got = failed.get(host.name, (None, ""))
        if got[0] != want:
            odd.append(
                f"{host.name}: built to end {want or 'with a health.json'}, ended "
                f"{got[0] or 'with a health.json'}" + (f" ({got[1]})" if got[1] else "")
            )
    return odd
