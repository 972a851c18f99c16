"""The speed tier's controller side (issue 25): hostile figures rejected, judged against model, link and
class, and the demo fleet's slow GPU, half-rate PCIe host and slow 500 W class landing in summary.json,
the report, the export, expectations, `sweep diff` and history.

The records are the speed demo's (`sweep.demo.speed`): the agent replaying the idle H200 capture made
eight-GPU, with a speed section derived from the record contract and the lent H200's figures."""
from __future__ import annotations

import copy
import json
import math
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from history_parts import PROMTOOL, require_part
from sweep.analysis.fleet import load_fleet
from sweep.analysis.compare import compare
from sweep.analysis.speed import speed_section
from sweep.analysis.speed_reference import CEILINGS, FIGURES, LINK_CEILING, link_raw_bps
from sweep.analysis.speed_record import read_speed
from sweep.audit.expect import evaluate_expectations, load_expectations
from sweep.audit.rundiff import diff_runs
from fleet_variants import with_speed
from sweep.demo.speed import recorded, speed_fleet, write_speed_run
from sweep.export.prometheus import metrics_text
from sweep.history import build
from sweep.report.build import build_report
from sweep.store import load_run

ROOT = Path(__file__).resolve().parents[2]
HBM = recorded()["gpus"][0]["figures"]["hbm"]["value"]  # the lent H200's, as the agent recorded it
GEMM = recorded()["gpus"][0]["figures"]["bf16_gemm"]["value"]


@pytest.fixture(scope="module")
def fleet_health(tmp_path_factory):
    return speed_fleet(tmp_path_factory.mktemp("speed-captures"))


@pytest.fixture(scope="module")
def report(fleet_health, tmp_path_factory):
    root = tmp_path_factory.mktemp("speed")
    run = write_speed_run(root / "run", fleet_health)
    return run, build_report([run], root / "report")


def test_the_slow_gpu_is_broken_and_named_with_its_figure(report):
    _, result = report
    speed = result.summary["speed"]
    hbm = [j for j in speed["judgments"] if j["figure"] == "hbm"]
    assert [(j["host"], j["gpu"], j["severity"]) for j in hbm] == [("gpu03", 5, "broken")]
    assert "gpu03 GPU 5: HBM 2993 GB/s is 70% of the H200 reference (4276 GB/s)" == hbm[0]["message"]
    assert "gpu03" in speed["broken_hosts"] and any("gpu03 GPU 5: HBM 2993 GB/s" in line for line in speed["headline"])
    outlier = [o for o in speed["class_outliers"] if o["host"] == "gpu03"]
    assert outlier and outlier[0]["class"] == "A" and outlier[0]["figure"] == "hbm"


def test_half_rate_pcie_is_judged_against_its_own_link(report):
    _, result = report
    link = [j for j in result.summary["speed"]["judgments"] if j["host"] == "gpu06" and j["against"] == "link"]
    assert len(link) == 16 and {j["severity"] for j in link} == {"broken"}  # 8 GPUs x both directions
    assert link[0]["link"] == "gen5 x16" and link[0]["link_raw"] == pytest.approx(63.0e9, rel=0.01)
    assert "of what its PCIe gen5 x16 link carries (63 GB/s raw" in link[0]["message"]
    others = {j["host"] for j in result.summary["speed"]["judgments"] if j["figure"].startswith("pcie")}
    assert others == {"gpu06"}


def test_a_slow_comparable_class_is_said_in_the_top_box(report):
    _, result = report
    pools = result.summary["speed"]["slow_pools"]
    assert [p["message"] for p in pools] == ["class B of 4: bf16 GEMM at 80% of the H200 reference; all 4 at 500 W"]
    assert pools[0]["message"] in result.headline
    html = result.files["html"].read_text()
    top = html[:html.index('id="speed"')]
    assert "class B of 4: bf16 GEMM at 80% of the H200 reference; all 4 at 500 W" in top
    # classes stay the unit: the 700 W class's GEMM is not pooled with the 500 W one
    assert not any(p["class"] == "A" for p in pools)


def test_the_report_draws_one_svg_bar_per_gpu_without_script(report):
    _, result = report
    html = result.files["html"].read_text()
    assert "<script" not in html.lower()
    section = html[html.index('<h2 id="speed"'):html.index('<h2 id="chart"')]
    hbm = section[section.index('data-figure="hbm"'):]
    hbm = hbm[:hbm.index("</svg>")]
    assert hbm.count('class="speed-bar"') == 12 * 8
    assert hbm.index('data-gpu="gpu03 GPU 5"') < hbm.index('data-gpu="gpu01 GPU 0"')  # the slowest first
    assert "2993 GB/s · 70%" in hbm


