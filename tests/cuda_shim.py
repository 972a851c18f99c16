"""The stand-in libcuda.so.1 (tests/cuda_shim.c): built with gcc into a folder, and the rates it answers with."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from helpers import require

SOURCE = Path(__file__).with_name("cuda_shim.c")
# the shim's virtual GPU: what the speed tier must report when it measures it
RATES = {"hbm": 3.2e12, "pcie_h2d": 41.5e9, "pcie_d2h": 37.25e9, "fp32": 44.0e12}
ENV_NAMES = {"hbm": "CUDA_SHIM_HBM_BPS", "pcie_h2d": "CUDA_SHIM_H2D_BPS", "pcie_d2h": "CUDA_SHIM_D2H_BPS",
             "fp32": "CUDA_SHIM_FP32_FLOPS"}


def build(folder: Path) -> Path:
    """Compile the shim as FOLDER/libcuda.so.1; returns FOLDER (for LD_LIBRARY_PATH)."""
    gcc = shutil.which("gcc")
    require(gcc is not None, "gcc is not installed (apt-get install gcc): the stand-in libcuda needs it")
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-Wall", "-o", str(folder / "libcuda.so.1"), str(SOURCE)],
                   check=True, capture_output=True)
    return folder


def environment(folder: Path, uuid: str, rates: dict | None = None, log: Path | None = None) -> dict[str, str]:
    """The variables that point a child at the shim and set its device and rates."""
    env = {"LD_LIBRARY_PATH": str(folder), "CUDA_SHIM_UUID": uuid}
    env.update({ENV_NAMES[k]: repr(v) for k, v in (rates or RATES).items()})
    if log is not None:
        env["CUDA_SHIM_LOG"] = str(log)
    return env
