"""Change-window audits: expectations, per-host baselines and `sweep diff RUN_A RUN_B`.

The fleet is 14 eight-GPU H200 hosts, each a capture derived (sweep.demo.synth) from the real H200
recording and replayed through the agent, written into two run folders around a change window.
"""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from probe_agent.main import main as agent_main
from sweep.demo import synth
from sweep.audit.baseline import audit_section, compare_to_baseline, read_baseline, set_baseline
from sweep.cli import main
from sweep.errors import ConfigError
from sweep.audit.expect import RULES, evaluate_expectations, load_expectations, resolve
from sweep.audit.rundiff import diff_runs, host_changes, render_html, render_terminal
from sweep.store import load_run, safe_name

ROOT = Path(__file__).resolve().parents[2]
EXPECT = ROOT / "tests" / "fixtures" / "expectations"
H200 = ROOT / "tests" / "fixtures" / "h200"
NEW_DRIVER = ("590.44.01", 13010)
HOSTS = [f"gpu{n:02d}" for n in range(1, 15)]
RACK_A = HOSTS[:7]
GROUPS = {h: ["all", "rack_a" if h in RACK_A else "rack_b"] for h in HOSTS}


def flat(text: str) -> str:
    """Terminal output with rich's line wrapping undone."""
    return " ".join(text.split())


# --- building run folders from replayed captures ---------------------------------------------


def swap_card(index: int, seed: str):
    """A new card at `index`: another UUID and serial, same PCI slot."""
    def edit(cap):
        cap["nvml"][f"gpu{index}.uuid"] = {"value": f"GPU-5ca1ab1e-0000-4000-8000-{abs(hash(seed)) % 10 ** 12:012d}"}
        cap["nvml"][f"gpu{index}.serial"] = {"value": "1659999000003"}
    edit.__doc__ = f"card swapped at GPU {index}"
    return edit


def busy():
    """What differs from probe to probe on a healthy busy host: clocks, heat, draw, memory, SW power cap."""
    def edit(cap):
        for i in range(synth.gpu_count(cap)):
            nv = cap["nvml"]
            nv[f"gpu{i}.temp"] = {"value": 61 + i}
            nv[f"gpu{i}.power_usage"] = {"value": 612000 + i}
            nv[f"gpu{i}.clock_sm"] = {"value": 1755}
            nv[f"gpu{i}.pstate"] = {"value": 0}
            nv[f"gpu{i}.util"] = {"value": {"gpu": 97, "memory": 40}}
            nv[f"gpu{i}.throttle_reasons"] = {"value": 0x4}  # SW power cap: never a change, never a finding
            mem = dict(nv[f"gpu{i}.mem"]["value"])
            mem["used"], mem["free"] = 80 << 30, mem["total"] - (80 << 30)
            nv[f"gpu{i}.mem"] = {"value": mem}
    edit.__doc__ = "busy"
    return edit


def replay(cap: dict, folder: Path) -> dict:
    path = synth.write(cap, folder / f"{cap['host']['hostname']}.capture.json")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert agent_main(["--replay", str(path)]) == 0
    return json.loads(out.getvalue())


def health_of(name: str, edits, folder: Path) -> dict:
    base = synth.base_capture("h200-idle")
    cap = synth.derive(base, [synth.multi_gpu(8), synth.identity(name), *edits], hostname=name)
    return replay(cap, folder)


def record(name, health=None, failure=None) -> dict:
    return {"record_version": 1, "host": name, "address": name + ".dc1", "status": "failed" if failure else "ok",
            "failure": {"class": failure[0], "message": failure[1]} if failure else None,
            "attempts": 1, "started_at": "2026-11-29T18:12:23.000Z", "ended_at": "2026-11-29T18:12:24.500Z",
            "duration_s": 1.5, "health": health}


