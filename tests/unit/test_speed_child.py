"""The driver-API child against a fake libcuda (no GPU here): what it measures, counts and frees.

The fake answers each driver call as the driver documents it (handles, sizes, 10 ms per timed
interval) and keeps what is live: the tests assert the child's promises, every allocation freed and
every context released whatever happened, the bytes it counts, and an error reported, not raised.
"""
import ctypes
import json

from probe_agent.speed import cuda, driver_child
from probe_agent.speed.figures import assemble


class FakeCuda(object):
    """A libcuda stand-in: `live` holds what is allocated or retained; `fail` maps a call to its error code."""

    def __init__(self, devices=1, fail=None, peer=True):
        self.devices, self.fail, self.peer = devices, dict(fail or {}), peer
        self.live, self.next, self.calls = {}, 100, []

    def _new(self, ref, kind):
        self.next += 1
        ref._obj.value = self.next
        self.live[(kind, self.next)] = True
        return 0

    def _drop(self, kind, handle):
        value = getattr(handle, "value", handle)
        return 0 if self.live.pop((kind, value), None) else 400  # CUDA_ERROR_INVALID_HANDLE

    def __getattr__(self, name):
        def call(*args):
            self.calls.append(name)
            if name in self.fail:
                rc = self.fail[name]
                self.fail[name + "#"] = self.fail.get(name + "#", 0) + 1
                return rc
            return self.answer(name, args)
        return call

    def answer(self, name, args):
        if name == "cuDeviceGetCount":
            args[0]._obj.value = self.devices
        elif name == "cuDeviceGet":
            args[0]._obj.value = args[1]
        elif name == "cuDeviceGetUuid_v2":
            ctypes.memmove(args[0], bytes([args[1].value + 1]) * 16, 16)
        elif name == "cuDeviceGetAttribute":
            args[0]._obj.value = 132
        elif name == "cuDevicePrimaryCtxRetain":
            args[0]._obj.value = 1000 + args[1].value
            self.live[("ctx", args[1].value)] = True
        elif name == "cuDevicePrimaryCtxRelease_v2":
            return self._drop("ctx", args[0])
        elif name == "cuMemGetInfo_v2":
            args[0]._obj.value, args[1]._obj.value = 140 << 30, 141 << 30
        elif name in ("cuMemAlloc_v2", "cuMemAllocHost_v2", "cuEventCreate", "cuModuleLoadData"):
            return self._new(args[0], name)
        elif name in ("cuMemFree_v2", "cuMemFreeHost", "cuEventDestroy_v2", "cuModuleUnload"):
            kind = {"cuMemFree_v2": "cuMemAlloc_v2", "cuMemFreeHost": "cuMemAllocHost_v2",
                    "cuEventDestroy_v2": "cuEventCreate", "cuModuleUnload": "cuModuleLoadData"}[name]
            return self._drop(kind, args[0])
        elif name == "cuEventElapsedTime":
            args[0]._obj.value = 10.0
        elif name == "cuDeviceCanAccessPeer":
            args[0]._obj.value = 1 if self.peer else 0
        return 0


def run_child(fake, capsys):
    driver_child.measure(cuda.Driver(fake), {"stop_at": 1e18, "budgets": {"hbm": 0.0, "fp32": 0.0,
                                                                            "pcie": 0.0, "p2p": 0.0}})
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_the_child_measures_every_figure_and_frees_everything(capsys):
    fake = FakeCuda(devices=2)
    events = run_child(fake, capsys)
    assert fake.live == {}  # every buffer, pinned buffer, event and module freed; both contexts released
    uuids = {e["uuid"]: i for i, e in enumerate(e for e in events if e["event"] == "device")}
    assert sorted(uuids) == ["GPU-01010101-0101-0101-0101-010101010101", "GPU-02020202-0202-0202-0202-020202020202"]
    out = assemble(events, uuids, [0, 1], "no torch", None)
    assert out["status"] == "measured"
    hbm = out["gpus"][0]["figures"]["hbm"]
    # 10 ms for one copy -> 2 copies a repetition of 20 ms, each 2 GiB read + 2 GiB written, in 10 ms
    assert hbm["bytes"] == 2 * cuda.HBM_BYTES and hbm["value"] == float("%.6g" % (2 * 2 * (2 << 30) / 0.01))
    assert hbm["repetitions"] == cuda.MIN_REPS  # a budget of 0 s still takes the floor
    fp32 = out["gpus"][1]["figures"]["fp32"]
    # the warm launch took 10 ms for 4096 iterations: scaled to 8192 for 20 ms; 8 blocks of 256 on each of 132 SMs
    flops = 2.0 * cuda.FMA_PER_ITER * 8192 * 132 * 8 * 256
    assert fp32["unit"] == "FLOP/s" and fp32["flops"] == flops and fp32["value"] == float("%.6g" % (flops / 0.01))
    assert [(p["src"], p["dst"]) for p in out["p2p"]] == [(0, 1), (1, 0)] and all("value" in p for p in out["p2p"])
    assert fake.calls.count("cuCtxEnablePeerAccess") == 4  # both ways, for each ordered pair


