"""`sweep run --wrap`: a benchmark on the demo benchmark fleet (real sshd hosts replaying the H200
load recording), its figures compared only within a comparability class."""
from __future__ import annotations

import json
import os
import sys

import pytest

from sweep import exitcodes
from sweep.cli import main
from bench_parts import bench_fleet
from sweep.demo.loopback import LocalFleet


# The stand-in benchmark: its figure follows the host's replayed samples (the slowest GPU's SM
# clock in each sample, shared with any other process on that GPU), as a data-parallel job would.
STANDIN = r'''
import json, os, sys, time
host = os.environ.get("SWEEP_REPLAY_HOSTNAME", "")
open(os.path.join(sys.argv[1], host + ".pid"), "w").write(str(os.getpid()))
if host == "gpu01" and len(sys.argv) > 2:
    print("CUDA error: an illegal memory access was encountered"); sys.exit(3)
if host == "gpu02" and len(sys.argv) > 2:
    time.sleep(120)
cap = json.load(open(os.environ["SWEEP_REPLAY"]))
rates = [min(g["sm_mhz"] / (1 + len(g.get("processes") or [])) for g in s["gpus"]) for s in cap["samples"][:15]]
time.sleep(1.5)
print("step 100 loss 2.31")
print("throughput: %.1f samples/s" % (3.1 * sum(rates) / len(rates)))
print(json.dumps({"metric": "tflops", "value": round(0.4525 * sum(rates) / len(rates), 3), "unit": "TFLOP/s"}))
'''


@pytest.fixture(scope="module")
def bench(needs_sshd, tmp_path_factory):
    work = tmp_path_factory.mktemp("bench")
    script = work / "standin.py"
    script.write_text(STANDIN)
    (work / "pids").mkdir()
    os.chmod(work, 0o755)
    with LocalFleet(bench_fleet(work / "captures"), work / "fleet") as fleet:
        yield fleet, work


def sweep_wrap(fleet, out, *extra, command):
    old = os.environ.get("HOME")
    os.environ["HOME"] = str(fleet.home)
    try:
        known = fleet.ssh_settings().known_hosts[0]
        code = main(["run", str(fleet.inventory_path), "--out", str(out), "--known-hosts", str(known),
                     "--interval", "0.1", *extra, "--wrap", "--", *command])
    finally:
        os.environ["HOME"] = old
    summary = json.loads((out / "report" / "summary.json").read_text())
    return code, summary