def write_run(folder: Path, records: list[dict], groups=GROUPS, started="2026-11-29T18:12:23.000Z") -> Path:
    """A run folder as sweep.store lays it out, its manifest holding the inventory snapshot."""
    (folder / "hosts").mkdir(parents=True)
    names = [r["host"] for r in records]
    manifest = {"format": "sweep-run", "record_version": 1, "state": "complete", "started_at": started,
                "hosts": names, "inventory": {"path": "fleet.yml", "snapshot": {
                    "path": "fleet.yml", "hosts": [{"name": n, "groups": groups.get(n, ["all"])} for n in names],
                    "groups": {}}}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    for rec in records:
        (folder / "hosts" / f"{safe_name(rec['host'])}.json").write_text(json.dumps(rec, ensure_ascii=False))
    return folder


BEFORE_EDITS: dict[str, list] = {}
AFTER_EDITS: dict[str, list] = {
    **{h: [synth.driver(*NEW_DRIVER)] for h in RACK_A},     # the driver upgrade of rack_a
    "gpu08": [synth.ecc(False)],                              # ECC toggled off
    "gpu09": [synth.power_cap(500)],                          # power cap lowered
    "gpu10": [swap_card(3, "gpu10")],                         # a card swapped
}
REMOVED, NEWLY_DOWN, STILL_DOWN, UNTOUCHED = "gpu11", "gpu12", "gpu14", "gpu13"


@pytest.fixture(scope="module")
def window(tmp_path_factory):
    """(run A, run B) around the change window."""
    tmp = tmp_path_factory.mktemp("window")
    caps = tmp / "captures"
    before, after = [], []
    for name in HOSTS:
        if name == STILL_DOWN:
            before.append(record(name, failure=("refused", "connection refused on port 22")))
            after.append(record(name, failure=("refused", "connection refused on port 22")))
            continue
        before.append(record(name, health_of(name, BEFORE_EDITS.get(name, []), caps / "a")))
        if name == REMOVED:
            continue
        if name == NEWLY_DOWN:
            after.append(record(name, failure=("timeout", "no SSH banner within 10 s")))
            continue
        after.append(record(name, health_of(name, [busy(), *AFTER_EDITS.get(name, [])], caps / "b")))
    run_a = write_run(tmp / "run-a", before)
    run_b = write_run(tmp / "run-b", after, started="2026-12-06T18:12:23.000Z")
    return run_a, run_b


# --- Must show: the change window -------------------------------------------------------------


def test_run_diff_lists_exactly_the_changes_of_the_window(window):
    run_a, run_b = window
    diff = diff_runs(load_run(run_a), load_run(run_b))
    assert diff.added == []
    assert diff.removed == [REMOVED]
    assert diff.unreachable == [{"host": NEWLY_DOWN, "failure_class": "timeout",
                                 "failure_message": "no SSH banner within 10 s"}]
    assert diff.recovered == []
    assert diff.still_failing == [STILL_DOWN]
    assert diff.not_swept == []
    assert diff.unchanged == [UNTOUCHED]
    assert {h: sorted({c.kind for c in cs}) for h, cs in diff.changed.items()} == {
        **{h: ["driver"] for h in RACK_A}, "gpu08": ["ecc"], "gpu09": ["power"], "gpu10": ["gpu swap"]}

    def fields(host):
        return sorted((c.field, c.gpus, c.before, c.after) for c in diff.changed[host])

    a, b = load_run(run_a).records, load_run(run_b).records
    assert fields("gpu01") == [
        ("driver.cuda_driver_version", (), "13.0", "13.1"),
        ("driver.kernel_module", (), a["gpu01"]["health"]["driver"]["kernel_module"],
         a["gpu01"]["health"]["driver"]["kernel_module"].replace("580.159.04", "590.44.01")),
        ("driver.nvml_version", (), "13.580.159.04", "13.590.44.01"),
        ("driver.version", (), "580.159.04", "590.44.01")]
    mem_a = a["gpu08"]["health"]["gpus"][0]["memory_total_bytes"]
    mem_b = b["gpu08"]["health"]["gpus"][0]["memory_total_bytes"]
    all8 = tuple(range(8))
    assert fields("gpu08") == [("ecc.current", all8, True, False),
                               ("ecc.pending_mode", all8, True, False),
                               ("memory_total_bytes", all8, mem_a, mem_b)]
    assert fields("gpu09") == [("power.enforced_limit_w", all8, 700.0, 500.0),
                               ("power.management_limit_w", all8, 700.0, 500.0)]
    old3 = a["gpu10"]["health"]["gpus"][3]
    new3 = b["gpu10"]["health"]["gpus"][3]
    assert fields("gpu10") == [("serial", (3,), old3["serial"], "1659999000003"),
                               ("uuid", (3,), old3["uuid"], new3["uuid"])]
    assert diff.exit_code == 5
    assert diff.headline() == ("hosts: 1 removed, 1 newly unreachable, 10 changed; "
                               "changes: gpu swap (1), driver (7), ecc (1), power (1)")


def test_run_diff_json_html_and_terminal(window, tmp_path, capsys):
    run_a, run_b = window
    html = tmp_path / "diff.html"
    assert main(["diff", str(run_a), str(run_b), "--json", "--html", str(html)]) == 5
    out = json.loads(capsys.readouterr().out)
    assert out["hosts"]["removed"] == [REMOVED]
    assert [u["host"] for u in out["hosts"]["unreachable"]] == [NEWLY_DOWN]
    assert out["by_kind"] == {"gpu swap": ["gpu10"], "driver": RACK_A, "ecc": ["gpu08"], "power": ["gpu09"]}
    assert {c["kind"] for c in out["changes"]} == {"gpu swap", "driver", "ecc", "power"}
    assert {"host": "gpu09", "kind": "power", "field": "power.enforced_limit_w", "gpus": list(range(8)),
            "before": 700.0, "after": 500.0} in out["changes"]
    page = html.read_text()
    assert "<script" not in page and "://" not in page  # self-contained: no script, no URL
    assert "power.enforced_limit_w" in page and "gpu10" in page and "no SSH banner within 10 s" in page
    assert main(["diff", str(run_a), str(run_b)]) == 5
    text = capsys.readouterr().out
    assert "newly unreachable" in text and "gpu12 (timeout: no SSH banner within 10 s)" in text
    assert "ecc.current" in text and "gpu swap" in text
    assert main(["diff", str(run_a), str(run_a)]) == 0
    assert "no change between" in capsys.readouterr().out


def test_baseline_flags_exactly_the_drifted_hosts(window, tmp_path):
    run_a, run_b = window
    base = tmp_path / "baseline"
    result = set_baseline(run_a, base)
    assert result.added == [h for h in HOSTS if h != STILL_DOWN]
    assert [s["host"] for s in result.skipped] == [STILL_DOWN]
    assert sorted(p.name for p in (base / "hosts").iterdir()) == sorted(f"{h}.json" for h in result.added)
    stored = json.loads((base / "hosts" / "gpu01.json").read_text())
    assert stored["format"] == "sweep-baseline-host" and stored["baseline_version"] == 1
    assert stored["state"]["driver"] == "580.159.04" and len(stored["state"]["gpus"]) == 8

    cmp = compare_to_baseline(load_run(run_b), base)
    assert cmp.drifted_hosts == [*RACK_A, "gpu08", "gpu09", "gpu10"]
    assert cmp.absent == [REMOVED]
    assert [u["host"] for u in cmp.unjudged] == [NEWLY_DOWN]
    assert cmp.no_baseline == [STILL_DOWN]
    assert UNTOUCHED in cmp.compared
    by_host = {d.host: d for d in cmp.drift}
    assert {d.host: d.kind for d in cmp.drift} == {**{h: "driver" for h in RACK_A}, "gpu08": "ecc",
                                                   "gpu09": "power", "gpu10": "gpu swap"}
    old3 = load_run(run_a).records["gpu10"]["health"]["gpus"][3]
    new3 = load_run(run_b).records["gpu10"]["health"]["gpus"][3]
    assert by_host["gpu10"].message == (f"gpu10: the card at GPU 3 was swapped: serial {old3['serial']} "
                                        f"({old3['uuid']}) -> serial 1659999000003 ({new3['uuid']})")
    assert by_host["gpu01"].message == "gpu01: driver changed: driver 580.159.04 -> 590.44.01 (+3 more fields)"
    assert by_host["gpu08"].message == ("gpu08: ecc changed: ECC mode on -> off on GPUs 0-7; ECC mode after reset "
                                        f"on -> off on GPUs 0-7; memory_total_bytes "
                                        f"{old3['memory_total_bytes']} -> "
                                        f"{load_run(run_b).records['gpu08']['health']['gpus'][0]['memory_total_bytes']}"
                                        " on GPUs 0-7")
    assert by_host["gpu09"].message == ("gpu09: power changed: enforced power limit (W) 700 -> 500 on GPUs 0-7; "
                                        "power limit (W) 700 -> 500 on GPUs 0-7")
    assert cmp.exit_code == 5
    assert compare_to_baseline(run_a, base).drift == []


def test_expectations_flag_the_hosts_off_the_approved_driver(window):
    _, run_b = window
    exp = load_expectations(EXPECT / "fleet.yml")
    findings = evaluate_expectations(load_run(run_b).records, exp)
    rack_b_up = ["gpu08", "gpu09", "gpu10", UNTOUCHED]
    assert [f.host for f in findings if f.rule == "driver"] == rack_b_up
    assert sorted((f.host, f.rule) for f in findings) == sorted(
        [(h, "driver") for h in rack_b_up] + [("gpu08", "ecc"), ("gpu09", "power_limit_w")])
    by = {(f.host, f.rule): f for f in findings}
    where = f"{EXPECT / 'fleet.yml'}"
    detail = (f"driver 580.159.04 is not approved; expected 590.44.01 ({where}:4); install an "
              "approved driver, or approve this one in the expectations file")
    assert by["gpu13", "driver"].as_dict() == {
        "host": "gpu13", "rule": "driver", "expected": ["590.44.01"], "actual": "580.159.04",
        "message": f"gpu13: {detail}",
        "detail": detail}  # the host beside the text, for the verdict (issue 48)
    assert by["gpu09", "power_limit_w"].message == (
        f"gpu09: enforced power limit 500 W on GPUs 0-7; expected 700 W ({where}:11); sudo nvidia-smi -i 0-7 -pl 700")
    assert by["gpu08", "ecc"].message == (
        f"gpu08: ECC off on GPUs 0-7; expected ECC on ({where}:5); sudo nvidia-smi -i 0-7 -e 1, then reset the "
        "GPUs or reboot")
    assert by["gpu08", "ecc"].expected is True and by["gpu08", "ecc"].actual is False


def test_audit_section_shape_and_exit_code(window, tmp_path):
    run_a, run_b = window
    base = tmp_path / "baseline"
    set_baseline(run_a, base)
    section = audit_section(run_b, EXPECT / "fleet.yml", base)
    assert section["schema"] == "sweep.audit/1"
    assert section["exit_code"] == 1  # two hosts of the run were not judged: that comes first (exitcodes.py)
    assert section["hosts_listed"] == 13
    assert section["unjudged"] == [{"host": "gpu12", "reason": "no health.json (timeout)"},
                                   {"host": "gpu14", "reason": "no health.json (refused)"}]
    assert section["expectations"]["hosts_off"] == ["gpu08", "gpu09", "gpu10", "gpu13"]
    assert section["expectations"]["unjudged"] == [{"host": "gpu12", "reason": "no health.json (timeout)"},
                                                   {"host": "gpu14", "reason": "no health.json (refused)"}]
    assert section["expectations"]["hosts_judged"] == 11
    assert section["baseline"]["drifted_hosts"] == [*RACK_A, "gpu08", "gpu09", "gpu10"]
    assert section["headline"] == [
        "4 hosts off expectations (driver, ecc, power_limit_w): gpu[08-10,13]",
        "10 hosts drifted from the baseline (driver, ecc, gpu swap, power): gpu[01-10]",
        "2 hosts of the run not judged: gpu[12,14]; the audit covers 11 of 13 hosts"]
    json.dumps(section)  # summary.json-ready
    assert audit_section(run_a)["exit_code"] == 0
    assert audit_section(run_a, baseline_dir=base)["baseline"]["drift"] == []


def test_baseline_cli_set_show_check_and_later_hosts(window, tmp_path, capsys):
    run_a, run_b = window
    base = tmp_path / "bl"
    assert main(["baseline", "set", str(run_a), "-o", str(base)]) == 0
    assert "13 added, 0 updated, 0 kept" in flat(capsys.readouterr().out)
    assert main(["baseline", "show", "--baseline", str(base), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["host"] for r in rows][:3] == ["gpu01", "gpu02", "gpu03"]
    assert rows[0]["driver"] == "580.159.04" and rows[0]["ecc"] == "on" and rows[0]["power_limit_w"] == "700"
    assert main(["baseline", "show", "--baseline", str(base)]) == 0
    assert main(["baseline", "check", str(run_a), "--baseline", str(base)]) == 0
    assert main(["baseline", "check", str(run_b), "--baseline", str(base)]) == 5
    assert "gpu09: power changed" in flat(capsys.readouterr().out)

    # a host that joins later gets its own file; the others stay as they were unless --update
    joined = tmp_path / "run-c"
    recs = [json.loads(p.read_text()) for p in sorted((run_b / "hosts").glob("*.json"))]
    recs.append(record("gpu15", health_of("gpu15", [], tmp_path / "caps")))
    write_run(joined, recs, groups={**GROUPS, "gpu15": ["all", "rack_b"]})
    result = set_baseline(joined, base)
    assert result.added == ["gpu15"] and result.updated == []
    assert read_baseline(base)["gpu01"]["state"]["driver"] == "580.159.04"
    result = set_baseline(joined, base, update=True, hosts=["gpu01"])
    assert result.updated == ["gpu01"] and result.added == []
    assert read_baseline(base)["gpu01"]["state"]["driver"] == "590.44.01"
    assert compare_to_baseline(joined, base).drifted_hosts == ["gpu02", "gpu03", "gpu04", "gpu05", "gpu06",
                                                               "gpu07", "gpu08", "gpu09", "gpu10"]


def test_cli_errors_exit_2(window, tmp_path, capsys):
    run_a, _ = window
    assert main(["baseline", "check", str(run_a), "--dir", str(tmp_path / "none")]) == 2
    assert flat(capsys.readouterr().err).startswith(
        f"sweep: error: {tmp_path / 'none'}: no baseline here (no baseline.json); record one first:")
    assert main(["diff", str(run_a), str(H200 / "idle.health.json")]) == 2
    assert "cannot compare a run folder with a file" in flat(capsys.readouterr().err)
    assert main(["diff", str(run_a), str(tmp_path)]) == 2
    assert "is not a sweep run folder (no manifest.json)" in flat(capsys.readouterr().err)
    # two health.json files: the probe diff, as before
    assert main(["diff", str(H200 / "idle.health.json"), str(H200 / "load.health.json"), "--json"]) == 0
    assert isinstance(json.loads(capsys.readouterr().out)["changes"], list)


def test_baseline_version_is_checked(window, tmp_path):
    run_a, _ = window
    base = tmp_path / "b"
    set_baseline(run_a, base)
    path = base / "hosts" / "gpu01.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps(dict(data, baseline_version=2)))
    with pytest.raises(ConfigError) as err:
        read_baseline(base)
    assert str(err.value) == (f"{base}: hosts/gpu01.json has baseline version 2; this sweep reads version 1; "
                              "use the sweep version that wrote it, or set a new baseline in another folder (-o)")


# --- GPUs gone, hostile host names, volatile fields -------------------------------------------


def test_a_gpu_off_the_bus_is_missing_not_eight_swaps(window):
    run_a, _ = window
    before = load_run(run_a).records["gpu13"]["health"]
    after = json.loads(json.dumps(before))
    gone = after["gpus"].pop(3)
    for g in after["gpus"][3:]:
        g["index"] -= 1
    after["driver"]["gpu_count"] = 7
    changes = [c for c in host_changes(before, after) if c.kind == "gpus"]
    assert [(c.field, c.gpus, c.before, c.after) for c in changes] == [
        ("driver.gpu_count", (), 8, 7),
        ("gpu", (3,), {"index": 3, "uuid": gone["uuid"], "serial": gone["serial"], "name": "NVIDIA H200"}, None),
        ("index", (4,), 4, 3), ("index", (5,), 5, 4), ("index", (6,), 6, 5), ("index", (7,), 7, 6)]
    assert not [c for c in host_changes(before, after) if c.kind == "gpu swap"]


def test_volatile_fields_are_not_changes(window):
    run_a, _ = window
    before = load_run(run_a).records["gpu13"]["health"]
    after = json.loads(json.dumps(before))
    for g in after["gpus"]:
        g["clocks"]["sm_mhz"] = 1980
        g["temperature_c"] = 80
        g["power"]["draw_w"] = 699.0
        g["memory_used_bytes"] = 1 << 36
        g["clock_event_reasons"]["active"] = ["sw_power_cap"]
        g["processes"] = [{"pid": 1, "name": "python3", "used_memory_bytes": 1 << 30}]
    after["probe"]["started_at"], after["probe"]["duration_s"] = "2027-01-01T00:00:00Z", 9.9
    after["load"] = {"summary": [{"gpu": 0, "sm_mhz_median": 1500.0}]}
    assert host_changes(before, after) == []


def test_host_names_are_escaped_in_terminal_and_html(window, tmp_path):
    run_a, _ = window
    health = load_run(run_a).records["gpu13"]["health"]
    evil = "gpu[bold]<script>x</script>\x1b[31m"
    upgraded = json.loads(json.dumps(health))
    upgraded["driver"]["version"] = "590.44.01"
    a = write_run(tmp_path / "a", [record(evil, health)])
    b = write_run(tmp_path / "b", [record(evil, upgraded)])
    diff = diff_runs(load_run(a), load_run(b))
    assert list(diff.changed) == [evil]
    from rich.console import Console

    buf = io.StringIO()
    render_terminal(diff, Console(file=buf, width=300, color_system=None, highlight=False))
    text = buf.getvalue()
    assert "gpu[bold]<script>x</script>\\x1b[31m" in text and "\x1b" not in text
    page = render_html(diff)
    assert "<script>" not in page and "\x1b" not in page
    assert "gpu[bold]&lt;script&gt;x&lt;/script&gt;\\x1b[31m" in page


# --- expectations: precedence, load floor, errors ---------------------------------------------


def write_yaml(tmp_path, text: str) -> Path:
    path = tmp_path / "exp.yml"
    path.write_text(text)
    return path


def test_precedence_defaults_models_groups_hosts(tmp_path):
    path = write_yaml(tmp_path, "\n".join([
        "defaults: {power_limit_w: 700, driver: '580.*'}",
        "models: {'NVIDIA H200': {power_limit_w: 650}}",
        "groups: {rack_b: {power_limit_w: 600}, rack_c: {power_limit_w: 550}}",
        "hosts: {'gpu1*': {power_limit_w: 500}, gpu13: {power_limit_w: ~}}", ""]))
    exp = load_expectations(path)
    assert resolve(exp, "gpu01", ["rack_a"])["power_limit_w"].value == 700.0
    assert resolve(exp, "gpu01", ["rack_a"], "NVIDIA H200")["power_limit_w"].value == 650.0
    assert resolve(exp, "gpu01", ["rack_b"], "NVIDIA H200")["power_limit_w"] == \
        load_expectations(path).groups["rack_b"]["power_limit_w"]
    assert resolve(exp, "gpu02", ["rack_b", "rack_c"], "NVIDIA H200")["power_limit_w"].value == 550.0
    assert resolve(exp, "gpu12", ["rack_b"], "NVIDIA H200")["power_limit_w"].where == f"{path}:4"
    assert "power_limit_w" not in resolve(exp, "gpu13", ["rack_b"], "NVIDIA H200")
    assert resolve(exp, "gpu13", ["rack_b"])["driver"].value == ["580.*"]


def test_sm_clock_floor_is_judged_under_load_only_and_sw_power_cap_is_no_finding(tmp_path):
    load = json.loads((H200 / "load.health.json").read_text())
    idle = json.loads((H200 / "idle.health.json").read_text())
    assert load["load"]["summary"][0]["sw_power_cap_fraction"] > 0.5  # capped most of the time: fine
    recs = [record("loaded", load), record("idle", idle)]
    exp = load_expectations(write_yaml(tmp_path, "defaults:\n  sm_clock_floor_mhz: 1400\n"))
    assert evaluate_expectations(recs, exp) == []
    exp = load_expectations(write_yaml(tmp_path, "defaults:\n  sm_clock_floor_mhz: 1600\n"))
    [f] = evaluate_expectations(recs, exp)
    summary = load["load"]["summary"][0]
    median, cap = summary["sm_mhz_median"], round(100 * summary["sw_power_cap_fraction"])
    assert dict(f.as_dict(), detail=None) == {
        "host": "loaded", "rule": "sm_clock_floor_mhz", "expected": 1600.0, "actual": float(median), "detail": None,
        "message": f"loaded: median SM clock under load {median:g} MHz on GPU 0, below the floor (power cap {cap}% of "
                   f"samples, HW slowdown 0% of samples, SW thermal 0% of samples); expected at least 1600 MHz "
                   f"({tmp_path / 'exp.yml'}:2); check cooling, power delivery and clock settings on that GPU"}


def test_mig_persistence_and_pending_ecc(tmp_path):
    h = json.loads((H200 / "idle.health.json").read_text())
    h["gpus"][0]["persistence_mode"] = False
    h["gpus"][0]["ecc"]["pending"] = h["gpus"][0]["ecc"]["pending_mode"] = False
    h["gpus"][0]["mig"] = {"current": True, "pending": True, "devices": []}
    h["gpus"][0]["mig_layout"] = "3g.71gb+3g.71gb"
    exp = load_expectations(write_yaml(tmp_path, "defaults: {persistence: yes, ecc: on, mig_layout: off}\n"))
    got = {f.rule: f.actual for f in evaluate_expectations([record("h", h)], exp)}
    assert got == {"persistence": False, "ecc": "on, off after reset", "mig_layout": "3g.71gb+3g.71gb"}
    exp = load_expectations(write_yaml(tmp_path, "defaults: {mig_layout: [3g.71gb, 3g.71gb]}\n"))
    assert evaluate_expectations([record("h", h)], exp) == []


def test_error_yaml_syntax_names_file_and_line():
    path = EXPECT / "bad-syntax.yml"
    with pytest.raises(ConfigError) as err:
        load_expectations(path)
    assert str(err.value) == (f"{path}:4: not valid YAML: did not find expected ',' or ']' (while parsing "
                              "a flow sequence that starts on line 3); fix the YAML there (indentation, a missing "
                              "':' or an unclosed quote)")


def test_error_unknown_key_names_file_line_and_valid_keys():
    path = EXPECT / "unknown-key.yml"
    with pytest.raises(ConfigError) as err:
        load_expectations(path)
    assert str(err.value) == (f"{path}:6: unknown key 'power_limt_w' in groups.rack_a; did you mean "
                              f"'power_limit_w'? valid keys: {', '.join(sorted(RULES))}")
    # the keys are the rules the fact table declares (a fact added there is one more), and these at least
    assert {"allreduce_gbps_min", "driver", "gpus", "power_limit_w", "sm_clock_floor_mhz", "vbios"} <= set(RULES)


def test_error_wrong_type_names_file_line_and_key():
    path = EXPECT / "wrong-type.yml"
    with pytest.raises(ConfigError) as err:
        load_expectations(path)
    assert str(err.value) == (f"{path}:4: groups.rack_a.power_limit_w must be a number of watts, not a string "
                              "('700W'); write e.g. power_limit_w: 700")


def test_every_expectations_error_is_said_at_once(tmp_path):
    """Three mistakes on three lines: one error names all three, each with its line and fix (it used to
    name the first only, so the operator fixed one, ran again, met the next)."""
    path = write_yaml(tmp_path, "version: 1\ndefaults:\n  drivr: ['590.44.01']\ngroups:\n  rack_a:\n"
                                "    power_limit_w: 700W\nhosts:\n  gpu0*:\n    ecc: maybe\n")
    with pytest.raises(ConfigError) as err:
        load_expectations(path)
    said = str(err.value)
    assert said.startswith(f"{path}: 3 mistakes: {path}:3: unknown key 'drivr' in defaults (did you mean "
                           "'driver'? valid keys: "), said
    assert (f"; {path}:6: groups.rack_a.power_limit_w must be a number of watts, not a string ('700W') "
            "(write e.g. power_limit_w: 700); ") in said, said
    assert f"; {path}:9: hosts.gpu0*.ecc must be true or false, not a string ('maybe') (write ecc: true or " \
           "ecc: false); fix each line named" in said, said


@pytest.mark.parametrize("text, message", [
    ("grups: {}\n", "{p}:1: unknown key 'grups' at the top level; did you mean 'groups'? valid keys: version, "
                    "defaults, models, groups, hosts, drain"),
    ("defaults:\n  driver: 580.95\n", "{p}:2: defaults.driver must be a driver version (glob) or a list of them, "
                                      "not a number (580.95) (quote version numbers); write e.g. driver: "
                                      "['590.44.01', '580.*']"),
    ("defaults:\n  ecc: required\n", "{p}:2: defaults.ecc must be true or false, not a string ('required'); "
                                     "write ecc: true or ecc: false"),
    ("models:\n  NVIDIA H200:\n    driver: ['1']\n",
     "{p}:3: 'driver' is a host rule and cannot be set per GPU model (models.NVIDIA H200); set it under "
     "defaults, groups or hosts"),
    ("version: 2\ndefaults: {ecc: true}\n", "{p}:1: version 2 is not supported (this sweep reads version 1); "
                                            "write version: 1"),
    ("defaults:\n  ecc: true\n  ecc: false\n", "{p}:3: key 'ecc' appears twice (first on line 2); keep one of them"),
    ("", "{p}:1: must be a mapping with defaults, models, groups, hosts, not null; start from "
         "inventories/expectations.example.yml"),
    ("defaults: {}\n", "{p}:1: holds no rule; add rules under defaults, models, groups or hosts"),
    ("defaults:\n  gpu_count: 0\n", "{p}:2: defaults.gpu_count must be above 0, not 0; write e.g. gpu_count: 8"),
])
def test_error_messages(tmp_path, text, message):
    path = write_yaml(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_expectations(path)
    assert str(err.value) == message.format(p=path)


def test_example_expectations_file_is_valid():
    exp = load_expectations(ROOT / "inventories" / "expectations.example.yml")
    assert exp.rule_count > 5


def test_groups_come_from_the_manifest_snapshot(window, tmp_path):
    _, run_b = window
    path = write_yaml(tmp_path, "\n".join([
        "groups:", "  rack_a: {driver: ['590.44.01']}", "  rack_b: {driver: ['580.159.*']}", ""]))
    assert evaluate_expectations(load_run(run_b).records, load_expectations(path)) == []
    recs = {h: dict(r, groups=["rack_a"]) for h, r in load_run(run_b).records.items()}  # the record's own win
    assert [f.host for f in evaluate_expectations(recs, load_expectations(path))] == [
        "gpu08", "gpu09", "gpu10", "gpu13"]


def test_added_recovered_and_not_swept_hosts(window, tmp_path):
    run_a, _ = window
    recs = load_run(run_a).records
    a = write_run(tmp_path / "a", [recs["gpu13"], record("gpu20", failure=("refused", "down")),
                                   recs["gpu01"]])
    b_records = [recs["gpu13"], dict(recs["gpu01"], host="gpu20"), recs["gpu10"]]
    b = write_run(tmp_path / "b", b_records)
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["hosts"].append("gpu01")  # listed, never swept: an interrupted run
    (b / "manifest.json").write_text(json.dumps(manifest))
    diff = diff_runs(load_run(a), load_run(b))
    assert (diff.added, diff.removed, diff.recovered, diff.not_swept, diff.unchanged) == (
        ["gpu10"], [], ["gpu20"], ["gpu01"], ["gpu13"])
    assert diff.changed == {} and diff.exit_code == 5


# --- an audit never passes what it did not judge (issue 22, item 4) ----------------------------


def test_audit_names_the_hosts_it_did_not_judge_and_exits_1(window, tmp_path, capsys):
    run_a, _ = window
    recs = load_run(run_a).records
    down = [record(f"gpu{n:02d}", failure=("timeout", "no SSH banner within 10 s")) for n in (6, 7, 8)]
    run = write_run(tmp_path / "run", [recs[f"gpu0{n}"] for n in range(1, 6)] + down)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["hosts"].append("gpu09")  # listed, never swept: an interrupted run
    (run / "manifest.json").write_text(json.dumps(manifest))
    expect = write_yaml(tmp_path, "defaults: {ecc: true, driver: ['580.*']}\n")
    assert main(["audit", str(run), "--expect", str(expect)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "gpu[06-08]: not judged: no health.json (timeout)",
        "gpu09: not judged: no record (not swept)",
        "none of the 5 judged hosts is off its expectations or baseline",
        "4 hosts of the run not judged: gpu[06-09]; the audit covers 5 of 9 hosts"]
    assert main(["audit", str(run), "--expect", str(expect), "--json"]) == 1
    section = json.loads(capsys.readouterr().out)
    assert section["exit_code"] == 1 and section["expectations"]["hosts_judged"] == 5
    assert [u["host"] for u in section["unjudged"]] == ["gpu06", "gpu07", "gpu08", "gpu09"]
    # every host judged: the same file passes, exit 0
    whole = write_run(tmp_path / "whole", [recs[f"gpu0{n}"] for n in range(1, 6)])
    assert main(["audit", str(whole), "--expect", str(expect)]) == 0
    assert capsys.readouterr().out.splitlines() == ["no host is off its expectations or baseline"]


def test_an_audit_against_a_baseline_names_the_hosts_without_one(window, tmp_path, capsys):
    run_a, _ = window
    base = tmp_path / "bl"
    set_baseline(run_a, base, hosts=["gpu01", "gpu02"])
    recs = load_run(run_a).records
    run = write_run(tmp_path / "run", [recs["gpu01"], recs["gpu02"], recs["gpu03"]])
    assert main(["audit", str(run), "--baseline", str(base)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"gpu03: not judged: no baseline (sweep baseline set RUN -o {base} adds it)",
        "none of the 2 judged hosts is off its expectations or baseline",
        "1 host of the run not judged: gpu03; the audit covers 2 of 3 hosts"]


def test_expectations_naming_no_audited_host_or_group_warn_with_file_and_line(window, tmp_path, capsys):
    _, run_b = window
    expect = write_yaml(tmp_path, "\n".join([
        "defaults: {ecc: true}",
        "groups:",
        "  rack_a: {persistence: true}",
        "  rack_c: {power_limit_w: 600}",
        "hosts:",
        "  'gpu0*': {ecc: true}",
        "  gpu99: {ecc: false}", ""]))
    main(["audit", str(run_b), "--expect", str(expect)])
    warned = [line for line in capsys.readouterr().err.splitlines() if line.startswith("sweep: warning:")]
    assert warned == [
        f"sweep: warning: {expect}:4: groups.rack_c is the group of none of the 13 audited hosts, so its rules "
        "judge nothing; fix the name, or remove it if it is not in this fleet",
        f"sweep: warning: {expect}:7: hosts.gpu99 matches none of the 13 audited hosts, so its rules judge "
        "nothing; fix the name, or remove it if it is not in this fleet"]
    assert main(["audit", str(run_b), "--expect", str(expect), "--json"]) == 1
    unmatched = json.loads(capsys.readouterr().out)["expectations"]["unmatched"]
    assert [(u["section"], u["name"], u["where"]) for u in unmatched] == [
        ("groups", "rack_c", f"{expect}:4"), ("hosts", "gpu99", f"{expect}:7")]


def test_baseline_set_takes_only_the_hosts_the_verdict_calls_healthy_and_names_those_left_out(tmp_path, capsys):
    """A 250 W cap (gpu03, broken contract) and an Xid 79 (gpu04) are no known-good state: `sweep baseline set`
    names each with its state and cause and takes the rest (gpu02, a 7-GPU host, is healthy in a class of its own);
    --unhealthy takes them (issue 49)."""
    import fleet_variants as fv

    variants = {"gpu02": lambda h: fv.rejudge(dict(h, gpus=h["gpus"][:7])), "gpu03": lambda h: fv.power_cap(h, 250.0),
                "gpu04": lambda h: fv.xid(h, 79)}
    records = [fv.record(n, variants.get(n, lambda h: h)(fv.h200(8, n))) for n in ("gpu01", "gpu02", "gpu03", "gpu04",
                                                                                    "gpu05")]
    run = fv.write_run(tmp_path / "run", records)
    assert main(["baseline", "set", str(run), "-o", str(tmp_path / "base")]) == 0
    out = capsys.readouterr().out
    assert sorted(read_baseline(tmp_path / "base")) == ["gpu01", "gpu02", "gpu05"]
    skipped = {line.split()[1].rstrip(":"): line for line in out.splitlines() if line.startswith("skipped ")}
    assert sorted(skipped) == ["gpu03", "gpu04"]
    assert "broken: power: GPU 0-7: enforced power limit 250 W is below the default 700 W" in skipped["gpu03"]
    assert "--unhealthy" in skipped["gpu03"] and skipped["gpu04"].startswith("skipped gpu04: broken")
    assert main(["baseline", "set", str(run), "-o", str(tmp_path / "all"), "--unhealthy"]) == 0
    assert sorted(read_baseline(tmp_path / "all")) == ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"]
