"""Comparability classes, health findings, exit codes and the written report, on crafted fleets."""
import csv
import json
import re
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings, strategies as st

import fleet_variants as fv
from sweep.report import build as report_module
from sweep.judgment import assess
from sweep.analysis.verdict import make_verdict
from sweep.analysis.compare import compare, fold_hosts, impact
from sweep.errors import ConfigError, InventoryWarning
from sweep.analysis.fleet import load_fleet
from sweep.report.build import build_report


def fleet_of(tmp_path, records):
    fv.write_run(tmp_path / "run", records)
    return load_fleet([tmp_path / "run"])


def healthy(names, n_gpus=2):
    return [fv.record(n, fv.h200(n_gpus, n)) for n in names]


@pytest.fixture(scope="module")
def must_show(tmp_path_factory):
    """The Must-show fleet, reported: (ReportResult, summary.json as read back from disk)."""
    base = tmp_path_factory.mktemp("must-show")
    fv.write_run(base / "run", fv.must_show_fleet())
    result = build_report([base / "run"], base / "report")
    return result, json.loads((base / "report" / "summary.json").read_text())


def by_host(summary):
    """host -> its class dict (hosts in a class), for the classes of a summary."""
    return {h: c for c in summary["classes"] for h in c["hosts"]}


def test_must_show_rest_form_one_comparable_pool(must_show):
    _, summary = must_show
    ref = summary["reference_class"]
    assert ref["hosts"] == fv.reference_pool()
    assert ref["size"] == 27 and ref["chosen_by"] == "largest class"
    assert ref["folded"] == "gpu[01-04,06,10-11,13-18,20,23-24,27-30,35-41]"
    assert ref["keys"]["driver"] == "580.159.04" and ref["keys"]["power_limit"] == "700 W"
    assert summary["comparable"] is False and summary["exit_code"] == 1
    assert [c["id"] for c in summary["classes"]] == list("ABCDEFG")


@pytest.mark.parametrize("hosts, key, value, reference, words", [
    (["gpu31", "gpu32", "gpu33", "gpu34"], "driver", "590.44.01", "580.159.04", "not comparable"),
    (["gpu05", "gpu12", "gpu19"], "ecc", "off", "on", "6% more usable memory"),
    (["gpu07", "gpu08"], "power_limit", "250 W (default 700 W)", "700 W", "SM clock it loses"),
    (["gpu09"], "power_limit", "700 W x7, 250 W x1 (GPU 3)", "700 W", "slowest GPU"),
    (["gpu21"], "mig", "on: 2x 3g.71gb", "off", "a slice"),
    (["gpu22"], "mig", "on: 7x 1g.18gb", "off", "a slice"),
])
def test_must_show_each_odd_host_is_named_with_its_reason(must_show, hosts, key, value, reference, words):
    _, summary = must_show
    classes = by_host(summary)
    cls = classes[hosts[0]]
    assert cls["hosts"] == hosts
    differs = {d["key"]: d for d in cls["differs"]}
    assert differs[key]["value"] == value and differs[key]["reference"] == reference
    assert words in differs[key]["impact"]
    if key == "driver":
        assert set(differs) == {"driver", "cuda_driver"}
    else:
        assert set(differs) == {key}


def test_must_show_hosts_that_cannot_run_or_answer_are_kept_out(must_show):
    _, summary = must_show
    classes = by_host(summary)
    assert [(e["host"], e["contract"]) for e in summary["excluded"]] == [("gpu25", "device_mask"),
                                                                        ("gpu26", "framework")]
    assert "CUDA_VISIBLE_DEVICES=''" in summary["excluded"][0]["message"]
    assert "CPU-only" in summary["excluded"][1]["message"]
    assert [(u["host"], u["failure_class"]) for u in must_show[0].summary["unreachable"]] == [
        ("gpu42", "refused"), ("gpu43", "timeout"), ("gpu44", "host_key_changed")]  # one entry per host, in memory
    assert [(u["folded"], u["failure_class"]) for u in summary["unreachable"]] == [
        ("gpu42", "refused"), ("gpu43", "timeout"), ("gpu44", "host_key_changed")]  # folded in summary.json
    for host in ("gpu25", "gpu26", "gpu42", "gpu43", "gpu44"):
        assert host not in classes


