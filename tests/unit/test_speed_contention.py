"""Contention: a process that appears on the GPU during the speed tier marks its figures contended (issue 34).

The agent runs as a host runs it (the real bootstrap, the bundle on stdin), its children measuring the
stand-in libcuda (tests/cuda_shim.c), NVML replayed from the H200's idle capture whose tier samples carry
the GPU's process list: empty at first, then another process (pid 4242) that starts half-way. The record
names that process and keeps the figures; the fleet judgment lists the host as contended and never says
its GPU is slow.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from sweep.analysis.speed import speed_section
from sweep.collect.bundle import bundle_bytes, remote_command

import cuda_shim

ROOT = Path(__file__).resolve().parents[2]
IDLE = ROOT / "sweep" / "demo" / "captures" / "h200-idle.json"
SCHEMA = json.loads((ROOT / "probe_agent" / "schema" / "health-1.schema.json").read_text())
CAPTURE = json.loads(IDLE.read_text())
UUID = CAPTURE["nvml"]["gpu0.uuid"]["value"]
OTHER = {"pid": 4242, "name": "python3", "used_memory_bytes": 12 << 30}


def capture_with(folder: Path, appears: bool) -> Path:
    """The idle capture, its tier samples carrying the process list (OTHER from the third sample on)."""
    data = copy.deepcopy(CAPTURE)
    base = {"index": 0, "sm_mhz": 1980, "mem_mhz": 3201, "power_w": 410.0, "enforced_limit_w": 700.0,
            "temperature_c": 40, "utilization_gpu_pct": 100, "pcie_gen": 5, "active_reasons": []}
    data["samples"] = [{"t": 0.1 * k, "gpus": [dict(base, processes=[OTHER] if appears and k >= 2 else [])]}
                       for k in range(4)]
    data["samples"] += [data["samples"][-1]] * 60  # next_sample cycles: the process stays once it came
    path = folder / "capture.json"
    path.write_text(json.dumps(data))
    return path


def probe(tmp_path: Path, appears: bool) -> dict:
    lib = cuda_shim.build(tmp_path / "lib")
    env = {"PATH": os.environ["PATH"], **cuda_shim.environment(lib, UUID), "SWEEP_REPLAY_MEASURE": "1"}
    payload = bundle_bytes()
    cmd = remote_command(sys.executable, len(payload), ["--replay", str(capture_with(tmp_path, appears)), "--speed",
                                                        "--interval", "0.05"])
    done = subprocess.run(["sh", "-c", cmd], input=payload, capture_output=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    health = json.loads(done.stdout)
    jsonschema.validate(health, SCHEMA)
    return health


def test_a_process_that_appears_during_the_tier_marks_the_figures_contended_and_names_it(tmp_path):
    speed = probe(tmp_path, appears=True)["speed"]
    assert speed["status"] == "measured"  # the figures are kept, as measured
    assert speed["gpus"][0]["figures"]["hbm"]["value"] == pytest.approx(cuda_shim.RATES["hbm"], rel=1e-4)
    found = speed["contention"]
    assert found["contended"] is True and len(found["processes"]) == 1
    assert {k: found["processes"][0][k] for k in ("gpu", "pid", "name")} == {"gpu": 0, "pid": 4242, "name": "python3"}
    assert found["processes"][0]["first_seen_s"] == pytest.approx(0.2)


def test_a_quiet_gpu_is_not_contended(tmp_path):
    speed = probe(tmp_path, appears=False)["speed"]
    assert speed["status"] == "measured" and speed["contention"] == {"contended": False, "processes": []}


def test_the_fleet_lists_a_contended_host_and_judges_its_figures_never(tmp_path):
    from sweep.analysis.compare import compare
    from sweep.analysis.fleet import load_fleet
    from sweep.demo.speed import write_speed_run

    health = probe(tmp_path, appears=True)
    # the shim's 3.2 TB/s HBM is 75% of the H200's reference: slow, were it judged
    quiet = copy.deepcopy(health)
    quiet["speed"]["contention"] = {"contended": False, "processes": []}
    fleet = load_fleet([write_speed_run(tmp_path / "run", {"busy01": health, "quiet01": quiet})])
    section = speed_section(fleet, compare(fleet))
    assert section["contended"] == [{"host": "busy01", "processes": "GPU 0: pid 4242 (python3)"}]
    judged = {j["host"] for j in section["judgments"]}
    assert "busy01" not in judged and "quiet01" in judged, section["judgments"]
    busy = next(g for g in section["gpus"] if g["host"] == "busy01")
    assert "contended: GPU 0: pid 4242 (python3) appeared during the tier" in busy["evidence"]


def test_the_verdict_names_a_contended_host_with_its_fix_and_neither_breaks_nor_drains_it(tmp_path):
    from sweep.analysis.compare import compare
    from sweep.analysis.fleet import load_fleet
    from sweep.analysis.verdict import make_verdict
    from sweep.demo.speed import write_speed_run

    health = probe(tmp_path, appears=True)
    fleet = load_fleet([write_speed_run(tmp_path / "run", {"busy01": health})])
    findings = compare(fleet)
    section = speed_section(fleet, findings)
    assert section["slow_pools"] == [] and section["class_outliers"] == []  # the shim's 75% HBM, contended: no pool line
    verdict = make_verdict(fleet, findings, section)
    (entry,) = [e for e in verdict.of("busy01") if e.about == "contended"]
    assert entry.severity == "unknown" and "pid 4242 (python3)" in entry.cause and "no other process" in entry.fix
    assert "busy01" not in verdict.broken and "busy01" not in verdict.drain_candidates
    assert any("contended" in line and "busy01" in line for line in verdict.notes()), verdict.notes()
    # figures recorded and not judged are a tier asked for and not measured: the run is incomplete (exit 1),
    # as the H200's two --speed tiers at once said "One pool ... exit 0" before
    assert entry.tier == "speed"  # in the pool as a host whose tier failed is: the exit code says the run is incomplete
    assert verdict.exit_code == 1 and "not measured" in verdict.exit_meaning
    assert any(line.startswith("speed not measured on 1 host (busy01") for line in verdict.notes()), verdict.notes()
