"""sweep export prometheus against promtool, the owner of the format and of the rules' meaning:
the export passes `promtool check metrics`; `promtool test rules`, fed the exports of two days of
the generated history, fires each alert on exactly its faults and nothing on SW power cap alone."""
from __future__ import annotations

import os
import re
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from history_parts import PROMTOOL, require_part, six_week_history
from sweep.cli import main
from sweep.export.prometheus import metrics_text
from sweep.export.rules import HW_REASONS, rules, rules_text
from sweep.export.textfile import write_output
from sweep.audit.expect import load_expectations
from sweep.demo.history import START
from sweep.store import RECORD_VERSION, RUN_FORMAT, RunFolder

EXPECT = """\
version: 1
defaults: {driver: ["580.159.*"], ecc: true}
models:
  "NVIDIA H200": {power_limit_w: 700, sm_clock_floor_mhz: 1300}
hosts:
  gpu30: {sm_clock_floor_mhz: 1420}
"""
_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$')
_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's where PyYAML has it: 5x faster on the rules tests' input series


def parse(text: str) -> dict[tuple, float]:
    """(name, ((label, value), ...)) -> value of every sample line."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        m = _LINE.match(line)
        assert m, line
        labels = tuple(sorted(_PAIR.findall(m.group(2) or "")))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def promtool(*args, cwd=None, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run([require_part(PROMTOOL), *args], cwd=cwd, input=stdin, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture()
def history(tmp_path, tmp_path_factory):
    return six_week_history(tmp_path, tmp_path_factory)


def _day(reports: Path, n: int) -> Path:
    """The daily run of day `n` (its 03:00 run: a change window's extra runs are not days)."""
    return reports / f"{START + timedelta(days=n):%Y%m%d}T030000Z-demo"


def test_promtool_check_metrics_accepts_the_export(history, tmp_path):
    reports, _ = history
    out = tmp_path / "textfile" / "sweep.prom"
    out.parent.mkdir()
    assert main(["export", "prometheus", str(_day(reports, 29)), "-o", str(out)]) == 0
    checked = promtool("check", "metrics", stdin=out.read_text())
    assert checked.returncode == 0 and checked.stdout + checked.stderr == "", checked.stdout + checked.stderr
    samples = parse(out.read_text())
    limit = {(dict(k[1])["host"], dict(k[1])["gpu"]): v for k, v in samples.items()
             if k[0] == "sweep_gpu_power_limit_enforced_watts"}
    assert limit[("gpu09", "0")] == 500 and limit[("gpu01", "0")] == 700 and limit[("gpu13", "3")] == 250
    assert samples[("sweep_host_driver_info", (("cuda_driver_version", "13.1"), ("driver_version", "590.44.01"),
                                               ("host", "gpu15")))] == 1
    assert samples[("sweep_gpu_ecc_enabled", (("gpu", "5"), ("host", "gpu22")))] == 0
    assert samples[("sweep_host_contract_status", (("contract", "power"), ("host", "gpu09"), ("status", "broken")))] == 1
    assert samples[("sweep_gpu_clock_event_reason_active", (("gpu", "0"), ("host", "gpu01"),
                                                            ("reason", "sw_power_cap")))] == 1
    assert samples[("sweep_host_comparability_class_info", (("class", "A"), ("host", "gpu01")))] == 1
    assert 1.40e9 < samples[("sweep_gpu_load_sm_clock_median_hertz", (("gpu", "0"), ("host", "gpu30")))] < 1.42e9
    names = {k[0] for k in samples}
    assert all(re.fullmatch(r"sweep_[a-z0-9_]+", n) for n in names)
    assert not any(label in ("uuid", "serial", "pci_bus_id") for _, labels in samples for label, _ in labels)
    assert sorted(p.name for p in out.parent.iterdir()) == ["sweep.prom"]  # no temporary file left


def test_hostile_host_names_are_escaped(tmp_path):
    folder = RunFolder.create(tmp_path / "run")
    names = ['gpu"quote', "gpu\\back", "gpu\nnewline", "gpu{brace}=1"]
    for name in names:
        folder.write_record({"record_version": RECORD_VERSION, "host": name, "address": None, "status": "failed",
                             "failure": {"class": "refused", "message": "x"}, "attempts": 1, "started_at": None,
                             "ended_at": None, "duration_s": 0.0, "health": None})
    folder.write_manifest({"format": RUN_FORMAT, "record_version": RECORD_VERSION, "state": "complete",
                           "started_at": "2026-11-30T00:00:00Z", "hosts": names, "sessions": []})
    text = metrics_text(folder.path)
    checked = promtool("check", "metrics", stdin=text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    up = {dict(k[1])["host"] for k in parse(text) if k[0] == "sweep_host_up"}
    assert up == {'gpu\\"quote', "gpu\\\\back", "gpu\\nnewline", "gpu{brace}=1"}


def test_the_textfile_is_replaced_whole(tmp_path):
    target = tmp_path / "sweep.prom"
    target.write_text("old\n")
    inode = target.stat().st_ino
    write_output("# HELP a b\n# TYPE a gauge\na 1\n", target)
    assert target.read_text().endswith("a 1\n") and target.stat().st_ino != inode  # renamed over, not rewritten
    assert oct(target.stat().st_mode & 0o777) == "0o644" and sorted(os.listdir(tmp_path)) == ["sweep.prom"]


# ------------------------------------------------------------------------------ rules


def _render(template: str, labels: dict) -> str:
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], template)


