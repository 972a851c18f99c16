"""A short GPU load and the cheap NVML samples taken while it runs (`--load SECONDS`).

The load runs in a child process so that a crash in it cannot take the probe down. Engines:
`torch` (a bf16 matmul loop: realistic power draw, needs a CUDA torch) and `ptx` (an FMA loop
loaded through the CUDA driver API with ctypes: needs nothing installed).
"""

import statistics
import subprocess
import threading
import time

from probe_agent.collect import Reader, decode_reasons, mw_to_w, NVML_CLOCK_MEM, NVML_CLOCK_SM

# Each load prints STARTED once its GPU work begins (after `import torch`, which alone takes
# seconds) and ENDED when it stops: the probe times its full mid-load read from STARTED, and the
# summary covers only the samples between the two (the busy window), not the child's start-up.
STARTED = "sweep-load-started"
ENDED = "sweep-load-ended"

TORCH_LOAD = r"""
import sys, time, torch
secs = float(sys.argv[1]); n = torch.cuda.device_count()
mats = [(torch.randn(8192, 8192, device=i, dtype=torch.bfloat16),) * 2 for i in range(n)]
print("sweep-load-started", flush=True)
t0 = time.time(); iters = 0
while time.time() - t0 < secs:
    for a, b in mats:
        with torch.cuda.device(a.device):
            for _ in range(10): c = a @ b
    for i in range(n): torch.cuda.synchronize(i)
    iters += 10
print("sweep-load-ended", flush=True)
print(iters)
"""

PTX = r"""
.version 6.0
.target sm_50
.address_size 64
.visible .entry burn(.param .u64 out, .param .u32 iters)
{
  .reg .f32 %f<9>; .reg .b32 %r<6>; .reg .b64 %rd<3>; .reg .pred %p1;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [iters];
  mov.u32 %r2, %tid.x;
  cvt.rn.f32.u32 %f1, %r2;
  mov.f32 %f2, 0f3F7FFFFE;
  mov.f32 %f3, 0f3A83126F;
  mov.f32 %f4, %f1; mov.f32 %f5, %f1; mov.f32 %f6, %f1;
  mov.u32 %r3, 0;
LOOP:
  fma.rn.f32 %f1, %f1, %f2, %f3;
  fma.rn.f32 %f4, %f4, %f2, %f3;
  fma.rn.f32 %f5, %f5, %f2, %f3;
  fma.rn.f32 %f6, %f6, %f2, %f3;
  add.u32 %r3, %r3, 1;
  setp.lt.u32 %p1, %r3, %r1;
  @%p1 bra LOOP;
  add.f32 %f1, %f1, %f4; add.f32 %f1, %f1, %f5; add.f32 %f1, %f1, %f6;
  st.global.f32 [%rd1], %f1;
  ret;
}
"""

PTX_LOAD = r"""
import ctypes, sys, time
secs = float(sys.argv[1]); ptx = sys.argv[2].encode() + b"\0"
cu = ctypes.CDLL("libcuda.so.1")
def ok(rc, what):
    if rc != 0: sys.exit("CUDA driver error %d in %s" % (rc, what))
ok(cu.cuInit(0), "cuInit")
n = ctypes.c_int(); ok(cu.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
ctxs = []
for i in range(n.value):
    dev = ctypes.c_int(); ok(cu.cuDeviceGet(ctypes.byref(dev), i), "cuDeviceGet")
    ctx = ctypes.c_void_p(); ok(cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev), "cuCtxCreate")
    mod = ctypes.c_void_p(); ok(cu.cuModuleLoadData(ctypes.byref(mod), ptx), "cuModuleLoadData")
    fn = ctypes.c_void_p()
    ok(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"burn"), "cuModuleGetFunction")

    buf = ctypes.c_uint64(); ok(cu.cuMemAlloc_v2(ctypes.byref(buf), 4), "cuMemAlloc")
    sms = ctypes.c_int(); cu.cuDeviceGetAttribute(ctypes.byref(sms), 16, dev)
    ctxs.append((ctx, fn, buf, max(sms.value, 1)))
iters = ctypes.c_uint32(2000000)
print("sweep-load-started", flush=True)
t0 = time.time(); launches = 0
while time.time() - t0 < secs:
    for ctx, fn, buf, sms in ctxs:
        cu.cuCtxSetCurrent(ctx)
        params = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(buf), ctypes.c_void_p),
                                       ctypes.cast(ctypes.byref(iters), ctypes.c_void_p))
        ok(cu.cuLaunchKernel(fn, sms * 8, 1, 1, 256, 1, 1, 0, None, params, None), "cuLaunchKernel")
    for ctx, fn, buf, sms in ctxs:
        cu.cuCtxSetCurrent(ctx); ok(cu.cuCtxSynchronize(), "cuCtxSynchronize")
    launches += 1
print("sweep-load-ended", flush=True)
print(launches)
"""


