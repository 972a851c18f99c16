"""The fact table (sweep/analysis/facts.py): every declared fact reaches every consumer, values are
compared typed, and the firmware and platform versions of schema 1.3 arrive through it alone.

Run folders here are written as `sweep run` writes them (manifest + hosts/*.json records) from the
recorded H200 health.json, edited the way the demo fleet's variants are (`fleet_variants`)."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from probe_agent import HEALTH_SCHEMA_VERSION

from fleet_variants import base, rejudge
from history_parts import PROMTOOL, require_part
from probe_agent.hostfacts import read_firmware, read_ib_ports
from probe_agent.source import LiveSource
from sweep.analysis import fact_values, facts
from sweep.analysis import fleet as fleet_module
from sweep.analysis import rows as rows_module
from sweep.analysis.compare import compare
from sweep.analysis.fleet import GPU_COLUMNS, HOST_COLUMNS, load_fleet
from sweep.audit.baseline import compare_to_baseline, set_baseline
from sweep.audit.expect import evaluate_expectations, load_expectations
from sweep.audit.fields import KIND_ORDER, run_kind
from sweep.demo.history import six_weeks
from sweep.store import load_run
from sweep.cli import main
from sweep.export.prometheus import FAMILIES, metrics_text
from sweep.history import build
from sweep.history import index as index_module
from sweep.history.runs import read_run
from sweep.report.build import build_report
from sweep.store import MANIFEST, RECORD_VERSION, RUN_FORMAT

ROOT = Path(__file__).resolve().parents[2]
FIRMWARE_IMPACT = "firmware differs: a change-window left hosts half-upgraded"


def write_run(folder: Path, day: int, healths: dict, *, compact: bool = False) -> Path:
    """A run folder of `healths` (host -> health.json) started on 2026-11-`day`."""
    (folder / "hosts").mkdir(parents=True)
    started = f"2026-11-{day:02d}T06:00:00Z"
    (folder / MANIFEST).write_text(json.dumps({
        "format": RUN_FORMAT, "record_version": RECORD_VERSION, "started_at": started, "state": "complete",
        "hosts": sorted(healths)}))
    for host, health in healths.items():
        record = {"record_version": RECORD_VERSION, "host": host, "address": "127.0.0.1", "status": "ok",
                  "failure": None, "attempts": 1, "duration_s": 1.0, "groups": [], "health": health}
        text = json.dumps(record, separators=(",", ":")) if compact else json.dumps(record, indent=1)
        (folder / "hosts" / f"{host}.json").write_text(text)
    return folder


def fleet_health(n: int = 4, **edits) -> dict:
    """host -> an idle H200 health.json; `edits` maps a host to a function that edits its copy."""
    out = {}
    for i in range(1, n + 1):
        host = f"gpu{i:02d}"
        health = base("idle")
        if host in edits:
            edits[host](health)
            health = rejudge(health)
        out[host] = health
    return out


def vbios(version):
    def edit(health):
        for g in health["gpus"]:
            g["vbios"] = version
    return edit


def hca(version):
    def edit(health):
        health.setdefault("host_settings", {})["ib_ports"] = [
            {"device": "mlx5_0", "port": 1, "state": "ACTIVE", "rate_gbps": 400.0, "fw_ver": version}]
    return edit


# --- the table: every fact reaches every consumer --------------------------------------------------


@pytest.mark.parametrize("fact", facts.FACTS, ids=lambda f: f.name)
def test_every_fact_has_a_metric_an_audit_kind_an_impact_and_a_history_treatment(fact):
    columns = GPU_COLUMNS if fact.scope == "gpu" else HOST_COLUMNS
    assert fact.scope in ("host", "gpu") and fact.columns and all(c in columns for c in fact.columns), \
        f"{fact.name}: every column of its typed value is a {fact.scope} frame column with a dtype"
    assert (fact.metric is None) != (fact.no_metric is None), f"{fact.name}: a metric, or the reason it has none"
    if fact.metric:
        assert fact.metric.name in FAMILIES and fact.metric.help
        assert all(c in columns for c in ([fact.metric.column] if fact.metric.column else
                                          [c for _, c in fact.metric.labels]))
    assert fact.diff_kind in KIND_ORDER and fact.paths
    for path in fact.paths:  # the audit field tables give each of its paths the fact's kind (or leave it volatile)
        assert run_kind(path.replace("#", "[0]")) in (fact.diff_kind, None), path
    assert fact.impact and fact.impact[-1][0] is None, f"{fact.name}: its last impact rule always holds"
    text = facts.impact_of(fact.name, "a", "b")
    assert isinstance(text, str) and len(text) > 30
    assert fact.history in ("value", "drift")
    if fact.history == "drift":  # a measured figure: no class split, an expectations floor, a metric of its unit
        assert not fact.compares and fact.expect and fact.metric.name.endswith(("_bytes_per_second", "_flops"))
    assert isinstance(fact.render(dict.fromkeys(fact.columns)), str)  # nothing read renders, no crash


def _exported(text: str) -> set:
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def _holds(doc, path: str) -> bool:
    """Whether a health.json holds a value (not null) at a declared path ("#": any index, "name*": any field)."""
    step, _, rest = path.partition(".")
    name, many = (step[:-1], True) if step.endswith("#") else (step, False)
    if not isinstance(doc, dict):
        return False
    keys = [k for k in doc if k.startswith(name[:-1])] if name.endswith("*") else ([name] if name in doc else [])
    values = [item for k in keys for item in ((doc[k] if isinstance(doc[k], list) else []) if many else [doc[k]])]
    return any(v is not None and (not rest or _holds(v, rest)) for v in values)


def _promtool_ok(text: str) -> None:
    proc = subprocess.run([require_part(PROMTOOL), "check", "metrics"], input=text, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_export_of_the_demo_fleet_carries_every_fact_it_read_and_passes_promtool(tmp_path):
    # one daily run of the demo fleet: the facts it read are its captures'
    six_weeks(tmp_path / "reports", days=1)
    [run] = [p for p in (tmp_path / "reports").iterdir() if (p / MANIFEST).is_file()]
    text = metrics_text(run)
    names = _exported(text)
    fleet = load_fleet([run])
    unread = {f.name for f in facts.FACTS
              if all((fleet.gpus if f.scope == "gpu" else fleet.hosts)[c].isna().all() for c in f.columns)}
    missing = {f.name for f in facts.FACTS if f.metric and f.metric.name not in names}
    assert missing == unread, "a fact the demo fleet read is missing from its export"
    # a fact the demo fleet did not read holds no value at any of its paths in the demo's records (its captures
    # were recorded before schema 1.3, and the speed tier is opt-in): a value not read is not exported
    healths = [r["health"] for r in load_run(run).records.values() if isinstance(r.get("health"), dict)]
    held = {f.name for f in facts.FACTS if any(_holds(h, p) for h in healths for p in f.paths)}
    assert unread and not (unread & held), sorted(unread & held)
    assert {"inforom", "bios", "hbm"} <= unread
    for name in ("sweep_gpu_pcie_link_width", "sweep_gpu_nvlinks_active", "sweep_host_ib_rate_info",
                 "sweep_host_cpu_governor_info", "sweep_gpu_vbios_info"):  # the ones 43e43b8 left out
        assert name in names
    _promtool_ok(text)


# --- typed values in history ---------------------------------------------------------------------


def _history(tmp_path, runs) -> Path:
    reports = tmp_path / "reports"
    for day, healths in runs:
        write_run(reports / f"day{day:02d}", day, healths)
    return reports


def test_rewording_a_label_gives_no_change_point(tmp_path, monkeypatch):
    monkeypatch.setattr(index_module, "MAX_WORKERS", 1)  # runs read here: spawned workers would not see the patch
    reports = _history(tmp_path, [(1, fleet_health(2)), (2, fleet_health(2))])
    assert build([reports]).changes == []
    power = facts.BY_NAME["power_limit"]
    reworded = [facts.Fact(**{**f.__dict__, "render": lambda r: f"{r['power_enforced_w']:g} watts"})
                if f is power else f for f in facts.FACTS]
    for name, value in facts.derived(tuple(reworded)).items():
        monkeypatch.setattr(facts, name, value)
    write_run(reports / "day03", 3, fleet_health(2))
    result = build([reports])
    assert result.changes == [], [c.text for c in result.changes]
    values = set(result.spans[result.spans["key"] == "power_limit"]["value"])
    assert values == {"700 watts"}  # shown in today's words, kept as the typed value


def test_a_field_older_records_lack_is_first_seen_not_a_change(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(index_module, "MAX_WORKERS", 1)

    def older_agent(health):  # schema 1.1: no pcie section, no firmware
        for g in health["gpus"]:
            g.pop("pcie", None)
            g.pop("vbios", None)
    old = {h: rejudge(copy.deepcopy(x)) for h, x in fleet_health(2).items()}
    for x in old.values():
        older_agent(x)
    new = fleet_health(2)
    for x in new.values():
        for g in x["gpus"]:
            g["pcie"] = {"gen": 5, "width": 16, "max_gen": 5, "max_width": 16, "replay_counter": 0}
    reports = _history(tmp_path, [(1, old), (2, old), (3, new)])
    result = build([reports])
    assert result.changes == [], [c.text for c in result.changes]
    pcie = result.spans[(result.spans["key"] == "pcie") & (result.spans["host"] == "gpu01")]
    assert list(pcie["value"]) == ["unknown", "gen5 x16"]  # the timeline still shows when it was first read
    code = main(["history", "--root", str(reports), "--out", str(tmp_path / "out")])
    assert code == 0, capsys.readouterr().err


def test_a_firmware_change_is_a_change_point(tmp_path, monkeypatch):
    monkeypatch.setattr(index_module, "MAX_WORKERS", 1)
    reports = _history(tmp_path, [(1, fleet_health(2)), (2, fleet_health(2, gpu02=vbios("96.00.A5.00.2B")))])
    result = build([reports])
    assert [c.text for c in result.changes] == ["2026-11-02 06:00 UTC: VBIOS 96.00.A5.00.1A -> 96.00.A5.00.2B"]


def test_a_record_written_without_spaces_keeps_its_drift(tmp_path):
    health = json.loads((ROOT / "tests" / "fixtures" / "h200" / "load.health.json").read_text())
    summary = health["load"]["summary"]
    assert summary and summary[0].get("sm_mhz_median") is not None
    spaced = read_run(write_run(tmp_path / "spaced", 1, {"gpu01": health}))
    compact = read_run(write_run(tmp_path / "compact", 1, {"gpu01": health}, compact=True))
    assert compact.load and compact.load == spaced.load
    assert compact.load[0][2] == summary[0]["sm_mhz_median"]


# --- the frames: columns by name ------------------------------------------------------------------


def test_inserting_a_column_cannot_shift_another(tmp_path, monkeypatch):
    run = write_run(tmp_path / "run", 1, fleet_health(2))
    before = load_fleet([run]).gpus
    columns = {}
    for name, dtype in GPU_COLUMNS.items():
        columns[name] = dtype
        if name == "uuid":
            columns["inserted_test"] = "Int64"  # a column no reader fills: NA, and nothing moves
    monkeypatch.setattr(fleet_module, "GPU_COLUMNS", columns)
    after = load_fleet([run]).gpus
    assert after["inserted_test"].isna().all()
    for name in GPU_COLUMNS:
        assert after[name].astype(object).tolist() == before[name].astype(object).tolist(), name
    assert after["name"].astype(str).tolist() == ["NVIDIA H200"] * len(after)


def test_a_value_under_an_undeclared_column_is_an_error_not_a_shift(tmp_path, monkeypatch):
    run = write_run(tmp_path / "run", 1, fleet_health(1))
    columns = {k: v for k, v in GPU_COLUMNS.items() if k != "memory_total_bytes"}
    monkeypatch.setattr(fleet_module, "GPU_COLUMNS", columns)
    with pytest.raises(KeyError, match="memory_total_bytes"):
        load_fleet([run])


# --- the proof: firmware and platform versions as facts -------------------------------------------


def test_mixed_vbios_splits_the_fleet_with_the_firmware_impact_and_reaches_every_consumer(tmp_path):
    run = write_run(tmp_path / "run", 1, fleet_health(4, gpu03=vbios("96.00.A5.00.2B"), gpu04=vbios("96.00.A5.00.2B")))
    found = compare(load_fleet([run]))
    assert [c.hosts for c in found.classes] == [("gpu01", "gpu02"), ("gpu03", "gpu04")] or \
        [c.hosts for c in found.classes] == [("gpu03", "gpu04"), ("gpu01", "gpu02")]
    other = found.classes[1]
    assert [d.key for d in other.differs] == ["vbios"]
    assert other.differs[0].impact.startswith(FIRMWARE_IMPACT)
    report = build_report([run], tmp_path / "report")
    markdown = (tmp_path / "report" / "summary.md").read_text()
    assert "VBIOS" in markdown and FIRMWARE_IMPACT in markdown and report.summary["key_labels"]["vbios"] == "VBIOS"
    text = metrics_text(run)
    assert 'sweep_gpu_vbios_info{gpu="0",host="gpu03",version="96.00.A5.00.2B"} 1' in text
    exp = tmp_path / "expect.yml"
    exp.write_text('version: 1\ndefaults: {vbios: ["96.00.A5.00.1A"]}\n')
    violations = evaluate_expectations(load_run(run).records, load_expectations(exp))
    assert {(v.host, v.rule) for v in violations} == {("gpu03", "vbios"), ("gpu04", "vbios")}
    assert "VBIOS 96.00.A5.00.2B on GPU 0" in violations[0].message


def test_hca_firmware_splits_the_fleet_and_drifts_from_a_baseline(tmp_path):
    first = write_run(tmp_path / "first", 1, fleet_health(2, gpu01=hca("28.39.1002"), gpu02=hca("28.39.1002")))
    set_baseline(load_run(first), tmp_path / "baseline")
    later = write_run(tmp_path / "later", 2, fleet_health(2, gpu01=hca("28.39.1002"), gpu02=hca("28.40.1000")))
    found = compare(load_fleet([later]))
    assert len(found.classes) == 2
    assert [d.key for d in found.classes[1].differs] == ["hca_firmware"]
    assert found.classes[1].differs[0].impact.startswith(FIRMWARE_IMPACT)
    drift = compare_to_baseline(load_run(later).records, tmp_path / "baseline")
    text = json.dumps(drift, default=lambda o: getattr(o, "__dict__", str(o)))
    assert "firmware" in text and "28.40.1000" in text and "gpu02" in text
    assert 'sweep_host_hca_firmware_info{host="gpu02",version="28.40.1000"} 1' in metrics_text(later)


def test_the_agent_reads_the_firmware_from_sysfs_and_nvml(tmp_path):
    root = tmp_path / "t"
    for path, text in (("/sys/class/dmi/id/bios_version", "2.4.1\n"),
                       ("/sys/class/infiniband/mlx5_0/fw_ver", "28.39.1002\n"),
                       ("/sys/class/infiniband/mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)\n"),
                       ("/sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n")):
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/")).write_text(text)
    src = LiveSource(root=str(root), journalctl=None)
    ports, err = read_ib_ports(src)
    assert err is None and ports[0]["fw_ver"] == "28.39.1002"
    assert read_firmware(src, [{"fabric": {"state": "not_supported"}}]) == {
        "bios_version": "2.4.1", "fabric_manager_version": None, "unreadable": {}}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert read_firmware(LiveSource(root=str(empty), journalctl=None), [])["unreadable"] == {
        "bios_version": "FileNotFoundError"}


def _replay(capture: dict, tmp_path: Path) -> dict:
    path = tmp_path / "cap.json"
    path.write_text(json.dumps(capture))
    proc = subprocess.run([sys.executable, "-m", "probe_agent", "--replay", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_replays_with_and_without_the_new_fields(tmp_path):
    capture = json.loads((ROOT / "sweep" / "demo" / "captures" / "h200-idle.json").read_text())
    old = _replay(capture, tmp_path)  # recorded before schema 1.3: no InfoROM, GSP, BIOS, fw_ver
    g = old["gpus"][0]
    assert old["schema_version"] == HEALTH_SCHEMA_VERSION and g["vbios"] == "96.00.A5.00.1A"
    assert g["inforom_image"] is None and g["gsp_firmware"] == {"version": None, "enabled": None,
                                                                  "default_enabled": None}
    assert old["firmware"]["bios_version"] is None
    capture["nvml"].update({"gpu0.inforom_img": {"value": "G520.0282.02.02"},
                            "gpu0.gsp_mode": {"value": [1, 1]}, "gpu0.gsp_version": {"value": "580.159.04"}})
    capture.setdefault("paths", {})["read /sys/class/dmi/id/bios_version"] = {"text": "2.4.1\n"}
    new = _replay(capture, tmp_path)
    g = new["gpus"][0]
    assert g["inforom_image"] == "G520.0282.02.02" and g["gsp_firmware"]["version"] == "580.159.04"
    assert new["firmware"]["bios_version"] == "2.4.1"
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "probe_agent" / "schema" / "health-1.schema.json").read_text())
    for doc in (old, new):
        jsonschema.validate(doc, schema)
    new["host_settings"]["ib_ports"] = [{"device": "mlx5_0", "port": 1, "state": "ACTIVE", "rate_gbps": 400.0,
                                         "fw_ver": "28.39.1002"}]
    for g in new["gpus"]:  # and what this single-GPU VM capture cannot show (an NVSwitch host's readings)
        g["fabric"] = {"state": "completed", "status": 0}
        g["pcie"] = {"gen": 5, "width": 16, "max_gen": 5, "max_width": 16, "replay_counter": 0}
    new["firmware"]["fabric_manager_version"] = "580.159.04"
    new["host_settings"]["cpu_governor"] = {"performance": 16}
    new["topology"]["worst_link_selected"] = "NV18"
    sample = {"category": "x1", "string": "x1", "Int64": 4, "Float64": 1.5, "boolean": True}
    new["host_settings"]["nearest_nic"] = {str(g["index"]): {"nic": "mlx5_0", "link": "PXB"} for g in new["gpus"]}
    for fact in (f for f in facts.FACTS if f.path):  # and every other fact declared by its path
        keyed = fact.scope == "gpu" and not fact.path.startswith("gpus#.")  # a host map keyed by GPU index
        *section, field = fact.path.removeprefix("gpus#.").split(".")
        if keyed:
            section, field = [*section, field][:-1], str(new["gpus"][0]["index"])
        for doc in new["gpus"] if fact.scope == "gpu" and not keyed else [new]:
            for step in section:
                doc = doc.setdefault(step, {}) if isinstance(doc.get(step), dict) or doc.get(step) is None else doc[step]
            if doc.get(field) is None:
                doc[field] = sample[fact.dtype]
    driver = next(c for c in new["contracts"] if c["name"] == "driver")
    driver.setdefault("evidence", {})["pci"] = {"on_bus": 1, "missing_from_nvml": []}
    run = write_run(tmp_path / "run", 1, {"old": old, "new": new})
    text = metrics_text(run)  # a host that read every fact: the export carries every fact's metric
    # (the speed tier's figures need the opt-in tier: tests/unit/test_speed_judge.py exports them)
    assert {f.metric.name for f in facts.FACTS if f.metric and f.history == "value"} <= _exported(text)
    _promtool_ok(text)
    keys = compare(load_fleet([run])).host_keys
    assert keys.at["old", "inforom"] == "not recorded" and keys.at["new", "inforom"] == "G520.0282.02.02"
    assert keys.at["new", "gsp_firmware"] == "580.159.04" and keys.at["old", "bios"] == "not recorded"


def test_impact_judges_typed_values_not_the_rendered_label(tmp_path, monkeypatch):
    """A label reworded ("gen5 x8" -> "PCIe 5.0, 8 lanes") keeps its impact: the rules read the widths."""
    def narrow(health):
        for g in health["gpus"]:
            g["pcie"] = {"gen": 5, "width": 8 if health is narrowed else 16, "max_gen": 5, "max_width": 16}
    healths = fleet_health(3)
    narrowed = healths["gpu03"]
    for h in healths.values():
        narrow(h)
    run = write_run(tmp_path / "run", 1, healths)
    pcie = facts.BY_NAME["pcie"]
    reworded = [facts.Fact(**{**f.__dict__, "render": lambda r: f"PCIe {r['pcie_max_gen']}.0, {r['pcie_width']} lanes"})
                if f is pcie else f for f in facts.FACTS]
    for name, value in facts.derived(tuple(reworded)).items():
        monkeypatch.setattr(facts, name, value)
    found = compare(load_fleet([run]))
    (difference,) = found.classes[1].differs
    assert difference.value == "PCIe 5.0, 8 lanes" and difference.reference == "PCIe 5.0, 16 lanes"
    assert "trained down to 8 lanes" in difference.impact and "50% of the reference's bandwidth" in difference.impact


def _ecc_off(health):
    for g in health["gpus"]:
        g["ecc"].update(current=False, pending_mode=False, pending=False)


def _persistence_off(health):
    for g in health["gpus"]:
        g["persistence_mode"] = False


@pytest.mark.parametrize("edit, key, impact", [
    (_ecc_off, "ecc", "ECC off: about 6% more usable memory"),
    (_persistence_off, "persistence", "persistence mode off: the driver tears the GPU state down"),
])
def test_on_off_labels_reworded_keep_their_impact(tmp_path, monkeypatch, edit, key, impact):
    """"on"/"off" reworded ("enabled"/"disabled") keeps the impact: the rules read the typed mode, not the text."""
    monkeypatch.setattr(fact_values, "onoff", lambda value, unknown="unknown":
                        unknown if value is None else ("enabled" if value else "disabled"))
    found = compare(load_fleet([write_run(tmp_path / "run", 1, fleet_health(3, gpu03=edit))]))
    (difference,) = [d for d in found.classes[1].differs if d.key == key]
    assert difference.value == "disabled" and difference.reference == "enabled"
    assert difference.impact.startswith(impact)


def _ports(*rates):
    def edit(health):
        health.setdefault("host_settings", {})["ib_ports"] = [
            {"device": f"mlx5_{i}", "port": 1, "state": "ACTIVE", "rate_gbps": rate, "fw_ver": "28.39.1002"}
            for i, rate in enumerate(rates)]
    return edit


def test_ib_rates_reworded_keep_the_slower_port_impact(tmp_path, monkeypatch):
    """The rule reads the typed port rates (slowest here, fastest on the reference), not the rates' text:
    text without a digit in it keeps the impact of a port trained down."""
    platform = rows_module._platform

    def reworded(health, contracts):
        row = platform(health, contracts)
        row["ib_rates"] = {"3x 400 Gb/s": "uniform", "2x 400 Gb/s + 1x 200 Gb/s": "mixed"}[row["ib_rates"]]
        return row
    monkeypatch.setattr(rows_module, "_platform", reworded)
    healths = fleet_health(3, gpu01=_ports(400.0, 400.0, 400.0), gpu02=_ports(400.0, 400.0, 400.0),
                           gpu03=_ports(400.0, 200.0, 400.0))
    found = compare(load_fleet([write_run(tmp_path / "run", 1, healths)]))
    (difference,) = [d for d in found.classes[1].differs if d.key == "ib_rate"]
    assert (difference.value, difference.reference) == ("mixed", "uniform")
    assert difference.impact.startswith("network ports at mixed instead of uniform: inter-node all-reduce runs at "
                                        "the slowest port's rate")
    hosts = load_fleet([write_run(tmp_path / "again", 1, healths)]).hosts.set_index("host")
    assert hosts.loc["gpu03", ["ib_slowest_gbps", "ib_fastest_gbps"]].tolist() == [200.0, 400.0]


def test_a_schema_1_0_record_is_read_through_one_normaliser(tmp_path):
    """Schema 1.0 named the ECC mode after reset `ecc.pending`: frames, export and expectations all see it."""
    def ecc_off_after_reset(health):
        for g in health["gpus"]:
            g["ecc"] = {"current": True, "pending": False, "volatile_uncorrected": 0}  # no pending_mode: 1.0
    healths = fleet_health(1, gpu01=ecc_off_after_reset)
    healths["gpu01"]["schema_version"] = "1.0"
    run = write_run(tmp_path / "run", 1, healths)
    assert load_fleet([run]).gpus["ecc_pending"].tolist() == [False]
    assert 'sweep_gpu_ecc_pending_enabled{gpu="0",host="gpu01"} 0' in metrics_text(run)
    exp = tmp_path / "expect.yml"
    exp.write_text("version: 1\ndefaults: {ecc: true}\n")
    (violation,) = evaluate_expectations(load_run(run).records, load_expectations(exp))
    assert violation.rule == "ecc" and "off after reset" in violation.message


def test_the_history_signature_covers_what_the_table_declares(monkeypatch):
    """Another column or dtype behind a fact rebuilds the index, not only another key name."""
    before = index_module._signature()
    pcie = facts.BY_NAME["pcie"]
    other = [facts.Fact(**{**f.__dict__, "columns": ("pcie_gen", "pcie_width")}) if f is pcie else f
             for f in facts.FACTS]
    for name, value in facts.derived(tuple(other)).items():
        monkeypatch.setattr(facts, name, value)
    assert index_module._signature() != before
    assert [f.name for f in facts.FACTS] == [f.name for f in other]  # same names, another declaration


@pytest.mark.parametrize("state", ["idle", "load", "fault"])
def test_the_inforom_image_agrees_with_nvidia_smi_of_its_session(state, tmp_path):
    """nvidia-smi owns the fact: the converted -smi capture's InfoROM image is the one its session's -q -x shows."""
    import xml.etree.ElementTree as ET
    capture = json.loads((ROOT / "sweep" / "demo" / "captures" / f"h200-{state}-smi.json").read_text())
    ours = _replay(capture, tmp_path)["gpus"][0]["inforom_image"]
    root = ET.parse(ROOT / "tests" / "fixtures" / "h200" / "smi-session" / state / "smi_qx.xml").getroot()
    assert ours is not None and ours == root.find("gpu/inforom_version/img_version").text


def test_every_expectations_key_of_the_table_is_one_rule_and_every_rule_a_fact_or_named():
    """A fact's `expect` is a rule an expectations file may set, declared once (expect_rules.TABLE, or a
    speed floor); a rule no fact names is a rule of its own, named here with why."""
    from sweep.audit import expect_rules as expect

    declared = [rule.name for rule in expect.TABLE]
    assert len(declared) == len(set(declared)), "a rule declared twice"
    keys = {f.expect.key for f in facts.FACTS if f.expect}
    assert keys <= set(expect.RULES), f"facts whose expectations key is no rule: {sorted(keys - set(expect.RULES))}"
    own = {"sm_clock_floor_mhz": "the median SM clock under load: a floor, not a comparability key"}
    assert set(expect.RULES) - keys == set(own)
    for rule in expect.TABLE:
        fact = next((f for f in facts.FACTS if f.expect and f.expect.key == rule.name), None)
        assert rule.scope == (fact.scope if fact else "gpu"), rule.name
        assert rule.name in (expect.GPU_RULES if rule.per_model else expect.HOST_RULES)