def _oracle(alert: str, a: dict, b: dict) -> list[dict]:
    """What each alert must say at the end of the test: written from the samples, not from PromQL."""
    def gpus(name, samples, pick):
        return [dict(labels) for (n, labels), v in samples.items() if n == name and pick(dict(labels), v)]
    if alert == "SweepGpuPowerLimitNotIntended":
        return gpus("sweep_gpu_power_limit_enforced_watts", b, lambda l, v: abs(v - 700) > 0.5)
    if alert == "SweepGpuHwSlowdown":
        return gpus("sweep_gpu_clock_event_reason_active", b, lambda l, v: v == 1 and l["reason"] in HW_REASONS)
    if alert == "SweepGpuEccModeChanged":
        return [l for l in gpus("sweep_gpu_ecc_enabled", b, lambda l, v: True)
                if a.get(("sweep_gpu_ecc_enabled", tuple(sorted(l.items())))) != b[("sweep_gpu_ecc_enabled",
                                                                                     tuple(sorted(l.items())))]]
    if alert == "SweepHostDriverNotApproved":
        return gpus("sweep_host_driver_info", b, lambda l, v: not l["driver_version"].startswith("580.159."))
    if alert == "SweepHostBroken":
        return gpus("sweep_host_to_drain", b, lambda l, v: v == 1)
    if alert == "SweepHostXidNeedsRepair":
        return gpus("sweep_host_contract_status", b, lambda l, v: v == 1 and l["contract"] == "xid"
                    and l["status"] == "broken")
    if alert == "SweepHostUnreachable":
        return gpus("sweep_host_up", b, lambda l, v: v == 0)
    if alert == "SweepFleetNotSwept":  # the exports' timestamps are of 2026, the test's clock of 1970: fresh
        return []
    if alert == "SweepGpuSmClockUnderLoadBelowFloor":
        return gpus("sweep_gpu_load_sm_clock_median_hertz", b,
                    lambda l, v: v < (1420e6 if l["host"] == "gpu30" else 1300e6))
    raise AssertionError(alert)


