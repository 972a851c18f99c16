"""`sweep report` on provenance files (sweep wrap): the real H200 envelopes of a bf16 matmul, one of
them with another process on the GPU."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from sweep.analysis.fleet import load_fleet, records_of
from sweep.report.build import build_report

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "h200"
CLEAN, FOREIGN = H200 / "matmul.provenance.json", H200 / "matmul-foreign.provenance.json"


def test_two_runs_on_one_machine_are_one_class_and_the_foreign_process_a_finding(tmp_path):
    result = build_report([CLEAN, FOREIGN], tmp_path)
    summary = result.summary
    # both probes say hostname "vm": the files name the hosts
    assert [c["hosts"] for c in summary["classes"]] == [["matmul", "matmul-foreign"]]
    assert [(f["host"], f["kind"], f["severity"]) for f in summary["findings"]] == [
        ("matmul-foreign", "foreign_process", "warning")]
    assert "python3 (pid 694" in summary["findings"][0]["detail"]
    # a foreign process is a warning, but it keeps the host out of the pool: one class, not all of it healthy
    assert summary["pool"]["hosts"] == ["matmul"] and [h["host"] for h in summary["held_out"]] == ["matmul-foreign"]
    assert result.exit_code == 4
    with open(tmp_path / "hosts.csv", newline="") as fh:
        rows = {r["host"]: r for r in csv.DictReader(fh)}
    assert rows["matmul"]["comparability_class"] == rows["matmul-foreign"]["comparability_class"] == "A"
    assert rows["matmul"]["provenance"].endswith("no other process on the GPUs; nothing changed between the probes")
    assert "1 other process(es) on the GPUs: python3 (pid 694)" in rows["matmul-foreign"]["provenance"]
    assert "1 other process(es) on the GPUs: python3 (pid 694)" in (tmp_path / "report.html").read_text()


def test_the_probe_before_the_command_is_the_hosts_health():
    fleet = load_fleet([FOREIGN])
    before = json.loads(FOREIGN.read_text())["before"]
    host = fleet.hosts.iloc[0]
    assert host["host"] == "vm" and host["summary"] == before["summary"]  # one file: named by its hostname
    assert fleet.processes["pid"].tolist() == [694]
    assert records_of(fleet)["vm"]["health"] == before


def test_folders_of_provenance_files_are_named_by_their_folder(tmp_path):
    for run, source in (("r16", CLEAN), ("r17", FOREIGN)):
        (tmp_path / run).mkdir()
        shutil.copy(source, tmp_path / run / "provenance.json")
    fleet = load_fleet([tmp_path / "r16", tmp_path / "r17"])
    assert fleet.hosts["host"].tolist() == ["r16", "r17"]
    assert fleet.hosts["provenance"].str.contains("1 other process").tolist() == [False, True]


def test_health_files_have_no_provenance():
    fleet = load_fleet([H200 / "idle.health.json"])
    assert fleet.hosts["provenance"].isna().all()


def test_a_live_load_probe_is_judged_as_the_agent_judged_it_not_from_the_raw_process_list(tmp_path):
    # recorded live on the H200 under --load: NVML lists the agent's own load process (its pid is
    # load.pid), and the agent's processes contract says there is no other compute process
    loaded = H200 / "load.health.json"
    health = json.loads(loaded.read_text())
    assert [p["pid"] for g in health["gpus"] for p in g["processes"]] == [health["load"]["pid"]]
    judged = next(c for c in health["contracts"] if c["name"] == "processes")
    assert (judged["status"], judged["message"]) == ("ok", "no other compute process on the GPUs")
    result = build_report([loaded], tmp_path / "load")
    assert not [f for f in result.summary["findings"] if f["kind"] == "foreign_process"]
    assert result.summary["pool"]["size"] == 1 and result.exit_code == 0
    assert "Foreign processes" not in (tmp_path / "load" / "report.html").read_text()
    # where the agent named another process, the report names it too
    foreign = build_report([H200 / "foreign.health.json"], tmp_path / "foreign")
    assert [f["detail"] for f in foreign.summary["findings"] if f["kind"] == "foreign_process"] == [
        "1 other process on the GPUs: python3 (pid 694, 11782 MiB) on GPU 0"]
    assert foreign.summary["pool"]["size"] == 0 and foreign.exit_code == 4
