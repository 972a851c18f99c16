"""Each GPU of a host has its own CPUs, NUMA node and nearest NIC by design (nvidia-smi topo -m): facts shown per
GPU (issue 51) that never make a "GPUs differ within the host" warning, where a power limit that differs does."""
from __future__ import annotations

import fleet_variants as fv
import sweep


def _placed(h: dict) -> dict:
    h["topology"]["cpu_affinity"] = {str(i): "0-47" if i < 4 else "48-95" for i in range(8)}
    h["topology"]["numa_affinity"] = {str(i): "0" if i < 4 else "1" for i in range(8)}
    return h


def _mixed(tmp_path, variant) -> list[str]:
    records = [fv.record(h, variant(_placed(fv.h200(8, h))) if h == "gpu02" else _placed(fv.h200(8, h)))
               for h in ("gpu01", "gpu02", "gpu03")]
    fv.write_run(tmp_path / "run", records)
    judged = sweep.assess(sweep.load_fleet([tmp_path / "run"]))
    return [f.host for f in judged.findings.health if f.kind == "mixed_gpus"]


def test_gpus_on_two_sockets_are_not_gpus_that_differ(tmp_path):
    assert _mixed(tmp_path, lambda h: h) == []


def test_a_power_limit_that_differs_within_a_host_still_is(tmp_path):
    assert _mixed(tmp_path, lambda h: fv.power_cap(h, 250.0, gpus={3})) == ["gpu02"]
