"""The speed tier's driver-API child: measure every CUDA device it sees and print JSON lines.

    python3 -I -S -c "import sys; sys.path.insert(0, ROOT); \
        from probe_agent.speed.driver_child import main; main()" PLAN


PLAN is JSON: {"stop_at": time.time() by which to be done, "budgets": {figure: seconds}}. HBM and
FP32 run on all devices at once (one thread a device: each GPU's own memory and SMs, nothing
shared); PCIe copies one device at a time (the host's memory and root ports are shared), and so is
each ordered peer pair. Lines: {"event": "device", "uuid", "sms"}, {"event": "figure", "uuid",
"key", "work" (bytes or FLOPs per repetition), "bytes", "flops", "times": [seconds per repetition]},
{"event": "pair", "src", "dst", ...}, {"event": "skipped", ...}, {"event": "error", ...}, and
{"event": "done"} last.
"""

import ctypes
import json
import sys
import threading

from probe_agent.speed.cuda import (
    CudaError,
    Device,
    Driver,
    FMA_BLOCKS_PER_SM,
    FMA_PER_ITER,
    FMA_THREADS,
    HBM_BYTES,
    P2P_BYTES,
    PCIE_BYTES,
    PEER_ALREADY_ENABLED,
    REP_TARGET_S,
    Timer,
    copy_figure,
    emit,
    fma_ptx,
    repeat,
)

FMA_WARM_ITERS = 4096


def hbm(d, budget_s, stop_at):
    """Device-to-device copies of HBM_BYTES: each reads and writes it (2 x bytes counted)."""
    src, dst = d.buffers[0], d.buffers[1]
    d.cu.call("cuMemsetD8_v2", src, ctypes.c_ubyte(1), ctypes.c_size_t(HBM_BYTES))

    def copy():
        d.cu.call("cuMemcpyDtoDAsync_v2", dst, src, ctypes.c_size_t(HBM_BYTES), None)

    copies, times = copy_figure(d.timer, copy, budget_s, stop_at)
    return {"key": "hbm", "work": 2 * HBM_BYTES * copies, "bytes": 2 * HBM_BYTES, "times": times}


def fp32(d, budget_s, stop_at):
    """The FMA kernel on every SM, its iterations scaled so one launch takes about REP_TARGET_S."""
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    d.cu.call("cuModuleLoadData", ctypes.byref(mod), fma_ptx().encode() + b"\0")
    try:
        d.cu.call("cuModuleGetFunction", ctypes.byref(fn), mod, b"fma32")
        out = d.buffers[0]
        blocks = d.sms * FMA_BLOCKS_PER_SM
        iters = ctypes.c_uint32(FMA_WARM_ITERS)
        params = (ctypes.c_void_p * 2)(
            ctypes.cast(ctypes.byref(out), ctypes.c_void_p),
            ctypes.cast(ctypes.byref(iters), ctypes.c_void_p),
        )

        def launch():
            d.cu.call("cuLaunchKernel", fn, blocks, 1, 1, FMA_THREADS, 1, 1, 0, None, params, None)

        d.timer.time(launch)  # load and warm
        first = d.timer.time(launch)
        iters.value = int(
            max(FMA_WARM_ITERS, min(1 << 30, FMA_WARM_ITERS * REP_TARGET_S / max(first, 1e-6)))
        )
        times = repeat(lambda: d.timer.time(launch), budget_s, stop_at=stop_at)
        flops = 2.0 * FMA_PER_ITER * iters.value * blocks * FMA_THREADS
        return {"key": "fp32", "work": flops, "flops": flops, "bytes": 4, "times": times}
    finally:
        d.cu.try_call("cuModuleUnload", mod)


def pcie(d, host, budget_s, stop_at):
    """Pinned host <-> device copies of PCIE_BYTES, each direction: two figure dicts."""
    dev_ptr, out = d.buffers[1], []
    for key, name, args in (
        ("pcie_h2d", "cuMemcpyHtoDAsync_v2", (dev_ptr, host)),
        ("pcie_d2h", "cuMemcpyDtoHAsync_v2", (host, dev_ptr)),
    ):

        def copy(name=name, args=args):
            d.cu.call(name, args[0], args[1], ctypes.c_size_t(PCIE_BYTES), None)

        copies, times = copy_figure(d.timer, copy, budget_s, stop_at)
        out.append({"key": key, "work": PCIE_BYTES * copies, "bytes": PCIE_BYTES, "times": times})
    return out


