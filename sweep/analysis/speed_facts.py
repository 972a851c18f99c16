"""The fact table's speed facts: the figures of the speed tier (schema 1.4), one fact per figure,
each measured (its history is drift, never a change point), splitting no class, expected as a floor.

The whole table, and every view of it that consumers iterate, is `sweep.analysis.facts`; what each
GPU model delivers is `sweep.analysis.speed_reference`, and the reader of a health document's speed
section is `sweep.analysis.speed_record`.
"""

from __future__ import annotations

from sweep.analysis import speed_record
from sweep.analysis.fact import Expect, Fact, Metric
from sweep.analysis.fact_values import rate_text
from sweep.analysis.speed_reference import LABELS, UNITS

SPEED_IMPACT = {
    "hbm": "the GPU's memory moves {value} against {reference}: every memory-bound kernel "
    "(attention, decode, optimizer steps) runs slower there, and a synchronous job waits for the "
    "slowest GPU",
    "pcie_h2d": "host-to-GPU copies run at {value} against {reference}: data loading, checkpoint "
    "restore and offload are slower on this GPU",
    "pcie_d2h": "GPU-to-host copies run at {value} against {reference}: checkpoint writes and "
    "offload are slower",
    "fp32": "FP32 FMA throughput is {value} against {reference}: the SMs run slower (clocks, power "
    "cap, slowdown), so every compute-bound kernel does",
    "bf16_gemm": "bf16 GEMM delivers {value} against {reference}: the matrix multiplies that set a "
    "training step's pace run slower on this GPU",
    "p2p": "the slowest GPU pair copies at {value} against {reference}: tensor-parallel traffic "
    "and every collective wait for that pair",
    "allreduce": "all-reduce bus bandwidth is {value} against {reference}: data-parallel gradient "
    "exchange takes longer on this host",
}


def speed_fact(name: str, scope: str, floor: str) -> Fact:
    """A figure of the speed tier (schema 1.4): measured, so its history is drift, never a change
    point, and it splits no class (two good GPUs never measure the same bytes per second); its
    expectation is a floor (`floor`: the key, in GB/s or TFLOP/s)."""
    column, unit = f"speed_{name}", UNITS[name]
    metric = (
        f"sweep_{scope}_speed_{name}_bytes_per_second"
        if unit == "B/s"
        else f"sweep_gpu_speed_{name}_flops"
    )
    where = (
        (f"speed.gpus#.figures.{name}.*",)
        if scope == "gpu"
        else (("speed.p2p#.*",) if name == "p2p" else ("speed.allreduce.*",))
    )
    reader = speed_record.gpu_figure(name) if scope == "gpu" else speed_record.host_figure(name)
    return Fact(
        name=name,
        label=LABELS[name],
        scope=scope,
        columns=(column,),
        render=lambda r: rate_text(r[column], unit),
        impact=[(None, SPEED_IMPACT[name])],
        diff_kind="speed",
        paths=where,
        metric=Metric(
            metric,
            f"The speed tier's measured {LABELS[name]} ({unit}), best of its repetitions.",
            column,
        ),
        history="drift",
        expect=Expect(floor, "floor", unit="GB/s" if unit == "B/s" else "TFLOP/s"),
        compares=False,
        reads={column: ("Float64", reader)},
    )


SPEED_FACTS = (
    speed_fact("hbm", "gpu", "hbm_gbps_min"),
    speed_fact("pcie_h2d", "gpu", "pcie_h2d_gbps_min"),
    speed_fact("pcie_d2h", "gpu", "pcie_d2h_gbps_min"),
    speed_fact("fp32", "gpu", "fp32_tflops_min"),
    speed_fact("bf16_gemm", "gpu", "bf16_gemm_tflops_min"),
    speed_fact("p2p", "host", "p2p_gbps_min"),
    speed_fact("allreduce", "host", "allreduce_gbps_min"),
)
