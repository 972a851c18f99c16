"""Replayed 8-GPU hosts whose captures carry real `nvidia-smi topo -m` matrices from the corpus
(tests/fixtures/corpus), swept over real OpenSSH sshds on loopback with the agent pushed and run from
memory as on a host (issue 51's must-show): the records' topology and nearest-NIC columns are the
matrix's, and an Xid 154 "0x1 (PF FLR)" in the host's kernel log is a GPU reset in the report's repair
section and in the drain reason. Two fallbacks ride along: clock event reasons from nvidia-smi -q where
NVML gives none, and a mask resolved against `nvidia-smi -L` (a real MIG listing) where NVML fails.

- `merged`: vllm-project/vllm#13855, whose header runs NIC8NIC9 together and whose rows run NIC cells
  together (NODENODE): every GPU's CPU affinity, NUMA affinity and nearest NIC as the text gives them.
- `mlx5`: NVIDIA/nccl#707, NICs named mlx5_0..mlx5_17, the quote cut inside GPU4's row: GPU0-3 read,
  GPU4-7 unknown with the reason (never a value from another column).

The report carries the same per-GPU columns (declared once in sweep/analysis/facts.py): fleet.csv one
row per GPU (an empty field where the agent left the row unread), hosts.csv each host's text per fact
("not read" for those GPUs).
"""
from __future__ import annotations

import csv
import re
from pathlib import Path

import pandas as pd
import pytest

from sweep.analysis.facts import GPU_FACTS
from sweep.collect.run import run_sweep
from sweep.demo import synth
from sweep.demo.loopback import FleetHost, LocalFleet
from sweep.report.build import build_report

from helpers import read_records

pytestmark = pytest.mark.integration
CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"
PF_FLR = "[ 1843.308145] NVRM: Xid (PCI:0000:0d:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (PF FLR)\n"
MATRICES = {"merged": "topo/vllm-13855.txt", "mlx5": "topo/nvidia-nccl-707.txt"}


@pytest.fixture(scope="module")
def swept(needs_sshd, tmp_path_factory):
    work = tmp_path_factory.mktemp("corpus-hosts")
    hosts = []
    for name, matrix in MATRICES.items():
        # the merged host's GPU 6 runs hot: a warning, so the host has a block in report.html
        hot = [synth.thermal_slowdown(gpus=(6,))] if name == "merged" else []
        cap = synth.derive(synth.base_capture("h200-idle"), [synth.multi_gpu(8), synth.identity(name), *hot],
                           hostname=name)
        cap["commands"]["nvidia-smi topo -m"]["stdout"] = (CORPUS / matrix).read_text()
        cap["nvml"]["gpu0.throttle_reasons"] = {"error": "NVMLError_NotSupported"}  # nvidia-smi -q says them
        synth.write(cap, work / f"{name}.json")
        hosts.append(FleetHost(name, capture=str(work / f"{name}.json")))
    listing = (CORPUS / "smi_list" / "influxdata-telegraf-5812.txt").read_text()
    cap = synth.derive(synth.base_capture("h200-idle"), [synth.env("CUDA_VISIBLE_DEVICES", "MIG-a45882f0")],
                       hostname="nonvml")
    cap["nvml"]["nvmlInit"] = {"error": "NVMLError_DriverNotLoaded", "message": "Driver Not Loaded"}
    cap["commands"]["nvidia-smi -L"] = {"rc": 0, "stdout": listing[listing.index("GPU 0:"):], "stderr": ""}
    hosts.append(FleetHost("nonvml", capture=str(synth.write(cap, work / "nonvml.json"))))
    log = work / "kern.log"
    log.write_text(PF_FLR)
    hosts.append(FleetHost("flr", env=(("SWEEP_KERNEL_LOG", str(log)),)))
    with LocalFleet(hosts, work / "fleet") as fleet:
        result = run_sweep(fleet.inventory_path, out=work / "run", ssh=fleet.ssh_settings())
    records = read_records(result.run_dir)
    report = build_report([result.run_dir], work / "report")
    links = report.fleet.hosts.set_index("host")["worst_link"]
    return records, report.summary, {h: (None if pd.isna(v) else v) for h, v in links.items()}, \
        report.files["html"].read_text(), report.files["fleet_csv"], report.files["hosts_csv"]


def health(records, host):
    record = records[host]
    assert record["status"] == "ok", record.get("failure")
    return record["health"]


