"""Every cause that keeps a host out of the pool has an owner, and the owner decides the action
(sweep.analysis.owners, issue 49): the node is drained; its configuration is named with its fix and
drained only with --drain-config; the probe's environment never drains a host; a running job makes the
host busy (out of the pool, not drained, no exit 4); a process of no job holds it out, named with pid
and user. One test per owner through the verdict, and the demo fleet the issue was found on."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet

import fleet_variants as fv
from sweep.analysis.owners import CAUSES, OWNERS
from sweep.collect.resume import is_busy, retry_classes, to_retry
from sweep.errors import ConfigError
from sweep.demo.fleet import demo_fleet
from sweep.report.build import build_report

ROOT = Path(__file__).resolve().parents[2]


def _job(h, job="41234", user="op", pid=4242, gpu=2):
    """`h` with a process of a running Slurm job on GPU `gpu` (as the agent's probe_agent/jobs.py records it)."""
    h["gpus"][gpu]["processes"] = [{"pid": pid, "name": "python3 train.py", "used_memory_bytes": 8 << 30,
                                    "user": user, "job": {"id": job, "user": user}}]
    return fv.rejudge(h)


def _no_job(h, pid=48213, gpu=2, user="bob"):
    h["gpus"][gpu]["processes"] = [{"pid": pid, "name": "python3 orphan_eval.py", "used_memory_bytes": 11 << 30,
                                    "user": user, "job": None}]
    return fv.rejudge(h)


def _report(tmp_path: Path, variant, name="gpu03", drain_config=False):
    """Four 8-GPU hosts, `name` edited by `variant`; the report built from them."""
    records = [fv.record(h, variant(fv.h200(8, h)) if h == name else fv.h200(8, h))
               for h in ("gpu01", "gpu02", "gpu03", "gpu04")]
    fv.write_run(tmp_path / "run", records)
    return build_report([tmp_path / "run"], tmp_path / f"report-{drain_config}", drain_config=drain_config)


def _drained(report) -> list[str]:
    return [h for g in report.summary["drain"] for h in g["hosts"]]


def _drain_lines(report) -> list[str]:
    """drain.sh's lines that drain: `drain SET REASON NODE...`."""
    return [line for line in report.files["drain"].read_text().splitlines() if line.startswith("drain ")]


def _owner(report, host):
    return next((o for o in report.summary["owners"] if o["host"] == host), None)


def test_the_node_owns_an_xid_that_needs_a_repair_it_is_broken_and_drained(tmp_path):
    report = _report(tmp_path, lambda h: fv.xid(h, code=79))
    assert report.summary["verdict_model"]["states"]["gpu03"] == "broken"
    assert _drained(report) == ["gpu03"] and _owner(report, "gpu03") is None
    assert report.exit_code == 4


def test_the_configuration_owns_a_power_cap_named_with_its_fix_and_drained_only_when_asked(tmp_path):
    report = _report(tmp_path, lambda h: fv.power_cap(h, 250.0, gpus={3}))
    assert _drained(report) == [] and "gpu03" not in report.summary["host_sets"]["pool"]["hosts"]
    owner = _owner(report, "gpu03")
    assert owner["owner"] == "config" and owner["label"] == "the node's configuration"
    assert owner["fix"].startswith("restore it with nvidia-smi -pl 700") and "--drain-config" in owner["action"]
    assert _drain_lines(report) == []
    asked = _report(tmp_path, lambda h: fv.power_cap(h, 250.0, gpus={3}), drain_config=True)
    assert _drained(asked) == ["gpu03"] and _owner(asked, "gpu03") is None
    assert asked.summary["drain"][0]["reason"].startswith("sweep: power: restore it with nvidia-smi -pl 700")


def hosts_of(folded: str) -> set:
    return set(NodeSet(folded))


@pytest.mark.parametrize("variant, contract", [(fv.empty_mask, "device_mask"), (fv.cpu_torch, "framework")])
def test_the_probes_environment_never_drains_a_host_and_says_how_to_probe_the_jobs(tmp_path, variant, contract):
    report = _report(tmp_path, variant)
    for drain_config in (False, True):
        assert _drained(_report(tmp_path, variant, drain_config=drain_config)) == []
    owner = _owner(report, "gpu03")
    assert owner["owner"] == "probe_env" and owner["key"] == contract
    assert "--engine slurm" in owner["action"] and "sweep_interpreters" in owner["action"] and "prolog" in owner["action"]
    assert any(line.startswith("not drained, the probe's environment: 1 host gpu03: ") for line in report.next_lines)


def test_a_running_jobs_processes_make_the_host_busy_out_of_the_pool_not_drained_not_exit_4(tmp_path):
    report = _report(tmp_path, _job)
    assert report.summary["verdict_model"]["states"]["gpu03"] == "busy"
    assert report.summary["host_sets"]["busy"]["hosts"] == ["gpu03"]
    assert report.summary["host_sets"]["pool"]["hosts"] == ["gpu01", "gpu02", "gpu04"]
    assert _drained(report) == [] and report.exit_code == 0
    owner = _owner(report, "gpu03")
    assert owner["owner"] == "busy" and owner["cause"].startswith("busy: job 41234 (user op)")
    assert "--retry-failed busy" in owner["fix"]
    assert re.search(r"sweep run --resume \S+ --retry-failed busy", report.files["markdown"].read_text())


def test_a_process_of_no_job_holds_the_host_out_as_today_with_pid_and_user_and_is_not_drained(tmp_path):
    report = _report(tmp_path, _no_job)
    assert report.summary["verdict_model"]["states"]["gpu03"] == "held_out" and report.exit_code == 4
    assert _drained(report) == []
    owner = _owner(report, "gpu03")
    assert owner["owner"] == "process"
    assert "python3 orphan_eval.py (pid 48213, user bob, 11264 MiB) on GPU 2" in owner["cause"]


def test_a_host_with_a_job_and_a_process_of_no_job_is_held_out_not_busy(tmp_path):
    def both(h):
        h["gpus"][1]["processes"] = [{"pid": 7, "name": "x", "used_memory_bytes": 1 << 30, "user": "op",
                                      "job": {"id": "9", "user": "op"}}]
        return _no_job(h)
    report = _report(tmp_path, both)
    assert report.summary["verdict_model"]["states"]["gpu03"] == "held_out"


def test_retry_failed_busy_picks_the_hosts_found_running_a_job():
    records = {"gpu01": fv.record("gpu01", _job(fv.h200(2, "gpu01"), gpu=1)),
               "gpu02": fv.record("gpu02", _no_job(fv.h200(2, "gpu02"), gpu=1)),
               "gpu03": fv.record("gpu03", fv.h200(2, "gpu03")),
               "gpu04": fv.record("gpu04", None, ("refused", "connection refused"))}
    assert [h for h, r in records.items() if is_busy(r)] == ["gpu01"]
    assert to_retry(records, retry_classes(["busy"]), list(records)) == ["gpu01"]
    assert to_retry(records, retry_classes(["busy", "refused"]), list(records)) == ["gpu01", "gpu04"]


def test_every_cause_names_a_declared_owner():
    assert set(CAUSES.values()) <= set(OWNERS)
    assert {o.drain for o in OWNERS.values()} == {"always", "asked", "never"}


# --- the demo fleet (issue 49's findings) ---------------------------------------------------------


def _replay(capture: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "probe_agent", "--replay", capture], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("demo")
    hosts = demo_fleet(tmp / "captures", unreachable=False)
    with ThreadPoolExecutor(2) as pool:
        health = list(pool.map(lambda h: _replay(h.capture), hosts))
    manifest = {"format": "sweep-run", "record_version": 1, "state": "complete",
                "options": {"engine": "ssh"}}  # as `sweep demo` probes it: over SSH, in a login session
    return fv.write_run(tmp / "run", [fv.record(h.name, x) for h, x in zip(hosts, health)], manifest)


def test_demo_fleet_gpu21_gpu29_gpu33_are_named_with_owner_and_fix_and_not_in_drain_sh(demo_run, tmp_path):
    report = build_report([demo_run], tmp_path / "report")
    drained = _drained(report)
    lines = _drain_lines(report)
    for host, owner, fix in (("gpu21", "process", "stop them"), ("gpu29", "probe_env", "fix the launcher"),
                             ("gpu33", "probe_env", "install a CUDA build of torch")):
        assert host not in drained and not [line for line in lines if host in line.split()]
        named = _owner(report, host)
        assert named["owner"] == owner and named["fix"].startswith(fix), host
        said = [line for line in report.next_lines if line.startswith(f"not drained, {OWNERS[owner].label}: ")]
        assert len(said) == 1 and host in hosts_of(said[0].split(": ")[1].split(" ", 2)[2]), (host, said)
    assert {"gpu03", "gpu19", "gpu25"} <= set(drained)  # the node's faults still are
    for host in ("gpu11", "gpu12", "gpu13"):
        assert host not in drained and _owner(report, host)["owner"] == "config"
    asked = build_report([demo_run], tmp_path / "asked", drain_config=True)
    assert {"gpu11", "gpu12", "gpu13"} <= set(_drained(asked))
    assert not {"gpu21", "gpu29", "gpu33"} & set(_drained(asked))
    html = report.files["html"].read_text()
    box = html[html.index('id="verdict"'):html.index("</section>")]
    owned = {}
    for folded, owner in re.findall(r'data-hosts="([^"]+)"[^>]*>(?:(?!</li>).)*?data-owner="(\w+)"', box, re.S):
        owned.update(dict.fromkeys(hosts_of(folded), owner))
    # each host named once, in the row of its cause, with whose cause keeps it out undrained: the caps,
    # the process
    assert {h: owned.get(h) for h in ("gpu11", "gpu12", "gpu13", "gpu21")} == {
        "gpu11": "config", "gpu12": "config", "gpu13": "config", "gpu21": "process"}
    assert not {"gpu03", "gpu19", "gpu25"} & set(owned)  # the node's faults are drained, not owned elsewhere
    # gpu29 and gpu33 were probed over SSH: judged on what NVML read, they are in the pool, in no kept-out row
    assert {"gpu29", "gpu33"} <= set(report.summary["host_sets"]["pool"]["hosts"])
    assert not {"gpu29", "gpu33"} & set(owned)
    states = report.summary["verdict_model"]["states"]
    assert states["gpu29"] == states["gpu33"] == "pool" and states["gpu03"] == "cannot_run"  # a GPU lost: the node's
    assert 'id="next"' in box and "sh drain.sh -n" in box


def test_the_expectations_file_can_ask_for_the_configurations_drain_and_names_a_bad_value(tmp_path):
    expect = tmp_path / "fleet.yml"
    expect.write_text("version: 1\ndefaults: {ecc: true}\ndrain: [config]\n")
    records = [fv.record(h, fv.power_cap(fv.h200(8, h), 250.0, gpus={3}) if h == "gpu03" else fv.h200(8, h))
               for h in ("gpu01", "gpu02", "gpu03", "gpu04")]
    fv.write_run(tmp_path / "run", records)
    report = build_report([tmp_path / "run"], tmp_path / "report", expect=expect)
    assert _drained(report) == ["gpu03"] and report.summary["drain_config"] is True
    expect.write_text("version: 1\ndefaults: {ecc: true}\ndrain: [node]\n")
    with pytest.raises(ConfigError, match="drain must be a list of config") as err:
        build_report([tmp_path / "run"], tmp_path / "bad", expect=expect)
    assert err.value.where == f"{expect}:3"
