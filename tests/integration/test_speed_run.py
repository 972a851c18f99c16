"""`sweep run --speed` over a loopback fleet replaying the H200's speed captures (issue 25).

Real sshds on loopback; each host's agent replays a capture recorded with `--speed` on the lent
H200 (tools/h200_speed.sh), so every record carries the figures the H200 measured; one host
replays that capture with the answers of a busy GPU (another process holding 11 GiB, recorded the
same session): refused, and measured with --force, which the record says.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from sweep.demo.loopback import FleetHost, LocalFleet

from helpers import run_over_fleet

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "probe_agent" / "schema" / "health-1.schema.json").read_text())
SPEED = ROOT / "tests" / "fixtures" / "h200" / "speed"
CAPTURE = ROOT / "sweep" / "demo" / "captures" / "h200-speed.json"


def busy_capture(folder: Path) -> Path:
    """The speed capture with the busy capture's process answers (derived, for the busy host)."""
    data = json.loads((SPEED / "speed-2.json").read_text())
    other = json.loads((SPEED / "busy.json").read_text())["nvml"]
    data["nvml"].update({k: v for k, v in other.items() if k.endswith(".procs") or k.startswith("process_name.")})
    path = folder / "busy-speed.json"
    path.write_text(json.dumps(data))
    path.chmod(0o644)
    return path


@pytest.fixture(scope="module")
def speed_fleet(needs_sshd, tmp_path_factory):
    work = tmp_path_factory.mktemp("speed")
    os.chmod(work, 0o755)
    hosts = [FleetHost("gpu01", capture=str(CAPTURE)), FleetHost("gpu02", capture=str(CAPTURE)),
             FleetHost("gpu03", capture=str(busy_capture(work)))]
    with LocalFleet(hosts, work / "fleet") as fleet:
        yield fleet


def sweep_run(fleet, out: Path, *extra: str) -> tuple[int, dict, dict]:
    code = run_over_fleet(fleet, out, *extra)
    records = {p.stem: json.loads(p.read_text()) for p in sorted((out / "hosts").glob("*.json"))}
    return code, records, json.loads((out / "manifest.json").read_text())


def test_sweep_run_speed_brings_back_the_h200_figures_and_refuses_the_busy_host(speed_fleet, tmp_path):
    _, records, manifest = sweep_run(speed_fleet, tmp_path / "run", "--speed")
    assert "--speed" in manifest["options"]["agent_args"] and "--force" not in manifest["options"]["agent_args"]
    recorded = json.loads(CAPTURE.read_text())["speed"]
    for name in ("gpu01", "gpu02"):
        health = records[name]["health"]
        jsonschema.validate(health, SCHEMA)
        speed = health["speed"]
        assert speed["status"] == "measured" and speed["forced"] is False
        assert speed["gpus"] == recorded["gpus"]
        assert speed["gpus"][0]["figures"]["hbm"]["value"] == recorded["gpus"][0]["figures"]["hbm"]["value"]
    busy = records["gpu03"]["health"]
    jsonschema.validate(busy, SCHEMA)
    assert busy["speed"]["status"] == "refused" and busy["speed"]["gpus"] == []
    assert busy["speed"]["reason"] == "GPU 0 is used by pid 826 (python3, 11.5 GiB); --force to measure anyway"


def test_sweep_run_speed_force_measures_the_busy_host_and_says_so(speed_fleet, tmp_path):
    _, records, manifest = sweep_run(speed_fleet, tmp_path / "run", "--speed", "--force")
    assert manifest["options"]["agent_args"][-2:] == ["--speed", "--force"]
    speed = records["gpu03"]["health"]["speed"]
    assert speed["status"] == "measured" and speed["forced"] is True
    assert speed["gpus"] == json.loads((SPEED / "speed-2.json").read_text())["speed"]["gpus"]


def test_without_speed_the_records_carry_speed_null(speed_fleet, tmp_path):
    _, records, manifest = sweep_run(speed_fleet, tmp_path / "run", "--limit", "gpu01")
    assert "--speed" not in manifest["options"]["agent_args"]
    assert records["gpu01"]["health"]["speed"] is None
