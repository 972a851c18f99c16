"""The demo fleet can load (issue 41): a demo host replaying its capture under ``--load`` replays the
real H200 load recording's samples, made to agree with what the host's probe reads (a 250 W cap draws
at most 250 W, a GPU in HW thermal slowdown is in it under load), instead of recording
``"samples": []``; the findings of the fleet are the same with and without the load."""
from __future__ import annotations

import contextlib
import io
import json
import re

import fleet_variants as fv
from probe_agent.main import main as agent
from sweep.demo.fleet import demo_fleet
from sweep.report.build import build_report


def _sweep(tmp_path, hosts, *args: str):
    """Each demo host's health.json as the agent writes it replaying the host's capture with `args`."""
    out = {}
    for host in hosts:
        folder = tmp_path / ("load" if args else "idle") / host.name
        with contextlib.redirect_stdout(io.StringIO()):
            assert agent(["--replay", host.capture, *args, "--out", str(folder)]) in (0, None)
        out[host.name] = json.loads((folder / "health.json").read_text())
    return out


def test_a_demo_host_under_load_replays_the_load_recordings_samples_as_its_probe_reads_it(tmp_path):
    hosts = demo_fleet(tmp_path / "captures", count=25, unreachable=False)
    loaded = _sweep(tmp_path, hosts, "--load", "5")
    for name, health in loaded.items():  # --load 5: five seconds of the recording's samples, every 0.2 s
        times = [s["t"] for s in health["load"]["samples"]]
        assert health["load"]["seconds"] == 5 and max(times) - min(times) <= 5 and len(times) >= 20, name
        assert [g["samples"] for g in health["load"]["summary"]] == [len(health["load"]["samples"])] * 8, name
    healthy, capped, hot = (loaded[h]["load"]["summary"] for h in ("gpu01", "gpu11", "gpu25"))
    assert healthy[0]["power_w_max"] > 650 and healthy[0]["hw_slowdown_fraction"] == 0.0
    assert {g["power_w_max"] for g in capped} == {250.0} and {g["enforced_limit_w"] for g in capped} == {250.0}
    assert hot[6]["hw_slowdown_fraction"] == 1.0 and hot[6]["sm_mhz_median"] == 1035
    assert [g["hw_slowdown_fraction"] for g in hot if g["gpu"] != 6] == [0.0] * 7

    idle = _sweep(tmp_path, hosts)
    findings = []
    for name, healths in (("idle", idle), ("load", loaded)):
        fv.write_run(tmp_path / f"run-{name}", [fv.record(h, health) for h, health in healths.items()])
        findings.append(build_report([tmp_path / f"run-{name}"], tmp_path / f"report-{name}").summary["findings"])
    assert findings[0] == findings[1] and len(findings[0]) > 10


def test_the_terminal_says_what_the_load_measured(tmp_path, capsys):
    """`sweep run --load 5` on the demo fleet: the verdict's lines say how long the load ran, on how many
    GPUs, the SM clock it held (and where the lowest was), the power drawn and the host in a HW slowdown
    (it used to say nothing of the load)."""
    from sweep.cli import main

    hosts = demo_fleet(tmp_path / "captures", count=25, unreachable=False)
    loaded = _sweep(tmp_path, hosts, "--load", "5")
    run = fv.write_run(tmp_path / "run", [fv.record(h, health) for h, health in loaded.items()],
                       {"format": "sweep-run", "record_version": 1, "state": "complete",
                        "options": {"agent_args": ["--load", "5"]}})
    capsys.readouterr()
    main(["report", str(run)])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("load")]
    assert len(lines) == 1, lines
    assert re.match(r"load \(5 s\): 19\d GPUs on 25 hosts measured; SM clock median \d+ MHz, ", lines[0]), lines[0]
    assert "lowest 1035 MHz (gpu25 GPU 6); power median " in lines[0], lines[0]
    assert "; HW slowdown most of the load on gpu25" in lines[0], lines[0]