def start_load(engine, seconds, torch_python):
    """Start the load child; returns (Popen, engine used)."""
    from probe_agent.children import command

    if engine == "torch":
        argv, _ = command("load-torch", [seconds], python=torch_python)
    else:
        argv, _ = command("load-ptx", [seconds, PTX])
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    return proc, engine


def _watch(stream, started, marks):
    """Read the load child's stdout to its end; note when it says its GPU work began and ended
    (`marks`: marker -> time.monotonic()) and set `started` at the first."""
    for line in iter(stream.readline, b""):
        marker = line.strip().decode("ascii", "replace")
        if marker in (STARTED, ENDED) and marker not in marks:
            marks[marker] = time.monotonic()
            if marker == STARTED:
                started.set()


def mark_phases(samples, started_s, ended_s):
    """Mark each sample "before" the load's GPU work began, "load" inside it, or "after" it ended.
    A load that never said it started has no busy window: every sample is "before"."""
    for s in samples:
        t = s.get("t")
        if started_s is None or t is None or t < started_s:
            s["phase"] = "before"
        elif ended_s is not None and t > ended_s:
            s["phase"] = "after"
        else:
            s["phase"] = "load"


def busy(samples):
    """The samples of the busy window. Samples without a phase (wrapped commands, records of agents
    before 1.2) all count, as they did."""
    return [s for s in samples if isinstance(s, dict) and s.get("phase", "load") == "load"]


def sample(src, count, t):
    """One sample of every GPU's cheap readings."""
    if src.replaying:
        return src.next_sample()
    out = {"t": round(t, 3), "gpus": []}
    for i in range(count):
        r = Reader(src, {})
        h = src.handle(i)
        k = "sample.gpu%d." % i
        reasons = r.get(k + "reasons", "r", "nvmlDeviceGetCurrentClocksThrottleReasons", h)
        out["gpus"].append(
            {
                "index": i,
                "sm_mhz": r.get(k + "sm", "sm", "nvmlDeviceGetClockInfo", h, NVML_CLOCK_SM),
                "mem_mhz": r.get(k + "mem", "mem", "nvmlDeviceGetClockInfo", h, NVML_CLOCK_MEM),
                "power_w": mw_to_w(r.get(k + "power", "p", "nvmlDeviceGetPowerUsage", h)),
                "enforced_limit_w": mw_to_w(
                    r.get(k + "limit", "l", "nvmlDeviceGetEnforcedPowerLimit", h)
                ),
                "temperature_c": r.get(k + "temp", "t", "nvmlDeviceGetTemperature", h, 0),
                "utilization_gpu_pct": (
                    r.get(k + "util", "u", "nvmlDeviceGetUtilizationRates", h) or {}
                ).get("gpu"),
                "pcie_gen": r.get(k + "pcie_gen", "g", "nvmlDeviceGetCurrPcieLinkGeneration", h),
                "active_reasons": decode_reasons(reasons),
            }
        )
    if hasattr(src, "samples"):
        src.samples.append(out)
    return out