def _input_series(a: dict, b: dict, keep=lambda host: True) -> list[dict]:
    """Export A at 0h, 1h, 2h and export B at 3h, 4h, 5h; a series missing from one is '_' there."""
    series = []
    for key in sorted(set(a) | set(b)):
        name, labels = key
        if not keep(dict(labels).get("host", "")):
            continue
        selector = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"
        values = " ".join(["_" if key not in a else f"{a[key]:g}"] * 3 + ["_" if key not in b else f"{b[key]:g}"] * 3)
        series.append({"series": selector, "values": values})
    return series


def _rules_test(tmp_path, rules_path: Path, series, expected: dict) -> subprocess.CompletedProcess:
    # the rules hold no `for:` and the series step by the hour: evaluating them on the hour (not every minute,
    # 300 evaluations of every series) gives the same alerts at 5h
    spec = {"rule_files": [str(rules_path)], "evaluation_interval": "1h", "tests": [{
        "interval": "1h", "input_series": series,
        "alert_rule_test": [{"eval_time": "5h", "alertname": name, "exp_alerts": alerts}
                            for name, alerts in expected.items()]}]}
    test_file = tmp_path / "rules.test.yml"
    test_file.write_text(yaml.dump(spec, Dumper=DUMPER, sort_keys=False, width=1000))
    return promtool("test", "rules", str(test_file))


