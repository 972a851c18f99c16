"""What the agent reads from nvidia-smi's text where NVML gives no answer, and what Xid 154's recovery action
asks of the operator (issue 51), each through a replayed host as the agent runs (`--replay`, schema checked).

- NVML fails to initialise but `nvidia-smi -L` lists the GPUs (a real listing with MIG devices, from
  influxdata/telegraf#5812 in tests/fixtures/corpus): the mask is still resolved, against that list.
- NVML answers no clock event reasons: nvidia-smi -q's "Clocks Event Reasons" block gives them.
- Xid 154 names NVML's recovery-action value (0-7, nvmlDeviceGpuRecoveryAction_t); the value decides the
  repair, whatever words the driver prints beside it: "0x1 (PF FLR)" is a GPU reset, not hardware inspection.
"""
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from probe_agent.xid import ACTION, parse_events
from sweep.analysis.xid import xid_action
from sweep.demo import synth

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "probe_agent" / "schema" / "health-1.schema.json").read_text())
LISTING = (ROOT / "tests" / "fixtures" / "corpus" / "smi_list" / "influxdata-telegraf-5812.txt").read_text()


def replay(cap, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "probe_agent", "--replay", str(synth.write(cap, tmp_path / "c.json"))],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    health = json.loads(proc.stdout)
    jsonschema.validate(health, SCHEMA)
    return health


def test_where_nvml_fails_the_mask_is_resolved_against_nvidia_smi_list_with_its_mig_devices(tmp_path):
    mask = "MIG-f00d722c-f4e1-52c9-aa31-750441ae1bfe,GPU-69ec2344"  # a MIG device of GPU 0, then GPU 3
    cap = synth.derive(synth.base_capture("h200-idle"), [synth.env("CUDA_VISIBLE_DEVICES", mask)])
    cap["nvml"]["nvmlInit"] = {"error": "NVMLError_DriverNotLoaded", "message": "Driver Not Loaded"}
    cap["commands"]["nvidia-smi -L"] = {"rc": 0, "stdout": LISTING[LISTING.index("GPU 0:"):], "stderr": ""}
    h = replay(cap, tmp_path)
    assert h["driver"]["nvml_error"] == "NVMLError_DriverNotLoaded" and h["gpus"] == []
    assert [(g["index"], len(g["mig"])) for g in h["driver"]["smi_list"]] == [(0, 4), (1, 0), (2, 0), (3, 0)]
    m = h["mask"]
    assert m["against"] == "nvidia-smi -L" and m["state"] == "set"
    assert [(s["cuda_index"], s["physical_index"], s.get("mig_uuid")) for s in m["selected"]] == [
        (0, 0, "MIG-f00d722c-f4e1-52c9-aa31-750441ae1bfe"), (1, 3, None)]


def test_where_nvml_gives_no_clock_event_reasons_nvidia_smi_q_does(tmp_path):
    cap = synth.derive(synth.base_capture("h200-idle"), [])
    cap["nvml"]["gpu0.throttle_reasons"] = {"error": "NVMLError_NotSupported"}
    reasons = replay(cap, tmp_path)["gpus"][0]["clock_event_reasons"]
    assert reasons["active"] == ["idle"] and reasons["source"] == "nvidia-smi -q"
    nvml = replay(synth.derive(synth.base_capture("h200-idle"), []), tmp_path)["gpus"][0]["clock_event_reasons"]
    assert nvml["active"] == ["idle"] and "source" not in nvml  # NVML answered: its answer stands


def line154(to, at=100.0, bus="0000:0d:00"):
    return "[%12.6f] NVRM: Xid (PCI:%s): 154, GPU recovery action changed from 0x0 (None) to %s" % (at, bus, to)


@pytest.mark.parametrize("to,action", [
    ("0x0 (None)", "ignore"), ("0x1 (PF FLR)", "reset_gpu"), ("0x1 (GPU Reset Required)", "reset_gpu"),
    ("0x2 (Node Reboot Required)", "reboot"), ("0x2 (OS Reboot)", "reboot"), ("0x3 (Drain P2P)", "reset_gpu"),
    ("0x4 (Drain and Reset)", "reset_gpu"), ("0x5 (Recover IMEX Domain)", "recover_imex"),
    ("0x6 (Bus Reset)", "reset_gpu"), ("0x7 (System Reboot)", "reboot"),
    ("0x9 (Something New)", "unknown"),  # a value NVML does not document: unknown, with the line's words
])
def test_each_recovery_action_value_is_its_repair_whatever_the_words_beside_it(to, action):
    [group] = parse_events([[line154(to), line154(to), 1]])
    assert group["action"] == action
    if action == "unknown":
        assert "NVML does not document" in group["meaning"] and "Something New" in group["meaning"]
    else:
        assert to.split()[0] in group["meaning"]


def test_pf_flr_reaches_the_drain_reason_as_a_gpu_reset():
    [group] = parse_events([[line154("0x1 (PF FLR)"), line154("0x1 (PF FLR)"), 1]])
    verdict = xid_action({"kernel_log": {"xid": [group], "sxid": []}})
    assert (verdict.action, verdict.label) == ("reset_gpu", ACTION["reset_gpu"][1])
    assert verdict.reason == ("Xid 154 the GPU's recovery action changed to 0x1 (PF FLR): NVML GPU_RESET, "
                              "reset the GPU (0000:0d:00 x1)")


def test_the_latest_recovery_action_of_a_gpu_decides():
    events = [[line154("0x4 (Drain and Reset)", 10.0), line154("0x2 (Node Reboot Required)", 20.0), 2]]
    [group] = parse_events(events)
    assert group["action"] == "reboot" and group["count"] == 2 and "0x2 (Node Reboot Required)" in group["meaning"]