def test_a_merged_header_matrix_gives_each_gpu_its_own_affinity_and_nearest_nic(swept):
    h = health(swept[0], "merged")
    topo, near = h["topology"], h["host_settings"]["nearest_nic"]
    assert topo["cpu_affinity"] == {str(i): "0-55,112-167" if i < 4 else "56-111,168-223" for i in range(8)}
    assert topo["numa_affinity"] == {str(i): "0" if i < 4 else "1" for i in range(8)}
    assert topo["source"] == "nvidia-smi topo -m" and topo["unread"] == {}
    assert {g: (n["nic"], n["link"]) for g, n in near.items()} == {
        "0": ("NIC0", "PXB"), "1": ("NIC3", "PXB"), "2": ("NIC4", "PXB"), "3": ("NIC5", "PXB"),
        "4": ("NIC6", "PXB"), "5": ("NIC9", "PXB"), "6": ("NIC10", "PXB"), "7": ("NIC11", "PXB")}
    assert topo["worst_link_selected"] == "NV18" and len(topo["pairs"]) == 28
    assert set(topo["pairs"].values()) == {"NV18"}
    assert swept[2]["merged"] == "NV18"  # the report's worst-link column
    assert h["gpus"][0]["clock_event_reasons"]["active"] == ["idle"]
    assert h["gpus"][0]["clock_event_reasons"]["source"] == "nvidia-smi -q"


def test_an_mlx5_matrix_names_the_nics_and_leaves_the_cut_rows_unknown(swept):
    h = health(swept[0], "mlx5")
    topo, near = h["topology"], h["host_settings"]["nearest_nic"]
    assert topo["cpu_affinity"] == {str(i): "0-47,96-143" for i in range(4)}
    assert topo["numa_affinity"] == {str(i): "0" for i in range(4)}
    assert {g: n["link"] for g, n in near.items()} == {"0": "PXB", "1": "PXB", "2": "PXB", "3": "PXB"}
    assert near["0"]["nic"] in ("mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7")
    assert near["2"]["nic"] in ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")
    assert sorted(topo["unread"]) == ["4", "5", "6", "7"]
    assert "GPU4's row of nvidia-smi topo -m" in topo["unread"]["4"]
    assert topo["pairs"]["0-4"] == "NV12" and "5-6" not in topo["pairs"]  # row 5 is not in the text
    # all eight GPUs selected, three of their pairs not in the text: the worst link is unknown, not NV12
    assert topo["worst_link_selected"] is None and swept[2]["mlx5"] is None
    contract = next(c for c in h["contracts"] if c["name"] == "topology")
    assert contract["status"] == "unknown" and "5-6, 5-7, 6-7" in contract["message"]


def test_xid_154_pf_flr_is_a_gpu_reset_in_the_record_the_repair_section_and_the_drain_reason(swept):
    records, summary, _, html, *_ = swept
    [group] = health(records, "flr")["kernel_log"]["xid"]
    assert (group["code"], group["bus_id"], group["action"]) == (154, "0000:0d:00", "reset_gpu")
    assert "0x1 (PF FLR): NVML GPU_RESET" in group["meaning"]
    [action] = [a for a in summary["xid"]["actions"] if "flr" in a["hosts"]]
    assert action["action"] == "reset_gpu" and action["label"] == "reset the GPU"
    [drain] = [d for d in summary["drain"] if "flr" in d["hosts"]]
    assert drain["reason"].startswith("sweep: reset the GPU: Xid 154 the GPU's recovery action changed to 0x1 (PF FLR)")
    repair = html[html.index('<section id="repair">'):]
    row = re.search(r'<li class="xid-action" data-action="(\w+)"><span class="badge [\w-]+">([^<]*)</span>\s*'
                    r'<span class="hosts">([^<]*)</span>', repair)
    assert row.groups() == ("reset_gpu", "reset the GPU", "flr")  # the report's repair section


def test_where_nvml_fails_the_mask_is_resolved_against_nvidia_smi_list(swept):
    h = health(swept[0], "nonvml")
    assert h["driver"]["nvml_error"] == "NVMLError_DriverNotLoaded" and len(h["driver"]["smi_list"]) == 4
    assert h["mask"]["against"] == "nvidia-smi -L" and h["mask"]["state"] == "set"
    [sel] = h["mask"]["selected"]
    assert (sel["physical_index"], sel["mig_uuid"]) == (0, "MIG-a45882f0-9215-5733-a0c1-49286ab31cb5")



# each GPU's CPU affinity, NUMA affinity, nearest NIC and its link, as the matrix's text gives them
# (the legend: PXB = several PCIe switches); None: the row is cut in the quoted text (not read)
MERGED = {i: ("0-55,112-167" if i < 4 else "56-111,168-223", "0" if i < 4 else "1", nic, "PXB")
          for i, nic in enumerate(("NIC0", "NIC3", "NIC4", "NIC5", "NIC6", "NIC9", "NIC10", "NIC11"))}
