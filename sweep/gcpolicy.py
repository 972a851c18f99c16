"""The cyclic garbage collector's settings while a sweep collects its hosts.

CPython runs a young collection every 700 net new container objects, and a full one, which walks
every tracked object of the process (the inventory, the modules, pandas), after each ten of the
next generation's. A sweep makes such objects by the thousand for every host: the answer parsed
(a list per JSON array of an 8-GPU health.json), paramiko's messages and the transport's cycles.
At 10,000 hosts x 8 GPUs from canned answers (`bench/bench_pipeline.py`) that was 3,774 young and
24 full collections, about 2 of the 4 CPU-seconds spent judging the answers.

`fewer_collections()` moves what exists when the sweep starts (modules, inventory, manifest, the
agent bundle) out of the collector's sight (`gc.freeze`: before the worker processes fork, so
their collections do not touch the pages they share with the parent either) and lets the young
generation grow to `YOUNG` objects before it is collected. A document freed as soon as its record
is written never reaches that count, so a sweep collects a few times per 10,000 hosts; cyclic
garbage (a finished transport) is still collected, at most `YOUNG` objects late (tens of MB).
Everything is restored when the sweep ends. `build_report` runs under it too (a report of 30,000
hosts made 1,563 young and 11 full collections); the readers of run folders (`sweep.analysis.fleet`)
pause the collector while they parse, since a parsed document holds no cycle.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG = 200_000  # net new container objects between young collections (CPython's default: 700)

_lock = threading.Lock()
_depth = 0
_before: tuple[int, ...] = ()


@contextmanager
def fewer_collections(young: int = YOUNG) -> Iterator[None]:
    """Collect rarely while the block runs (nested or from several threads: the outermost block
    sets and restores)."""
    global _depth, _before
    with _lock:
        if _depth == 0:
            _before = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(young, *_before[1:])
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_before)
                gc.unfreeze()