def test_figures_are_grouped_by_class_outliers_explained_and_never_pooled(bench, tmp_path, capsys):
    fleet, work = bench
    code, s = sweep_wrap(fleet, tmp_path / "run", "--metric", r"samples_s=throughput: ([0-9.]+) (samples/s)",
                         command=[sys.executable, str(work / "standin.py"), str(work / "pids")])
    b = s["benchmark"]
    # refusals outrank the comparability verdict; both are in the report
    assert code == exitcodes.REFUSED == 7
    assert {n["host"]: n["status"] for n in b["not_run"]} == {"gpu12": "refused", "gpu13": "refused"}
    assert "broken contract power" in b["not_run"][0]["why"] and "orphan_eval.py (pid 48213" in b["not_run"][1]["why"]
    classes = {c["id"]: c for c in b["classes"]}
    ref = classes["A"]
    assert ref["reference"] and [h["host"] for h in ref["hosts"] if h["value"] is not None] == [
        "gpu06", "gpu04", "gpu01", "gpu02", "gpu03", "gpu05", "gpu07", "gpu08"]  # lowest first
    assert {h["host"] for h in classes["B"]["hosts"]} == {"gpu09", "gpu10", "gpu11"}
    # the figure follows the replayed clocks: healthy hosts agree, the slowed and the shared host fall
    healthy = {h["value"] for h in ref["hosts"] if h["host"] not in ("gpu04", "gpu06", "gpu13")}
    assert len(healthy) == 1 and ref["median"] == healthy.pop()
    outliers = {o["host"]: o for o in b["outliers"]}
    assert set(outliers) == {"gpu04", "gpu06"}
    slow = " ".join(outliers["gpu04"]["evidence"])
    assert "SM clock median 1035 MHz against" in slow and "HW slowdown in" in slow and "hw_thermal_slowdown" in slow
    assert outliers["gpu04"]["deviation_pct"] < -10
    shared = " ".join(outliers["gpu06"]["evidence"])
    assert "python3 eval_sweep.py (pid 51234), on GPU 2: appeared at" in shared
    # never pooled: the report says which keys keep the classes apart
    assert b["not_pooled"].startswith("figures from 2 comparability classes are not pooled")
    assert "Driver (580.95.05 vs 580.159.04)" in b["not_pooled"]
    q = b["quote"]
    # the figure quoted is the one the operator named, not the first one a host printed
    assert (q["value"], q["class"], q["metric"], q["n"]) == (ref["median"], "A", "samples_s", 8)
    assert all(path.endswith(".json") and os.path.isfile(path) for path in q["records"])
    assert b["metrics"] == ["samples_s", "tflops"] and b["unit"] == "samples/s" and b["metric_chosen_by"] == "--metric"
    # the records keep the envelope and the output's tail; the --metric figure has its unit
    rec = json.loads((tmp_path / "run" / "hosts" / "gpu04.json").read_text())
    assert rec["health"]["kind"] == "sweep.health" and rec["wrap"]["status"] == "ok"
    assert rec["wrap"]["figures"]["samples_s"]["unit"] == "samples/s"
    assert rec["wrap"]["provenance"]["intervals"][0]["what"] == "hw_thermal_slowdown"
    assert "step 100 loss" in rec["wrap"]["provenance"]["output"]["tail"]
    md = (tmp_path / "run" / "report" / "summary.md").read_text()
    assert "## Benchmark, by comparability class" in md and "| `gpu04` | A |" in md
    html = (tmp_path / "run" / "report" / "report.html").read_text()
    assert "The figure to quote" in html and "not pooled" in html and 'id="bench-B"' in html
    assert "appeared at" in html and "Hosts without a figure" in html
    err = capsys.readouterr().out  # the verdict lines are results: stdout
    assert "benchmark: quote samples_s = " in err and "benchmark: outlier gpu04 (class A)" in err


def test_without_the_refused_hosts_the_verdict_is_the_comparability_one(bench, tmp_path):
    fleet, work = bench
    code, s = sweep_wrap(fleet, tmp_path / "run", "--limit", "!gpu12:!gpu13",
                         command=[sys.executable, str(work / "standin.py"), str(work / "pids")])
    assert code == exitcodes.NOT_COMPARABLE and s["benchmark"]["exit_code"] == exitcodes.NOT_COMPARABLE
    assert s["benchmark"]["not_run"] == [] and s["benchmark"]["quote"]["class"] == "A"


def test_a_failing_benchmark_a_timeout_and_a_forced_run_are_told_apart(bench, tmp_path):
    fleet, work = bench
    pids = work / "pids"
    code, s = sweep_wrap(fleet, tmp_path / "run", "--limit", "gpu01:gpu02:gpu13", "--force", "--host-deadline", "14",
                         command=[sys.executable, str(work / "standin.py"), str(pids), "faults"])
    assert code == exitcodes.BENCH_FAILED == 6
    status = {n["host"]: (n["status"], n["why"]) for n in s["benchmark"]["not_run"]}
    assert status["gpu01"] == ("failed", "the command failed (exit 3); the output's tail is in the record")
    assert status["gpu02"][0] == "timed_out" and "command timeout of 7 s" in status["gpu02"][1]
    rec = json.loads((tmp_path / "run" / "hosts" / "gpu02.json").read_text())
    assert rec["wrap"]["provenance"]["command"]["timed_out"] is True
    pid = int((pids / "gpu02.pid").read_text())
    with pytest.raises(ProcessLookupError):  # ended on the host (loopback: this machine)
        os.kill(pid, 0)
    rec = json.loads((tmp_path / "run" / "hosts" / "gpu01.json").read_text())
    assert "illegal memory access" in rec["wrap"]["provenance"]["output"]["tail"]
    forced = json.loads((tmp_path / "run" / "hosts" / "gpu13.json").read_text())["wrap"]
    assert forced["status"] == "ok" and forced["provenance"]["command"]["refused"] is None
    assert "orphan_eval.py (pid 48213, GPU 1)" in forced["provenance"]["command"]["forced"][0]
