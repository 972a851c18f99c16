"""How many worker processes a `sweep run` forks (CPUs from affinity and the cgroup's quota), and how the
hosts are shared out among them."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, strategies as st

from sweep.collect.run import run_sweep
from sweep.collect.workers import auto_workers, shares, usable_cpus
from sweep.errors import ConfigError


@pytest.mark.parametrize("files, affinity, cpus", [
    ({}, 16, 16),  # no cgroup files: the affinity
    ({"cpu.max": "max 100000\n"}, 16, 16),  # v2, no quota
    ({"cpu.max": "200000 100000\n"}, 16, 2),  # v2, 2 CPUs of quota
    ({"cpu.max": "150000 100000\n"}, 16, 2),  # 1.5 CPUs: rounded up
    ({"cpu.max": "50000 100000\n"}, 16, 1),
    ({"cpu.max": "800000 100000\n"}, 4, 4),  # a quota above the affinity: the affinity (taskset)
    ({"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n"}, 8, 8),  # v1, no quota
    ({"cpu.cfs_quota_us": "300000\n", "cpu.cfs_period_us": "100000\n"}, 8, 3),  # v1, 3 CPUs
    ({"cpu.max": "garbage"}, 6, 6),  # unreadable: the affinity
])
def test_usable_cpus_reads_the_affinity_and_the_cgroup_quota(tmp_path, files, affinity, cpus):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert usable_cpus(tmp_path, affinity=affinity) == cpus


def test_the_number_of_workers_follows_cpus_forks_and_hosts():
    assert auto_workers(2, 256, 10_000) == 1  # 2 CPUs: one process, as before workers existed
    assert auto_workers(16, 256, 10_000) == 15  # one CPU left to the parent
    assert auto_workers(16, 32, 10_000) == 4  # 8 forks a worker at least
    assert auto_workers(16, 256, 100) == 3  # 32 hosts a worker at least
    assert auto_workers(4, 256, 10) == 1


def host(name: str, address: str, port: int = 22):
    return SimpleNamespace(name=name, address=address, port=port)


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2)), min_size=1, max_size=60), st.integers(1, 8))
def test_shares_keep_an_address_whole_every_host_once_and_balance(pairs, n):
    hosts = [host(f"h{i}", f"10.0.0.{a}", 22 + p) for i, (a, p) in enumerate(pairs)]
    parts = shares(hosts, n)
    assert sorted(h.name for part in parts for h in part) == sorted(h.name for h in hosts)  # each once
    assert len(parts) <= n
    where = {}
    for k, part in enumerate(parts):
        assert [hosts.index(h) for h in part] == sorted(hosts.index(h) for h in part)  # their order kept
        for h in part:
            assert where.setdefault((h.address, h.port), k) == k  # a machine's aliases in one worker
    groups: dict = {}
    for h in hosts:
        groups[(h.address, h.port)] = groups.get((h.address, h.port), 0) + 1
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= max(groups.values())  # greedy: off by at most the largest group


def test_workers_are_refused_for_an_engine_that_hands_its_hosts_to_one_tool(tmp_path):
    inventory = tmp_path / "inv.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01: {}\n")
    with pytest.raises(ConfigError, match="--workers 4 spreads sweep's own fan-out.*ansible engine"):
        run_sweep(inventory, engine="ansible", workers=4, out=tmp_path / "run")
    with pytest.raises(ConfigError, match="--workers is -1"):
        run_sweep(inventory, workers=-1, out=tmp_path / "run")
    assert not (tmp_path / "run").exists()  # refused before the run folder


def _pool_reading(lines: bytes, names: str):
    """A WorkerPool reading one forked child that wrote `lines` in one write and exited."""
    import os
    import select
    import selectors

    from sweep.collect.workers import WorkerPool

    pool = WorkerPool(bound=None, n=1, keep=None)
    pool._by_name = {name: SimpleNamespace(name=name) for name in names}
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: every line in one write, then gone
        os.close(rfd)
        os.write(wfd, lines)
        os._exit(0)
    os.close(wfd)
    assert len(lines) < select.PIPE_BUF  # one write lands whole: once readable, all of it is there
    assert select.select([rfd], [], [], 30)[0] == [rfd]
    os.set_blocking(rfd, False)
    pool._children[rfd] = (pid, 0)
    pool._buffers[rfd] = bytearray()
    pool._selector.register(rfd, selectors.EVENT_READ)
    return pool


def test_a_ctrl_c_between_outcomes_read_together_loses_none_of_them():
    """Lines a worker wrote together arrive in one read; Ctrl-C while the first is tallied must not
    drop the others (a whole-suite run beside stress-ng counted 4 records of 5 on disk): the rest
    are handed out by drain()."""
    import os
    import signal

    import orjson

    names = "abc"
    lines = b"".join(orjson.dumps(["outcome", n, "ok", None, "", 1, 0.0, 1.0, 0]) + b"\n" for n in names)
    pool = _pool_reading(lines + orjson.dumps(["done"]) + b"\n", names)
    got = []
    with pytest.raises(KeyboardInterrupt):
        for host, _ in pool._read(1.0):
            got.append(host.name)
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while this outcome is being tallied
            for _ in range(1000):  # bytecodes enough for Python to run the signal's handler
                pass
    got += [host.name for host, _ in pool.drain(timeout=5.0)]
    assert got == list(names)
