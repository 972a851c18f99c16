"""The probe's environment is not the host (issue 49): where the agent ran in a login session (the ssh /
ansible engines, as the run's manifest says), the SSH session's empty device mask or the login python3's
CPU-only torch does not make the host `cannot_run`. The host is judged on what NVML read (in the pool
when otherwise healthy), the contract stays a warning owned by the probe's environment, named with its
fix and how to probe the job's environment; never drained, never exit 4. Probed in a Slurm job step
(the slurm engine), or with an interpreter the operator named, the same record still cannot run."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import fleet_variants as fv
import sweep
from sweep.analysis.owners import PROBE_ENV_FIX
from sweep.cli import main

HOSTS = ("gpu01", "gpu02", "gpu03", "gpu04")


def _named(h):
    """The CPU-only torch read with the operator's own interpreter (sweep_interpreters), not the login python3."""
    h = fv.cpu_torch(h)
    h["frameworks"][0].update(interpreter="/opt/venv/bin/python", named=True)
    return h


def _run(tmp_path: Path, variant, engine: str | None) -> Path:
    """Four 8-GPU H200 hosts, gpu03 edited by `variant`, as a run folder whose manifest says `engine`."""
    records = [fv.record(h, variant(fv.h200(8, h)) if h == "gpu03" else fv.h200(8, h)) for h in HOSTS]
    manifest = {"format": "sweep-run", "record_version": 1, "state": "complete"}
    if engine is not None:
        manifest["options"] = {"engine": engine}
    return fv.write_run(tmp_path / f"run-{engine}", records, manifest)


def _report(tmp_path: Path, capsys, variant, engine):
    run = _run(tmp_path, variant, engine)
    code = main(["report", str(run), "--out", str(tmp_path / f"report-{engine}"), "--details"])
    terminal = capsys.readouterr().out
    summary = json.loads((tmp_path / f"report-{engine}" / "summary.json").read_text())
    return run, code, terminal, summary


@pytest.mark.parametrize("variant, contract, fix", [
    (fv.empty_mask, "device_mask", "fix the launcher"),
    (fv.cpu_torch, "framework", "install a CUDA build of torch"),
], ids=["empty_mask_over_ssh", "cpu_torch_in_login_python"])
def test_a_login_sessions_environment_does_not_stop_the_host_it_is_judged_on_nvml(tmp_path, capsys, variant,
                                                                                  contract, fix):
    run, code, terminal, summary = _report(tmp_path, capsys, variant, "ssh")
    judged = sweep.assess(sweep.load_fleet([run]))
    assert judged.verdict.states["gpu03"] == "pool" and judged.pool == list(HOSTS)
    assert code == judged.exit_code == summary["exit_code"] == 0
    assert judged.findings.excluded == () and judged.findings.comparable
    assert judged.findings.reference.keys["gpu_count"] == "8 GPUs"  # what NVML lists, not the mask's none
    cause = judged.cause("gpu03")
    assert cause.severity == "watch" and cause.contract == contract and cause.fix.startswith(fix)
    assert summary["drain"] == [] and summary["host_sets"]["pool"]["hosts"] == list(HOSTS)
    owner = next(o for o in summary["owners"] if o["host"] == "gpu03")
    assert owner["owner"] == "probe_env" and owner["key"] == contract
    assert owner["fix"].startswith(fix) and owner["action"] == PROBE_ENV_FIX
    assert f"not drained, the probe's environment: 1 host gpu03: {PROBE_ENV_FIX}" in terminal
    said = [line for line in terminal.splitlines() if "gpu03" in line]
    assert said[0].startswith(f"- warning: The probe's environment, not a job's: {contract}: 1 host gpu03: ")
    assert cause.cause in said[0] and len(said) == 2  # its text once, then its owner and how to probe the job's
    drain = (tmp_path / "report-ssh" / "drain.sh").read_text()
    assert "gpu03" not in [word for line in drain.splitlines() if line.startswith("drain ") for word in line.split()]


def test_ansible_is_a_login_session_too(tmp_path, capsys):
    _, code, _, summary = _report(tmp_path, capsys, fv.empty_mask, "ansible")
    assert code == 0 and summary["host_sets"]["pool"]["hosts"] == list(HOSTS)


@pytest.mark.parametrize("variant, engine", [
    (fv.empty_mask, "slurm"),  # the job step's own mask is empty: the job cannot see a GPU
    (fv.empty_mask, None),  # the record does not say where the agent ran (a prolog's, a copied folder)
    (_named, "ssh"),  # the operator's training interpreter has a CPU-only torch
], ids=["empty_mask_in_a_slurm_job", "empty_mask_where_not_said", "cpu_torch_in_a_named_interpreter"])
def test_the_same_contract_in_the_jobs_own_environment_still_cannot_run(tmp_path, capsys, variant, engine):
    run, code, _, summary = _report(tmp_path, capsys, variant, engine)
    judged = sweep.assess(sweep.load_fleet([run]))
    assert judged.verdict.states["gpu03"] == "cannot_run" and code == judged.exit_code == 4
    assert [e["host"] for e in judged.findings.excluded] == ["gpu03"]
    assert judged.cause("gpu03").severity == "broken"