def test_promtool_test_rules_each_alert_fires_on_its_fault(history, tmp_path):
    reports, story = history
    expect = tmp_path / "fleet.yml"
    expect.write_text(EXPECT)
    rules_path = tmp_path / "sweep.rules.yml"
    assert main(["export", "prometheus", "--rules", "--expect", str(expect), "-o", str(rules_path)]) == 0
    checked = promtool("check", "rules", str(rules_path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    a, b = (parse(metrics_text(_day(reports, n))) for n in (19, 29))  # 2026-10-24 and 2026-11-03
    spec = rules(load_expectations(expect))["groups"][0]["rules"]
    expected, hosts = {}, {}
    for rule in spec:
        found = _oracle(rule["alert"], a, b)
        hosts[rule["alert"]] = {l["host"] for l in found}
        expected[rule["alert"]] = [{"exp_labels": dict(l, **rule["labels"]),
                                    "exp_annotations": {k: _render(v, l) for k, v in rule["annotations"].items()}}
                                   for l in found]
    # the faults the story and the demo fleet put there, and no other host
    assert hosts == {
        "SweepGpuPowerLimitNotIntended": {"gpu09", "gpu11", "gpu12", "gpu13"},
        "SweepGpuHwSlowdown": {"gpu25"},
        "SweepGpuEccModeChanged": {"gpu22"},
        "SweepHostDriverNotApproved": {"gpu15", "gpu37", "gpu38", "gpu39", "gpu40"},
        "SweepGpuSmClockUnderLoadBelowFloor": {"gpu30"},
        # the node's faults only: not the power caps (gpu11-13, the configuration's), not gpu21's process of no job,
        # not the probe's environment (gpu29's empty mask, gpu33's CPU torch) (issue 49)
        "SweepHostBroken": {"gpu03", "gpu09", "gpu15", "gpu19", "gpu23", "gpu25", "gpu27"},
        "SweepHostXidNeedsRepair": {"gpu19", "gpu23"},  # Xid 79 (reboot), Xid 48 (reset); gpu21's Xid 31 is the app's
        "SweepHostUnreachable": set(),  # every host of the history answers: test_unreachable_and_stale_...
        "SweepFleetNotSwept": set(),
    }
    done = _rules_test(tmp_path, rules_path, _input_series(a, b), expected)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]


def test_sw_power_cap_alone_fires_nothing(history, tmp_path):
    reports, _ = history
    rules_path = tmp_path / "sweep.rules.yml"
    rules_path.write_text(rules_text(None, floor_mhz=1300))
    a, b = (parse(metrics_text(_day(reports, n))) for n in (19, 29))
    healthy = {"gpu01", "gpu02", "gpu04", "gpu08"}  # gpu03 is broken (a GPU missing from NVML): SweepHostBroken
    capped = [k for k, v in b.items() if k[0] == "sweep_gpu_clock_event_reason_active" and v == 1
              and dict(k[1])["host"] in healthy]
    assert {dict(k[1])["reason"] for k in capped} == {"sw_power_cap"}  # the only reason active on them
    assert {dict(k[1])["host"] for k in capped} == healthy and len(capped) >= 28  # (nearly) every GPU capped
    names = [r["alert"] for r in rules()["groups"][0]["rules"]]
    done = _rules_test(tmp_path, rules_path, _input_series(a, b, keep=lambda h: h in healthy or h == ""),
                       {name: [] for name in names})
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "SweepHostDriverNotApproved" not in rules_path.read_text()  # no approved list without --expect


def test_a_duplicate_gpu_index_keeps_both_series_and_promtool_accepts_it(tmp_path):
    """A record giving two GPUs index 0 (a modified agent): the host's own GPU 0 is not overwritten."""
    from fleet_variants import h200, record, write_run

    health = h200(2, "gpu01")
    health["gpus"][1]["index"] = 0
    health["gpus"][0]["power"]["enforced_limit_w"] = 700.0
    health["gpus"][1]["power"]["enforced_limit_w"] = 123.0
    run = write_run(tmp_path / "run", [record("gpu01", health)], {
        "format": RUN_FORMAT, "record_version": RECORD_VERSION, "state": "complete",
        "started_at": "2026-11-30T00:00:00Z", "hosts": ["gpu01"], "sessions": []})
    text = metrics_text(run)
    checked = promtool("check", "metrics", stdin=text)
    assert checked.returncode == 0 and checked.stdout + checked.stderr == "", checked.stdout + checked.stderr
    limits = {k[1]: v for k, v in parse(text).items() if k[0] == "sweep_gpu_power_limit_enforced_watts"}
    assert limits == {(("gpu", "0"), ("gpu_position", "0"), ("host", "gpu01")): 700,
                      (("gpu", "0"), ("gpu_position", "1"), ("host", "gpu01")): 123}


def test_an_unreachable_host_and_a_fleet_not_swept_for_hours_fire_and_a_fresh_fleet_does_not(tmp_path):
    """sweep_host_up 0 fires SweepHostUnreachable for that host; the newest sweep_run_timestamp_seconds older than
    stale_hours (the test's clock starts at 0: a run stamped 0 is 5 h old at 5h) fires SweepFleetNotSwept, and
    so does no export at all; a run stamped 3 h ago does not."""
    rules_path = tmp_path / "sweep.rules.yml"
    assert main(["export", "prometheus", "--rules", "--stale-hours", "4", "-o", str(rules_path)]) == 0
    series = [{"series": 'sweep_host_up{host="gpu01"}', "values": "1 1 1 1 1 1"},
              {"series": 'sweep_host_up{host="gpu02"}', "values": "1 1 1 0 0 0"},
              {"series": "sweep_run_timestamp_seconds", "values": "0 0 0 0 0 0"}]
    spec = {a["alert"]: a for a in rules(None, stale_hours=4)["groups"][0]["rules"]}
    def fired(name, **labels):
        rule = spec[name]
        return [{"exp_labels": dict(labels, **rule["labels"]),
                 "exp_annotations": {k: _render(v, labels) for k, v in rule["annotations"].items()}}]
    done = _rules_test(tmp_path, rules_path, series, {"SweepHostUnreachable": fired("SweepHostUnreachable", host="gpu02"),
                                                      "SweepFleetNotSwept": fired("SweepFleetNotSwept")})
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    fresh = [*series[:2], {"series": "sweep_run_timestamp_seconds", "values": "0 0 0 7200 7200 7200"}]
    done = _rules_test(tmp_path, rules_path, fresh, {"SweepFleetNotSwept": []})
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    done = _rules_test(tmp_path, rules_path, series[:2], {"SweepFleetNotSwept": fired("SweepFleetNotSwept")})
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
