"""The thresholds a verdict turns on, pinned on both sides (issue 39).

Speed figures just below and just above the 75% and 90% lines of the reference; a benchmark outlier
just inside and just outside three scaled median absolute deviations of its class, where the scale
is the normal distribution's consistency constant (1 / the normal's 75th percentile = 1.4826), taken
from the standard library's NormalDist rather than from sweep's code.
"""
from __future__ import annotations

from statistics import NormalDist, median

import pytest

from sweep.analysis.bench import OUTLIER_MADS, OUTLIER_MIN, is_outlier
from sweep.analysis.compare import compare
from sweep.analysis.speed import speed_section
from sweep.analysis.speed_reference import reference_of
from fleet_variants import with_speed
from sweep.demo.speed import recorded, speed_fleet
from test_bench_figures import line, wrapped_run
from test_speed_judge import load_fleet_of

HBM = recorded()["gpus"][0]["figures"]["hbm"]["value"]
REFERENCE = reference_of("NVIDIA H200", "hbm")["value"]
# GPU index -> (fraction of the H200 HBM reference, the severity the tier must give)
AT = {0: (0.74, "broken"), 1: (0.76, "warning"), 2: (0.89, "warning"), 3: (0.91, "ok")}


@pytest.fixture(scope="module")
def health(tmp_path_factory):
    return speed_fleet(tmp_path_factory.mktemp("boundary-captures"))["gpu01"]


def test_hbm_at_74_76_89_and_91_percent_of_reference_is_broken_warning_warning_ok(health):
    def scale(i, name):
        return AT[i][0] * REFERENCE / HBM if name == "hbm" and i in AT else 1.0
    fleet = load_fleet_of({"gpu01": with_speed(health, per_gpu=scale)})
    section = speed_section(fleet, compare(fleet))
    judged = {g["gpu"]: (j["fraction"], j["severity"]) for g in section["gpus"] for j in g["judgments"]
              if j["figure"] == "hbm" and j["against"] == "reference"}
    assert {g: judged.get(g) for g in AT} == {g: (pytest.approx(f), s) for g, (f, s) in AT.items()}
    listed = {(j["gpu"], j["severity"]) for j in section["judgments"] if j["figure"] == "hbm"}
    assert listed == {(g, s) for g, (_, s) in AT.items() if s != "ok"}  # what the report lists


NORMAL_SCALE = 1 / NormalDist().inv_cdf(0.75)  # 1.482602...: MAD -> standard deviation for normal data
TIGHT = [-0.01, -0.01, -0.01, 0.0, 0.0, 0.01, 0.01, 0.01]  # 8 hosts within 1% of 660 TFLOP/s


def mad_rule(values: list[float]) -> tuple[float, float]:
    """(median, the deviation beyond which the last value is an outlier) by the rule as written:
    beyond 2% and beyond 3 scaled MADs."""
    mid = median(values)
    mad = median(abs(v - mid) for v in values) * NORMAL_SCALE / abs(mid)
    return mid, max(OUTLIER_MIN, OUTLIER_MADS * mad)


@pytest.mark.parametrize("off,outlier", [(-0.04, False), (-0.05, True)])
def test_an_outlier_at_4_and_5_percent_below_a_tight_class_is_judged_by_three_scaled_mads(off, outlier):
    values = [660.0 * (1 + d) for d in TIGHT] + [660.0 * (1 + off)]
    mid, beyond = mad_rule(values)
    assert mid == 660.0 and beyond == pytest.approx(3 * 0.01 * NORMAL_SCALE)  # 4.45%: between the two
    dev = (values[-1] - mid) / mid
    assert (abs(dev) > beyond) is outlier
    assert is_outlier(dev, values, mid) is outlier


@pytest.mark.parametrize("off,outlier", [(-0.04, False), (-0.05, True)])
def test_the_report_lists_the_5_percent_host_and_not_the_4_percent_one(tmp_path, off, outlier):
    outputs = {f"gpu0{i + 1}": line("tflops", round(660.0 * (1 + d), 3)) for i, d in enumerate(TIGHT)}
    outputs["gpu09"] = line("tflops", round(660.0 * (1 + off), 3))
    b = wrapped_run(tmp_path, outputs)
    assert [o["host"] for o in b["outliers"]] == (["gpu09"] if outlier else [])


