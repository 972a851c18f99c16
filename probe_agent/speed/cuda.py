"""The speed tier's driver-API measurements, run in a child process (`python3 -I -S -c ...`).

Talks to libcuda through ctypes alone (no toolkit, no framework): HBM by cuMemcpyDtoD, PCIe by
pinned cuMemcpyHtoD/DtoH, GPU-to-GPU by cuMemcpyPeer, FP32 by a PTX FMA kernel. Every figure is
timed with CUDA events. It prints one JSON line per measurement ({"event": ...}) as soon as it has
it, so a child stopped at the tier's bound still leaves what it measured; the parent turns the raw
timings into figures (probe_agent.speed.figures). Every allocation is freed and every context
released before it exits; nothing on the GPU is configured.
"""

import ctypes
import json
import sys
import threading
import time

HBM_BYTES = 2 << 30  # each of the two device buffers (the copy reads one and writes the other)
PCIE_BYTES = 256 << 20  # the pinned host buffer
P2P_BYTES = 256 << 20
REP_TARGET_S = 0.02  # one repetition's GPU time: copies or loop iterations are scaled to it
MIN_REPS, MAX_REPS = 3, 12
ATTR_SM_COUNT = 16
PEER_ALREADY_ENABLED = 704

FMA_PTX = r"""
.version 6.0
.target sm_50
.address_size 64
.visible .entry fma32(.param .u64 out, .param .u32 iters)
{
  .reg .f32 %f<12>; .reg .b32 %r<4>; .reg .b64 %rd<2>; .reg .pred %p1;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [iters];
  mov.u32 %r2, %tid.x;
  cvt.rn.f32.u32 %f0, %r2;
  mov.f32 %f9, 0f3F7FFFFE;
  mov.f32 %f10, 0f3A83126F;
  add.f32 %f1, %f0, %f10; add.f32 %f2, %f1, %f10; add.f32 %f3, %f2, %f10; add.f32 %f4, %f3, %f10;
  add.f32 %f5, %f4, %f10; add.f32 %f6, %f5, %f10; add.f32 %f7, %f6, %f10; add.f32 %f8, %f7, %f10;
  mov.u32 %r3, 0;
LOOP:
%BODY%
  add.u32 %r3, %r3, 1;
  setp.lt.u32 %p1, %r3, %r1;
  @%p1 bra LOOP;
  add.f32 %f1, %f1, %f2; add.f32 %f3, %f3, %f4; add.f32 %f5, %f5, %f6; add.f32 %f7, %f7, %f8;
  add.f32 %f1, %f1, %f3; add.f32 %f5, %f5, %f7; add.f32 %f1, %f1, %f5;
  st.global.f32 [%rd1], %f1;
  ret;
}
"""
FMA_CHAINS, FMA_UNROLL = 8, 4
FMA_PER_ITER = FMA_CHAINS * FMA_UNROLL  # per thread and loop iteration
FMA_THREADS, FMA_BLOCKS_PER_SM = 256, 8


def fma_ptx():
    """The FP32 kernel: FMA_CHAINS independent chains, unrolled FMA_UNROLL times per iteration."""
    body = "\n".join(
        "  fma.rn.f32 %%f%d, %%f%d, %%f9, %%f10;" % (c, c)
        for _ in range(FMA_UNROLL)
        for c in range(1, FMA_CHAINS + 1)
    )
    return FMA_PTX.replace("%BODY%", body)


class CudaError(Exception):
    """A driver call answered an error code."""

    def __init__(self, what, rc):
        Exception.__init__(self, "CUDA driver error %d in %s" % (rc, what))
        self.rc = rc


