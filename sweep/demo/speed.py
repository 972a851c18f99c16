"""The speed tier's demo: H200 hosts replaying derived captures, in the states the
tier is there to catch.

Every host replays, through the agent with `--speed`, a capture derived (sweep.demo.synth) from the
real `--speed` recording of the lent H200 (`sweep/demo/captures/h200-speed.json`: HBM 4276 GB/s,
PCIe 55 GB/s each way on gen5 x16, FP32 57.4 TFLOP/s, bf16 GEMM 765 TFLOP/s, one GPU): made
eight-GPU, each GPU's figures are the recorded GPU 0's times the variant's factor. The peer copies
and the all-reduce, which one GPU cannot show, are derived from the record contract
(/work/wt/SPEED_RECORD.md): 390 GB/s per NV18 pair, 360 GB/s bus bandwidth. Each derived capture
says so in its `note`.

    gpu01-gpu08   healthy twins of the reference class
    gpu03         GPU 5's HBM at 70% of the reference (broken, named with its figure)
    gpu06         PCIe copies at half its gen5 x16 link's raw rate, both ways
    gpu09-gpu12   a class of its own (a 500 W board power on every GPU) whose bf16 GEMM sits at
                  80% of the reference: comparable inside, but the top box says the class is slow

`write_speed_run` writes the fleet as a run folder, as `sweep run --speed` would
(`sweep demo --speed`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Callable, Optional

PAIR_BPS, ALLREDUCE_BPS = 3.9e11, 3.6e11  # derived from the contract: one GPU cannot show them
NOTE = (
    "derived: the lent H200's --speed capture made eight-GPU, each GPU's figures GPU 0's x the "
    "variant's factor; peer copies and all-reduce from the record contract, not measured"
)
HALF_LINK = 63.0e9 / 2  # half a gen5 x16 link's raw rate


def recorded() -> dict:
    """The speed section of the real H200 recording (one GPU)."""
    from sweep.demo import synth

    return synth.base_capture("h200-speed")["speed"]


def _scaled(fig: dict, factor: float) -> dict:
    if "value" not in fig:
        return copy.deepcopy(fig)
    out = copy.deepcopy(fig)
    out["value"] = fig["value"] * factor
    if isinstance(fig.get("samples"), list):
        out["samples"] = [v * factor for v in fig["samples"]]
    return out


def _pair(src: int, dst: int) -> dict:
    return {
        "src": src,
        "dst": dst,
        "value": PAIR_BPS,
        "unit": "B/s",
        "method": "cuMemcpyPeer",
        "bytes": 2**30,
        "repetitions": 6,
        "spread": 0.004,
    }


def derive_section(
    indices: list,
    scale: Optional[dict] = None,
    per_gpu: Optional[Callable] = None,
    power_w: Optional[float] = None,
    base: Optional[dict] = None,
) -> dict:
    """A speed section for the GPUs `indices`: the recorded GPU 0's figures times `scale[figure]`
    and `per_gpu(index, figure)`; its envelope under a `power_w` cap where given."""
    base = copy.deepcopy(base or recorded())
    scale = scale or {}
    gpu0 = base["gpus"][0]
    row0 = base["samples"]["summary"][0]
    gpus, summary = [], []
    for i in indices:
        figures = {
            name: _scaled(fig, scale.get(name, 1.0) * (per_gpu(i, name) if per_gpu else 1.0))
            for name, fig in gpu0["figures"].items()
        }
        gpus.append({"index": i, "uuid": None, "figures": figures})
        row = dict(row0, gpu=i)
        if power_w is not None:
            row.update(
                enforced_limit_w=power_w,
                power_w_median=power_w - 4,
                power_w_max=power_w,
                sw_power_cap_fraction=0.91,
                sm_mhz_median=1710.0,
            )
        summary.append(row)
    base.update(
        gpus=gpus,
        p2p=[_pair(a, b) for a in indices for b in indices if a != b],
        allreduce={
            "value": ALLREDUCE_BPS,
            "unit": "B/s",
            "method": "torch.cuda.nccl all_reduce busbw",
            "gpus": list(indices),
            "bytes": 2**28,
            "repetitions": 5,
            "spread": 0.01,
        }
        if len(indices) > 1
        else {"skipped": "one GPU selected"},
    )
    base["samples"] = {
        "interval_s": base["samples"].get("interval_s", 0.2),
        "samples": [],
        "summary": summary,
    }
    return base


def _board_power(watts: float) -> Callable:
    """A SKU whose board power (default and enforced limit) is `watts`: its own class,
    no broken contract."""
    from sweep.demo import synth

    cap = synth.power_cap(watts)

    def edit(capture):
        cap(capture)
        for i in range(synth.gpu_count(capture)):
            capture["nvml"][f"gpu{i}.default_power_limit"] = {"value": int(watts * 1000)}

    return edit


def probe(edits: list, workdir: Path, hostname: str, speed: dict) -> dict:
    """health.json of the agent replaying, with --speed, the H200's speed capture made
    eight-GPU, edited by `edits` and carrying the derived `speed` section (in this process: no
    interpreter start)."""
    import contextlib
    import io

    from probe_agent.main import main as agent_main
    from sweep.demo import hgx, synth

    cap = synth.derive(
        synth.base_capture("h200-speed"),
        [
            synth.multi_gpu(8, lambda i, j: "NV18"),
            hgx.hgx_platform(),
            synth.identity(hostname),
            *edits,
        ],
        hostname=hostname,
    )
    cap["speed"] = speed
    cap["note"] = f"{cap.get('note', '')}; {NOTE}"
    path, out = workdir / f"{hostname}.capture.json", workdir / hostname
    synth.write(cap, path)
    with contextlib.redirect_stdout(io.StringIO()):
        agent_main(["--replay", str(path), "--speed", "--out", str(out)])
    return json.loads((out / "health.json").read_text())


def _variant(n: int) -> tuple[list, dict]:
    """(capture edits, derive_section options) of demo host n."""
    if n == 3:
        return [], {"per_gpu": lambda i, name: 0.70 if (i, name) == (5, "hbm") else 1.0}
    if n == 6:
        base = recorded()["gpus"][0]["figures"]
        return [], {"scale": {f: HALF_LINK / base[f]["value"] for f in ("pcie_h2d", "pcie_d2h")}}
    if n >= 9:
        return [_board_power(500.0)], {"scale": {"bf16_gemm": 0.80}, "power_w": 500.0}
    return [], {}


def speed_fleet(workdir: Path) -> dict:
    """host -> health.json of the speed demo fleet (see the module docstring)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    out = {}
    for n in range(1, 13):
        host = f"gpu{n:02d}"
        edits, options = _variant(n)
        out[host] = probe(edits, workdir, host, derive_section(list(range(8)), **options))
    return out