def test_a_figure_exactly_on_a_line_is_on_the_better_side():
    from sweep.analysis.speed import severity_of

    assert [severity_of(f) for f in (0.7499, 0.75, 0.8999, 0.90, None)] == [
        "broken", "warning", "warning", "ok", "unjudged"]


def test_a_deviation_exactly_at_the_2_percent_floor_is_no_outlier_and_two_figures_tell_nothing():
    flat = [100.0, 100.0, 100.0, 100.0, 98.0]  # no spread at all: the 2% floor alone decides
    assert not is_outlier((98.0 - 100.0) / 100.0, flat, 100.0)
    assert is_outlier((97.9 - 100.0) / 100.0, flat[:-1] + [97.9], 100.0)
    assert not is_outlier(-0.5, [100.0, 50.0], 75.0)  # two figures that disagree: no telling which is off
    assert is_outlier(-0.5, [100.0, 100.0, 50.0], 100.0)


# --- what the envelope must differ by to be named as the outlier's explanation (bench.evidence) ---

def _wrap(**verdict):
    return {"provenance": {"verdict": verdict}}


@pytest.mark.parametrize("cap,said", [(0.395, True), (0.405, False)])  # 10.5 / 9.5 points from its class's 50%
def test_a_power_cap_fraction_10_points_off_its_class_is_named(cap, said):
    from sweep.analysis.bench import evidence

    lines = evidence(_wrap(sw_power_cap_fraction=cap), [{"sw_power_cap_fraction": 0.5}] * 3)
    assert any(line.startswith("SW power cap in") for line in lines) is said


@pytest.mark.parametrize("sm,said", [(979.0, True), (981.0, False)])  # 2.1% / 1.9% under its class's clock
def test_an_sm_clock_2_percent_off_its_class_is_named(sm, said):
    from sweep.analysis.bench import evidence

    lines = evidence(_wrap(sm_mhz_median=sm), [{"sm_mhz_median": 1000.0}] * 3)
    assert any(line.startswith("SM clock median") for line in lines) is said


@pytest.mark.parametrize("value,measured", [(9.5e29, True), (1e30, True), (1.05e30, False)])  # 1e30 itself: a figure
def test_a_figure_beyond_1e30_is_not_a_measurement(tmp_path, value, measured):
    outputs = dict({f"gpu0{i}": line("tflops", 660.0 + i) for i in range(1, 5)}, gpu05=line("tflops", value))
    b = wrapped_run(tmp_path, outputs)
    out = next(o for o in b["outliers"] if o["host"] == "gpu05")
    assert ("is not a measurement" in out["evidence"][0]) is not measured


def test_summary_json_lists_50_figure_names_and_counts_the_rest(tmp_path):
    def names(first):  # 26 names a host: under the 32 figures the controller reads of one host
        return "".join(line(f"m{i:02d}", 1.0) for i in range(first, first + 26))
    outputs = {"gpu01": line("tflops", 660.0) + names(0), "gpu02": line("tflops", 661.0) + names(26),
               "gpu03": line("tflops", 662.0)}
    b = wrapped_run(tmp_path, outputs)
    assert len(b["metrics"]) == 50 and b["metrics_not_listed"] == 3  # 53 names: tflops and m00-m51
    assert "tflops" in b["metrics"]  # the most reported first


@pytest.mark.parametrize("bps,measured", [(6.2e10, True), (6.7e10, False)])  # gen5 x16: 63 GB/s raw, 66.2 the line
def test_a_pcie_copy_above_its_links_raw_rate_times_1_05_is_no_measurement(health, bps, measured):
    from sweep.analysis.speed_record import read_speed
    from test_speed_judge import _figure

    h = with_speed(health)
    h["speed"]["gpus"][0]["figures"]["pcie_h2d"] = _figure(bps)
    record = read_speed(h)
    assert (record.gpus.get(0, {}).get("pcie_h2d") == bps) is measured
    assert any(f.startswith("speed.gpus[0].figures.pcie_h2d") for f, _ in record.rejected) is not measured