def emit(event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


class Driver(object):
    """libcuda through ctypes: `call(name, *args)` raises CudaError on a non-zero answer."""

    def __init__(self, lib=None):
        self.lib = lib or ctypes.CDLL("libcuda.so.1")

    def call(self, name, *args):
        rc = getattr(self.lib, name)(*args)
        if rc != 0:
            raise CudaError(name, rc)

    def try_call(self, name, *args):
        return getattr(self.lib, name)(*args)


class Timer(object):
    """Two CUDA events in the current context: time(work) is work()'s GPU time in seconds."""

    def __init__(self, cu):
        self.cu = cu
        self.start, self.end = ctypes.c_void_p(), ctypes.c_void_p()
        cu.call("cuEventCreate", ctypes.byref(self.start), 0)
        cu.call("cuEventCreate", ctypes.byref(self.end), 0)

    def time(self, work):
        self.cu.call("cuEventRecord", self.start, None)
        work()
        self.cu.call("cuEventRecord", self.end, None)
        self.cu.call("cuEventSynchronize", self.end)
        ms = ctypes.c_float()
        self.cu.call("cuEventElapsedTime", ctypes.byref(ms), self.start, self.end)
        return ms.value / 1000.0

    def close(self):
        for ev in (self.start, self.end):
            self.cu.try_call("cuEventDestroy_v2", ev)


def scale(one_s, target_s=REP_TARGET_S, most=64):
    """How many units (copies) make one repetition of about target_s, one taking one_s."""
    if one_s <= 0:
        return most
    return int(max(1, min(most, round(target_s / one_s))))


def repeat(
    run_once, budget_s, clock=time.monotonic, min_reps=MIN_REPS, max_reps=MAX_REPS, stop_at=None
):
    """run_once() (which returns its GPU seconds) repeated within budget_s of wall time: at least
    min_reps, at most max_reps, none started past stop_at (the tier's end, time.time())."""
    times, t0 = [], clock()
    while len(times) < max_reps and (len(times) < min_reps or clock() - t0 < budget_s):
        if stop_at is not None and time.time() > stop_at and times:
            break
        times.append(run_once())
    return times


def copy_figure(timer, copy_once, budget_s, stop_at):
    """Warm up, scale the copies of one repetition to REP_TARGET_S, repeat: (copies,
    per-rep seconds)."""
    first = timer.time(copy_once)
    copies = scale(first)

    def rep():
        return timer.time(lambda: [copy_once() for _ in range(copies)])

    return copies, repeat(rep, budget_s, stop_at=stop_at)


class Device(object):
    """One CUDA device: its primary context, its two HBM buffers and its event pair."""

    def __init__(self, cu, ordinal):
        self.cu, self.ordinal = cu, ordinal
        self.dev, self.ctx = ctypes.c_int(), ctypes.c_void_p()
        self.buffers, self.timer, self.retained = [], None, False
        cu.call("cuDeviceGet", ctypes.byref(self.dev), ordinal)
        self.uuid = device_uuid(cu, self.dev)
        sms = ctypes.c_int()
        cu.call("cuDeviceGetAttribute", ctypes.byref(sms), ATTR_SM_COUNT, self.dev)
        self.sms = max(sms.value, 1)
        cu.call("cuDevicePrimaryCtxRetain", ctypes.byref(self.ctx), self.dev)
        self.retained = True

    def current(self):
        self.cu.call("cuCtxSetCurrent", self.ctx)

    def alloc(self, size):
        ptr = ctypes.c_uint64()
        self.cu.call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(size))
        self.buffers.append(ptr)
        return ptr

    def free_bytes(self):
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self.cu.call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
        return free.value

    def close(self):
        """Free what this device holds and release its context (errors ignored: best effort)."""
        if not self.retained:
            return
        self.cu.try_call("cuCtxSetCurrent", self.ctx)
        self.cu.try_call("cuCtxSynchronize")
        if self.timer is not None:
            self.timer.close()
        for ptr in self.buffers:
            self.cu.try_call("cuMemFree_v2", ptr)
        self.buffers = []
        self.cu.try_call("cuDevicePrimaryCtxRelease_v2", self.dev)
        self.retained = False


def device_uuid(cu, dev):
    """The device's UUID as NVML writes it (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)."""
    raw = (ctypes.c_ubyte * 16)()
    name = "cuDeviceGetUuid_v2" if hasattr(cu.lib, "cuDeviceGetUuid_v2") else "cuDeviceGetUuid"
    cu.call(name, raw, dev)
    h = bytes(raw).hex()
    return "GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])
