"""Topology and device-mask renumbering, proven on a real two-GPU H200 host (captures in fixtures/x2).

Each capture was recorded with --deep under a different CUDA_VISIBLE_DEVICES; torch's own view
of every CUDA device (its UUID) was recorded with it, so the agent's mapping is checked against
CUDA itself, not against our idea of it.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from probe_agent.collect import parse_topo_matrix

ROOT = Path(__file__).resolve().parents[2]
X2 = ROOT / "tests" / "fixtures" / "x2"


def replay(name):
    proc = subprocess.run([sys.executable, "-m", "probe_agent", "--deep", "--replay", str(X2 / f"x2-{name}.json")],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("name,mask,physical", [
    ("idle-deep", None, [0, 1]),
    ("mask-1", "1", [1]),
    ("mask-1-0", "1,0", [1, 0]),
    ("mask-uuid-rev", "{uuid1},{uuid0}", [1, 0]),
    ("mask-bad", "1,7,0", [1]),
])
def test_mask_maps_each_cuda_index_to_the_gpu_torch_sees(name, mask, physical):
    h = replay(name)
    uuids = {"uuid%d" % g["index"]: g["uuid"] for g in h["gpus"]}
    assert h["environment"].get("CUDA_VISIBLE_DEVICES") == (mask and mask.format(**uuids))
    selected = h["mask"]["selected"]
    assert [s["physical_index"] for s in selected] == physical
    assert [s["cuda_index"] for s in selected] == list(range(len(physical)))
    torch_view = [d["uuid"] for d in h["frameworks"][0]["devices"]]
    assert [s["uuid"] for s in selected] == torch_view
    assert [h["gpus"][p]["uuid"] for p in physical] == torch_view


def test_invalid_entry_stops_the_mask_like_cuda():
    h = replay("mask-bad")
    assert h["mask"]["state"] == "partly_invalid"
    assert h["mask"]["invalid"] == [{"entry": "7", "position": 1, "reason": "no GPU 7 on this host (it has 2)"}]
    assert h["mask"]["ignored"] == ["0"]
    c = next(c for c in h["contracts"] if c["name"] == "device_mask")
    assert c["status"] == "warning" and "'7'" in c["message"]


def test_topology_agrees_with_nvidia_smi_topo_m_for_every_pair():
    smi = parse_topo_matrix((X2 / "topo.txt").read_text())
    h = replay("idle")
    assert smi["pairs"] == {"0-1": "NV18"}
    assert h["topology"]["pairs"] == smi["pairs"]
    assert h["topology"]["worst_link_selected"] == "NV18"
    assert next(c for c in h["contracts"] if c["name"] == "topology")["status"] == "ok"
    assert replay("mask-1")["topology"]["worst_link_selected"] is None  # one GPU selected: no link


def test_comparison_report_on_the_two_gpu_host_finds_the_same_link_classes(tmp_path):
    from sweep.report.build import build_report

    names = ["idle", "mask-1-0", "mask-uuid-rev", "mask-1"]
    result = build_report([X2 / f"x2-{n}.health.json" for n in names], tmp_path)
    classes = {tuple(c["hosts"]): c["keys"] for c in result.summary["classes"]}
    assert classes[("x2-idle.health", "x2-mask-1-0.health", "x2-mask-uuid-rev.health")]["link"] == "NV18 (NVLink)"
    assert classes[("x2-mask-1.health",)]["link"] == "single GPU"
    assert result.exit_code == 3  # a one-GPU mask cannot be benchmarked with the two-GPU runs