def write_speed_run(folder: Path, healths: dict, started: str | None = None) -> Path:
    """A run folder (manifest + hosts/*.json) of `healths`, as `sweep run` writes one; it started
    `started` (ISO 8601, UTC), by default now: a demo run has the time it was made."""
    from datetime import datetime, timezone

    from sweep.store import MANIFEST, RECORD_VERSION, RUN_FORMAT

    folder = Path(folder)
    started = started or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    (folder / "hosts").mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).write_text(
        json.dumps(
            {
                "format": RUN_FORMAT,
                "record_version": RECORD_VERSION,
                "started_at": started,
                "state": "complete",
                "hosts": sorted(healths),
            }
        )
    )
    for host, health in healths.items():
        record = {
            "record_version": RECORD_VERSION,
            "host": host,
            "address": "127.0.0.1",
            "status": "ok",
            "failure": None,
            "attempts": 1,
            "duration_s": 10.0,
            "groups": ["speed"],
            "health": health,
        }
        (folder / "hosts" / f"{host}.json").write_text(json.dumps(record, indent=1))
    return folder


def off_design(summary: dict) -> list[str]:
    """What the speed demo's report (summary.json) judged otherwise than the fleet was built for."""
    speed = summary.get("speed") or {}
    odd = []
    broken = {
        (j["host"], j["gpu"], j["figure"])
        for j in speed.get("judgments", ())
        if j["severity"] == "broken"
    }
    if ("gpu03", 5, "hbm") not in broken:
        odd.append("gpu03: built with GPU 5's HBM at 70% of the reference, not judged broken")
    if not all(("gpu06", i, f) in broken for i in range(8) for f in ("pcie_h2d", "pcie_d2h")):
        odd.append("gpu06: built with PCIe at half its link's rate, not judged broken on every GPU")
    if not any(p["figure"] == "bf16_gemm" and p["hosts"] == 4 for p in speed.get("slow_pools", ())):
        odd.append("gpu[09-12]: built as a 500 W class with bf16 GEMM at 80%, not said to be slow")
    others = {h for h, *_ in broken} - {"gpu03", "gpu06"}
    odd += [f"{h}: built healthy, judged broken" for h in sorted(others)]
    return odd
