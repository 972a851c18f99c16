"""`sweep wrap`: real commands run under the agent, GPU answers replayed from the real H200 captures."""
import copy
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from referencing import Registry, Resource

from probe_agent.wrap.sampler import Attribution
from probe_agent.wrap.verdict import probe_changes
from sweep.demo import synth
from sweep.cli import main as sweep_main
from sweep.audit.diff import diff_provenance, load_health

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "sweep" / "demo" / "captures"
SCHEMAS = ROOT / "probe_agent" / "schema"
HEALTH_SCHEMA = json.loads((SCHEMAS / "health-1.schema.json").read_text())
PROVENANCE_SCHEMA = json.loads((SCHEMAS / "provenance-1.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(
    PROVENANCE_SCHEMA, registry=Registry().with_resource(HEALTH_SCHEMA["$id"], Resource.from_contents(HEALTH_SCHEMA)))
SLEEPER = [sys.executable, "-c", "import time; print('hi'); time.sleep(1.5)"]
FOREIGN_PID = 48213


def steady_load(tmp_path, edits=(), name="steady.json"):
    """h200-load.json from the moment the load computed: its first 4 s of samples are the load
    process starting up on an idle GPU (replayed in order, a 1.5 s command would see only those)."""
    cap = synth.derive(synth.base_capture("h200-load"), list(edits))
    own = (cap.get("load") or {}).get("pid")  # the recording's own --load process is not the environment
    for key, answer in cap["nvml"].items():
        if key.endswith(".procs") and isinstance(answer.get("value"), list):
            answer["value"] = [p for p in answer["value"] if not (isinstance(p, dict) and p.get("pid") == own)]
    samples = cap["samples"]
    first = next(n for n, s in enumerate(samples) if "idle" not in s["gpus"][0]["active_reasons"])
    cap["samples"] = samples[first:]
    return synth.write(cap, tmp_path / name)


def wrapped(tmp_path, command, capture=CAPTURES / "h200-load.json", interval=0.1, out="out", stdin=None, env=None):
    """Run the agent in wrap mode; (completed process, provenance dict validated against the schema)."""
    out_dir = tmp_path / out
    proc = subprocess.run([sys.executable, "-m", "probe_agent", "--wrap", "--out", str(out_dir), "--interval",
                           str(interval), "--replay", str(capture), "--", *command], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=120, env=env)
    prov = json.loads((out_dir / "provenance.json").read_text())
    VALIDATOR.validate(prov)
    return proc, prov


def test_wrapped_run_passes_output_and_exit_code_through_and_keeps_the_evidence(tmp_path):
    proc, p = wrapped(tmp_path, SLEEPER, capture=steady_load(tmp_path))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "hi\n", "")
    assert p["kind"] == "sweep.provenance" and p["schema_version"] == "1.1"
    assert p["command"]["argv"] == SLEEPER and p["command"]["exit_code"] == 0 and p["command"]["signal"] is None
    assert 1.5 <= p["command"]["wall_s"] < 10
    assert p["before"]["kind"] == p["after"]["kind"] == "sweep.health"
    assert p["before"]["gpus"][0]["uuid"] == p["after"]["gpus"][0]["uuid"]
    assert len(p["samples"]) >= 5 and p["sampler"]["samples"] == len(p["samples"])
    assert all(0 <= s["t"] <= p["command"]["wall_s"] + 1 for s in p["samples"])
    v = p["verdict"]
    assert v["sw_power_cap_fraction"] > 0.5
    assert v["sm_mhz_median"] < v["sm_mhz_max_allowed"] == 1980
    assert v["hw_slowdown"] is False and v["other_processes"] == [] and v["changes"] == []
    assert "SW power cap active in" in v["summary"] and "no other process" in v["summary"]
    assert v["unreadable_process_entries"] == 0 and "other processes may be missed" not in v["summary"]
    # the sampler slept: it read for a small fraction of the run
    assert p["sampler"]["error"] is None and p["sampler"]["busy_fraction"] < 0.2


def test_failing_command_exit_code_and_stderr_pass_through(tmp_path):
    cmd = [sys.executable, "-c", "import sys, time; time.sleep(0.6); sys.stderr.write('boom\\n'); sys.exit(3)"]
    proc, p = wrapped(tmp_path, cmd)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "", "boom\n")
    assert p["command"]["exit_code"] == 3
    # replay is in recorded order: the recording starts with the load process warming up, GPU idle
    assert p["samples"][0]["gpus"][0]["active_reasons"] == ["idle"]
    assert p["verdict"]["sm_mhz_median"] == 345 and p["verdict"]["sw_power_cap_fraction"] == 0


