"""The probe agent through its command line, on real H200 captures and on this GPU-less host."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

from sweep.demo import synth

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "sweep" / "demo" / "captures"
H200 = ROOT / "tests" / "fixtures" / "h200"
SCHEMA = json.loads((ROOT / "probe_agent" / "schema" / "health-1.schema.json").read_text())


def agent(*args, env=None, timeout=60):
    proc = subprocess.run([sys.executable, "-m", "probe_agent", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    health = json.loads(proc.stdout)
    jsonschema.validate(health, SCHEMA)
    return health


def statuses(health):
    return {c["name"]: (c["status"], c["consequence_of"]) for c in health["contracts"]}


@pytest.mark.parametrize("name,args", [("idle", []), ("idle-deep", ["--deep"]), ("load", ["--load", "20"]),
                                       ("fault", ["--deep"])])
def test_replay_of_h200_capture_gives_the_live_verdict(name, args):
    live = json.loads((H200 / f"{name}.health.json").read_text())
    jsonschema.validate(live, SCHEMA)
    replayed = agent("--replay", CAPTURES / f"h200-{name}.json", *args)
    # the live runs predate schema 1.2: the contracts they judged agree; the new ones are not in them
    assert {k: v for k, v in statuses(replayed).items() if k in statuses(live)} == statuses(live)
    assert replayed["lowest_broken"] == live["lowest_broken"]
    assert replayed["gpus"][0]["uuid"] == live["gpus"][0]["uuid"]


def test_h200_idle_every_contract_holds():
    h = agent("--replay", CAPTURES / "h200-idle.json")
    g = h["gpus"][0]
    assert h["verdict"] == "ok" and h["lowest_broken"] is None
    assert h["driver"]["version"] == "580.159.04" and h["driver"]["cuda_driver_version"] == "13.0"
    assert g["uuid"].startswith("GPU-") and g["ecc"]["current"] is True
    assert g["power"]["enforced_limit_w"] == g["power"]["default_limit_w"] == 700.0
    assert g["mig"]["current"] is False and g["persistence_mode"] is True
    # "not supported" is an answer, recorded with its reason
    assert g["unsupported"].get("numa_node") == "NVMLError_NotSupported"


def test_h200_load_shows_sw_power_cap_below_max_clock_near_limit():
    h = agent("--replay", CAPTURES / "h200-load.json", "--load", "20")
    s = h["load"]["summary"][0]
    assert s["sw_power_cap_fraction"] > 0.5
    assert s["sm_mhz_median"] < s["sm_mhz_max_allowed"]
    assert s["power_w_max"] >= 0.95 * s["enforced_limit_w"]
    assert s["hw_slowdown_fraction"] == 0
    clocks = next(c for c in h["contracts"] if c["name"] == "clocks")
    assert clocks["status"] == "ok" and "SW power cap active" in clocks["message"]
    assert next(c for c in h["contracts"] if c["name"] == "processes")["status"] == "ok"  # its own load is not foreign


def test_empty_mask_blames_neither_driver_nor_framework():
    h = agent("--replay", CAPTURES / "h200-fault.json", "--deep")
    st = statuses(h)
    assert h["lowest_broken"] == "device_mask"
    assert st["driver"] == ("ok", None)
    assert st["framework"] == ("broken", "device_mask")
    assert h["gpus"], "NVML still sees the GPU"
    assert "CUDA_VISIBLE_DEVICES=''" in next(c for c in h["contracts"] if c["name"] == "device_mask")["message"]


def test_this_host_without_driver_names_the_driver(tmp_path):
    """This machine has no GPU: the driver is the lowest broken contract, the rest consequences."""
    h = agent("--out", tmp_path)
    assert h["lowest_broken"] == "driver"
    assert h["driver"]["nvml_error"] in ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded")
    for c in h["contracts"][1:]:
        if c["status"] in ("broken", "unknown"):
            assert c["consequence_of"] == "driver", c
    report = (tmp_path / "health-report.md").read_text()
    assert "Lowest broken contract: Kernel driver and NVML" in report
    assert json.loads((tmp_path / "health.json").read_text()) == h


def fake_torch_interpreter(tmp_path, version, cuda):
    """A python3 whose site holds a torch package layout (version.py only): what metadata mode reads."""
    pkg = tmp_path / "site" / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('metadata mode must not import torch')\n")
    (pkg / "version.py").write_text(f"__version__ = {version!r}\ncuda = {cuda!r}\nhip = None\n")
    wrapper = tmp_path / "python3-train"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={tmp_path / 'site'} exec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


def test_cpu_only_torch_is_recorded_as_a_consequence_of_the_missing_driver(tmp_path):
    py = fake_torch_interpreter(tmp_path, "2.13.0+cpu", None)
    h = agent("--interpreter", py)
    fw = next(c for c in h["contracts"] if c["name"] == "framework")
    assert h["frameworks"][0]["torch_version"] == "2.13.0+cpu" and h["frameworks"][0]["cuda_runtime"] is None
    assert fw["status"] == "broken" and "CPU-only wheel" in fw["message"]
    assert fw["consequence_of"] == "driver"


def test_real_cpu_torch_if_installed():
    pytest.importorskip("torch")
    h = agent()
    fw = h["frameworks"][0]
    import torch
    assert fw["torch_version"] == torch.__version__
    assert fw["cuda_runtime"] == torch.version.cuda


def test_runtime_newer_than_driver_across_a_major_is_broken(tmp_path):
    cap = synth.derive(synth.base_capture("h200-idle"), [synth.driver("570.172.08", 12080)])
    path = synth.write(cap, tmp_path / "old-driver.json")
    h = agent("--replay", path)
    fw = next(c for c in h["contracts"] if c["name"] == "framework")
    assert fw["status"] == "broken" and "forward-compatibility" in fw["message"]
    assert h["lowest_broken"] == "framework"


def test_a_hung_driver_query_cannot_hang_the_probe(tmp_path):
    cap = synth.derive(synth.base_capture("h200-idle"), [synth.hang("gpu0.ecc_mode")])
    path = synth.write(cap, tmp_path / "hang.json")
    t = time.monotonic()
    h = agent("--replay", path, "--deadline", "1.5", timeout=20)
    assert time.monotonic() - t < 8
    assert h["probe"]["complete"] is False
    assert "deadline of 1.5 s reached while reading GPU 0" in h["probe"]["incomplete_reason"]
    assert h["driver"]["version"] == "580.159.04"  # what was read before the hang is kept


def test_a_deadline_shorter_than_the_probe_marks_it_incomplete():
    """Deadlines on both sides of the probe's own time. The short one is a millisecond: far below what
    reading a capture takes on any machine (a tenth of a first run's time raced: a run under load,
    then a quiet one, finished within it)."""
    took = agent("--replay", CAPTURES / "h200-idle.json")["probe"]["duration_s"]
    assert took > 0.001
    short = agent("--replay", CAPTURES / "h200-idle.json", "--deadline", 0.001)
    assert short["probe"]["complete"] is False
    assert short["probe"]["incomplete_reason"].startswith("deadline of 0.001 s reached while reading ")
    assert agent("--replay", CAPTURES / "h200-idle.json", "--deadline", "0")["probe"]["complete"] is False
    roomy = agent("--replay", CAPTURES / "h200-idle.json", "--deadline", "30")
    assert roomy["probe"]["complete"] is True and roomy["probe"]["duration_s"] < 30


@pytest.mark.parametrize("args,status", [
    (["--interpreter", "/opt/absent/bin/python3"], "warning"),
    (["--interpreter", "/opt/absent/bin/python3", "--interpreter", "python3"], "warning"),
    ([], "ok"),  # the default python3 of the capture, which has torch
])
def test_a_named_training_interpreter_the_host_lacks_is_a_warning(args, status):
    h = agent("--replay", CAPTURES / "h200-idle.json", *args)
    fw = next(c for c in h["contracts"] if c["name"] == "framework")
    assert fw["status"] == status and h["verdict"] == status
    if status == "warning":
        assert "/opt/absent/bin/python3: the training interpreter named for this host is not here" in fw["message"]
        assert fw["fix"] == ("install the training environment on this host, or correct sweep_interpreters / "
                             "--interpreter (/opt/absent/bin/python3)")


def test_replay_from_environment_variable():
    env = dict(os.environ, SWEEP_REPLAY=str(CAPTURES / "h200-idle.json"), SWEEP_REPLAY_HOSTNAME="gpu07")
    h = agent(env=env)
    assert h["host"]["hostname"] == "gpu07" and h["probe"]["replay"].endswith("h200-idle.json")


def test_record_then_replay_round_trip_on_this_host(tmp_path):
    cap = tmp_path / "here.json"
    live = agent("--record", cap, "--note", "test host")
    data = json.loads(cap.read_text())
    assert data["format"] == "sweep-capture" and data["note"] == "test host"
    assert data["nvml"]["nvmlInit"]["error"] == live["driver"]["nvml_error"]
    replayed = agent("--replay", cap)
    assert statuses(replayed) == statuses(live)


def test_eight_gpu_mask_renumbering_and_worst_link(tmp_path):
    links = lambda i, j: "NV18" if (i < 4) == (j < 4) else "SYS"
    cap = synth.derive(synth.base_capture("h200-idle"),
                       [synth.multi_gpu(8, links), synth.env("CUDA_VISIBLE_DEVICES", "3,5")])
    h = agent("--replay", synth.write(cap, tmp_path / "eight.json"))
    sel = h["mask"]["selected"]
    assert [(s["cuda_index"], s["physical_index"]) for s in sel] == [(0, 3), (1, 5)]
    assert sel[1]["uuid"] == h["gpus"][5]["uuid"]
    assert h["topology"]["worst_link_selected"] == "SYS"
    topo = next(c for c in h["contracts"] if c["name"] == "topology")
    assert topo["status"] == "warning" and "crosses PCIe instead of NVLink" in topo["message"]


def test_demo_fleet_variants_are_judged_as_intended(tmp_path):
    from sweep.demo.fleet import demo_fleet
    hosts = {h.name: h for h in demo_fleet(tmp_path)}
    expect = {"gpu01": None, "gpu11": "power", "gpu13": "power", "gpu25": "thermal", "gpu29": "device_mask",
              "gpu33": "framework"}
    for name, lowest in expect.items():
        assert agent("--replay", hosts[name].capture)["lowest_broken"] == lowest, name
    ecc = agent("--replay", hosts["gpu05"].capture)
    assert {g["ecc"]["current"] for g in ecc["gpus"]} == {False}
    mig = agent("--replay", hosts["gpu18"].capture)
    assert mig["gpus"][0]["mig_layout"] == "+".join(["1g.18gb"] * 7)


def test_real_foreign_process_on_the_h200_is_named():
    h = agent("--replay", CAPTURES / "h200-foreign.json")
    c = next(c for c in h["contracts"] if c["name"] == "processes")
    assert c["status"] == "warning" and "python3 (pid 694, 11782 MiB) on GPU 0" in c["message"]
    assert h["lowest_broken"] is None and h["verdict"] == "warning"