def test_must_show_health_findings(must_show):
    summary = must_show[0].summary  # the findings one per host (summary.json folds them)
    found = {(f["host"], f["kind"]): f for f in summary["findings"]}
    assert found[("gpu16", "hw_thermal_slowdown")]["message"] == (
        "gpu16: HW thermal slowdown active on GPU 5 (SM 1125 of 1980 MHz, 92 C)")
    assert found[("gpu16", "hw_thermal_slowdown")]["severity"] == "broken"
    assert found[("gpu14", "foreign_process")]["message"] == (
        "gpu14: 1 other process on the GPUs: python3 (pid 4242, 8192 MiB) on GPU 2")
    assert found[("gpu09", "mixed_gpus")]["detail"] == (
        "the selected GPUs differ: Power limit 700 W x7, 250 W x1 (GPU 3)")
    assert found[("gpu25", "lowest_broken")]["contract"] == "device_mask"
    assert found[("gpu42", "unreachable")]["detail"] == "refused: connection refused on port 22"
    # comparable, but not healthy: in the reference class, held out of the pool, each with its reason
    assert {"gpu14", "gpu16"} <= set(summary["reference_class"]["hosts"])
    assert not {"gpu14", "gpu16"} & set(summary["pool"]["hosts"])
    assert [(h["host"], h["cause"]) for h in summary["held_out"]] == [
        ("gpu14", "1 other process on the GPUs: python3 (pid 4242, 8192 MiB) on GPU 2"),
        ("gpu16", "HW thermal slowdown active on GPU 5 (SM 1125 of 1980 MHz, 92 C)")]
    assert summary["pool"]["hosts"] == [h for h in fv.reference_pool() if h not in ("gpu14", "gpu16")]
    broken = sorted({f["host"] for f in summary["findings"] if f["kind"] == "lowest_broken"})
    assert broken == ["gpu07", "gpu08", "gpu09", "gpu16", "gpu25", "gpu26"]


def test_must_show_headline(must_show):
    result, summary = must_show
    # each host counted once, in its state, as the terminal's state lines count it (issue 48)
    assert result.headline == (
        "Not one pool: 7 comparability classes: the pool is gpu[01-04,06,10-11,13,15,17-18,20,23-24,27-30,35-41] "
        "(25 of 44 hosts); 9 hosts in 6 other classes "
        "differ in Driver, CUDA (driver), ECC, Power limit, MIG; 1 held out for health; "
        "4 broken; 2 cannot run a benchmark; 3 unreachable.")  # the hosts and causes: on lines of their own
    # one headline: summary.json's is the terminal's (issue 48); the detail names each host's cause
    assert summary["headline"] == result.summary["headline"] == result.headline
    assert summary["verdict_detail"] == (
        "The pool is gpu[01-04,06,10-11,13,15,17-18,20,23-24,27-30,35-41] "
        "(25 of 44 hosts); 9 hosts in 6 other classes "
        "differ in Driver, CUDA (driver), ECC, Power limit, MIG; 1 held out for health (gpu14: 1 other "
        "process on the GPUs: python3 (pid 4242, 8192 MiB) on GPU 2); 4 broken (gpu07: GPU 0-7: enforced power "
        "limit 250 W is below the default 700 W; gpu08: GPU 0-7: enforced power limit 250 W is below the default "
        "700 W; gpu09: GPU 3: enforced power limit 250 W is below the default 700 W; gpu16: HW thermal slowdown "
        "active on GPU 5 (SM 1125 of 1980 MHz, 92 C)); 2 cannot run a benchmark; 3 unreachable.")


def test_report_folder_holds_every_output(must_show):
    result, summary = must_show
    out = result.out_dir
    assert sorted(p.name for p in out.iterdir()) == ["broken.nodeset", "broken.txt", "drain.sh", "fleet.csv", "held_out.nodeset", "held_out.txt",
                                                     "hosts.csv", "kubectl.sh", "pool.nodeset", "pool.txt",
                                                     "report.html", "resume.sh", "summary.json", "summary.md"]
    # the pool and the held-out hosts, one per line, as --limit @FILE reads them
    assert (out / "pool.txt").read_text().splitlines() == summary["pool"]["hosts"]
    assert (out / "held_out.txt").read_text() == "gpu14\ngpu16\n"
    assert summary["schema"] == "sweep.summary/2"  # its per-host lists folded (issue 41)
    assert {"comparable", "hosts_total", "hosts_ok", "unreachable", "reference_class", "classes", "excluded",
            "findings", "exit_code"} <= set(summary)
    assert summary["hosts_total"] == 44 and summary["hosts_ok"] == 41
    assert {"id", "hosts", "folded", "size", "keys", "differs"} <= set(summary["classes"][1])
    with open(out / "fleet.csv", newline="") as fh:
        gpus = list(csv.DictReader(fh))
    assert len(gpus) == 41 * 8 and gpus[0]["host"] == "gpu01" and gpus[0]["power_enforced_w"] == "700.0"
    with open(out / "hosts.csv", newline="") as fh:
        hosts = {r["host"]: r for r in csv.DictReader(fh)}
    assert len(hosts) == 44
    assert hosts["gpu09"]["key_power_limit"] == "700 W x7, 250 W x1 (GPU 3)"
    assert hosts["gpu09"]["comparability_class"] == "E" and hosts["gpu42"]["comparability_class"] == ""
    markdown = (out / "summary.md").read_text()
    for host in ("gpu[31-34]", "gpu[05,12,19]", "gpu[07-08]", "gpu09", "gpu21", "gpu22", "gpu25", "gpu26",
                 "gpu42", "gpu16", "gpu14"):
        assert f"`{host}`" in markdown, host


