"""torch's own figures for the speed tier's cross-check (tools/h200_speed.sh): prints one JSON object.

DtoD: `dst.copy_(src)` of 2 GiB (read + written bytes counted, as the tier counts them); H2D / D2H:
pinned 256 MiB `copy_(non_blocking=True)`; bf16 8192^3 `torch.mm`. Each is timed with CUDA events,
best of 10 repetitions after a warm-up, on GPU 0. Frees what it took.
"""
import json
import sys

import torch


def best(run, reps=10):
    run()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(reps):
        s.record()
        run()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) / 1000.0)
    return min(out), max(out)


def main():
    dev = torch.device("cuda", 0)
    n = 2 << 30
    a, b = torch.ones(n, dtype=torch.uint8, device=dev), torch.empty(n, dtype=torch.uint8, device=dev)
    k = 10
    fast, slow = best(lambda: [b.copy_(a) for _ in range(k)])
    res = {"dtod_Bps": 2 * n * k / fast, "dtod_spread": (slow - fast) / slow}
    del a, b
    m = 256 << 20
    host = torch.empty(m, dtype=torch.uint8, pin_memory=True)
    d = torch.empty(m, dtype=torch.uint8, device=dev)
    fast, _ = best(lambda: [d.copy_(host, non_blocking=True) for _ in range(4)])
    res["h2d_Bps"] = 4 * m / fast
    fast, _ = best(lambda: [host.copy_(d, non_blocking=True) for _ in range(4)])
    res["d2h_Bps"] = 4 * m / fast
    del host, d
    N = 8192
    x, y = (torch.randn(N, N, device=dev, dtype=torch.bfloat16) for _ in range(2))
    c = torch.empty(N, N, device=dev, dtype=torch.bfloat16)
    fast, _ = best(lambda: [torch.mm(x, y, out=c) for _ in range(10)])
    res["bf16_FLOPps"] = 2.0 * N ** 3 * 10 / fast
    del x, y, c
    torch.cuda.empty_cache()
    res["torch"] = torch.__version__
    json.dump(res, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