def summarize(samples, max_sm):
    """Per-GPU summary of the busy window's samples: the figures that prove or clear throttling."""
    per = {}
    for s in busy(samples):
        for g in (s or {}).get("gpus", []):
            per.setdefault(g["index"], []).append(g)
    out = []
    for i, rows in sorted(per.items()):
        sm = [r["sm_mhz"] for r in rows if r.get("sm_mhz") is not None]
        pw = [r["power_w"] for r in rows if r.get("power_w") is not None]
        lim = [r["enforced_limit_w"] for r in rows if r.get("enforced_limit_w")]
        frac = lambda name: round(
            sum(1 for r in rows if name in (r.get("active_reasons") or [])) / float(len(rows)), 3
        )
        out.append(
            {
                "gpu": i,
                "samples": len(rows),
                "sm_mhz_min": min(sm) if sm else None,
                "sm_mhz_median": statistics.median(sm) if sm else None,
                "sm_mhz_max_allowed": (max_sm or {}).get(i),
                "power_w_max": max(pw) if pw else None,
                "power_w_median": statistics.median(pw) if pw else None,
                "enforced_limit_w": lim[-1] if lim else None,
                "sw_power_cap_fraction": frac("sw_power_cap"),
                "hw_slowdown_fraction": max(
                    frac("hw_slowdown"),
                    frac("hw_thermal_slowdown"),
                    frac("hw_power_brake_slowdown"),
                ),
                "sw_thermal_fraction": frac("sw_thermal_slowdown"),
                "pcie_gen_max": max(
                    [r["pcie_gen"] for r in rows if r.get("pcie_gen") is not None] or [None],
                    key=lambda v: -1 if v is None else v,
                ),
            }
        )
    return out


def replayed_window(samples, seconds, recorded_seconds=None):
    """The recorded samples up to `seconds` into the recorded load (all of them when the recording's
    load is no longer, `recorded_seconds`): a replayed --load S lasts S seconds, as a measured one
    does, whatever the recording's own length. The samples before the load are kept."""
    times = [
        s.get("t") for s in samples if isinstance(s, dict) and isinstance(s.get("t"), (int, float))
    ]
    if not times or not seconds or seconds <= 0:
        return list(samples)
    if isinstance(recorded_seconds, (int, float)) and seconds >= recorded_seconds:
        return list(samples)
    loaded = [
        s["t"]
        for s in samples
        if isinstance(s, dict) and s.get("phase") == "load" and isinstance(s.get("t"), (int, float))
    ]
    end = (min(loaded) if loaded else min(times)) + seconds
    return [
        s
        for s in samples
        if not isinstance(s, dict) or not isinstance(s.get("t"), (int, float)) or s["t"] <= end
    ]


def run_load(src, count, seconds, engine, torch_python, interval, read_facts):
    """Run the load, sample it, and call read_facts() once mid-load. Returns the load section."""
    section = {
        "seconds": seconds,
        "engine": engine,
        "interval_s": interval,
        "samples": [],
        "pid": None,
    }
    if src.replaying and not getattr(src, "measures", False):
        recorded = src.data.get("load") or {}
        section.update({k: v for k, v in recorded.items() if k not in ("samples", "seconds")})
        section["samples"] = replayed_window(
            src.data.get("samples") or [], seconds, recorded.get("seconds")
        )
        read_facts()
        return section
    proc, used = start_load(engine, seconds, torch_python)
    section["engine"], section["pid"] = used, proc.pid
    started, err, marks = threading.Event(), [], {}
    t0 = time.monotonic()
    readers = [
        threading.Thread(target=_watch, args=(proc.stdout, started, marks), daemon=True),
        threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True),
    ]
    for reader in readers:
        reader.start()
    # when the child's GPU work began: the full read is taken half-way through the load
    began = None
    read = False
    while proc.poll() is None:
        t = time.monotonic() - t0
        if t > seconds + 60:
            proc.kill()
            break
        taken = sample(src, count, t)
        if taken is not None:  # a replay whose capture holds no samples (SWEEP_REPLAY_MEASURE)
            section["samples"].append(taken)
        if began is None and started.is_set():
            began = t
        if not read and began is not None and t - began >= seconds / 2.0:
            read_facts()
            read = True
        time.sleep(interval)
    proc.wait()
    for reader in readers:
        reader.join(5.0)
    section["exit_code"] = proc.returncode
    section["started_s"], section["ended_s"] = (
        round(marks[m] - t0, 3) if m in marks else None for m in (STARTED, ENDED)
    )
    mark_phases(section["samples"], section["started_s"], section["ended_s"])
    if proc.returncode != 0:
        section["error"] = b"".join(err).decode("utf-8", "replace").strip()[-500:]
    if not read:  # the load never started or ended early: read what is there
        read_facts()
    if hasattr(src, "load_meta"):
        src.load_meta = {k: v for k, v in section.items() if k != "samples"}
    return section