def test_an_outliers_evidence_names_every_difference_of_its_envelope_in_order():
    """Issue 39 (mutation score): each line bench.evidence can say, from one envelope, word for word."""
    from sweep.analysis.bench import evidence

    wrap = {"provenance": {
        "verdict": {"sw_power_cap_fraction": 0.9, "sm_mhz_median": 1500.0, "hw_slowdown": True,
                    "hw_slowdown_fraction": 0.25,
                    "other_processes": [{"name": "python3", "pid": 4242, "gpus": [0, 3], "first_seen_s": 12.5,
                                         "present_before": False},
                                        {"name": "dcgm", "pid": 7, "gpus": [1], "present_before": True}],
                    "changes": [{"field": "power_limit_w", "before": 700, "after": 500}]},
        "intervals": [{"gpu": 2, "what": "hw_slowdown", "from_s": 1.5, "to_s": None},
                      {"gpu": 0, "what": "other_process", "from_s": 0, "to_s": 1}],
        "command": {"forced": ["a foreign process on GPU 0"]}}}
    peers = [{"sw_power_cap_fraction": 0.1, "sm_mhz_median": 1980.0}] * 3
    assert evidence(wrap, peers) == [
        "SW power cap in 90% of samples (its class: 10%)",
        "SM clock median 1500 MHz against 1980 MHz in its class",
        "HW slowdown in 25% of samples (GPU 2 hw_slowdown 1.5-? s)",
        "another process, python3 (pid 4242), on GPU 0,3: appeared at 12.5 s into the run",
        "another process, dcgm (pid 7), on GPU 1: there before the run",
        "the probe after differs from the probe before: power_limit_w 700 -> 500",
        "run with --force over: a foreign process on GPU 0"]
    quiet = {"provenance": {"verdict": {"hw_slowdown": True}}}
    assert evidence(quiet, peers) == ["HW slowdown (its counters grew)"]
    assert evidence({}, []) == [
        "nothing in the envelope explains it (power cap, clocks, processes and both probes match its class): "
        "look at the benchmark or its inputs"]


def test_evidence_is_cut_to_three_of_each_kind_and_a_gap_exactly_on_the_line_is_named():
    from sweep.analysis.bench import evidence

    procs = [{"name": f"p{i}", "pid": i, "gpus": [i], "first_seen_s": 2.0, "present_before": i == 1} for i in range(4)]
    wrap = {"provenance": {
        "verdict": {"sw_power_cap_fraction": 0.1, "sm_mhz_median": 980.0, "hw_slowdown": True,
                    "other_processes": procs,
                    "changes": [{"field": f"f{i}", "before": i, "after": i + 1} for i in range(4)]},
        "intervals": [{"gpu": i, "what": "hw_slowdown", "from_s": i, "to_s": i + 0.5} for i in range(4)],
        "command": {"forced": ["x", "y"]}}}
    lines = evidence(wrap, [{"sw_power_cap_fraction": 0.0, "sm_mhz_median": 1000.0}] * 3)
    assert lines == [
        "SW power cap in 10% of samples (its class: 0%)",          # exactly 10 points: named
        "SM clock median 980 MHz against 1000 MHz in its class",   # exactly 2%: named
        "HW slowdown (its counters grew) (GPU 0 hw_slowdown 0-0.5 s; GPU 1 hw_slowdown 1-1.5 s; "
        "GPU 2 hw_slowdown 2-2.5 s)",
        "another process, p0 (pid 0), on GPU 0: appeared at 2 s into the run",
        "another process, p1 (pid 1), on GPU 1: there before the run",
        "another process, p2 (pid 2), on GPU 2: appeared at 2 s into the run",
        "the probe after differs from the probe before: f0 0 -> 1",
        "the probe after differs from the probe before: f1 1 -> 2",
        "the probe after differs from the probe before: f2 2 -> 3",
        "run with --force over: x; y"]
