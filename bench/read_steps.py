"""Process time of each step of reading a run folder in one process (`load_fleet(workers=1)`, no profiler).

    python3 bench/bench_report.py --hosts 10000 --gpus 8 --keep DIR     # the fleet, kept
    python3 bench/read_steps.py DIR/run                                 # this tree
    PYTHONPATH=TREE python3 bench/read_steps.py DIR/run                 # another tree (b378d2c: sweep.fleet)
    python3 bench/read_steps.py DIR/run --as-workers 2                  # the chunks 2 workers would get, in turn

With `--as-workers N` the files are cut into the chunks `sweep report` gives N worker processes
(four each), and the chunks are read one after the other in this process (the pool replaced by a
serial one): the per-step times of the parallel read, without the scheduling noise of processes.

Steps: the JSON read (file, digest, parse), the rows (`_Builder.add`: the read is its caller's), the typing of
the frames (`_Builder.typed`) and the rest (listing, joining the chunks). Each step is timed by
wrapping the tree's own function; run it two or three times, alternating trees, on a shared machine.
"""
from __future__ import annotations

import functools
import importlib
import sys
import time

try:
    fleet = importlib.import_module("sweep.analysis.fleet")
except ImportError:  # b378d2c and before
    fleet = importlib.import_module("sweep.fleet")

SPENT: dict[str, float] = {}


def timed(name, function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            SPENT[name] = SPENT.get(name, 0.0) + time.process_time() - start
    return wrapper


class SerialPool:
    """A stand-in for ProcessPoolExecutor: map runs in this process, in order."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def map(self, function, items):
        return map(function, items)


def main(run: str, workers: int = 1) -> None:
    fleet._read_json = timed("read", fleet._read_json)
    fleet._Builder.add = timed("add", fleet._Builder.add)
    fleet._Builder.typed = timed("typed", fleet._Builder.typed)
    start = time.process_time()
    if workers > 1:
        fleet.ProcessPoolExecutor = SerialPool
    loaded = fleet.load_fleet([run], workers=workers)
    total = time.process_time() - start
    print(f"{fleet.__name__} ({workers} worker(s)' chunks): {len(loaded.hosts)} hosts, {len(loaded.gpus)} GPUs: total {total:.2f} s; "
          f"JSON read {SPENT['read']:.2f}, rows {SPENT['add']:.2f}, typing {SPENT['typed']:.2f}, "
          f"rest {total - SPENT['read'] - SPENT['add'] - SPENT['typed']:.2f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[3]) if sys.argv[2:3] == ["--as-workers"] else 1)