def test_chart_marks_capped_and_slowed_hosts(must_show, monkeypatch):
    from sweep.report import charts
    from sweep.report.charts import chart

    result, _ = must_show
    summary = chart(result.fleet, result.findings)  # 46 hosts: a bar per class, a small class named by its hosts
    assert summary["by_class"] and len(summary["bars"]) == 7
    assert {b["label"] for b in summary["bars"]} >= {"class A (27 hosts)", "class D: gpu[07-08]"}
    monkeypatch.setattr(charts, "CHART_HOSTS_MAX", 64)
    bars = {b["label"]: b for b in chart(result.fleet, result.findings)["bars"]}
    assert len(bars) == 40  # probed hosts with a selected GPU: not the empty mask, not the unreachable
    assert bars["gpu07"]["capped"] and bars["gpu07"]["power"] == 250.0 and bars["gpu07"]["class"] == "D"
    assert bars["gpu09"]["power"] == 250.0 and bars["gpu09"]["power_top"] == 700.0
    # probed idle: no SM bar (an idle clock says nothing about speed), the slowed clock kept for the label
    assert bars["gpu16"]["slow"] and not bars["gpu16"]["loaded"] and bars["gpu16"]["sm"] is None
    assert bars["gpu16"]["sm_read"] == 1125.0 and bars["gpu16"]["note"] == "HW slowdown"
    assert not bars["gpu01"]["loaded"] and not bars["gpu01"]["capped"] and not bars["gpu01"]["slow"]


def test_one_pool_exits_0(tmp_path):
    fleet = fleet_of(tmp_path, healthy(["gpu1", "gpu2", "gpu3"]))
    findings = compare(fleet)
    assert findings.comparable and findings.health == ()
    assert make_verdict(fleet, findings).exit_code == assess(fleet).exit_code == 0
    assert assess(fleet).headline() == "One pool: all 3 of 3 hosts (gpu[1-3]) can be benchmarked together."


def test_comparable_but_broken_exits_4(tmp_path):
    records = healthy(["gpu1", "gpu2"], n_gpus=8) + [fv.record("gpu3", fv.hw_thermal(fv.h200(8, "gpu3")))]
    fleet = fleet_of(tmp_path, records)
    findings = compare(fleet)
    assert findings.comparable
    assert make_verdict(fleet, findings).exit_code == 4


def test_two_classes_exit_3_and_unreachable_wins_over_it(tmp_path):
    records = healthy(["gpu1", "gpu2"]) + [fv.record("gpu3", fv.driver(fv.h200(2, "gpu3")))]
    assert code_of(fleet_of(tmp_path / "a", records)) == 3
    records.append(fv.record("gpu4", None, ("dns", "Name or service not known")))
    assert code_of(fleet_of(tmp_path / "b", records)) == 1


def test_excluded_host_alone_exits_4_not_3(tmp_path):
    records = healthy(["gpu1", "gpu2"]) + [fv.record("gpu3", fv.empty_mask(fv.h200(2, "gpu3")))]
    fleet = fleet_of(tmp_path, records)
    findings = compare(fleet)
    assert [c.hosts for c in findings.classes] == [("gpu1", "gpu2")]
    assert make_verdict(fleet, findings).exit_code == 4


def code_of(fleet) -> int:
    return make_verdict(fleet, compare(fleet)).exit_code


def test_exit_codes_are_documented():
    doc = report_module.__doc__
    for code in ("2 bad input", "1 a host unreachable", "3 more than\none comparability class",
                 "4 a host broken", "5 off its expectations", "0 otherwise"):
        assert code in doc


def test_reference_by_host_and_by_group(tmp_path):
    records = [fv.record(n, fv.h200(2, n), groups=["old"]) for n in ("gpu1", "gpu2", "gpu3")]
    records += [fv.record(n, fv.driver(fv.h200(2, n)), groups=["new"]) for n in ("gpu4", "gpu5")]
    fleet = fleet_of(tmp_path, records)
    assert compare(fleet).reference.hosts == ("gpu1", "gpu2", "gpu3")
    by_host_ref = compare(fleet, reference="gpu5")
    assert by_host_ref.reference.hosts == ("gpu4", "gpu5") and by_host_ref.reference_by == "host gpu5"
    assert by_host_ref.classes[1].differs[0].value == "580.159.04"
    assert by_host_ref.classes[1].differs[0].reference == "590.44.01"
    by_group = compare(fleet, reference="new")
    assert by_group.reference.hosts == ("gpu4", "gpu5")
    assert by_group.reference_by == "group new (its most common class)"