MLX5_READ = {i: ("0-47,96-143", "0", "PXB") for i in range(4)}


def fleet_rows(path, host):
    with open(path, newline="") as f:
        return {int(r["index"]): r for r in csv.DictReader(f) if r["host"] == host}


def host_row(path, host):
    with open(path, newline="") as f:
        return next(r for r in csv.DictReader(f) if r["host"] == host)


def html_facts(html, host):
    """The GPU facts of `host`'s block in report.html: label -> its text (None: the host has no block)."""
    block = re.search(r'<details class="host" id="[\w-]+">\s*<summary>(?:(?!</details>).)*?<b class="mono">'
                      + re.escape(host) + r'</b>(?:(?!</details>).)*</details>', html, re.S)
    return block and dict(re.findall(r'<tr data-fact="[^"]*"><td>([^<]*)</td><td>([^<]*)</td></tr>', block.group(0)))


def test_the_report_gives_each_gpu_of_the_merged_header_host_the_matrix_placement(swept):
    rows = fleet_rows(swept[4], "merged")
    assert {i: (r["cpu_affinity"], r["numa_affinity"], r["nearest_nic"], r["nearest_nic_link"])
            for i, r in rows.items()} == MERGED
    keys = host_row(swept[5], "merged")  # the host's text per fact: a value per GPU where they differ
    assert keys["key_cpu_affinity"] == "0-55,112-167 x4, 56-111,168-223 x4 (GPU 4-7)"
    assert keys["key_numa_affinity"] == "0 x4, 1 x4 (GPU 4-7)"
    assert keys["key_nearest_nic"].startswith("NIC0 (PXB: several PCIe switches) x1, NIC3 (PXB: several PCIe "
                                              "switches) x1 (GPU 1), NIC4 (PXB: several PCIe switches) x1 (GPU 2)")
    assert "NIC11 (PXB: several PCIe switches) x1 (GPU 7)" in keys["key_nearest_nic"]
    assert not {"cpu_affinity", "numa_affinity", "nearest_nic"} & set(swept[1]["classes"][0]["keys"])  # never a key
    shown = html_facts(swept[3], "merged")  # its block in report.html (GPU 6 runs hot) says the same
    assert (shown["CPU affinity"], shown["NUMA affinity"], shown["Nearest NIC"]) == (
        keys["key_cpu_affinity"], keys["key_numa_affinity"], keys["key_nearest_nic"])


def test_the_report_gives_the_mlx5_host_its_nic_names_and_not_read_for_the_cut_rows(swept):
    rows = fleet_rows(swept[4], "mlx5")
    assert {i: (r["cpu_affinity"], r["numa_affinity"], r["nearest_nic_link"]) for i, r in rows.items()} == {
        **MLX5_READ, **{i: ("", "", "") for i in range(4, 8)}}  # empty: the agent left GPU4-7's rows unread
    assert all(rows[i]["nearest_nic"] in ("mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7") for i in (0, 1))
    assert all(rows[i]["nearest_nic"] in ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3") for i in (2, 3))
    assert all(rows[i]["nearest_nic"] == "" for i in range(4, 8))
    keys = host_row(swept[5], "mlx5")
    assert keys["key_cpu_affinity"] == "0-47,96-143 x4, not read x4 (GPU 4-7)"
    assert keys["key_numa_affinity"] == "0 x4, not read x4 (GPU 4-7)"
    assert re.fullmatch(r"not read x4, (mlx5_[4-7]) \(PXB: several PCIe switches\) x2 \(GPU 0-1\), (mlx5_[0-3]) "
                        r"\(PXB: several PCIe switches\) x2 \(GPU 2-3\)", keys["key_nearest_nic"]).groups() == (
        rows[0]["nearest_nic"], rows[2]["nearest_nic"])
    assert html_facts(swept[3], "mlx5") is None


def test_a_host_block_in_the_html_lists_its_gpu_facts_not_read_where_the_agent_read_none(swept):
    """The single-GPU host with a Xid has a block: its GPU facts as hosts.csv says them; one GPU, no
    topo -m matrix read, so its placement is 'not read' (never empty, never another column's)."""
    shown, keys = html_facts(swept[3], "flr"), host_row(swept[5], "flr")
    assert (shown["CPU affinity"], shown["NUMA affinity"], shown["Nearest NIC"]) == ("not read",) * 3
    assert shown == {label: keys[f"key_{name}"] for name, label in ((f.name, f.label) for f in GPU_FACTS) if f"key_{name}" in keys
                     and label in shown} and shown["GPU model"] == keys["key_gpu_model"]
