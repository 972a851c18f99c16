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


def test_sweep_diff_idle_vs_load_opens_with_the_conclusion_then_its_evidence(capsys):
    # both recorded live on the same H200, one after the other; the full read taken mid-load
    assert main(["diff", str(H200 / "idle.health.json"), str(H200 / "load.health.json"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    load = json.loads((H200 / "load.health.json").read_text())["load"]
    s = load["summary"][0]
    assert out["conclusion"] == [
        f"under load (torch, {load['seconds']:g} s): SW power cap active in {s['sw_power_cap_fraction']:.0%} of "
        f"samples, SM clock median {round(s['sm_mhz_median'])} of {s['sm_mhz_max_allowed']} MHz, power "
        f"{round(s['power_w_median'])} of {round(s['enforced_limit_w'])} W: power-capped, as expected; no HW slowdown"]
    changes = out["changes"]
    gpu = {c["path"]: c for c in changes if c["path"].startswith("gpus[0].")}
    assert gpu["gpus[0].clock_event_reasons.active"]["before"] == ["idle"]
    assert gpu["gpus[0].clock_event_reasons.active"]["after"] == ["sw_power_cap"]
    assert gpu["gpus[0].clocks.sm_mhz"]["after"] < 1980
    assert gpu["gpus[0].power.draw_w"]["after"] > gpu["gpus[0].power.draw_w"]["before"]
    # the evidence first, and only the evidence is labelled so: a warmer, busier card proves nothing
    kinds = [c["category"] for c in changes]
    evidence = {c["path"] for c in changes if c["category"] == "throttle evidence"}
    assert kinds == sorted(kinds, key=lambda k: k != "throttle evidence")
    assert {"gpus[0].clock_event_reasons.active", "load.summary[0].sw_power_cap_fraction",
            "load.summary[0].sm_mhz_median", "load.summary[0].power_w_median"} <= evidence
    assert gpu["gpus[0].temperature_c"]["category"] == gpu["gpus[0].utilization_gpu_pct"]["category"] == "other readings"
    # nothing about the machine's configuration changed between the two probes
    assert not [c for c in changes if c["category"] in ("power and clock policy", "memory health and modes",
                                                        "identity and software")]


def test_a_live_load_10_is_read_mid_load_and_the_old_fixed_time_read_is_called_out(capsys):
    # recorded live on one H200, --load 10 with torch: the agent before the fix read the GPU 5 s after
    # starting the load child, before torch had started the load; the fixed agent reads half-way
    # through the load itself. Both runs' samples saw the same power-capped load.
    for name, stale in (("load10-fixed-time-read", True), ("load10", False)):
        health = json.loads((H200 / f"{name}.health.json").read_text())
        g, s = health["gpus"][0], health["load"]["summary"][0]
        assert s["sw_power_cap_fraction"] > 0.5 and s["power_w_median"] > 0.95 * s["enforced_limit_w"]
        under_load = "sw_power_cap" in g["clock_event_reasons"]["active"] and g["power"]["draw_w"] > 0.9 * s[
            "enforced_limit_w"]
        assert under_load is not stale, name
        # recorded on another card of the H200 machine (GPU 0's UUID and serial differ): a gpu swap, exit 5
        assert main(["diff", str(H200 / "idle.health.json"), str(H200 / f"{name}.health.json"), "--json"]) == 5
        conclusion = json.loads(capsys.readouterr().out)["conclusion"]
        assert conclusion[0].startswith("under load (torch, 10 s): SW power cap active in ")
        assert conclusion[0].endswith("power-capped, as expected; no HW slowdown")
        if stale:
            assert conclusion[1] == (
                f"the per-GPU fields below were not read under the load (GPU 0: SM {g['clocks']['sm_mhz']} MHz at "
                f"{g['power']['draw_w']} W, no reason active): the load's samples are the evidence; probe again "
                "with this sweep's agent")
        else:
            assert len(conclusion) == 1


def test_sweep_diff_between_idle_probes_names_a_facility_slowdown(tmp_path, capsys):
    import fleet_variants as fv

    before = fv.h200(8, "gpu01")
    after = fv.hw_thermal(fv.h200(8, "gpu01"), gpu=5, sm_mhz=1125)
    for name, health in (("a.json", before), ("b.json", after)):
        (tmp_path / name).write_text(json.dumps(health))
    assert main(["diff", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    # one line per cause, named as the report names it, with the cause's own fix (issue 41)
    assert first == ("HW thermal slowdown on GPU 5 (SM 1125 of 1980 MHz): a facility fault: check fans, airflow "
                     "and inlet temperature; the GPU is too hot for its clocks")


def test_sweep_diff_of_a_missing_file_is_bad_input(capsys):
    assert main(["diff", "nope.json", str(H200 / "load.health.json")]) == 2
    assert "nope.json: no such file" in capsys.readouterr().err
