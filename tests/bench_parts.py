"""The benchmark fleet of the `sweep run --wrap` integration tests (test_fleet_bench and
test_wrap_leftovers): eight-GPU H200s replaying the real load recording's samples."""
from __future__ import annotations

from pathlib import Path

from sweep.demo import synth
from sweep.demo.fleet import OLD_DRIVER
from sweep.demo.loopback import FleetHost


def slowdown_in_run(gpus=(0,), sm_mhz: int = 1035, reason: str = "hw_thermal_slowdown",
                    start: int = 3) -> synth.Edit:
    """From sample `start` on, a HW slowdown under load (the probe before the run sees none)."""
    def edit(cap):
        for s in cap["samples"][start:]:
            for g in s["gpus"]:
                if g["index"] in gpus:
                    g["sm_mhz"] = sm_mhz
                    g["active_reasons"] = sorted(set(g["active_reasons"]) | {reason})
    edit.__doc__ = f"{reason} at {sm_mhz} MHz on GPUs {list(gpus)} from sample {start} of the run"
    return edit


def process_in_run(pid: int = 51234, name: str = "python3 eval_sweep.py", mib: int = 9216,
                   gpus=(0,), start: int = 5) -> synth.Edit:
    """From sample `start` on, another process on the GPUs (the probe before the run saw none)."""
    def edit(cap):
        for s in cap["samples"][start:]:
            for g in s["gpus"]:
                if g["index"] in gpus:
                    g["processes"] = [{"pid": pid, "name": name,
                                       "used_memory_bytes": mib * 1048576}]
    edit.__doc__ = (f"process {name} (pid {pid}) appears on GPUs {list(gpus)} at sample {start} "
                    "of the run")
    return edit


def _bench_variants() -> dict[int, tuple[list, str]]:
    """host number -> (edits, why) of the benchmark fleet; the others are healthy twins."""
    return {
        4: ([slowdown_in_run(gpus=(5,))], "HW thermal slowdown on GPU 5 during the run"),
        6: ([process_in_run(gpus=(2,))], "another process appears on GPU 2 during the run"),
        9: ([synth.driver(*OLD_DRIVER)], "driver 580.95.05"),
        10: ([synth.driver(*OLD_DRIVER)], "driver 580.95.05"),
        11: ([synth.driver(*OLD_DRIVER)], "driver 580.95.05"),
        12: ([synth.power_cap(500)], "500 W power cap (a broken contract: refused)"),
        13: ([synth.foreign_process(pid=48213, name="python3 orphan_eval.py", mib=11264, gpus=[1])],
             "a process on GPU 1 before the run (refused)"),
    }


def bench_fleet(workdir: str | Path, count: int = 13) -> list[FleetHost]:
    """Hosts for `sweep run --wrap`: eight-GPU H200s (every pair NV18) replaying the real load
    recording's samples.

    gpu01..gpu08 form the reference class; gpu04 slows down (HW thermal) and gpu06 gets another
    process during the run; gpu09..gpu11 run an older driver (another class); gpu12 (power cap
    below default) and gpu13 (a process before the run) are refused.
    """
    workdir = Path(workdir)
    base = synth.base_capture("h200-load")
    variants = _bench_variants()
    hosts = []
    for n in range(1, count + 1):
        name = f"gpu{n:02d}"
        edits, _ = variants.get(n, ([], "healthy"))
        cap = synth.derive(base, [synth.multi_gpu(8, lambda i, j: "NV18"), synth.load_samples(8),
                                  synth.identity(name), *edits], hostname=name)
        capture = synth.write(cap, workdir / f"{name}.json")
        hosts.append(FleetHost(name, group="bench", capture=str(capture)))
    return hosts
