"""What each GPU model delivers: the speed tier's reference table, each figure with where it was
measured.

One row per GPU model (matched on the NVML name): its memory and board power, and per figure of
the speed tier (`hbm`, `pcie_h2d`, `pcie_d2h`, `fp32`, `bf16_gemm`, in the units the agent reports:
B/s and FLOP/s) the *measured* value and its source. A figure nobody measured where this table
could cite it is None ("unknown"): the tier then judges that figure only against the host's class
(and the link, for PCIe), never against a spec sheet. `seen_here` says whether the row comes from a
machine this project measured itself (the lent H200) or from a published measurement ("not seen
here"). An operator's own known-good hosts (`sweep baseline set`) come before this table.

`CEILINGS` bound what any GPU can deliver, per figure: three times the fastest known GPU (B200
spec figures; a value above it is not a measurement, whatever the record says). PCIe is bounded
by the link itself: `link_raw_bps(gen, width)` x `LINK_CEILING`.
"""

from __future__ import annotations

import re
from typing import Optional

FIGURES = ("hbm", "pcie_h2d", "pcie_d2h", "fp32", "bf16_gemm")  # per GPU
HOST_FIGURES = ("p2p", "allreduce")  # per host
UNITS = {
    "hbm": "B/s",
    "pcie_h2d": "B/s",
    "pcie_d2h": "B/s",
    "fp32": "FLOP/s",
    "bf16_gemm": "FLOP/s",
    "p2p": "B/s",
    "allreduce": "B/s",
}
LABELS = {
    "hbm": "HBM",
    "pcie_h2d": "PCIe host to device",
    "pcie_d2h": "PCIe device to host",
    "fp32": "FP32 FMA",
    "bf16_gemm": "bf16 GEMM",
    "p2p": "GPU to GPU (slowest pair)",
    "allreduce": "all-reduce bus bandwidth",
}

WARNING_BELOW = 0.90  # below 90% of the reference: warning
BROKEN_BELOW = 0.75  # below 75%: broken (DCGM's memory-bandwidth floor is 0.75x its trained value)

# the fastest known GPU's spec figures (B200: 8 TB/s HBM3e, ~80 TFLOP/s FP32, 2.25 PFLOP/s dense
# bf16, NVLink 5 1.8 TB/s per GPU both ways); no record may claim more than three times these
FASTEST = {"hbm": 8.0e12, "fp32": 8.0e13, "bf16_gemm": 2.25e15, "p2p": 1.8e12, "allreduce": 1.8e12}
CEILINGS = {k: 3.0 * v for k, v in FASTEST.items()}
LINK_CEILING = 1.05  # a PCIe copy above the link's raw rate x 1.05 is not a measurement
PCIE_EFFICIENCY = 0.85  # what a good pinned copy gets of the raw rate (the H200: 52-55 of 63 GB/s)
# raw rate of one PCIe lane per generation, bytes/s, after line encoding (gen5 x16: 63 GB/s)
LANE_BPS = {1: 0.25e9, 2: 0.5e9, 3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.877e9}


def link_raw_bps(gen, width) -> Optional[float]:
    """The raw rate of a PCIe link in bytes/s each way (None where gen or width is not known)."""
    if (
        not isinstance(gen, int)
        or not isinstance(width, int)
        or gen not in LANE_BPS
        or not 1 <= width <= 32
    ):
        return None
    return LANE_BPS[gen] * width


def _figure(value, source):
    return None if value is None else {"value": value, "source": source}


LENT = (
    "measured on the lent H200 by the agent's --speed (tests/fixtures/h200/speed/speed-1..5, "
    "2026-12-01; "
    "sweep/demo/captures/h200-speed.json)"
)
REFERENCE = (
    {
        "model": "H200",
        "match": r"\bH200\b",
        "memory_gib": 141,
        "board_power_w": 700,
        "seen_here": True,
        "figures": {
            "hbm": _figure(
                4.276e12,
                LENT + ": cuMemcpyDtoD 4275-4277 GB/s (spec 4.8 TB/s; issue 25's first "
                "driver-API run read 4085-4093 GB/s)",
            ),
            "pcie_h2d": _figure(
                5.53e10,
                LENT + ": pinned cuMemcpyHtoD 55.0-55.4 GB/s, gen5 x16 (63 GB/s raw; "
                "issue 25: 52-55 GB/s)",
            ),
            "pcie_d2h": _figure(
                5.53e10, LENT + ": pinned cuMemcpyDtoH 55.2-55.3 GB/s, gen5 x16 (63 GB/s raw)"
            ),
            "fp32": _figure(5.743e13, LENT + ": PTX fma.rn.f32 57.35-57.43 TFLOP/s"),
            "bf16_gemm": _figure(
                7.65e14,
                LENT + ": torch.mm bf16 8192^3 760-772 TFLOP/s (issue 25: 763-789; spec 989)",
            ),
        },
    },
    {
        "model": "H100 SXM",
        "match": r"\bH100\b(?!.*\b(PCIe|NVL)\b)",
        "memory_gib": 80,
        "board_power_w": 700,
        "seen_here": False,
        "figures": {
            "hbm": _figure(
                2.8e12,
                "not seen here: 2.8 TB/s coalesced loads under Nsight Compute, "
                "mikamirai.com/blog/gpu-memory-bandwidth (spec 3.35 TB/s)",
            ),
            "pcie_h2d": None,
            "pcie_d2h": None,
            "fp32": None,
            "bf16_gemm": None,
        },
    },
    {
        "model": "A100 SXM 80GB",
        "match": r"\bA100\b.*\b80\s?GB\b(?!.*PCIe)",
        "memory_gib": 80,
        "board_power_w": 400,
        "seen_here": False,
        "figures": {
            "hbm": _figure(
                1.80e12,
                "not seen here: 1.80 TB/s read kernel (88% of 2.04 TB/s), "
                "forums.developer.nvidia.com/t/trouble-to-reach-peak-bandwidth-of-a100/339083",
            ),
            "pcie_h2d": None,
            "pcie_d2h": None,
            "fp32": None,
            "bf16_gemm": None,
        },
    },
    {
        "model": "B200",
        "match": r"\bB200\b",
        "memory_gib": 180,
        "board_power_w": 1000,
        "seen_here": False,
        "figures": {
            "hbm": _figure(
                6.0e12,
                "not seen here: over 6,000 GB/s device to device (CUDA samples bandwidthTest, "
                "8x B200 HGX), newmind.ai/journal/18 (spec 8 TB/s)",
            ),
            "pcie_h2d": None,
            "pcie_d2h": None,
            "fp32": None,
            "bf16_gemm": None,
        },
    },
    {
        "model": "L40S",
        "match": r"\bL40S\b",
        "memory_gib": 48,
        "board_power_w": 350,
        "seen_here": False,
        # only spec figures (864 GB/s GDDR6, 362 TFLOP/s bf16 with sparsity) were found published:
        # unknown
        "figures": {
            "hbm": None,
            "pcie_h2d": None,
            "pcie_d2h": None,
            "fp32": None,
            "bf16_gemm": None,
        },
    },
)


def row_for(model) -> Optional[dict]:
    """The reference row of an NVML GPU name ('NVIDIA H200' -> the H200 row), or None."""
    if not isinstance(model, str):
        return None
    return next((r for r in REFERENCE if re.search(r["match"], model)), None)


def reference_of(model, figure: str) -> Optional[dict]:
    """{"value", "source", "model"} of one figure of a GPU model from the table, or None
    (unknown)."""
    row = row_for(model)
    entry = (row or {}).get("figures", {}).get(figure)
    return None if entry is None else dict(entry, model=row["model"])