def test_stdin_passes_through_and_a_signal_is_reported_as_a_shell_does(tmp_path):
    proc, _ = wrapped(tmp_path, [sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], stdin="abc",
                      out="a")
    assert proc.stdout == "ABC\n"
    proc, p = wrapped(tmp_path, [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"],
                      out="b")
    assert proc.returncode == 143 and p["command"]["exit_code"] == 143 and p["command"]["signal"] == "SIGTERM"


def test_a_command_that_cannot_start_answers_127_and_still_leaves_the_probes(tmp_path):
    proc, p = wrapped(tmp_path, ["no-such-benchmark-xyz", "--size", "8192"])
    assert proc.returncode == 127 and proc.stdout == ""
    assert proc.stderr == "sweep-agent: no-such-benchmark-xyz: command not found\n"
    assert p["command"]["pid"] is None and p["samples"] == [] and p["before"]["gpus"]


@pytest.mark.parametrize("args,message", [
    (["--wrap", "--out", "x"], "--wrap needs a command after --"),
    (["--wrap", "--", "true"], "--wrap needs --out DIR"),
    (["--out", "x", "--", "true"], "a command after -- needs --wrap"),
    (["--wrap", "--out", "x", "--interval", "0", "--", "true"], "--interval must be > 0 seconds"),
])
def test_usage_errors_name_the_fix(tmp_path, args, message):
    proc = subprocess.run([sys.executable, "-m", "probe_agent", *args], cwd=tmp_path, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("sweep-agent: " + message)


def test_sweep_diff_of_two_runs_is_exactly_the_foreign_process(tmp_path, capsys):
    clean = steady_load(tmp_path, name="clean.json")
    busy = steady_load(tmp_path, [synth.foreign_process(pid=FOREIGN_PID, name="python3 train.py")], name="busy.json")
    _, a = wrapped(tmp_path, SLEEPER, capture=clean, out="a")
    _, b = wrapped(tmp_path, SLEEPER, capture=busy, out="b")
    assert [p["pid"] for p in b["verdict"]["other_processes"]] == [FOREIGN_PID]
    seen = b["verdict"]["other_processes"][0]
    assert seen["present_before"] and seen["present_after"] and seen["samples_seen"] == len(b["samples"])
    assert "1 other process on the GPUs: python3 train.py (pid 48213)" in b["verdict"]["summary"]

    assert sweep_main(["diff", str(tmp_path / "a" / "provenance.json"), str(tmp_path / "b" / "provenance.json"),
                       "--json"]) == 0
    changes = json.loads(capsys.readouterr().out)["changes"]
    process = "[%d]" % FOREIGN_PID
    paths = {c["path"] for c in changes}
    assert paths - {"command.wall_s"} == {  # a 1.5 s sleep's wall time varies with python's start (> 2%)
        # the probe before the command: the process, and the contract it warns
        "before.gpus[0].processes%s.pid" % process, "before.gpus[0].processes%s.name" % process,
        "before.contracts[processes].status", "before.contracts[processes].message", "before.verdict",
        # what the samples saw
        "samples.other_processes%s.pid" % process, "samples.other_processes%s.name" % process,
        "samples.other_processes%s.gpus" % process,
    }
    paths = [c["path"] for c in changes]
    assert paths.index("before.gpus[0].processes%s.name" % process) < paths.index(
        "samples.other_processes%s.name" % process)
    assert all(c["path"].startswith("before.") for c in changes[:5])  # the environment first
    name = next(c for c in changes if c["path"] == "samples.other_processes%s.name" % process)
    assert (name["category"], name["before"], name["after"]) == ("processes", None, "python3 train.py")


def test_a_process_seen_only_in_the_samples_is_that_difference():
    p = json.loads((ROOT / "tests" / "fixtures" / "h200" / "load.health.json").read_text())
    run = {"kind": "sweep.provenance", "schema_version": "1.0", "before": p, "after": p, "samples": [],
           "command": {"argv": ["bench"], "exit_code": 0, "wall_s": 10.0},
           "verdict": {"hw_slowdown": False, "gpus": [{"gpu": 0, "sm_mhz_median": 1500, "sw_power_cap_fraction": 0.8}],
                       "other_processes": [], "unattributed_processes": [], "changes": []}}
    other = copy.deepcopy(run)
    other["verdict"]["other_processes"] = [{"pid": 777, "name": "nccl-tests", "gpus": [0], "first_seen_s": 4.2}]
    other["verdict"]["gpus"][0].update(sm_mhz_median=1515, sw_power_cap_fraction=0.83)  # within run-to-run noise
    other["command"]["wall_s"] = 10.1
    assert [(c.category, c.path, c.before, c.after) for c in diff_provenance(run, other)] == [
        ("processes", "samples.other_processes[777].gpus", None, [0]),
        ("processes", "samples.other_processes[777].name", None, "nccl-tests"),
        ("processes", "samples.other_processes[777].pid", None, 777)]
    other["verdict"]["gpus"][0]["sm_mhz_median"] = 1245
    assert ("throttle evidence", "samples.gpus[0].sm_mhz_median", 1500, 1245) in [
        (c.category, c.path, c.before, c.after) for c in diff_provenance(run, other)]


def test_load_health_reads_a_provenance_file_as_its_probe_before(tmp_path):
    _, p = wrapped(tmp_path, [sys.executable, "-c", "pass"])
    assert load_health(tmp_path / "out" / "provenance.json") == p["before"]


def test_changes_between_the_probes_name_driver_ecc_power_and_mig():
    before = json.loads((ROOT / "tests" / "fixtures" / "h200" / "idle.health.json").read_text())
    after = copy.deepcopy(before)
    after["driver"]["version"] = "580.65.06"
    g = after["gpus"][0]
    g["ecc"]["current"] = False
    g["power"]["enforced_limit_w"] = 500.0
    g["mig"]["current"], g["mig_layout"] = True, "3g.71gb+3g.71gb"
    assert [(c["field"], c["before"], c["after"]) for c in probe_changes(before, after)] == [
        ("driver.version", "580.159.04", "580.65.06"), ("gpus[0].ecc.current", True, False),
        ("gpus[0].power.enforced_limit_w", 700.0, 500.0), ("gpus[0].mig.current", False, True),
        ("gpus[0].mig_layout", before["gpus"][0]["mig_layout"], "3g.71gb+3g.71gb")]


def test_the_commands_own_process_tree_is_told_from_other_processes():
    """Live attribution, through /proc: a grandchild of the command is the command's own."""
    child = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen(['sleep', '30']); "
                              "print(p.pid, flush=True); p.wait()"], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(child.stdout.readline())
        who = Attribution(child.pid)
        assert who.of(grandchild) == "command" and who.of(child.pid) == "command"
        assert who.of(os.getpid()) == "other"
        assert who.of(2 ** 22 + 12345) == "not_visible"  # above pid_max: another PID namespace's pid
        assert who.own_pids() == {child.pid, grandchild}
    finally:
        os.kill(grandchild, signal.SIGTERM)
        child.wait(10)


def test_record_under_wrap_keeps_the_commands_pid_for_replay(tmp_path):
    cap = tmp_path / "wrapped-capture.json"
    proc = subprocess.run([sys.executable, "-m", "probe_agent", "--wrap", "--out", str(tmp_path / "o"), "--record",
                           str(cap), "--", sys.executable, "-c", "print(1)"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "1\n"
    load = json.loads(cap.read_text())["load"]
    assert load["engine"] == "wrap" and load["pid"] > 0 and load["argv"][-1] == "print(1)"


def test_sweep_wrap_cli_passes_the_exit_code_through(tmp_path, capfd):
    code = sweep_main(["wrap", "--interval", "0.1", "--out", str(tmp_path / "w"), "--replay",
                       str(CAPTURES / "h200-load.json"), "--", sys.executable, "-c", "print('x'); raise SystemExit(5)"])
    assert code == 5 and capfd.readouterr().out == "x\n"
    VALIDATOR.validate(json.loads((tmp_path / "w" / "provenance.json").read_text()))


def test_real_h200_wrapped_runs_differ_by_the_process_holding_memory(capsys):
    """Recorded on the H200: the same matmul wrapped twice, the second with another process holding 11 GiB."""
    fixtures = ROOT / "tests" / "fixtures" / "h200"
    a, b = fixtures / "matmul.provenance.json", fixtures / "matmul-foreign.provenance.json"
    for path in (a, b):
        VALIDATOR.validate(json.loads(path.read_text()))
    clean = json.loads(a.read_text())["verdict"]
    assert clean["sw_power_cap_fraction"] > 0.5 and clean["sm_mhz_median"] < clean["sm_mhz_max_allowed"]
    assert clean["hw_slowdown"] is False and clean["other_processes"] == []
    assert sweep_main(["diff", str(a), str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    changes = out["changes"]
    # both commands ran power-capped, as a bf16 matmul should on an H200: the conclusion says so for each
    assert [line.split(":")[0] for line in out["conclusion"]] == ["run A, during the command",
                                                                "run B, during the command"]
    assert all("power-capped, as expected; no HW slowdown" in line for line in out["conclusion"])
    paths = {c["path"] for c in changes}
    assert {"before.gpus[0].processes[694].pid", "samples.other_processes[694].name",
            "before.contracts[processes].status"} <= paths
    assert not [p for p in paths if any(k in p for k in ("driver", "ecc", "enforced_limit", "mig", "uuid"))]