def per_device(devices, work, budget_s, stop_at):
    """work(device, budget_s, stop_at) on every device at once, one thread each;
    emits each figure."""

    def one(d):
        try:
            d.current()
            emit(dict(work(d, budget_s, stop_at), event="figure", uuid=d.uuid))
        except CudaError as exc:
            emit({"event": "error", "uuid": d.uuid, "key": work.__name__, "error": str(exc)})

    threads = [threading.Thread(target=one, args=(d,)) for d in devices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def pcie_all(cu, devices, budget_s, stop_at):
    """The PCIe figures one device at a time, through one pinned buffer freed at the end."""
    host = ctypes.c_void_p()
    devices[0].current()
    cu.call("cuMemAllocHost_v2", ctypes.byref(host), ctypes.c_size_t(PCIE_BYTES))
    try:
        for d in devices:
            try:
                d.current()
                for fig in pcie(d, host, budget_s, stop_at):
                    emit(dict(fig, event="figure", uuid=d.uuid))
            except CudaError as exc:
                emit({"event": "error", "uuid": d.uuid, "key": "pcie", "error": str(exc)})
    finally:
        cu.try_call("cuMemFreeHost", host)


def enable_peer(cu, a, b):
    """Let a's context reach b's memory; True when it did (or already could),
    False: no peer access."""
    can = ctypes.c_int()
    cu.call("cuDeviceCanAccessPeer", ctypes.byref(can), a.dev, b.dev)
    if not can.value:
        return False
    a.current()
    rc = cu.try_call("cuCtxEnablePeerAccess", b.ctx, 0)
    if rc not in (0, PEER_ALREADY_ENABLED):
        raise CudaError("cuCtxEnablePeerAccess", rc)
    return True


def pair(cu, a, b, budget_s, stop_at):
    """cuMemcpyPeer of P2P_BYTES from a to b (timed in a's context), peer access
    enabled both ways."""
    if not (enable_peer(cu, a, b) and enable_peer(cu, b, a)):
        return {"event": "pair", "src": a.uuid, "dst": b.uuid, "skipped": "no peer access"}
    a.current()

    def copy():
        cu.call(
            "cuMemcpyPeerAsync",
            b.buffers[0],
            b.ctx,
            a.buffers[1],
            a.ctx,
            ctypes.c_size_t(P2P_BYTES),
            None,
        )

    copies, times = copy_figure(a.timer, copy, budget_s, stop_at)
    return {
        "event": "pair",
        "src": a.uuid,
        "dst": b.uuid,
        "work": P2P_BYTES * copies,
        "bytes": P2P_BYTES,
        "times": times,
    }


def pairs(cu, devices, budget_s, stop_at):
    """Every ordered pair, one at a time; peer access is the contexts' own and ends with them."""
    for a in devices:
        for b in devices:
            if a is b:
                continue
            try:
                emit(pair(cu, a, b, budget_s, stop_at))
            except CudaError as exc:
                emit({"event": "pair", "src": a.uuid, "dst": b.uuid, "error": str(exc)})


def open_devices(cu):
    """Every device CUDA sees, with its buffers and events; a device without room is
    reported and left out."""
    count = ctypes.c_int()
    cu.call("cuDeviceGetCount", ctypes.byref(count))
    devices = []
    for i in range(count.value):
        d = Device(cu, i)
        devices.append(d)
        d.current()
        if d.free_bytes() < 2 * HBM_BYTES + (1 << 30):
            emit(
                {
                    "event": "skipped",
                    "uuid": d.uuid,
                    "why": "less than %d GiB of GPU memory free"
                    % (2 * HBM_BYTES + (1 << 30) >> 30),
                }
            )
            continue
        d.alloc(HBM_BYTES), d.alloc(HBM_BYTES)
        d.timer = Timer(cu)
        emit({"event": "device", "uuid": d.uuid, "sms": d.sms})
    return devices


def measure(cu, plan):
    budgets, stop_at = plan["budgets"], plan["stop_at"]
    devices = []
    try:
        cu.call("cuInit", 0)
        devices = open_devices(cu)
        ready = [d for d in devices if d.timer is not None]
        if ready:
            per_device(ready, hbm, budgets["hbm"], stop_at)
            per_device(ready, fp32, budgets["fp32"], stop_at)
            pcie_all(cu, ready, budgets["pcie"], stop_at)
            pairs(cu, ready, budgets["p2p"], stop_at)
    except CudaError as exc:
        emit({"event": "error", "error": str(exc)})
    finally:
        for d in devices:
            d.close()


def main(argv=None):
    plan = json.loads((sys.argv[1:] if argv is None else argv)[0])
    try:
        cu = Driver()
    except OSError as exc:
        emit({"event": "error", "error": "cannot load libcuda.so.1: %s" % exc})
        return 0
    measure(cu, plan)
    emit({"event": "done"})
    return 0
