"""The speed tier's demo: derived records of the H200, in the states the tier is there to catch (`sweep demo --speed`).

Until the agent's own capture of the tier lands, every figure is derived from the record shape both
sides agreed on (/work/wt/SPEED_RECORD.md, schema 1.4) with the figures measured on the lent H200
(issue 25): HBM 4089 GB/s (cuMemcpyDtoD), PCIe 54 GB/s each way (gen5 x16), bf16 GEMM 776 TFLOP/s;
FP32 is skipped, as the agent says when it has no figure. Each derived record says so in its
`speed.reason`-free `note`. The fleet (`speed_fleet`), written as a run folder by `write_speed_run`:

    gpu01-gpu08   healthy twins of the reference
    gpu03         GPU 5's HBM at 70% of the reference (broken, named with its figure)
    gpu06         PCIe copies at half its gen5 x16 link's rate, both ways
    gpu09-gpu12   a class of its own (a 500 W power cap on every GPU) whose bf16 GEMM sits at ~80%
                  of the reference: comparable inside, but the top box says the class is slow
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Callable, Optional

H200 = {"hbm": 4.089e12, "pcie_h2d": 5.4e10, "pcie_d2h": 5.3e10, "bf16_gemm": 7.76e14}
METHODS = {"hbm": "cuMemcpyDtoD", "pcie_h2d": "cuMemcpyHtoD pinned", "pcie_d2h": "cuMemcpyDtoH pinned",
           "fp32": "ptx fma.rn.f32", "bf16_gemm": "torch.matmul bf16 8192^3"}
UNITS = {"hbm": "B/s", "pcie_h2d": "B/s", "pcie_d2h": "B/s", "fp32": "FLOP/s", "bf16_gemm": "FLOP/s"}
SIZES = {"hbm": 4 * 2**30, "pcie_h2d": 2**30, "pcie_d2h": 2**30, "fp32": 0, "bf16_gemm": 3 * 2 * 8192**2}
NOTE = ("speed section derived from the contract (SPEED_RECORD.md) with the lent H200's figures (issue 25); "
        "not measured on this host")


def figure(name: str, value: float, spread: float = 0.004) -> dict:
    """A measured figure as the agent writes it (the best of 7 repetitions)."""
    return {"value": value, "unit": UNITS[name], "method": METHODS[name], "bytes": SIZES[name] or 1,
            "repetitions": 7, "spread": spread, "samples": [value * (1 - spread * k / 6) for k in range(7)]}


def speed_of(health: dict, scale: Optional[dict] = None, per_gpu: Optional[Callable] = None,
             power_w: float = 700.0) -> dict:
    """A `speed` section for every GPU of `health`: the H200's figures times `scale[figure]`, and
    `per_gpu(index, name)` -> a further factor (1.0 for most); the envelope at `power_w`."""
    scale = scale or {}
    gpus, summary = [], []
    for g in health.get("gpus") or ():
        i = g["index"]
        figures = {name: figure(name, value * scale.get(name, 1.0) * (per_gpu(i, name) if per_gpu else 1.0))
                   for name, value in H200.items()}
        figures["fp32"] = {"skipped": "derived record: no FP32 figure of the lent H200 to derive from"}
        gpus.append({"index": i, "uuid": g.get("uuid"), "figures": figures})
        capped = power_w < 700.0
        summary.append({"gpu": i, "samples": 40, "sm_mhz_median": 1650 if capped else 1980,
                        "power_w_median": power_w - 3, "enforced_limit_w": power_w,
                        "sw_power_cap_fraction": 0.9 if capped else 0.0, "hw_slowdown_fraction": 0.0})
    pairs = [{"src": a["index"], "dst": b["index"], **dict(figure("hbm", 3.9e11), method="cuMemcpyPeer")}
             for a in gpus for b in gpus if a is not b]
    allreduce = (dict(figure("hbm", 3.6e11), method="torch.distributed all_reduce nccl busbw",
                      gpus=[g["index"] for g in gpus]) if len(gpus) > 1 else {"skipped": "one GPU selected"})
    return {"status": "measured", "reason": None, "forced": False, "wall_s": 9.7, "bound_s": 20.0,
            "parallel": ["hbm", "fp32"], "gpus": gpus, "p2p": pairs, "allreduce": allreduce,
            "samples": {"interval_s": 0.2, "summary": summary}, "note": NOTE}


def with_speed(health: dict, **kwargs) -> dict:
    """A copy of `health` (schema 1.4) carrying a derived speed section."""
    out = copy.deepcopy(health)
    out["schema_version"] = "1.4"
    out["speed"] = speed_of(out, **kwargs)
    return out


def _board_power(watts: float) -> Callable:
    """A SKU whose board power (default and enforced limit) is `watts`: its own class, no broken contract."""
    from sweep.demo import synth

    cap = synth.power_cap(watts)

    def edit(capture):
        cap(capture)
        for i in range(synth.gpu_count(capture)):
            capture["nvml"][f"gpu{i}.default_power_limit"] = {"value": int(watts * 1000)}
    return edit


def probe(edits: list, workdir: Path, hostname: str) -> dict:
    """health.json of the agent replaying the idle H200 capture made eight-GPU and edited by `edits`
    (in this process: no interpreter start)."""
    import contextlib
    import io

    from probe_agent.main import main as agent_main
    from sweep.demo import synth
    cap = synth.derive(synth.base_capture("h200-idle"), [synth.multi_gpu(8, lambda i, j: "NV18"), synth.hgx_platform(),
                                                         synth.identity(hostname), *edits], hostname=hostname)
    path, out = workdir / f"{hostname}.capture.json", workdir / hostname
    synth.write(cap, path)
    with contextlib.redirect_stdout(io.StringIO()):
        agent_main(["--replay", str(path), "--out", str(out)])
    return json.loads((out / "health.json").read_text())


HALF_LINK = 63.0e9 / 2  # half a gen5 x16 link's raw rate


def speed_fleet(workdir: Path) -> dict:
    """host -> health.json of the speed demo fleet (see the module docstring)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    idle = probe([], workdir, "gpu01")
    capped = probe([_board_power(500.0)], workdir, "gpu09")
    out = {}
    for n in range(1, 13):
        host = f"gpu{n:02d}"
        if n == 3:
            out[host] = with_speed(idle, per_gpu=lambda i, name: 0.70 if (i, name) == (5, "hbm") else 1.0)
        elif n == 6:
            out[host] = with_speed(idle, scale={"pcie_h2d": HALF_LINK / H200["pcie_h2d"],
                                                "pcie_d2h": HALF_LINK / H200["pcie_d2h"]})
        elif n >= 9:
            out[host] = with_speed(capped, scale={"bf16_gemm": 0.80}, power_w=500.0)
        else:
            out[host] = with_speed(idle)
        out[host]["host"] = dict(out[host].get("host") or {}, hostname=host)
    return out


