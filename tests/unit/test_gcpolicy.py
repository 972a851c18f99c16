"""A sweep collects garbage rarely (issue 52): CPython's default young-generation threshold (700)
made 10,000 8-GPU answers cost 3,774 young and 24 full collections, half the CPU of judging them.
While a sweep collects, what existed before it is frozen and the young generation may grow to
`YOUNG`; cyclic garbage is still collected, and everything is as it was once the sweep ends."""

import contextlib
import gc
import json
import time
import weakref

from fleet_variants import must_show_health

from sweep.collect.engines.base import Engine, outcome_of_output
from sweep.collect.options import HostSelection
import sweep.collect.run as run_module
from sweep.collect.run import run_sweep
from sweep.gcpolicy import YOUNG, fewer_collections

HOSTS = 300
IN_FLIGHT = 64  # sweep run's default --forks is 32


def answer(name: str) -> bytes:
    health = must_show_health("gpu01", 8)
    health["host"]["hostname"] = name
    return json.dumps(health, separators=(",", ":")).encode()


class CountingEngine(Engine):
    """Each host answers an 8-GPU health.json, judged as the SSH engine judges it, `IN_FLIGHT` at a
    time (the answers of the hosts that finish together are held until their records are
    written); the collector's settings and its collections are noted meanwhile."""

    name = "ssh"

    def __init__(self):
        self.seen, self.collections = [], 0

    def bind(self, job):
        return self

    def check(self, hosts, options, inventory_path):
        pass

    def _count(self, phase, info):
        self.collections += phase == "stop"

    def run(self, hosts):
        hosts = list(hosts)
        gc.callbacks.append(self._count)
        try:
            for first in range(0, len(hosts), IN_FLIGHT):
                chunk = hosts[first : first + IN_FLIGHT]
                self.seen.append((gc.get_threshold()[0], gc.get_freeze_count()))
                outcomes = [
                    outcome_of_output(host, time.time(), answer(host.name), 0, "") for host in chunk
                ]
                yield from zip(chunk, outcomes)
        finally:
            gc.callbacks.remove(self._count)

    def stop(self):
        pass

    def drain(self, timeout=10.0):
        return []


def sweep(tmp_path, label):
    inventory = tmp_path / "fleet.yml"
    inventory.write_text(
        "all:\n  hosts:\n"
        + "".join(f"    gpu{i:03d}: {{ansible_host: 127.0.0.1}}\n" for i in range(HOSTS))
    )
    engine = CountingEngine()
    result = run_sweep(
        inventory,
        engine=engine,
        out=tmp_path / label,
        hosts=HostSelection(),
        report={"no_report": True},
    )
    assert result.ok == HOSTS
    return engine


def test_a_sweep_collects_rarely_and_leaves_the_collector_as_it_found_it(tmp_path, monkeypatch):
    before = gc.get_threshold()
    engine = sweep(tmp_path, "run")
    assert {threshold for threshold, _ in engine.seen} == {YOUNG}
    assert all(frozen > 1000 for _, frozen in engine.seen)  # modules, inventory: out of its sight
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    # the same sweep under CPython's defaults collects dozens of times
    monkeypatch.setattr(run_module, "fewer_collections", contextlib.nullcontext)
    default = sweep(tmp_path, "default")
    assert default.collections >= 30 and engine.collections <= 3, (
        default.collections,
        engine.collections,
    )


def test_cyclic_garbage_is_still_collected_meanwhile():
    class Node:
        pass

    with fewer_collections():
        first = Node()
        first.me = first  # a cycle: only the collector frees it
        alive = weakref.ref(first)
        del first
        keep = [[] for _ in range(YOUNG + 1000)]  # the young generation past its threshold
        assert alive() is None
        del keep


def test_only_the_outermost_block_restores_and_unfreezes():
    before = gc.get_threshold()
    with fewer_collections(young=12_345):
        with fewer_collections(young=99):
            assert gc.get_threshold()[0] == 12_345
        assert gc.get_threshold()[0] == 12_345 and gc.get_freeze_count() > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