def test_reference_errors_name_the_problem(tmp_path):
    records = healthy(["gpu1", "gpu2"]) + [fv.record("gpu3", None, ("refused", "refused")),
                                           fv.record("gpu4", fv.cpu_torch(fv.h200(2, "gpu4")))]
    fleet = fleet_of(tmp_path, records)
    with pytest.raises(ConfigError) as err:
        compare(fleet, reference="rack9")
    assert str(err.value) == ("--reference: 'rack9' is neither a host nor a group of this fleet; "
                              "name one of the hosts, or a group of the inventory the sweep ran")
    with pytest.raises(ConfigError) as err:
        compare(fleet, reference="gpu3")
    assert err.value.message == "the reference host gpu3 is in no comparability class: unreachable (refused)"
    with pytest.raises(ConfigError) as err:
        compare(fleet, reference="gpu4")
    assert err.value.message == ("the reference host gpu4 is in no comparability class: it cannot run a "
                                 "benchmark (lowest broken contract: framework)")


@pytest.mark.parametrize("variant, key, value", [
    (lambda h: fv.ecc_pending(h, pending=False), "ecc", "on (pending off)"),
    (lambda h: fv.app_clocks(h, 1410, 1980), "clock_policy", "app clocks 1410 MHz"),
    (lambda h: fv.link(h, "SYS"), "link", "SYS (across NUMA nodes)"),
    (lambda h: fv.persistence_off(h), "persistence", "off"),
    (lambda h: fv.mask(h, "0,1"), "gpu_count", "2 GPUs"),
    (lambda h: fv.torch(h, "2.10.0+cu129", "12.9"), "framework", "torch 2.10.0+cu129, CUDA 12.9"),
    (lambda h: fv.mig(h, ("1g.18gb", "1g.18gb", "3g.71gb")), "mig", "on: 2x 1g.18gb + 3g.71gb"),
    (lambda h: fv.power_cap(h, 437.5), "power_limit", "437.5 W (default 700 W)"),
])
def test_each_key_tells_the_variant_apart(tmp_path, variant, key, value):
    records = healthy(["gpu1", "gpu2"], n_gpus=4) + [fv.record("gpu3", variant(fv.h200(4, "gpu3")))]
    findings = compare(fleet_of(tmp_path, records))
    assert [c.hosts for c in findings.classes] == [("gpu1", "gpu2"), ("gpu3",)]
    assert [(d.key, d.value) for d in findings.classes[1].differs] == [(key, value)]
    assert findings.host_keys.loc["gpu3", key] == value


def test_one_gpu_mask_changes_count_and_link(tmp_path):
    records = healthy(["gpu1", "gpu2"], n_gpus=4) + [fv.record("gpu3", fv.mask(fv.h200(4, "gpu3"), "0"))]
    findings = compare(fleet_of(tmp_path, records))
    assert [(d.key, d.value, d.reference) for d in findings.classes[1].differs] == [
        ("gpu_count", "1 GPU", "4 GPUs"), ("link", "single GPU", "NV18 (NVLink)")]


def test_gpus_outside_the_mask_do_not_count(tmp_path):
    odd = fv.power_cap(fv.mask(fv.h200(4, "gpu3"), "0,1"), 250.0, gpus={3})
    records = [fv.record(n, fv.mask(fv.h200(4, n), "0,1")) for n in ("gpu1", "gpu2")] + [fv.record("gpu3", odd)]
    findings = compare(fleet_of(tmp_path, records))
    assert findings.comparable
    assert not [f for f in findings.health if f.kind == "mixed_gpus"]


def test_warnings_are_findings_but_not_exit_4(tmp_path):
    records = [fv.record("gpu1", fv.persistence_off(fv.h200(2, "gpu1"))),
               fv.record("gpu2", fv.remap(fv.ecc_pending(fv.h200(2, "gpu2"), pending=True), pending=True)),
               fv.record("gpu3", fv.foreign_process(fv.h200(4, "gpu3"), gpu=1))]
    fleet = fleet_of(tmp_path, records)
    findings = compare(fleet)
    kinds = sorted((f.host, f.kind, f.severity) for f in findings.health)
    assert kinds == [("gpu1", "persistence_off", "warning"), ("gpu2", "row_remap_pending", "warning"),
                     ("gpu3", "foreign_process", "warning")]
    assert make_verdict(fleet, findings).exit_code == 3  # persistence off and a 4-GPU host: other classes


def test_row_remap_failure_is_broken(tmp_path):
    records = healthy(["gpu1"]) + [fv.record("gpu2", fv.remap(fv.h200(2, "gpu2"), gpu=1, failure=True))]
    findings = compare(fleet_of(tmp_path, records))
    found = [f for f in findings.health if f.kind == "row_remap_failure"]
    assert [(f.message, f.severity) for f in found] == [("gpu2: row remapping failed on GPU 1", "broken")]