def write_speed_run(folder: Path, healths: dict, started: str = "2026-12-01T06:00:00Z") -> Path:
    """A run folder (manifest + hosts/*.json) of `healths`, as `sweep run` writes one."""
    from sweep.store import MANIFEST, RECORD_VERSION, RUN_FORMAT

    folder = Path(folder)
    (folder / "hosts").mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).write_text(json.dumps({"format": RUN_FORMAT, "record_version": RECORD_VERSION,
                                               "started_at": started, "state": "complete", "hosts": sorted(healths)}))
    for host, health in healths.items():
        record = {"record_version": RECORD_VERSION, "host": host, "address": "127.0.0.1", "status": "ok",
                  "failure": None, "attempts": 1, "duration_s": 10.0, "groups": ["speed"], "health": health}
        (folder / "hosts" / f"{host}.json").write_text(json.dumps(record, indent=1))
    return folder


def off_design(summary: dict) -> list[str]:
    """What the speed demo's report (summary.json) judged otherwise than the fleet was built for."""
    speed = summary.get("speed") or {}
    odd = []
    broken = {(j["host"], j["gpu"], j["figure"]) for j in speed.get("judgments", ()) if j["severity"] == "broken"}
    if ("gpu03", 5, "hbm") not in broken:
        odd.append("gpu03: built with GPU 5's HBM at 70% of the reference, not judged broken")
    if not all(("gpu06", i, f) in broken for i in range(8) for f in ("pcie_h2d", "pcie_d2h")):
        odd.append("gpu06: built with PCIe at half its link's rate, not judged broken on every GPU")
    if not any(p["figure"] == "bf16_gemm" and p["hosts"] == 4 for p in speed.get("slow_pools", ())):
        odd.append("gpu[09-12]: built as a 500 W class with bf16 GEMM at 80%, not said to be slow")
    others = {h for h, *_ in broken} - {"gpu03", "gpu06"}
    odd += [f"{h}: built healthy, judged broken" for h in sorted(others)]
    return odd
