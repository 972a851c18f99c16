"""drain.sh and resume.sh applied to a real one-node Slurm (slurmctld + slurmd on loopback): the
report's broken host is this machine's Slurm node, with an Xid 79 in its kernel log; a later report
finds it healthy again (issue 43: sweep never overwrites nor resumes a drain that is not its own). The
cluster knows a second node, otherhost, outside every report and drained by hand: no script may touch it,
whatever a reason holds (issue 49: a reason with a newline read as another node's line)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
import fleet_variants as fv  # noqa: E402

from probe_agent.source import RecordingSource  # noqa: E402
from sweep.collect.run import run_sweep  # noqa: E402
from sweep.demo import hgx, synth  # noqa: E402
from sweep.demo.loopback import SSHD, FleetHost, LocalFleet  # noqa: E402
from sweep.report.build import build_report  # noqa: E402

from helpers import require  # noqa: E402
from slurm_parts import one_node_slurm  # noqa: E402

pytestmark = pytest.mark.integration
OTHER = "otherhost"  # a node of the cluster in no report, drained by hand
OTHERS_REASON = "held by ops"


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    with one_node_slurm(tmp_path_factory.mktemp("slurm"), others=(OTHER,)) as cluster:
        yield cluster


def _slurm(env: dict, *argv: str) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _node(env: dict, node: str) -> dict:
    """`scontrol show node -o NODE` as a dict; Reason (the last field, with blanks) kept whole."""
    line = _slurm(env, "scontrol", "show", "node", "-o", node).strip()
    head, _, reason = line.partition(" Reason=")
    fields = dict(item.split("=", 1) for item in head.split() if "=" in item)
    if reason:
        fields["Reason"] = reason
    return fields


def _report(tmp_path: Path, node: str, name: str, broken: bool):
    """A report of three hosts, `node` among them, broken (Xid 79) or healthy."""
    health = fv.xid(fv.h200(8, node), code=79) if broken else fv.h200(8, node)
    records = [fv.record(node, health), *(fv.record(h, fv.h200(8, h)) for h in ("gpu02", "gpu03"))]
    fv.write_run(tmp_path / f"run-{name}", records)
    return build_report([tmp_path / f"run-{name}"], tmp_path / f"report-{name}")


def _sh(env: dict, script: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(["sh", str(script), *args], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def _plain(stderr: str) -> str:
    """`stderr` without the flag Slurm adds to a state while slurmd has not answered a ping (a loaded machine)."""
    return stderr.replace("+NOT_RESPONDING", "")


def _state(env: dict, node: str) -> tuple[bool, str | None]:
    shown = _node(env, node)
    return "DRAIN" in shown["State"].split("+"), shown.get("Reason", "").rsplit(" [", 1)[0] or None


@pytest.fixture
def cluster(slurm):
    """The cluster's node idle and undrained at the start of each test; otherhost drained by hand, and so
    at its end."""
    env = dict(os.environ, SLURM_CONF=slurm["conf"])
    if _state(env, slurm["node"])[0]:
        _slurm(env, "scontrol", "update", f"NodeName={slurm['node']}", "State=RESUME")
    assert _state(env, slurm["node"]) == (False, None)
    _slurm(env, "scontrol", "update", f"NodeName={OTHER}", "State=DRAIN", f"Reason={OTHERS_REASON}")
    other = _node(env, OTHER)["Reason"]
    yield slurm["node"], env
    after = _node(env, OTHER)  # drained, its reason and its [user@time] untouched (NOT_RESPONDING comes and goes)
    assert "DRAIN" in after["State"].split("+") and after["Reason"] == other


def test_drain_sh_drains_the_broken_node_with_its_reason(cluster, tmp_path):
    node, env = cluster
    report = _report(tmp_path, node, "broken", broken=True)
    [drain] = report.summary["drain"]
    assert drain["hosts"] == [node] and drain["reason"] == "sweep: reboot: Xid 79 GPU has fallen off the bus"
    assert report.summary["host_sets"]["broken"]["hosts"] == [node]

    done = _sh(env, report.files["drain"])
    shown = _node(env, node)
    assert "DRAIN" in shown["State"].split("+")
    assert shown["Reason"].startswith(drain["reason"] + " [")  # Slurm appends [user@time]
    assert _slurm(env, "sinfo", "-R", "-h", "-N", "-n", node, "-o", "%N|%E").strip() == f"{node}|{drain['reason']}"
    assert done.stdout == f"drained {node}: {drain['reason']}\n" and done.stderr == ""


def test_a_node_drained_by_hand_keeps_its_reason_through_drain_sh_and_is_never_resumed(cluster, tmp_path):
    node, env = cluster
    _slurm(env, "scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=disk replace")
    broken = _report(tmp_path, node, "broken", broken=True)
    done = _sh(env, broken.files["drain"])
    assert _state(env, node) == (True, "disk replace")
    assert _plain(done.stderr) == f"{broken.files['drain']}: {node} left alone: IDLE+DRAIN by someone else, Reason=disk replace\n"
    for name, broken_now in (("still-broken", True), ("healthy", False)):
        report = _report(tmp_path, node, name, broken=broken_now)
        done = _sh(env, report.files["resume"])
        assert _state(env, node) == (True, "disk replace"), name
        assert f"{node} left alone: " in done.stderr and "Reason=disk replace" in done.stderr
    assert "by someone else" in done.stderr  # the healthy report's pool holds it, the reason is not sweep's


def test_a_node_sweep_drained_is_resumed_by_the_report_that_finds_it_healthy(cluster, tmp_path):
    node, env = cluster
    broken = _report(tmp_path, node, "broken", broken=True)
    _sh(env, broken.files["drain"])
    assert _state(env, node) == (True, "sweep: reboot: Xid 79 GPU has fallen off the bus")
    healthy = _report(tmp_path, node, "healthy", broken=False)
    assert healthy.summary["drain"] == [] and node in healthy.summary["host_sets"]["pool"]["hosts"]
    done = _sh(env, healthy.files["resume"])
    assert _state(env, node) == (False, None)
    assert done.stdout == f"resumed {node}\n"
    assert _slurm(env, "sinfo", "-R", "-h", "-N", "-n", node, "-o", "%N|%E").strip() == ""


def test_a_node_sweep_drained_and_still_broken_stays_drained(cluster, tmp_path):
    node, env = cluster
    _sh(env, _report(tmp_path, node, "broken", broken=True).files["drain"])
    again = _report(tmp_path, node, "again", broken=True)
    done = _sh(env, again.files["resume"])
    assert _state(env, node) == (True, "sweep: reboot: Xid 79 GPU has fallen off the bus")
    assert _plain(done.stderr) == (f"{again.files['resume']}: {node} left alone: still held out or broken in this report, "
                           "IDLE+DRAIN, Reason=sweep: reboot: Xid 79 GPU has fallen off the bus\n")


def test_dry_run_prints_the_commands_and_changes_nothing(cluster, tmp_path):
    node, env = cluster
    broken = _report(tmp_path, node, "broken", broken=True)
    for args, extra in ((("-n",), {}), ((), {"DRY_RUN": "1"})):
        done = _sh(dict(env, **extra), broken.files["drain"], *args)
        assert done.stdout == (f"would run: scontrol update NodeName={node} State=DRAIN "
                               "'Reason=sweep: reboot: Xid 79 GPU has fallen off the bus'\n")
        assert _state(env, node) == (False, None)
    _sh(env, broken.files["drain"])
    healthy = _report(tmp_path, node, "healthy", broken=False)
    done = _sh(env, healthy.files["resume"], "-n")
    assert done.stdout == f"would run: scontrol update NodeName={node} State=RESUME\n"
    assert _state(env, node) == (True, "sweep: reboot: Xid 79 GPU has fallen off the bus")


FORGED = f"x\n{OTHER}|drained|sweep: x $(touch PWNED) `touch PWNED2`"  # a second line, as sinfo printed it


@pytest.mark.parametrize("script", ["drain", "resume"])
def test_a_reason_holding_a_newline_and_a_forged_node_line_never_reaches_another_node(cluster, tmp_path, script):
    """Whoever may drain one node of the report writes a reason whose second line reads as otherhost's, drained
    by sweep: neither drain.sh (of a report that finds the node broken) nor resume.sh (of one that finds it
    healthy) touches otherhost (the cluster fixture checks its state and reason after the test), nor runs the
    reason's shell text. drain.sh leaves the node as it is (drained by someone else); resume.sh resumes it
    (its reason starts with sweep's)."""
    node, env = cluster
    reason = ("sweep: " if script == "resume" else "") + FORGED
    _slurm(env, "scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}")
    work = tmp_path / "cwd"
    work.mkdir()
    report = _report(tmp_path, node, script, broken=script == "drain")
    done = subprocess.run(["sh", str(report.files[script])], cwd=work, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert OTHER not in done.stdout and list(work.iterdir()) == []
    if script == "drain":
        assert _state(env, node)[0] and _node(env, node)["Reason"].startswith("x ")
        assert done.stderr.startswith(f"{report.files['drain']}: {node} left alone: IDLE+DRAIN") or \
            done.stderr.startswith(f"{report.files['drain']}: {node} left alone: IDLE+DRAIN+NOT_RESPONDING")
        assert done.stderr.count("\n") == 1  # the reason shown on its node's one line, as text
    else:
        assert done.stdout == f"resumed {node}\n" and _state(env, node) == (False, None)


def test_dry_run_without_a_controller_prints_one_line_per_reason_from_the_report(slurm, tmp_path):
    """No slurmctld answers (its port closed): drain.sh -n prints what the report asks, each line marked, exit 0;
    without -n it changes nothing and says why (exit 1); resume.sh -n the same."""
    conf = Path(slurm["conf"]).read_text()
    down = tmp_path / "slurm.conf"
    down.write_text(re.sub(r"SlurmctldPort=\d+", "SlurmctldPort=9", conf))  # port 9 (discard): nothing listens
    env = dict(os.environ, SLURM_CONF=str(down))
    node = slurm["node"]
    health = {node: fv.xid(fv.h200(8, node), code=79), "gpu02": fv.hw_thermal(fv.h200(8, "gpu02")),
              "gpu03": fv.hw_thermal(fv.h200(8, "gpu03")), "gpu04": fv.h200(8, "gpu04")}
    fv.write_run(tmp_path / "run", [fv.record(h, x) for h, x in health.items()])
    report = build_report([tmp_path / "run"], tmp_path / "report")
    drains = report.summary["drain"]
    assert sorted(d["folded"] for d in drains) == sorted(["gpu[02-03]", node])
    done = subprocess.run(["sh", str(report.files["drain"]), "-n"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"would run: scontrol update {'NodeName=' + d['folded'] if d['folded'] == node else repr('NodeName=' + d['folded'])} "
        f"State=DRAIN 'Reason={d['reason']}'  # state not read" for d in drains]
    assert "does not answer (scontrol ping)" in done.stderr
    real = subprocess.run(["sh", str(report.files["drain"])], env=env, capture_output=True, text=True, timeout=120)
    assert real.returncode == 1 and real.stdout == "" and "nothing done" in real.stderr
    resumed = subprocess.run(["sh", str(report.files["resume"]), "-n"], env=env, capture_output=True, text=True,
                             timeout=120)
    assert resumed.returncode == 0 and resumed.stdout == (
        "would run: scontrol update NodeName=gpu04 State=RESUME  # state not read: resumes only the nodes drained "
        "with a sweep: reason\n")


# --- a node running a job is busy, not faulty (issue 49) --------------------------------------------


def _capture(tmp_path: Path, node: str, name: str, edits=()) -> Path:
    """A replayed 8-GPU H200 capture of `node` (the demo's), with `edits`."""
    cap = synth.derive(synth.base_capture("h200-idle"), [synth.multi_gpu(8, lambda i, j: "NV18"), hgx.hgx_platform(),
                                                         synth.identity(node), *edits], hostname=node)
    return synth.write(cap, tmp_path / f"{name}.json")


def _with_process(capture: Path, pid: int, monkeypatch, env: dict) -> Path:
    """`capture` with `pid` on GPU 2, and the answers this machine gives about that pid (its cgroup and status,
    /etc/passwd, scontrol pidinfo, squeue) recorded as the agent's RecordingSource records them on a host."""
    from probe_agent.jobs import attach_jobs  # issue 49's: imported here so that the module collects on main

    cap = json.loads(capture.read_text())
    synth.foreign_process(pid=pid, name="python3 train.py", mib=11264, gpus=[2])(cap)
    monkeypatch.setenv("SLURM_CONF", env["SLURM_CONF"])
    recording = RecordingSource()
    attach_jobs(recording, [{"processes": [{"pid": pid}]}])
    cap.setdefault("paths", {}).update(recording.path_answers)
    cap.setdefault("commands", {}).update(recording.command_answers)
    capture.write_text(json.dumps(cap))
    return capture


def _replayed(capture: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "probe_agent", "--replay", str(capture)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _replayed_report(tmp_path: Path, node: str, capture: Path, name: str):
    """A report of `node` (replaying `capture`) and two healthy twins."""
    records = [fv.record(node, _replayed(capture))]
    records += [fv.record(h, _replayed(_capture(tmp_path, h, f"{name}-{h}"))) for h in ("gpu02", "gpu03")]
    fv.write_run(tmp_path / f"run-{name}", records)
    return build_report([tmp_path / f"run-{name}"], tmp_path / f"report-{name}")


@pytest.fixture
def job(cluster, tmp_path):
    """A real batch job running on the node: (job id, the pid of its process)."""
    node, env = cluster
    pidfile = tmp_path / "job.pid"
    job = _slurm(env, "sbatch", "--parsable", "-o", str(tmp_path / "job.out"), "--wrap",
                 f"echo $$ > {pidfile}; exec sleep 300").strip().split(";")[0]
    end = time.monotonic() + 60
    while not (pidfile.exists() and pidfile.read_text().strip()):
        assert time.monotonic() < end, _slurm(env, "squeue", "-h", "-o", "%i %T %R")
        time.sleep(0.2)
    yield job, int(pidfile.read_text())
    subprocess.run(["scancel", job], env=env, capture_output=True, timeout=60)


def test_a_node_whose_gpu_process_belongs_to_a_running_job_is_busy_not_drained(cluster, job, tmp_path, monkeypatch):
    node, env = cluster
    job_id, pid = job
    capture = _with_process(_capture(tmp_path, node, "busy"), pid, monkeypatch, env)
    report = _replayed_report(tmp_path, node, capture, "busy")
    summary = report.summary
    assert summary["verdict_model"]["states"][node] == "busy"
    [owner] = summary["owners"]
    assert owner["host"] == node and owner["owner"] == "busy"
    assert owner["cause"].startswith(f"busy: job {job_id} (user root): python3 train.py (pid {pid}, user root, ")
    assert summary["host_sets"]["pool"]["hosts"] == ["gpu02", "gpu03"] and summary["host_sets"]["busy"]["hosts"] == [node]
    assert summary["drain"] == [] and report.exit_code != 4 and report.exit_code == 0
    done = _sh(env, report.files["drain"])
    assert done.stdout == "" and _state(env, node) == (False, None)  # the job's node stays in service


def test_the_same_node_with_a_process_of_no_job_is_held_out_as_before(cluster, tmp_path, monkeypatch):
    node, env = cluster
    stray = subprocess.Popen(["sleep", "300"])  # started outside Slurm: no job's
    try:
        capture = _with_process(_capture(tmp_path, node, "stray"), stray.pid, monkeypatch, env)
        report = _replayed_report(tmp_path, node, capture, "stray")
    finally:
        stray.kill()
        stray.wait()
    summary = report.summary
    assert summary["verdict_model"]["states"][node] == "held_out" and report.exit_code == 4
    assert summary["host_sets"]["held_out"]["hosts"] == [node]
    [owner] = summary["owners"]
    assert owner["owner"] == "process"
    assert f"python3 train.py (pid {stray.pid}, user root, 11264 MiB) on GPU 2" in owner["cause"]
    assert summary["drain"] == []  # a process of no job: its owner stops it, a drain would not


# --- the loop closes: drain, repair, probe again, resume (issue 49) ----------------------------------


def test_a_node_sweep_drained_is_probed_again_after_its_fix_over_ssh_and_resumed(cluster, tmp_path, monkeypatch):
    """The broken node (an Xid 79 replayed by a real sshd on loopback, named as the Slurm node) is drained by
    drain.sh; the Slurm engine cannot probe it now and says to use the ssh engine; after the fix (a healthy
    capture) a sweep over ssh finds it healthy and that report's resume.sh resumes it."""
    node, env = cluster
    if not os.path.exists(SSHD):
        require(False, "needs OpenSSH's sshd (apt-get install -y openssh-server)")
    capture = _capture(tmp_path, node, "fleet-node", [hgx.xid(79, gpu=2, first_s=20417.75)])
    with LocalFleet([FleetHost(node, capture=str(capture))], tmp_path / "fleet") as fleet:
        ssh = fleet.ssh_settings(connect_timeout=5)
        broken = run_sweep(fleet.inventory_path, out=tmp_path / "run-broken", ssh=ssh)
        assert broken.ok == 1
        report = build_report([broken.run_dir], tmp_path / "report-broken")
        assert [d["hosts"] for d in report.summary["drain"]] == [[node]]
        _sh(env, report.files["drain"])
        assert _state(env, node) == (True, "sweep: reboot: Xid 79 GPU has fallen off the bus")

        with monkeypatch.context() as slurm_env:
            slurm_env.setenv("SLURM_CONF", env["SLURM_CONF"])
            by_slurm = run_sweep(fleet.inventory_path, out=tmp_path / "run-slurm", engine="slurm")
        [record] = [json.loads(p.read_text()) for p in (by_slurm.run_dir / "hosts").glob("*.json")]
        assert record["status"] == "failed" and "probe it with the ssh engine" in record["failure"]["message"]
        assert f"--engine ssh --limit {node}" in record["failure"]["message"]

        _capture(tmp_path, node, "fleet-node")  # the repair: the same node, healthy
        again = run_sweep(fleet.inventory_path, out=tmp_path / "run-fixed", ssh=ssh)
        healthy = build_report([again.run_dir], tmp_path / "report-fixed")
    assert healthy.summary["host_sets"]["pool"]["hosts"] == [node] and healthy.exit_code == 0
    done = _sh(env, healthy.files["resume"])
    assert done.stdout == f"resumed {node}\n" and _state(env, node) == (False, None)


def test_retry_failed_busy_probes_again_the_hosts_found_running_a_job(tmp_path):
    """A sweep over real sshds finds gpu02 busy (its process's job recorded in its capture, as a recorded host
    answers); `--resume RUN --retry-failed busy` sets its record aside and probes it again, now idle; gpu01
    (healthy) keeps its record."""
    if not os.path.exists(SSHD):
        require(False, "needs OpenSSH's sshd (apt-get install -y openssh-server)")
    busy = _capture(tmp_path, "gpu02", "gpu02", [synth.foreign_process(pid=4242, name="python3 train.py", gpus=[1])])
    cap = json.loads(busy.read_text())
    cap.setdefault("paths", {})["read /proc/4242/cgroup"] = {"text": "0::/system.slice/slurmstepd.scope/job_41234/step_0\n"}
    cap.setdefault("commands", {})["squeue -h -j 41234 -o %u"] = {"rc": 0, "stdout": "op\n", "stderr": "", "seconds": 0.01}
    busy.write_text(json.dumps(cap))
    hosts = [FleetHost("gpu01", capture=str(_capture(tmp_path, "gpu01", "gpu01"))), FleetHost("gpu02", capture=str(busy))]
    with LocalFleet(hosts, tmp_path / "fleet") as fleet:
        ssh = fleet.ssh_settings(connect_timeout=5)
        first = run_sweep(fleet.inventory_path, out=tmp_path / "run", ssh=ssh)
        report = build_report([first.run_dir], tmp_path / "report-1")
        assert report.summary["host_sets"]["busy"]["hosts"] == ["gpu02"]
        assert re.search(r"sweep run --resume \S+ --retry-failed busy", report.files["markdown"].read_text())
        _capture(tmp_path, "gpu02", "gpu02")  # the job ended: the same host, idle
        again = run_sweep(fleet.inventory_path, resume=first.run_dir, retry_failed=["busy"], ssh=ssh)
    hosts_dir = again.run_dir / "hosts"
    assert sorted(p.name for p in hosts_dir.iterdir()) == ["gpu01.json", "gpu02.json", "gpu02~attempt-1.json"]
    report = build_report([again.run_dir], tmp_path / "report-2")
    assert report.summary["host_sets"]["pool"]["hosts"] == ["gpu01", "gpu02"] and report.exit_code == 0