def test_summary_json_carries_the_figures_and_exit_code_counts_a_broken_figure(report, fleet_health, tmp_path):
    _, result = report
    summary = json.loads(result.files["summary"].read_text())
    gpu = next(g for g in summary["speed"]["gpus"] if (g["host"], g["gpu"]) == ("gpu03", 5))
    assert gpu["figures"]["hbm"] == pytest.approx(0.7 * HBM)
    assert summary["speed"]["host_figures"]["gpu01"]["p2p"] == pytest.approx(3.9e11)
    # one class, every contract holds: only the slow GPU makes the report exit 4
    one_class = {h: fleet_health[h] for h in ("gpu01", "gpu02", "gpu03", "gpu04")}
    run = write_speed_run(tmp_path / "run", one_class)
    assert build_report([run], tmp_path / "r").exit_code == 4
    healthy = write_speed_run(tmp_path / "ok", {h: fleet_health[h] for h in ("gpu01", "gpu02")})
    assert build_report([healthy], tmp_path / "r2").exit_code == 0


def test_the_export_carries_the_figures_and_passes_promtool(report):
    run, _ = report
    text = metrics_text(run)
    values = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith("sweep_") and "speed" in line}
    assert values['sweep_gpu_speed_hbm_bytes_per_second{gpu="5",host="gpu03"}'] == pytest.approx(0.7 * HBM)
    assert values['sweep_gpu_speed_pcie_h2d_bytes_per_second{gpu="0",host="gpu06"}'] == pytest.approx(31.5e9)
    assert values['sweep_gpu_speed_bf16_gemm_flops{gpu="0",host="gpu09"}'] == pytest.approx(0.8 * GEMM)
    assert "sweep_host_speed_allreduce_bytes_per_second" in text
    proc = subprocess.run([require_part(PROMTOOL), "check", "metrics"], input=text, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_expectations_floor_names_the_slow_gpu(report, tmp_path):
    run, _ = report
    path = tmp_path / "expect.yml"
    path.write_text("defaults:\n  hbm_gbps_min: 3800\n  pcie_h2d_gbps_min: 45\n")
    found = evaluate_expectations(load_run(run).records, load_expectations(path))
    assert sorted({(f.host, f.rule) for f in found}) == [("gpu03", "hbm_gbps_min"), ("gpu06", "pcie_h2d_gbps_min")]
    msg = next(f.message for f in found if f.rule == "hbm_gbps_min")
    assert msg.startswith("gpu03: HBM 2992.9 GB/s on GPU 5, below the floor; expected at least 3800 GB/s")


def test_sweep_diff_and_history_see_moved_figures_but_no_change_point(fleet_health, tmp_path):
    before = {h: fleet_health[h] for h in ("gpu01", "gpu02")}
    after = copy.deepcopy(before)
    after["gpu02"] = with_speed(fleet_health["gpu02"], per_gpu=lambda i, name: 0.8 if (i, name) == (2, "hbm") else
                                1.0 + 0.01 * i)  # 1-7% run-to-run noise elsewhere
    reports = tmp_path / "reports"
    a = write_speed_run(reports / "a", before, "2026-12-01T06:00:00Z")
    b = write_speed_run(reports / "b", after, "2026-12-02T06:00:00Z")
    diff = diff_runs(load_run(a), load_run(b))
    changes = [(h, c.field, c.gpus) for h, cs in diff.changed.items() for c in cs] if isinstance(diff.changed, dict) \
        else [(c.host, c.field, c.gpus) for c in diff.changed]
    assert changes == [("gpu02", "speed.hbm", (2,))]
    assert build([reports]).changes == []  # measured figures drift; they are no change of configuration


def _figure(value, unit="B/s", **extra):
    return {"value": value, "unit": unit, "method": "m", "bytes": 2**30, "repetitions": 7, "spread": 0.01, **extra}


HOSTILE = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**70, 2**70), st.text(max_size=5),
                    st.none(), st.booleans(), st.lists(st.integers(), max_size=2),
                    st.sampled_from([1e300, -0.0, 5e12, 3e13, 7e10, 2.5e16, 1e15]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(value=HOSTILE, unit=st.sampled_from(["B/s", "FLOP/s", "GB/s", None, 7]), size=HOSTILE, reps=HOSTILE,
       spread=HOSTILE, name=st.sampled_from(FIGURES))
def test_hostile_figures_never_crash_and_never_show_an_impossible_figure(fleet_health, value, unit, size, reps,
                                                                          spread, name):
    health = with_speed(fleet_health["gpu01"])
    fig = health["speed"]["gpus"][0]["figures"]
    fig[name] = {"value": value, "unit": unit, "method": "m", "bytes": size, "repetitions": reps, "spread": spread}
    health["speed"]["allreduce"] = _figure(value, unit)
    record = read_speed(health)
    shown = record.gpus.get(0, {}).get(name)
    ceiling = link_raw_bps(5, 16) * LINK_CEILING if name.startswith("pcie") else CEILINGS[name]
    if shown is None:
        fields = [f for f, _ in record.rejected]
        assert any(f.startswith(f"speed.gpus[0].figures.{name}") for f in fields), record.rejected
    else:
        assert math.isfinite(shown) and 0 < shown <= ceiling
    assert record.allreduce is None or 0 < record.allreduce <= CEILINGS["allreduce"]
    fleet = load_fleet_of({"gpu01": health})
    section = speed_section(fleet, compare(fleet))
    if section is None:  # outside the published schema: the record is refused whole on read-back, as on arrival
        hosts = fleet.hosts.set_index("host")
        assert hosts.loc["gpu01", "failure_class"] == "bad_output" and "speed" in hosts.loc["gpu01", "failure_message"]
        return
    for g in section["gpus"]:
        assert all(0 < v for v in g["figures"].values())
    for r in section["rejected"]:
        assert r["message"].startswith(f"gpu01: {r['field']} ")


def load_fleet_of(healths):
    """The fleet of one run folder of `healths`, read as `sweep report` reads it (the folder removed after)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="speed-hostile-"))
    try:
        return load_fleet([write_speed_run(folder / "run", healths)])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_whole_speed_section_of_garbage_is_rejected_by_host_and_field(fleet_health, tmp_path):
    health = with_speed(fleet_health["gpu01"])
    health["speed"]["gpus"][1]["figures"]["hbm"] = _figure(9e13)  # above 3x the fastest GPU's HBM
    health["speed"]["gpus"][2]["figures"]["pcie_h2d"] = _figure(7e10)  # above a gen5 x16 link's 63 GB/s x 1.05
    outside = copy.deepcopy(health)  # values the published schema refuses: the record is refused whole, by field
    outside["speed"]["gpus"][0]["figures"]["hbm"] = _figure(float("nan"))  # written as null: no number
    outside["speed"]["gpus"][3]["figures"]["hbm"] = _figure(4e12, unit="GB/s")
    outside["speed"]["gpus"][4]["figures"]["hbm"] = _figure(-4e12)
    outside["speed"]["p2p"][0]["src"] = "zero"
    hosts = load_fleet_of({"gpu08": outside}).hosts.set_index("host")
    assert hosts.loc["gpu08", "failure_class"] == "bad_output" and "speed." in hosts.loc["gpu08", "failure_message"]
    run = write_speed_run(tmp_path / "run", {"gpu07": health})
    speed = build_report([run], tmp_path / "r").summary["speed"]
    assert [r["field"] for r in speed["rejected"]] == [  # values the schema allows that cannot be measurements
        "speed.gpus[1].figures.hbm.value", "speed.gpus[2].figures.pcie_h2d.value"]
    assert speed["rejected"][0]["message"].startswith("gpu07: speed.gpus[1].figures.hbm.value ")
    shown = {(g["gpu"], f) for g in speed["gpus"] for f in g["figures"]}
    assert not shown & {(1, "hbm"), (2, "pcie_h2d")}


def test_a_baseline_of_known_good_hosts_is_the_reference_first(fleet_health, tmp_path):
    from sweep.audit.baseline import set_baseline

    slow = {h: with_speed(fleet_health["gpu01"], scale={"hbm": 0.8}) for h in ("gpu01", "gpu02")}
    base_run = write_speed_run(tmp_path / "base", slow)
    set_baseline(base_run, tmp_path / "baseline")
    result = build_report([base_run], tmp_path / "r", baseline=tmp_path / "baseline")
    speed = result.summary["speed"]
    hbm = next(r for r in speed["references"] if r["figure"] == "hbm")
    assert hbm["by"] == "baseline" and hbm["value"] == pytest.approx(0.8 * HBM)
    assert not [j for j in speed["judgments"] if j["figure"] == "hbm"]  # at 80% of the table, 100% of its baseline


@pytest.mark.parametrize("n", range(1, 6))
def test_the_lent_h200s_own_records_are_judged_at_its_reference(n, tmp_path):
    health = json.loads((ROOT / "tests" / "fixtures" / "h200" / "speed" / f"speed-{n}.health.json").read_text())
    run = write_speed_run(tmp_path / "run", {"h200": health})
    speed = build_report([run], tmp_path / "r").summary["speed"]
    assert speed["rejected"] == [] and speed["judgments"] == []  # nothing below 90%
    fractions = [j["fraction"] for j in speed["gpus"][0]["judgments"]]
    assert len(fractions) == 7 and all(0.97 <= f <= 1.1 for f in fractions)  # 5 figures, and PCIe both ways on its link


def test_history_tracks_the_drift_of_measured_bandwidth(fleet_health, tmp_path, capsys):
    from sweep.cli import main

    reports = tmp_path / "reports"
    for day in range(1, 7):  # gpu02's GPU 2 loses 2% of its HBM bandwidth a day; the rest wobbles 0.5%
        runs = {"gpu01": with_speed(fleet_health["gpu01"], per_gpu=lambda i, name, d=day: 1 + 0.005 * (-1) ** d),
                "gpu02": with_speed(fleet_health["gpu02"], per_gpu=lambda i, name, d=day: 1 - 0.02 * (d - 1)
                                    if (i, name) == (2, "hbm") else 1.0)}
        write_speed_run(reports / f"day{day}", runs, f"2026-12-0{day}T06:00:00Z")
    history = build([reports])
    assert history.changes == []
    assert [(d.host, d.gpu, d.figure) for d in history.speed_drifted] == [("gpu02", 2, "hbm")]
    d = history.speed_drifted[0]
    assert d.fall_pct == pytest.approx(100 * (0.98 - 0.92) / 0.98, abs=0.01) and d.runs == 6  # medians of 3
    assert d.text == "gpu02 GPU 2: HBM 4190 GB/s -> 3934 GB/s (-6.1% over 6 runs)"
    code = main(["history", "--root", str(reports), "--out", str(tmp_path / "out")])
    assert code == 5 and "speed drift gpu02 GPU 2: HBM" in capsys.readouterr().out
    saved = json.loads((tmp_path / "out" / "history.json").read_text())
    assert [s["text"] for s in saved["speed_drift"] if s["drifted"]] == [d.text]
    assert 'class="speed-drift"' in (tmp_path / "out" / "history.html").read_text()


def test_measured_figures_that_differ_between_gpus_make_no_mixed_host_finding(report):
    _, result = report
    assert [f for f in result.summary["findings"] if f["title"] == "GPUs differ within the host"] == []
    assert [h["host"] for h in result.summary["held_out"]] == ["gpu03", "gpu06"]  # held out for their figures only


def test_the_lent_h200s_refused_forced_and_bare_records(tmp_path):
    read = {n: json.loads((ROOT / "tests" / "fixtures" / "h200" / "speed" / f"{n}.health.json").read_text())
            for n in ("busy", "forced", "bare")}
    run = write_speed_run(tmp_path / "run", read)
    speed = build_report([run], tmp_path / "r").summary["speed"]
    assert speed["not_measured"] == [{"host": "busy", "status": "refused",
                                      "reason": read["busy"]["speed"]["reason"]}]
    assert "pid" in speed["not_measured"][0]["reason"] and speed["rejected"] == []
    forced = next(g for g in speed["gpus"] if g["host"] == "forced")
    assert "measured with --force over other processes" in forced["evidence"]
    bare = next(g for g in speed["gpus"] if g["host"] == "bare")
    assert "bf16_gemm" not in bare["figures"] and "hbm" in bare["figures"]  # skipped, never faked
    gemm = [k for k in speed["skipped"] if k["host"] == "bare" and k["figure"] == "bf16_gemm"]
    assert gemm == [{"host": "bare", "gpu": 0, "figure": "bf16_gemm",
                     "reason": read["bare"]["speed"]["gpus"][0]["figures"]["bf16_gemm"]["skipped"]}]


def test_sweep_demo_speed_judges_as_designed(tmp_path, capsys):
    from sweep.cli import main

    code = main(["demo", "--speed", "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "class B of 4: bf16 GEMM at 80% of the H200 reference; all 4 at 500 W" in out
    # the slow figure is gpu03's one cause, said once: on its own line (issue 48)
    assert [line for line in out.splitlines() if line.startswith("  gpu03 (1 broken): ")
            and "GPU 5 HBM 2993 GB/s, 70% of the H200 reference" in line], out  # its cause, on the glance
    assert out.count("HBM 2993 GB/s") == 1
    assert "speed demo done: every host was judged as designed" in out
    summary = json.loads((tmp_path / "run" / "report" / "summary.json").read_text())
    assert summary["speed"]["hosts_ran"] == 12 and summary["speed"]["rejected"] == []


def test_each_reference_and_each_judgment_against_a_model_names_its_source(tmp_path):
    """Issue 39: summary.json says where every reference figure comes from (the table's source text)."""
    from sweep.analysis.speed_reference import reference_of

    health = json.loads((ROOT / "tests" / "fixtures" / "h200" / "speed" / "speed-1.health.json").read_text())
    speed = build_report([write_speed_run(tmp_path / "run", {"h200": health})], tmp_path / "r").summary["speed"]
    assert [(r["figure"], r["by"], r["source"]) for r in speed["references"]] == [
        (f, "table", reference_of("H200", f)["source"]) for f in FIGURES]
    by_model = [j for j in speed["gpus"][0]["judgments"] if j["against"] != "link"]
    assert [(j["figure"], j["reference_source"]) for j in by_model] == [
        (f, reference_of("H200", f)["source"]) for f in FIGURES]


@pytest.mark.parametrize("model", ["Tesla K80", None])
def test_a_model_the_table_lacks_has_no_reference_and_is_not_an_error(model):
    from sweep.analysis.speed_reference import reference_of

    assert [reference_of(model, f) for f in FIGURES] == [None] * len(FIGURES)


def _lent(edit=None) -> dict:
    """The lent H200's first --speed record (one GPU, gen5 x16, 700 W default and enforced), edited."""
    health = json.loads((ROOT / "tests" / "fixtures" / "h200" / "speed" / "speed-1.health.json").read_text())
    if edit:
        edit(health, health["speed"]["samples"]["summary"][0], health["gpus"][0])
    return health


def _section(healths: dict) -> dict:
    fleet = load_fleet_of(healths)
    return speed_section(fleet, compare(fleet))


def _evidence_of(section: dict) -> dict:
    return {g["host"]: g["evidence"] for g in section["gpus"]}


def test_a_judged_gpus_evidence_says_its_power_cap_only_below_its_default_limit():
    """Issue 39 (mutation score): the envelope the tier sampled, as the GPU's record says it."""
    def tier_limit(watts):
        return lambda h, env, gpu: env.update(enforced_limit_w=watts)

    def probe_limit(h, env, gpu):  # the tier sampled no limit: the probe's enforced limit stands in
        env.pop("enforced_limit_w")
        gpu["power"]["enforced_limit_w"] = 450.0

    def no_default(h, env, gpu):  # a default limit NVML did not give: nothing to compare the cap with
        env.update(enforced_limit_w=500.0)
        gpu["power"]["default_limit_w"] = None
    said = _evidence_of(_section({"capped": _lent(tier_limit(500.0)), "at-default": _lent(tier_limit(700.0)),
                                  "just-under": _lent(tier_limit(699.0)), "probe": _lent(probe_limit),
                                  "no-default": _lent(no_default)}))
    assert said == {"capped": ["power capped at 500 W (default 700 W)"], "at-default": [],
                    "just-under": ["power capped at 699 W (default 700 W)"],
                    "probe": ["power capped at 450 W (default 700 W)"], "no-default": []}


@pytest.mark.parametrize("share,said", [(0.099, []), (0.10, ["SW power cap in 10% of the tier's samples"]),
                                        (0.91, ["SW power cap in 91% of the tier's samples"])])
def test_a_sw_power_cap_in_a_tenth_of_the_tiers_samples_is_said(share, said):
    section = _section({"h200": _lent(lambda h, env, gpu: env.update(sw_power_cap_fraction=share))})
    assert _evidence_of(section) == {"h200": said}


def test_a_hw_slowdown_and_other_processes_during_the_tier_are_said_with_their_share_and_count():
    def slowed(h, env, gpu):
        env.update(hw_slowdown_fraction=0.25)

    def busy(n):
        def edit(h, env, gpu):
            gpu["processes"] = [{"pid": 800 + i, "name": "python3", "used_memory_bytes": 2**30} for i in range(n)]
        return edit
    said = _evidence_of(_section({"slowed": _lent(slowed), "one": _lent(busy(1)), "two": _lent(busy(2)),
                                  "quiet": _lent(lambda h, env, gpu: env.update(hw_slowdown_fraction=0.0))}))
    assert said == {"slowed": ["HW slowdown in 25% of the tier's samples"], "one": ["1 other process on the GPU"],
                    "two": ["2 other processes on the GPU"], "quiet": []}


def test_a_gpu_whose_first_figure_was_skipped_is_judged_on_the_rest_and_the_skip_reason_is_whole():
    """A skipped HBM figure (the first the tier measures) leaves the other four judged; a reason
    holding ': ' is the operator's to read whole."""
    reason = "cuMemAlloc of 4 GiB failed: CUDA_ERROR_OUT_OF_MEMORY: out of memory"

    def skip_hbm(h, env, gpu):
        h["speed"]["gpus"][0]["figures"]["hbm"] = {"skipped": reason}
    section = _section({"h200": _lent(skip_hbm)})
    gpu = section["gpus"][0]
    assert sorted(gpu["figures"]) == sorted(f for f in FIGURES if f != "hbm")
    assert sorted((j["figure"], j["against"]) for j in gpu["judgments"]) == sorted(
        [(f, "reference") for f in FIGURES if f != "hbm"] + [("pcie_d2h", "link"), ("pcie_h2d", "link")])
    assert section["skipped"] == [{"host": "h200", "gpu": 0, "figure": "hbm", "reason": reason},
                                  {"host": "h200", "gpu": None, "figure": "allreduce", "reason": "one GPU selected"}]


def test_a_slow_pcie_copy_is_said_against_its_link_in_bytes_per_second():
    def slow_h2d(h, env, gpu):
        h["speed"]["gpus"][0]["figures"]["pcie_h2d"]["value"] = 30e9
    section = _section({"h200": _lent(slow_h2d)})
    link = [j for j in section["judgments"] if j["against"] == "link"]
    assert [(j["host"], j["gpu"], j["figure"], j["severity"]) for j in link] == [("h200", 0, "pcie_h2d", "broken")]
    message = link[0]["message"]
    assert message.startswith("h200 GPU 0: PCIe host to device 30 GB/s is 56% of what its PCIe gen5 x16 link carries")
    assert message.endswith("(63 GB/s raw, ~54 GB/s expected of a pinned copy)")


def test_a_baseline_reference_says_how_many_known_good_hosts_and_which_it_is_the_median_of():
    """Issue 39: the baseline's source, as summary.json's references and each judgment say it."""
    def hbm(tbps):
        return _lent(lambda h, env, gpu: h["speed"]["gpus"][0]["figures"]["hbm"].update(value=tbps * 1e12))
    judged = {"gpu07": hbm(3.0)}
    for baseline, source, value in (
            ({"gpu01": {"health": hbm(4.0)}, "gpu02": {"health": hbm(4.2)}, "gpu03": {"health": hbm(4.1)}},
             "baseline: median of 3 known-good hosts (gpu[01-03])", 4.1e12),
            ({"gpu01": {"health": hbm(4.0)}}, "baseline: median of 1 known-good host (gpu01)", 4.0e12)):
        fleet = load_fleet_of(judged)
        section = speed_section(fleet, compare(fleet), baseline=baseline)
        ref = next(r for r in section["references"] if r["figure"] == "hbm")
        assert (ref["by"], ref["source"], ref["value"]) == ("baseline", source, pytest.approx(value))
        j = next(j for j in section["judgments"] if j["figure"] == "hbm")
        assert (j["reference_source"], j["fraction"]) == (source, pytest.approx(3.0e12 / value, abs=1e-4))


def test_summary_json_lists_the_gpus_worst_figure_first():
    def hbm(fraction):
        return _lent(lambda h, env, gpu: h["speed"]["gpus"][0]["figures"]["hbm"].update(value=fraction * 4.276e12))
    section = _section({"a-fast": hbm(0.99), "b-slowest": hbm(0.6), "c-slow": hbm(0.8)})
    assert [g["host"] for g in section["gpus"]] == ["b-slowest", "c-slow", "a-fast"]
    assert [j["host"] for j in section["judgments"]] == ["b-slowest", "c-slow"]  # broken, then warning


def _envelope(health: dict, gpu: int, **row) -> dict:
    health["speed"]["samples"]["summary"][gpu].update(row)
    return health


def test_a_class_outlier_is_named_with_its_figure_its_classs_median_and_every_gpus_evidence(fleet_health):
    """Three hosts of one class (the smallest a class median is taken of): gpu03's slowest GPU's HBM
    at 77.777% of the others, two of its GPUs under the SW power cap (said once) and one in HW
    slowdown; gpu01's FP32 at 70% with nothing in its envelope."""
    def hosts(n_gpu01_fp32=0.7):
        return {
            "gpu01": with_speed(fleet_health["gpu01"], per_gpu=lambda i, f: n_gpu01_fp32 if (i, f) == (0, "fp32") else 1.0),
            "gpu02": with_speed(fleet_health["gpu02"], per_gpu=lambda i, f: 1.002),
            "gpu03": _envelope(_envelope(with_speed(fleet_health["gpu03"], per_gpu=lambda i, f: 0.77777 if (i, f) == (
                2, "hbm") else 1.0), 2, sw_power_cap_fraction=0.5), 5, sw_power_cap_fraction=0.5,
                hw_slowdown_fraction=0.3)}
    section = _section(hosts())
    out = section["class_outliers"]
    assert [(o["host"], o["class"], o["figure"]) for o in out] == [("gpu03", "A", "hbm"), ("gpu01", "A", "fp32")]
    hbm, fp32 = out
    assert (hbm["value"], hbm["median"]) == (pytest.approx(0.77777 * HBM), pytest.approx(HBM))
    assert hbm["deviation_pct"] == -22.22  # two decimals
    assert hbm["message"] == (f"gpu03: HBM {0.77777 * HBM / 1e9:.0f} GB/s against its class A's median "
                              f"{HBM / 1e9:.0f} GB/s (-22%)")
    assert hbm["evidence"] == ["SW power cap in 50% of the tier's samples", "HW slowdown in 30% of the tier's samples"]
    assert fp32["evidence"] == ["nothing in the envelope explains it (power cap, slowdown and processes match its "
                                "class): look at the card"]
    assert fp32["message"].endswith("(-30%)") and " TFLOP/s against its class A's median " in fp32["message"]
    # two hosts tell nothing about which is off
    two = _section({h: v for h, v in hosts().items() if h != "gpu02"})
    assert two["class_outliers"] == []


def test_a_slow_pool_names_its_figure_against_the_model_that_judged_it_and_its_one_power_limit():
    """Three lent-H200 hosts, their bf16 GEMM at 85% of the table, their HBM judged against a baseline
    (which names the model as NVML does): the pool's line names the table's model of that figure."""
    def gemm(h, env, gpu):
        h["speed"]["gpus"][0]["figures"]["bf16_gemm"]["value"] *= 0.85
    def hbm_only(h, env, gpu):  # a known-good host that measured its HBM only
        for f in FIGURES[1:]:
            h["speed"]["gpus"][0]["figures"][f] = {"skipped": "not asked"}
    baseline = {"base": {"health": _lent(hbm_only)}}
    fleet = load_fleet_of({f"gpu0{i}": _lent(gemm) for i in range(1, 4)})
    section = speed_section(fleet, compare(fleet), baseline=baseline)
    assert [p["message"] for p in section["slow_pools"]] == [
        "pool of 3: bf16 GEMM at 85% of the H200 reference; all 3 at 700 W"]
    assert section["slow_pools"][0]["median_fraction"] == pytest.approx(0.85 * 764785e9 / 7.65e14, abs=1e-4)
    assert next(r for r in section["references"] if r["figure"] == "hbm")["by"] == "baseline"


def test_a_gpu_nobody_can_judge_is_listed_last_unjudged_and_its_references_say_unknown():
    def k80(h, env, gpu):
        gpu["name"] = "Tesla K80"
        gpu["pcie"]["max_gen"] = None  # no link to judge its copies against either
    section = _section({"a-k80": _lent(k80), "b-h200": _lent()})
    assert [(g["host"], g["judgments"]) for g in section["gpus"]][1] == ("a-k80", [])
    assert section["gpus"][0]["host"] == "b-h200"
    k80_refs = [r for r in section["references"] if r["model"] == "Tesla K80"]
    assert [(r["figure"], r["unit"], r["value"], r["by"]) for r in k80_refs] == [
        ("hbm", "B/s", None, None), ("pcie_h2d", "B/s", None, None), ("pcie_d2h", "B/s", None, None),
        ("fp32", "FLOP/s", None, None), ("bf16_gemm", "FLOP/s", None, None)]
    assert {r["source"] for r in k80_refs} == {"unknown: no reference for this model and figure"}


@pytest.mark.parametrize("mixed", [False, True])
def test_a_slow_class_other_than_the_pool_is_named_by_its_id_and_its_power_limit_only_when_one(fleet_health, mixed):
    healths = {h: with_speed(fleet_health[h]) for h in ("gpu01", "gpu02", "gpu03")}
    healths.update({h: with_speed(fleet_health[h], scale={"bf16_gemm": 0.8}, power_w=500.0) for h in ("gpu09", "gpu10")})
    if mixed:  # one GPU of each under another enforced limit: no host of the class has one limit to say
        for h in ("gpu09", "gpu10"):
            healths[h]["gpus"][3]["power"]["enforced_limit_w"] = 450.0
    section = _section(healths)
    assert [p["message"] for p in section["slow_pools"]] == [
        "class B of 2: bf16 GEMM at 80% of the H200 reference" + ("" if mixed else "; all 2 at 500 W")]
    assert [(p["class"], p["reference"], p["figure"], p["hosts"]) for p in section["slow_pools"]] == [
        ("B", False, "bf16_gemm", 2)]


@pytest.mark.parametrize("n,more", [(1, ""), (3, ""), (4, "; and 1 more"), (5, "; and 2 more")])
def test_the_headline_names_the_three_worst_broken_hosts_and_counts_the_rest(n, more):
    def hbm(fraction):
        return _lent(lambda h, env, gpu: h["speed"]["gpus"][0]["figures"]["hbm"].update(value=fraction * 4.276e12))
    section = _section({f"gpu0{i}": hbm(0.60 + 0.01 * i) for i in range(1, n + 1)})
    shown = "; ".join(f"gpu0{i} GPU 0: HBM {(0.60 + 0.01 * i) * 4276:.0f} GB/s is {60 + i}% of the H200 reference "
                      "(4276 GB/s)" for i in range(1, min(n, 3) + 1))
    hosts = "gpu01" if n == 1 else f"gpu[01-0{n}]"
    assert section["headline"][0].startswith(f"pool of {n}: HBM at ")  # the pool as a whole first
    assert section["headline"][1:] == [f"speed: {n} host{'s' if n > 1 else ''} below 75% of reference ({hosts}): "
                                       f"{shown}{more}"]


def test_the_headline_counts_the_figures_and_hosts_rejected_as_no_measurement():
    def beyond(*figures):  # above three times the fastest GPU's: no measurement
        def edit(h, env, gpu):
            for f in figures:
                h["speed"]["gpus"][0]["figures"][f]["value"] = 9e15
        return edit
    one = _section({"gpu01": _lent(beyond("hbm"))})
    assert one["headline"] == [
        "speed: 1 figure of 1 host rejected as no measurement (gpu01): gpu01: speed.gpus[0].figures.hbm.value "
        + one["rejected"][0]["message"].split("speed.gpus[0].figures.hbm.value ", 1)[1]]
    assert one["headline"][0].endswith("the figure is left out (not shown as a measurement): probe the host again "
                                       "with this sweep's agent")
    three = _section({"gpu01": _lent(beyond("hbm", "fp32")), "gpu02": _lent(beyond("bf16_gemm"))})
    assert three["headline"][0].startswith(
        "speed: 3 figures of 2 hosts rejected as no measurement (gpu[01-02]): gpu01: speed.gpus[0].figures.hbm.value ")


def test_each_host_that_ran_the_tier_has_its_status_its_reason_and_its_class():
    busy = json.loads((ROOT / "tests" / "fixtures" / "h200" / "speed" / "busy.health.json").read_text())
    section = _section({"busy": busy, "h200": _lent()})
    assert section["status"] == {"busy": "refused", "h200": "measured"}
    assert section["reasons"] == {"busy": busy["speed"]["reason"]} and "pid" in busy["speed"]["reason"]
    assert [(g["host"], g["class"]) for g in section["gpus"]] == [("h200", "A")]


def test_a_contended_hosts_figures_are_recorded_and_its_evidence_names_the_process_never_judged():
    def contended(h, env, gpu):
        h["speed"]["gpus"][0]["figures"]["hbm"]["value"] = 0.5 * 4.276e12  # slow, under another process
        h["speed"]["contention"] = {"contended": True, "processes": [
            {"gpu": 0, "pid": 4242, "name": "python3", "first_seen_s": 1.5}]}
    section = _section({"h200": _lent(contended)})
    assert section["contended"] == [{"host": "h200", "processes": "GPU 0: pid 4242 (python3)"}]
    gpu = section["gpus"][0]
    assert gpu["evidence"] == ["contended: GPU 0: pid 4242 (python3) appeared during the tier"]
    assert gpu["figures"]["hbm"] == pytest.approx(0.5 * 4.276e12)
    assert section["judgments"] == [] and section["broken_hosts"] == []


@pytest.mark.parametrize("value,unit,shown", [(2501.5e9, "B/s", "2502 GB/s"), (2500.49e9, "B/s", "2500 GB/s"),
                                              (776.75e12, "FLOP/s", "776.8 TFLOP/s"), (None, "B/s", "?")])
def test_a_figure_is_shown_in_gb_s_or_tflop_s_rounded_to_the_nearest(value, unit, shown):
    from sweep.analysis.speed import rate

    assert rate(value, unit) == shown


def test_a_tier_that_failed_or_was_refused_is_not_measured_and_a_partial_one_is():
    def status(value, reason):
        return _lent(lambda h, env, gpu: h["speed"].update(status=value, reason=reason))
    busy = json.loads((ROOT / "tests" / "fixtures" / "h200" / "speed" / "busy.health.json").read_text())
    section = _section({"busy": busy, "died": status("failed", "the measuring child died: SIGKILL"),
                        "half": status("partial", "bf16 GEMM skipped"), "h200": _lent()})
    assert section["not_measured"] == [
        {"host": "busy", "status": "refused", "reason": busy["speed"]["reason"]},
        {"host": "died", "status": "failed", "reason": "the measuring child died: SIGKILL"}]
    assert section["gpus_not_listed"] == 0 and len(section["gpus"]) == 3


@pytest.mark.parametrize("gen,width,raw", [(5, 16, 16 * 3.938e9), (5, 32, 32 * 3.938e9), (5, 1, 3.938e9),
                                           (5, 33, None), (5, 0, None), (7, 16, None), (0, 16, None),
                                           (None, 16, None), (5, None, None)])
def test_a_links_raw_rate_is_known_for_generations_1_to_6_and_1_to_32_lanes_only(gen, width, raw):
    """A link of a generation or width the table does not know is not judged (never a crash)."""
    assert link_raw_bps(gen, width) == (pytest.approx(raw) if raw else None)
