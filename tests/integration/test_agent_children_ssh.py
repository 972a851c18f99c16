"""The path a real host takes: `sweep run --speed`, `--load --load-engine ptx` and `--wrap` over real
OpenSSH, the agent imported from stdin by the real bootstrap, its children really started (issue 34).

There is no GPU here: each host's sessions get a stand-in libcuda.so.1 (tests/cuda_shim.c, built with gcc
into a temporary folder) on LD_LIBRARY_PATH through sshd_config SetEnv, with known rates, while NVML is
replayed from the H200's idle capture; SWEEP_REPLAY_MEASURE=1 tells the replaying agent to start its
tiers' children instead of replaying recorded figures. So every figure recorded here was measured by a
child the memory-loaded agent started, against the shim's virtual GPU clock: the shim's rates, exactly.
On dcc27e2 the driver child could not import probe_agent on such a host (`ModuleNotFoundError`).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sweep.demo.loopback import FleetHost, LocalFleet

import cuda_shim
from helpers import run_over_fleet, read_records

ROOT = Path(__file__).resolve().parents[2]
IDLE = ROOT / "sweep" / "demo" / "captures" / "h200-idle.json"
UUID = json.loads(IDLE.read_text())["nvml"]["gpu0.uuid"]["value"]
# host gpu02's virtual GPU is slower: two hosts, two rate sets, each record must carry its own
SLOW = {k: v * 0.5 for k, v in cuda_shim.RATES.items()}

# the --wrap benchmark: an FMA kernel through the host's libcuda (the shim), timed by CUDA events
BENCH = r'''
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
ptx = b".entry k() {\nLOOP:\n fma.rn.f32 %f1, %f1, %f2, %f3;\n fma.rn.f32 %f1, %f1, %f2, %f3;\n @%p1 bra LOOP;\n}\0"
dev, ctx, mod, fn, a, b = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0 and cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0
assert cu.cuModuleLoadData(ctypes.byref(mod), ptx) == 0 and cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"k") == 0
cu.cuEventCreate(ctypes.byref(a), 0); cu.cuEventCreate(ctypes.byref(b), 0)
iters = ctypes.c_uint32(1000000); out = ctypes.c_uint64()
params = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(out), ctypes.c_void_p), ctypes.cast(ctypes.byref(iters), ctypes.c_void_p))
cu.cuEventRecord(a, None); cu.cuLaunchKernel(fn, 1056, 1, 1, 256, 1, 1, 0, None, params, None); cu.cuEventRecord(b, None)
ms = ctypes.c_float(); cu.cuEventElapsedTime(ctypes.byref(ms), a, b)
print("fp32: %.3f TFLOP/s" % (2 * 2 * 1000000 * 1056 * 256 / (ms.value / 1000) / 1e12))
'''


@pytest.fixture(scope="module")
def shim_fleet(needs_sshd, tmp_path_factory):
    work = tmp_path_factory.mktemp("children")
    os.chmod(work, 0o755)
    lib = cuda_shim.build(work / "lib")
    (work / "bench.py").write_text(BENCH)
    hosts = []
    for name, rates in (("gpu01", cuda_shim.RATES), ("gpu02", SLOW)):
        log = work / f"{name}-shim.log"
        env = {**cuda_shim.environment(lib, UUID, rates, log), "SWEEP_REPLAY_MEASURE": "1"}
        hosts.append(FleetHost(name, capture=str(IDLE), env=tuple(env.items())))
    with LocalFleet(hosts, work / "fleet") as fleet:
        fleet.work = work
        yield fleet


def sweep_run(fleet, out: Path, *extra: str) -> tuple[int, dict]:
    code = run_over_fleet(fleet, out, *extra)
    return code, read_records(out)


def test_speed_over_ssh_measures_with_real_children_the_stand_ins_rates(shim_fleet, tmp_path):
    _, records = sweep_run(shim_fleet, tmp_path / "run", "--speed")
    for name, rates in (("gpu01", cuda_shim.RATES), ("gpu02", SLOW)):
        assert records[name]["status"] == "ok", records[name].get("failure")
        speed = records[name]["health"]["speed"]
        figures = speed["gpus"][0]["figures"]
        assert speed["status"] == "measured", (speed["reason"], figures)
        for key, rate in rates.items():
            assert figures[key]["value"] == pytest.approx(rate, rel=1e-4), (name, key, figures[key])
            assert figures[key]["repetitions"] >= 3
        # no torch in this machine's python3: the torch child started, and said so in its own words
        assert "torch" in figures["bf16_gemm"]["skipped"]
        assert 0 < speed["wall_s"] <= speed["bound_s"]
        log = (shim_fleet.work / f"{name}-shim.log").read_text()
        assert log.startswith("cuInit") and "kernel" in log  # the driver child ran on that host's shim


def test_ptx_load_over_ssh_runs_its_child_on_the_stand_in(shim_fleet, tmp_path):
    log = shim_fleet.work / "gpu01-shim.log"
    log.write_text("")
    _, records = sweep_run(shim_fleet, tmp_path / "run", "--load", "1", "--load-engine", "ptx", "--limit", "gpu01")
    load = records["gpu01"]["health"]["load"]
    assert load["engine"] == "ptx" and load["exit_code"] == 0, load
    assert load["started_s"] is not None and load["ended_s"] is not None and load["ended_s"] > load["started_s"]
    kernels = [float(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("kernel")]
    # burn: 4 FMAs a loop x 2 FLOPs x 2,000,000 iterations x 132 SMs x 8 blocks x 256 threads, at 44 TFLOP/s
    assert kernels and kernels[0] == pytest.approx(2 * 4 * 2e6 * 132 * 8 * 256 / cuda_shim.RATES["fp32"], rel=1e-6)


def test_wrap_over_ssh_runs_the_benchmark_beside_the_memory_loaded_agent(shim_fleet, tmp_path):
    bench = str(shim_fleet.work / "bench.py")
    _, records = sweep_run(shim_fleet, tmp_path / "run", "--interval", "0.1", "--metric",
                           r"tflops=fp32: ([0-9.]+) (TFLOP/s)", "--wrap", "--", "python3", bench)
    for name, rates in (("gpu01", cuda_shim.RATES), ("gpu02", SLOW)):
        wrap = records[name]["wrap"]
        assert wrap["status"] == "ok", wrap
        assert wrap["provenance"]["command"]["exit_code"] == 0
        assert wrap["figures"]["tflops"]["value"] == pytest.approx(rates["fp32"] / 1e12, rel=1e-3)
