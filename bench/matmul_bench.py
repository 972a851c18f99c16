"""A bf16 matmul benchmark with one number: TFLOP/s of an N x N x N torch matmul, for ~10 s.

    python3 bench/matmul_bench.py                       # 8192^3 bf16 on cuda:0, 10 s
    python3 bench/matmul_bench.py --device cpu --size 512 --seconds 1 --dtype float32   # smoke test

Warm-up (cuBLAS heuristics, clocks ramping up) is run first and not counted. The timed phase
launches batches of matmuls and synchronizes after each batch, so the host never queues more
than one batch ahead; time is host wall time around whole synchronized batches. The last line is
`TFLOP/s: X` (what bench/bench_wrap.py reads).
"""
import argparse
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--seconds", type=float, default=10.0, help="timed phase (default 10)")
    p.add_argument("--warmup", type=float, default=2.0, help="untimed warm-up seconds (default 2)")
    p.add_argument("--batch", type=int, default=20, help="matmuls between synchronizations")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--window", type=float, default=0.0,
                   help="also print the throughput of each WINDOW seconds of the timed phase")
    a = p.parse_args()

    import torch

    dev = torch.device(a.device)
    dtype = getattr(torch, a.dtype)
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    x = torch.randn(a.size, a.size, device=dev, dtype=dtype)
    y = torch.randn(a.size, a.size, device=dev, dtype=dtype)
    out = torch.empty(a.size, a.size, device=dev, dtype=dtype)

    flop = 2.0 * a.size ** 3

    def run(seconds, window=0.0):
        n = 0
        sync()
        t0 = time.perf_counter()
        w_n, w_t0, k = 0, t0, 0
        while True:
            for _ in range(a.batch):
                torch.matmul(x, y, out=out)
            sync()
            n += a.batch
            now = time.perf_counter()
            elapsed = now - t0
            if window:
                w_n += a.batch
                if now - w_t0 >= window:
                    print("window %d (%.0f-%.0f s) TFLOP/s: %.6g" % (k, w_t0 - t0, now - t0, flop * w_n / (now - w_t0) / 1e12),
                          flush=True)
                    w_n, w_t0, k = 0, now, k + 1
            if elapsed >= seconds:
                return n, elapsed

    run(a.warmup)
    n, elapsed = run(a.seconds, a.window)
    tflops = flop * n / elapsed / 1e12
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    print("matmul %s %d^3 on %s: %d matmuls in %.2f s" % (a.dtype, a.size, name, n, elapsed))
    print("TFLOP/s: %.6g" % tflops)


if __name__ == "__main__":
    main()