def test_impacts_read_like_an_operator():
    """The rules judge the typed readings behind each side (one row per distinct value); the texts are filled in."""
    def on(column, mine, ref, **same):
        return {"rows": [{column: mine, **same}], "ref_rows": [{column: ref, **same}]}
    assert "6% more usable memory" in impact("ecc", "off", "on", **on("ecc_current", False, True, ecc_pending=None))
    assert "collectives" in impact("link", "SYS (across NUMA nodes)", "NV18 (NVLink)",
                                   **on("worst_link", "SYS", "NV18", gpus_selected=8))
    assert "better link" in impact("link", "NV18 (NVLink)", "PIX (one PCIe switch)",
                                   **on("worst_link", "NV18", "PIX", gpus_selected=8))
    assert "start-up latency" in impact("persistence", "off", "on", **on("persistence_mode", False, True))
    assert "parallelism" in impact("gpu_count", "4 GPUs", "8 GPUs")
    assert "compiled kernels" in impact("framework", "torch 2.10.0+cu129, CUDA 12.9", "torch 2.11.0+cu130, CUDA 13.0")
    assert "higher power cap" in impact("power_limit", "700 W", "400 W (default 700 W)")
    assert "boost clock" in impact("clock_policy", "app clocks 1410 MHz", "default",
                                   **on("app_sm_mhz", 1410, 1980, default_app_sm_mhz=None, sm_max_mhz=1980))
    assert "bounce buffers" in impact("confidential_compute", "on", "off", **on("confidential_compute", True, False))


@pytest.mark.parametrize("names, folded", [
    (["gpu01", "gpu02", "gpu03", "gpu10", "node-a"], "gpu[01-03,10],node-a"),
    (["gpu9", "gpu10", "gpu11"], "gpu[9-11]"),
    (["gpu1", "gpu01"], "gpu[1,01]"),
    (["gpu01.dc1", "gpu02.dc1", "gpu01.dc2"], "gpu01.dc[1-2],gpu02.dc1"),
    (["<script>x</script>", "gpu2", "gpu1", "a,b", "gpu[7]"], "gpu[1-2],<script>x</script>,a,b,gpu[7]"),
    ([], ""),
])
def test_fold_hosts(names, folded):
    assert fold_hosts(names) == folded


def test_fold_hosts_large_list_matches_nodeset():
    from ClusterShell.NodeSet import NodeSet

    names = [f"gpu{i:05d}" for i in range(1, 5001) if i % 7] + [f"cpu{i}" for i in range(1, 30)]
    assert fold_hosts(names) == str(NodeSet.fromlist(names))


