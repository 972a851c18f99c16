"""The speed tier's torch child: bf16 dense GEMM per GPU and one NCCL all-reduce across them.

Runs under the host's training python (`python -c TORCH_CHILD PLAN`). It imports torch at once
(seconds: the parent overlaps that with the driver-API figures), prints {"event": "ready"}, and
touches no GPU until the parent writes a line on its stdin: the budgets then (JSON), or nothing
(stdin closed: it exits). The GEMMs run on every GPU at once (each its own SMs); the all-reduce,
through torch.cuda.nccl (one process, every selected GPU), follows them. NVLink multicast (NVLS)
stays off: it is asked of NCCL in the child's environment only, no setting of the host is changed.
"""

TORCH_CHILD = r"""
import json, os, sys, time
os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast off in this child, whatever the caller set
def emit(ev):
    sys.stdout.write(json.dumps(ev) + "\n"); sys.stdout.flush()
t0 = time.time()
import torch
emit({"event": "ready", "import_s": round(time.time() - t0, 3)})
line = sys.stdin.readline()
if not line.strip():
    sys.exit(0)
plan = json.loads(line); stop_at = plan["stop_at"]
def uuid_of(i):
    u = getattr(torch.cuda.get_device_properties(i), "uuid", None)
    return None if u is None else "GPU-" + str(u)
def reps(run, budget):
    out, t = [], time.time()
    while (len(out) < 12 and (len(out) < 3 or time.time() - t < budget)
           and not (out and time.time() > stop_at)):
        out.append(run())
    return out
n = torch.cuda.device_count() if torch.cuda.is_available() else 0
if not n:
    emit({"event": "skipped", "key": "bf16_gemm", "why": "torch sees no CUDA GPU"}); sys.exit(0)
N, K = 8192, 10
mats = []
for i in range(n):
    with torch.cuda.device(i):
        a = torch.randn(N, N, device=i, dtype=torch.bfloat16)
        b = torch.randn(N, N, device=i, dtype=torch.bfloat16)
        mats.append((a, b, torch.empty(N, N, device=i, dtype=torch.bfloat16),
                     torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
def gemm_rep():
    for i, (a, b, c, s, e) in enumerate(mats):
        with torch.cuda.device(i):
            s.record()
            for _ in range(K): torch.mm(a, b, out=c)
            e.record()
    for m in mats: m[4].synchronize()
    return [m[3].elapsed_time(m[4]) / 1000.0 for m in mats]
warm = time.time()
# the clocks rise from idle: the first products are slow
while time.time() - warm < plan.get("warm", 0.05):
    gemm_rep()
times = reps(gemm_rep, plan["gemm"])
for i in range(n):
    emit({"event": "figure", "key": "bf16_gemm", "uuid": uuid_of(i), "flops": 2.0 * N ** 3 * K,
          "work": 2.0 * N ** 3 * K, "bytes": 3 * N * N * 2, "size": N,
          "times": [t[i] for t in times]})
del mats; torch.cuda.empty_cache()
if n < 2:
    emit({"event": "skipped", "key": "allreduce", "why": "one GPU selected"}); sys.exit(0)
try:
    import torch.cuda.nccl as nccl
    S = 256 << 20
    bufs = [torch.zeros(S // 2, device=i, dtype=torch.bfloat16) for i in range(n)]
    if not nccl.is_available(bufs):
        raise RuntimeError("torch was built without NCCL")
    def ar_rep():
        t = time.time(); nccl.all_reduce(bufs)
        for i in range(n): torch.cuda.synchronize(i)
        return time.time() - t
    ar_rep()
    emit({"event": "allreduce", "uuids": [uuid_of(i) for i in range(n)], "bytes": S,
          "work": S * 2.0 * (n - 1) / n, "ranks": n, "times": reps(ar_rep, plan["allreduce"])})
    del bufs; torch.cuda.empty_cache()
except Exception as exc:
    emit({"event": "skipped", "key": "allreduce",
          "why": "no torch with NCCL (%s: %s)" % (type(exc).__name__, exc)})

"""