def test_pairs_without_peer_access_are_skipped_not_copied_through_the_host(capsys):
    fake = FakeCuda(devices=2, peer=False)
    events = run_child(fake, capsys)
    uuids = {e["uuid"]: i for i, e in enumerate(e for e in events if e["event"] == "device")}
    out = assemble(events, uuids, [0, 1], None, None)
    assert "cuMemcpyPeerAsync" not in fake.calls and "cuCtxEnablePeerAccess" not in fake.calls and fake.live == {}
    assert out["p2p"] == [{"src": 0, "dst": 1, "skipped": "no peer access"},
                          {"src": 1, "dst": 0, "skipped": "no peer access"}]


def test_an_allocation_that_fails_is_reported_and_the_rest_still_freed(capsys):
    fake = FakeCuda(devices=1, fail={"cuMemAllocHost_v2": 2})  # CUDA_ERROR_OUT_OF_MEMORY for the pinned buffer
    events = run_child(fake, capsys)
    assert fake.live == {}
    assert any(e["event"] == "error" and "cuMemAllocHost_v2" in e["error"] for e in events)
    uuid = next(e["uuid"] for e in events if e["event"] == "device")
    out = assemble(events, {uuid: 0}, [0], None, None)
    figs = out["gpus"][0]["figures"]
    assert "value" in figs["hbm"] and "value" in figs["fp32"]
    assert out["status"] == "partial" and "pcie" in out["reason"]


def test_a_device_without_room_for_the_buffers_is_skipped_with_the_reason(capsys):
    class Full(FakeCuda):
        def answer(self, name, args):
            if name == "cuMemGetInfo_v2":
                args[0]._obj.value, args[1]._obj.value = 3 << 30, 141 << 30
                return 0
            return FakeCuda.answer(self, name, args)

    fake = Full(devices=1)
    events = run_child(fake, capsys)
    assert fake.live == {} and "cuMemAlloc_v2" not in fake.calls
    skipped = next(e for e in events if e["event"] == "skipped")
    out = assemble(events, {skipped["uuid"]: 0}, [0], None, None)
    assert out["gpus"][0]["figures"]["hbm"] == {"skipped": "less than 5 GiB of GPU memory free"}
    assert out["status"] == "failed"


DRIVER_STUB = r"""
import json, sys, time
def emit(e): print(json.dumps(e), flush=True)
emit({"event": "device", "uuid": "GPU-a", "sms": 132})
emit({"event": "figure", "uuid": "GPU-a", "key": "hbm", "work": 8e10, "bytes": 4 << 30, "times": [0.02, 0.021]})
if sys.argv[1] == "hang":
    time.sleep(600)
for k in ("pcie_h2d", "pcie_d2h", "fp32"):
    emit({"event": "figure", "uuid": "GPU-a", "key": k, "work": 1e9, "bytes": 1, "times": [0.02]})
emit({"event": "done"})
"""
TORCH_STUB = r"""
import json, sys
print(json.dumps({"event": "ready"}), flush=True)
plan = json.loads(sys.stdin.readline())
print(json.dumps({"event": "figure", "key": "bf16_gemm", "uuid": "GPU-a", "work": 1.1e13, "flops": 1.1e13,
                  "bytes": 1, "times": [0.014], "plan": sorted(plan)}), flush=True)
"""


class ReplayedSamples(object):
    replaying = True  # load.sample() then takes next_sample(): no NVML here

    def next_sample(self):
        return {"t": 0.0, "gpus": [{"index": 0, "sm_mhz": 1980, "power_w": 300.0, "active_reasons": []}]}


def tier(monkeypatch, mode, torch, bound=15.0):
    import sys
    from types import SimpleNamespace
    from probe_agent.speed import tier as speed, torch_child
    monkeypatch.setattr(speed, "driver_command", lambda plan: ([sys.executable, "-c", DRIVER_STUB, mode], b""))
    monkeypatch.setattr(torch_child, "TORCH_CHILD", TORCH_STUB)
    facts = {"gpus": [{"index": 0, "uuid": "GPU-a", "clocks": {"sm_max_mhz": 1980}}], "mask": None}
    section = speed.empty_section(SimpleNamespace(force=False), bound)
    return speed.measure(ReplayedSamples(), SimpleNamespace(interval=0.05), facts, 1,
                         sys.executable if torch else None, section, __import__("time").monotonic())


def test_the_torch_child_starts_its_gpu_work_on_the_plan_after_the_driver_figures(monkeypatch):
    s = tier(monkeypatch, "ok", torch=True)
    figs = s["gpus"][0]["figures"]
    assert s["status"] == "measured" and all("value" in figs[k] for k in figs)
    assert figs["bf16_gemm"]["unit"] == "FLOP/s" and s["allreduce"] == {"skipped": "one GPU selected"}
    assert s["samples"]["samples"] and s["samples"]["summary"][0]["sm_mhz_median"] == 1980


def test_a_hung_child_is_stopped_at_the_bound_and_what_it_measured_is_kept(monkeypatch):
    s = tier(monkeypatch, "hang", torch=False, bound=1.0)
    figs = s["gpus"][0]["figures"]
    assert "value" in figs["hbm"] and figs["fp32"] == {"skipped": "stopped at the tier's bound"}
    assert figs["bf16_gemm"] == {"skipped": "no CUDA torch in this host's python"}
    assert s["status"] == "partial" and s["reason"] == "GPU 0 pcie_h2d: stopped at the tier's bound"