NAME_PARTS = st.tuples(
    st.sampled_from(["gpu", "n", "rack1-n", "dgx-a", "h"]),
    st.integers(min_value=0, max_value=120),
    st.sampled_from([0, 2, 3, 5]),  # zero-padded to this width (0: not padded)
    st.sampled_from(["", ".dc1", "-ib"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(NAME_PARTS, max_size=60))
def test_fold_hosts_is_what_nodeset_folds(parts):
    """ClusterShell's NodeSet owns the folding: whatever path fold_hosts takes (one pattern it
    writes itself, or NodeSet's fold of several), the text is NodeSet's."""
    from ClusterShell.NodeSet import NodeSet

    names = [f"{prefix}{number:0{width}d}{suffix}" for prefix, number, width, suffix in parts]
    assert fold_hosts(names) == (str(NodeSet.fromlist(names)) if names else "")


def test_hostile_host_strings_stay_text(tmp_path):
    evil = "<script>document.title='pwned'</script>"
    records = healthy(["gpu1", evil]) + [fv.record("gpu2", fv.foreign_process(fv.h200(2, "gpu2"), name=evil, gpu=0))]
    fv.write_run(tmp_path / "run", records)
    with pytest.warns(InventoryWarning, match="left out: no node set can hold that name"):  # the names shown as text
        result = build_report([tmp_path / "run"], tmp_path / "out")
    html = result.files["html"].read_text()
    assert evil not in html
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in html
    assert "<script" not in html
    markdown = result.files["markdown"].read_text()
    from markdown_it import MarkdownIt  # CommonMark decides what would become HTML: nothing may

    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    kinds = {c.type for t in tokens for c in [t, *(t.children or [])]}
    assert not kinds & {"html_inline", "html_block"} and "&lt;" not in markdown
    assert f"`gpu[1-2],{evil}`" in markdown


# --- identical failure lines are folded, as clubak -b folds identical output (issue 22) ----------


class _Rows(HTMLParser):
    """The cells of the report's unreachable rows (<tr class="unreachable">)."""

    def __init__(self):
        super().__init__()
        self.rows, self._cell, self._in_row = [], None, False

    def handle_starttag(self, tag, attrs):
        if tag == "tr" and ("class", "unreachable") in attrs:
            self.rows.append([])
            self._in_row = True
        elif tag == "td" and self._in_row and self._cell is None:
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.rows[-1].append(self._cell)
            self._cell = None
        self._in_row = self._in_row and tag != "tr"

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def _unknown_key(name):
    return fv.record(name, None, ("host_key_unknown", f"{name}: the host key is not in known_hosts; add it"))


def test_identical_failures_are_one_folded_line_in_the_report_and_summary_md(tmp_path):
    records = healthy(["gpu01", "gpu02", "gpu03"]) + [_unknown_key(f"gpu{n:02d}") for n in range(7, 21)]
    records.append(fv.record("gpu21", None, ("refused", "connection refused on port 22")))
    fv.write_run(tmp_path / "run", records)
    result = build_report([tmp_path / "run"], tmp_path / "report")
    markdown = (tmp_path / "report" / "summary.md").read_text()
    table = markdown.split("## Unreachable\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert table == ["| Hosts | Failure | Message |", "|---|---|---|",
                     "| `gpu[07-20]` | host\\_key\\_unknown | the host key is not in known\\_hosts; add it |",
                     "| `gpu21` | refused | connection refused on port 22 |"]
    rows = _Rows()
    rows.feed((tmp_path / "report" / "report.html").read_text())
    assert rows.rows == [["gpu[07-20]", "host_key_unknown", "the host key is not in known_hosts; add it", "3"],
                         ["gpu21", "refused", "connection refused on port 22", "3"]]
    assert result.summary["unreachable"][0]["host"] == "gpu07"  # summary.json keeps one entry per host


def test_identical_failures_are_one_folded_line_in_the_terminal_summary(tmp_path):
    import io

    from rich.console import Console

    from sweep.cli.progress import render_summary
    from sweep.collect.run import RunResult

    failures = tuple((f"gpu{n:02d}", "host_key_unknown", f"gpu{n:02d}: the host key is not in known_hosts; add it")
                     for n in range(7, 21)) + (("gpu21", "refused", "gpu21: connection refused on port 22"),)
    result = RunResult(tmp_path, "complete", 18, 3, 15, 0, 0, {"host_key_unknown": 14, "refused": 1}, failures)
    out = io.StringIO()
    render_summary(result, Console(file=out, width=60, color_system=None))
    lines = [line.strip() for line in out.getvalue().splitlines()]
    assert "gpu[07-20]: host_key_unknown: the host key is not in known_hosts; add it" in lines
    assert "gpu21: refused: connection refused on port 22" in lines
    assert not any(line.startswith("gpu08") for line in lines)


def unknown_key_message(n: int, known_hosts: str = "/root/.ssh/known_hosts") -> str:
    """The prober's host_key_unknown message, word for word, for host gpuNN at 127.0.10.NN."""
    fingerprint = "SHA256:" + f"{n:02d}" * 21 + "x"
    return (f"gpu{n:02d}: the host key of 127.0.10.{n} (its ssh-ed25519 key is {fingerprint}) is not in "
            f"{known_hosts}; check it and add it: ssh-keyscan -H 127.0.10.{n} >> ~/.ssh/known_hosts, or sweep "
            "with --accept-new-host-keys")


def test_failures_alike_but_for_each_hosts_address_and_key_fold_into_one_line(tmp_path):
    """Issue 22: the 14 host_key_unknown hosts of an interrupted run are one line, not 14, although each
    message names the host's own address and key; a message that differs otherwise stays its own line."""
    import io

    from rich.console import Console

    from sweep.cli.progress import render_summary
    from sweep.collect.run import RunResult

    failures = tuple((f"gpu{n:02d}", "host_key_unknown", unknown_key_message(n)) for n in range(7, 21)) + (
        ("gpu21", "host_key_unknown", unknown_key_message(21, "/etc/ssh/ssh_known_hosts")),)
    result = RunResult(tmp_path, "complete", 18, 3, 15, 0, 0, {"host_key_unknown": 15}, failures)
    out = io.StringIO()
    render_summary(result, Console(file=out, width=400, color_system=None))
    lines = [line.strip() for line in out.getvalue().splitlines() if ": host_key_unknown: " in line]
    assert lines == [
        "gpu[07-20]: host_key_unknown: the host key of <address> (its ssh-ed25519 key is <fingerprint>) is not in "
        "/root/.ssh/known_hosts; check it and add it: ssh-keyscan -H <address> >> ~/.ssh/known_hosts, or sweep "
        "with --accept-new-host-keys",
        "gpu21: host_key_unknown: " + unknown_key_message(21, "/etc/ssh/ssh_known_hosts")[len("gpu21: "):]]
    records = healthy(["gpu01"]) + [fv.record(host, None, (cls, message)) for host, cls, message in failures]
    fv.write_run(tmp_path / "run", records)
    build_report([tmp_path / "run"], tmp_path / "report")
    markdown = (tmp_path / "report" / "summary.md").read_text()
    table = markdown.split("## Unreachable\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(table) == 4 and table[2].startswith("| `gpu[07-20]` | host\\_key\\_unknown | the host key of \\<address>")


def test_a_host_name_that_would_read_as_a_pattern_is_left_out_of_a_limit_file(tmp_path):
    from sweep.errors import InventoryWarning
    from sweep.report.files import write_limit_file

    path = tmp_path / "pool.txt"
    with pytest.warns(InventoryWarning) as caught:
        write_limit_file(path, ["gpu01", "!gpu02", "gpu03\nall", "gpu*", "gpu04"])
    assert path.read_text() == "gpu01\ngpu04\n"  # never a line that --limit @FILE reads as 'all' or a glob
    assert [str(w.message).split(": host ", 1)[1].split(" left out")[0] for w in caught] == [
        "'!gpu02'", "'gpu03\\nall'", "'gpu*'"]


def test_summary_json_folds_hosts_that_share_an_entry_and_loses_none(must_show):
    """summary.json (sweep.summary/2): hosts that share a finding, a failure, a verdict entry or a state are one
    entry with a node set and a count (issue 41: 100,000 listed hosts wrote 104 MB); expanded, every folded list
    gives back exactly the per-host entries the report was rendered from."""
    from ClusterShell.NodeSet import NodeSet

    result, summary = must_show
    memory = result.summary

    def expand(rows, fields):
        return sorted((h, *(r[f] for f in fields)) for r in rows for h in [*NodeSet(r["folded"]), *r["not_folded"]])

    for key, fields in (("findings", ("kind", "detail", "fix")), ("unreachable", ("failure_class", "message"))):
        assert expand(summary[key], fields) == sorted((r["host"], *(r[f] for f in fields)) for r in memory[key])
        assert all(r["count"] == len(NodeSet(r["folded"])) + len(r["not_folded"]) for r in summary[key])
    entries = summary["verdict_model"]["entries"]
    assert expand(entries, ("source", "what", "cause")) == sorted(
        (e["host"], e["source"], e["what"], e["cause"]) for e in memory["verdict_model"]["entries"])
    states = {h: state for state, s in summary["verdict_model"]["states"].items() for h in NodeSet(s["folded"])}
    assert states == memory["verdict_model"]["states"]
    shared = [f for f in summary["findings"] if f["count"] > 1]
    assert shared and all("host" not in f and "message" not in f for f in summary["findings"])


def test_summary_json_of_many_hosts_alike_stays_small(tmp_path):
    """A run listing 3,000 hosts of which 2 have a record: the 2,998 not probed are one entry of each list."""
    import json

    names = [f"gpu{i:04d}" for i in range(1, 3001)]
    records = healthy(names[:2])
    fv.write_run(tmp_path / "run", records, manifest={"format": "sweep-run", "record_version": 1, "hosts": names,
                                                       "state": "interrupted"})
    result = build_report([tmp_path / "run"], tmp_path / "report")
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert [(u["folded"], u["count"]) for u in summary["unreachable"]] == [("gpu[0003-3000]", 2998)]
    assert [f["count"] for f in summary["findings"] if f["kind"] == "unreachable"] == [2998]
    assert summary["verdict_model"]["states"]["unreachable"]["count"] == 2998
    assert len(result.summary["unreachable"]) == 2998  # the report itself still has each host
    assert (tmp_path / "report" / "summary.json").stat().st_size < 100_000


# --- the verdict's words for many held-out hosts, and summary.json's keys (issue 39: compare.py's mutants) ---


OTHER_PROCESS = "1 other process on the GPUs: python3 (pid 4242, 8192 MiB) on GPU 2"


@pytest.mark.parametrize("held", [4, 5, 6])
def test_the_verdict_names_four_held_out_hosts_and_counts_the_rest(tmp_path, held):
    names = [f"gpu{i}" for i in range(2, 2 + held)]
    records = healthy(["gpu1"], n_gpus=8) + [fv.record(n, fv.foreign_process(fv.h200(8, n))) for n in names]
    answer, detail = assess(fleet_of(tmp_path, records)).sentence()
    named = "; ".join(f"{n}: {OTHER_PROCESS}" for n in names[:4])
    rest = f"; and {held - 4} more" if held > 4 else ""
    assert (answer, detail) == ("One pool, hosts kept out", f"1 of {held + 1} hosts (gpu1) can be benchmarked "
                                f"together; {held} held out for health ({named}{rest}).")


def test_summary_names_each_difference_by_its_key_and_opens_with_the_headline(tmp_path):
    records = healthy(["gpu1", "gpu2"]) + [fv.record("gpu3", fv.driver(fv.h200(2, "gpu3")))]
    # what summary.json says of the comparison
    summary = assess(fleet_of(tmp_path, records)).to_dict()
    assert [(d["key"], d["label"]) for d in summary["classes"][1]["differs"]] == [
        ("driver", "Driver"), ("cuda_driver", "CUDA (driver)")]
    assert summary["headline"] == ("Not one pool: 2 comparability classes: the pool is gpu[1-2] (2 of 3 hosts); "
                                   "1 host in 1 other class differs in Driver, CUDA (driver).")
    assert summary["verdict_detail"] == ("The pool is gpu[1-2] (2 of 3 hosts); 1 host in 1 other class "
                                         "differs in Driver, CUDA (driver).")
    assert summary["verdict_brief"] == "The pool is gpu[1-2] (2 of 3 hosts); 1 host is kept out for the reasons listed below."


def test_the_verdict_gives_every_reason_hosts_are_kept_out_and_the_summary_counts_them(tmp_path):
    records = healthy(["gpu1", "gpu2"]) + [
        fv.record("gpu3", fv.foreign_process(fv.h200(2, "gpu3"), gpu=1)),      # held out for health
        fv.record("gpu4", fv.empty_mask(fv.h200(2, "gpu4"))),                  # cannot run a benchmark
        fv.record("gpu5", None, ("dns", "Name or service not known"))]        # unreachable
    findings = assess(fleet_of(tmp_path, records))
    assert findings.sentence() == ("One pool, hosts kept out", (
        "2 of 5 hosts (gpu[1-2]) can be benchmarked together; 1 held out for health (gpu3: 1 other process on "
        "the GPUs: python3 (pid 4242, 8192 MiB) on GPU 1); 1 cannot run a benchmark; 1 unreachable."))
    summary = findings.to_dict()
    assert summary["verdict_brief"] == ("2 of 5 hosts (gpu[1-2]) can be benchmarked together; "
                                        "3 hosts are kept out for the reasons listed below.")
    assert (summary["hosts_total"], summary["hosts_ok"], summary["hosts_in_reference"]) == (5, 4, 3)
    assert summary["pool"] == {"hosts": ["gpu1", "gpu2"], "folded": "gpu[1-2]", "size": 2}


def unreachable(name):
    return fv.record(name, None, ("dns", "Name or service not known"))


def held(name):
    return fv.record(name, fv.foreign_process(fv.h200(2, name), gpu=1))


PROCESS_ON_GPU_1 = "1 other process on the GPUs: python3 (pid 4242, 8192 MiB) on GPU 1"


@pytest.mark.parametrize("records, verdict, brief", [
    ([unreachable("gpu1")], ("No host can run a benchmark", "the one host did not reach a runnable state; 1 unreachable."),
     "the one host did not reach a runnable state; 1 host is kept out for the reasons listed below."),
    ([unreachable("gpu1"), unreachable("gpu2")],
     ("No host can run a benchmark", "none of the 2 hosts reached a runnable state; 2 unreachable."),
     "none of the 2 hosts reached a runnable state; 2 hosts are kept out for the reasons listed below."),
    ([held("gpu1")], ("No healthy pool", "the one comparable host of class A is held out for health; "
                                         f"1 held out for health (gpu1: {PROCESS_ON_GPU_1})."),
     "the one comparable host of class A is held out for health; 1 host is kept out for the reasons listed below."),
    ([held("gpu1"), held("gpu2")],
     ("No healthy pool", "the 2 comparable hosts of class A are all held out for health; "
                         f"2 held out for health (gpu1: {PROCESS_ON_GPU_1}; gpu2: {PROCESS_ON_GPU_1})."),
     "the 2 comparable hosts of class A are all held out for health; 2 hosts are kept out for the reasons listed below."),
], ids=["one-unreachable", "all-unreachable", "one-held-out", "all-held-out"])
def test_the_verdict_when_no_host_can_be_benchmarked(tmp_path, records, verdict, brief):
    judged = assess(fleet_of(tmp_path, records))
    assert judged.sentence() == verdict
    assert judged.sentence(brief=True) == (verdict[0], brief)


def test_a_held_out_host_has_one_cause_the_precise_finding_or_the_xid_repair(tmp_path):
    """Issue 48: the verdict picks one cause per host (`Verdict.cause`), the held-out reason reads
    it."""
    records = healthy(["gpu1", "gpu2"], n_gpus=8) + [
        # broken: the slowdown finding says it
        fv.record("gpu3", fv.hw_thermal(fv.h200(8, "gpu3"))),
        fv.record("gpu4", fv.xid(fv.foreign_process(fv.h200(8,
                                                            "gpu4"))))]     # the Xid's repair, not the process
    judged = assess(fleet_of(tmp_path, records))
    assert [(h["host"], h["source"], h["cause"]) for h in judged.held_out_items()] == [
        ("gpu3", "health", "HW thermal slowdown active on GPU 5 (SM 1125 of 1980 MHz, 92 C)"),
        ("gpu4", "xid", "reboot: Xid 79 GPU has fallen off the bus (0000:19:00.0 x1)")]
    assert judged.cause("gpu4").fix == "drain the host and reboot it"
    assert judged.cause("gpu1") is None or judged.cause("gpu1").severity != "broken"


def test_the_verdict_says_hosts_of_other_classes_differ(tmp_path):
    records = healthy(["gpu1", "gpu2", "gpu3"]) + [fv.record(n, fv.driver(fv.h200(2, n))) for n in ("gpu4", "gpu5")]
    assert assess(fleet_of(tmp_path, records)).sentence() == (
        "Not one pool: 2 comparability classes",
        "the pool is gpu[1-3] (3 of 5 hosts); 2 hosts in 1 other class differ in Driver, CUDA (driver).")
