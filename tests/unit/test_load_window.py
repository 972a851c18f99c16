"""--load's summary covers the load's busy window, from the child's "started" line to its "ended" line.

Recorded on the H200 (tests/fixtures/h200/load10-busy.*, tools/h200_busy_window.sh): `import torch`
took 5 s, so a third of the samples were idle. Before the fix those idle samples were summarised
with the busy ones (SW power cap in 65% of samples, SM minimum 345 MHz) and everything built on the
summary (the clocks verdict, sweep diff, history drift, the Prometheus medians) said so.
"""
import csv
import json
import statistics
import subprocess
import sys
from pathlib import Path

from probe_agent.load import mark_phases, summarize

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "fixtures" / "h200"


def busy_window(health):
    load = health["load"]
    return [s for s in load["samples"] if load["started_s"] <= s["t"] <= load["ended_s"]]


def test_the_live_h200_summary_covers_only_the_samples_of_the_busy_window():
    health = json.loads((H200 / "load10-busy.health.json").read_text())
    load = health["load"]
    phases = [s["phase"] for s in load["samples"]]
    assert phases.count("before") >= 20 and phases.count("load") >= 40  # the recording shows the problem
    assert [s for s in load["samples"] if s["phase"] == "load"] == busy_window(health)
    gpus = [g for s in busy_window(health) for g in s["gpus"]]
    (summary,) = load["summary"]
    assert summary["samples"] == len(gpus)
    assert summary["sm_mhz_median"] == statistics.median(g["sm_mhz"] for g in gpus)
    assert summary["sm_mhz_min"] == min(g["sm_mhz"] for g in gpus)
    assert summary["power_w_median"] == statistics.median(g["power_w"] for g in gpus)
    capped = sum("sw_power_cap" in g["active_reasons"] for g in gpus) / len(gpus)
    assert summary["sw_power_cap_fraction"] == round(capped, 3)
    assert summary["sm_mhz_min"] > 345  # no idle sample counted


def test_the_busy_window_agrees_with_nvidia_smi_sampling_the_same_seconds():
    """nvidia-smi -lms 200 ran beside the agent: its busy samples (GPU utilisation above 0) saw the
    SW power cap as often as the agent's busy window did, at the same SM clock."""
    with (H200 / "load10-busy.smi.csv").open() as fh:
        rows = [[c.strip() for c in r] for r in csv.reader(fh)][1:]
    smi_busy = [r for r in rows if int(r[2].split()[0]) > 0]
    smi_capped = sum(r[6] == "Active" for r in smi_busy) / len(smi_busy)
    smi_sm = statistics.median(int(r[3].split()[0]) for r in smi_busy)
    (summary,) = json.loads((H200 / "load10-busy.health.json").read_text())["load"]["summary"]
    assert abs(summary["sw_power_cap_fraction"] - smi_capped) <= 0.05
    assert abs(summary["sm_mhz_median"] - smi_sm) <= 30


def test_replaying_the_capture_gives_the_recorded_summary():
    proc = subprocess.run([sys.executable, "-m", "probe_agent", "--replay", str(H200 / "load10-busy.json"),
                           "--load", "10"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    replayed = json.loads(proc.stdout)["load"]
    recorded = json.loads((H200 / "load10-busy.health.json").read_text())["load"]
    assert replayed["summary"] == recorded["summary"]
    assert [s["phase"] for s in replayed["samples"]] == [s["phase"] for s in recorded["samples"]]


def sample(t, sm, reasons):
    return {"t": t, "gpus": [{"index": 0, "sm_mhz": sm, "power_w": 80.0 if sm < 500 else 690.0,
                              "enforced_limit_w": 700.0, "active_reasons": reasons}]}


def test_samples_before_the_start_and_after_the_end_are_kept_but_not_summarised():
    samples = [sample(0.0, 345, ["idle"]), sample(0.2, 345, ["idle"]), sample(0.4, 1470, ["sw_power_cap"]),
               sample(0.6, 1500, ["sw_power_cap"]), sample(0.8, 1980, [])]
    mark_phases(samples, 0.3, 0.7)
    assert [s["phase"] for s in samples] == ["before", "before", "load", "load", "after"]
    (summary,) = summarize(samples, {0: 1980})
    assert (summary["samples"], summary["sm_mhz_min"], summary["sw_power_cap_fraction"]) == (2, 1470, 1.0)


def test_a_load_that_never_started_summarises_nothing_rather_than_idle_samples():
    samples = [sample(0.0, 345, ["idle"]), sample(0.2, 345, ["idle"])]
    mark_phases(samples, None, None)
    assert summarize(samples, {0: 1980}) == []


def test_samples_without_a_phase_are_summarised_as_before():
    """Wrapped commands' samples and records of older agents carry no phase: all of them count."""
    samples = [sample(0.0, 1470, ["sw_power_cap"]), sample(0.2, 345, ["idle"])]
    (summary,) = summarize(samples, {0: 1980})
    assert summary["samples"] == 2 and summary["sm_mhz_min"] == 345
