"""`sweep probe` on this GPU-less host, `sweep diff` of the H200's idle and loaded probes."""
import json
from pathlib import Path

from sweep.cli import main

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "fixtures" / "h200"


def test_sweep_probe_writes_results_and_names_the_driver(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["probe"]) == 4  # a broken contract on this host
    health = json.loads((tmp_path / "results" / "health.json").read_text())
    assert health["lowest_broken"] == "driver"
    report = (tmp_path / "results" / "health-report.md").read_text()
    assert "Lowest broken contract: Kernel driver and NVML" in report
    assert "Lowest broken contract: Kernel driver and NVML" in capsys.readouterr().out


def test_sweep_probe_replay_of_the_h200_is_healthy(tmp_path):
    assert main(["probe", "--out", str(tmp_path), "--replay", str(ROOT / "sweep" / "demo" / "captures" / "h200-idle.json")]) == 0
    assert json.loads((tmp_path / "health.json").read_text())["verdict"] == "ok"


def test_sweep_diff_idle_vs_load_points_at_the_throttle_evidence(capsys):
    # both recorded live on the same H200, one after the other
    assert main(["diff", str(H200 / "idle.health.json"), str(H200 / "load.health.json"), "--json"]) == 0
    changes = json.loads(capsys.readouterr().out)
    gpu = {c["path"]: c for c in changes if c["path"].startswith("gpus[0].")}
    assert gpu["gpus[0].clock_event_reasons.active"]["before"] == ["idle"]
    assert gpu["gpus[0].clock_event_reasons.active"]["after"] == ["sw_power_cap"]
    assert gpu["gpus[0].clocks.sm_mhz"]["after"] < 1980
    assert gpu["gpus[0].power.draw_w"]["after"] > gpu["gpus[0].power.draw_w"]["before"]
    assert changes[0]["category"] == "throttle evidence"
    # nothing about the machine's configuration changed between the two probes
    assert not [c for c in changes if c["category"] in ("power and clock policy", "memory health and modes",
                                                        "identity and software")]


def test_sweep_diff_of_a_missing_file_is_bad_input(capsys):
    assert main(["diff", "nope.json", str(H200 / "load.health.json")]) == 2
    assert "nope.json: no such file" in capsys.readouterr().err
