"""The audit (expectations and baseline drift) in the report: summary.json, report.html, summary.md, exit code.

Run folders of four eight-GPU H200 hosts, each a capture derived from the real H200 recording and
replayed through the agent, as in test_audit.py.
"""
from __future__ import annotations

import json
import re

import pytest

from sweep.demo import synth
from sweep.audit.baseline import set_baseline
from sweep.cli import main
from sweep.errors import InventoryWarning
from sweep.report.build import build_report
from test_audit import health_of, record, swap_card, write_run

HOSTS = ["gpu01", "gpu02", "gpu03<b>", "gpu04"]  # a host string with markup: the page must show it as text
OFF_DRIVER, DRIFTED = "gpu03<b>", "gpu04"
EXPECT = f"""version: 1
defaults:
  driver: ["580.159.04"]
hosts:
  "{OFF_DRIVER}":
    driver: ["590.44.01"]   # its upgrade was planned, not done
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """(the run, its baseline: the same hosts before gpu04's card at GPU 0 was swapped, expectations file)."""
    tmp = tmp_path_factory.mktemp("audited")
    before = write_run(tmp / "before", [record(h, health_of(h, [], tmp / "caps-a")) for h in HOSTS])
    now = write_run(tmp / "now", [record(h, health_of(h, [swap_card(0, h)] if h == DRIFTED else [], tmp / "caps-b"))
                                  for h in HOSTS])
    set_baseline(before, tmp / "baseline")
    (tmp / "fleet.yml").write_text(EXPECT)
    return now, tmp / "baseline", tmp / "fleet.yml"


def audit_part(page: str) -> str:
    """The Audit section of report.html (up to the next heading)."""
    return re.search(r'<h2 id="audit">Audit</h2>(.*?)<h2 ', page, re.S).group(1)


def left_out_of_the_node_sets():
    """gpu03<b> cannot be a node set's name: the report's pool.nodeset leaves it out, and warns."""
    return pytest.warns(InventoryWarning, match=r'pool\.nodeset: host "gpu03<b>" left out: no node set can hold that name')


def test_report_holds_the_audit_and_exits_5_for_an_otherwise_healthy_pool(fleet, tmp_path):
    run, baseline, expect = fleet
    with left_out_of_the_node_sets():
        result = build_report([run], tmp_path / "report", expect=expect, baseline=baseline)
    assert result.summary["classes"] and len(result.summary["classes"]) == 1
    assert result.exit_code == 5

    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    audit = summary["audit"]
    assert summary["exit_code"] == 5 and audit["exit_code"] == 5 and audit["schema"] == "sweep.audit/1"
    assert audit["expectations"]["hosts_off"] == [OFF_DRIVER]
    assert [(f["host"], f["rule"], f["actual"]) for f in audit["expectations"]["findings"]] == [
        (OFF_DRIVER, "driver", "580.159.04")]
    assert audit["baseline"]["drifted_hosts"] == [DRIFTED]
    assert [(d["host"], d["kind"]) for d in audit["baseline"]["drift"]] == [(DRIFTED, "gpu swap")]
    assert sorted(audit["baseline"]["compared"]) == sorted(HOSTS)

    page = (tmp_path / "report" / "report.html").read_text()
    assert '<a href="#audit">Audit</a>' in page
    assert page.index('id="health"') < page.index('id="audit"') < page.index('id="chart"')
    section = audit_part(page)
    assert "gpu03&lt;b&gt;" in section and "driver 580.159.04 is not approved" in section
    assert "gpu04" in section and "the card at GPU 0 was swapped" in section
    assert "gpu01" not in section and "gpu03<b>" not in page  # host strings are text, never markup
    markdown = (tmp_path / "report" / "summary.md").read_text()
    assert "## Audit" in markdown and "gpu04" in markdown and "the card at GPU 0 was swapped" in markdown


def test_without_an_audit_the_report_is_unchanged(fleet, tmp_path):
    run, _, _ = fleet
    with left_out_of_the_node_sets():
        result = build_report([run], tmp_path / "report")
    assert result.exit_code == 0 and result.summary["audit"] is None
    assert 'id="audit"' not in (tmp_path / "report" / "report.html").read_text()
    assert "## Audit" not in (tmp_path / "report" / "summary.md").read_text()


def test_not_comparable_wins_over_the_audit(fleet, tmp_path):
    """gpu02 was upgraded to an unapproved driver: another class, so exit 3; the audit is kept."""
    _, baseline, expect = fleet
    run = write_run(tmp_path / "run", [
        record(h, health_of(h, [synth.driver("590.44.01", 13010)] if h == "gpu02" else [], tmp_path / "caps"))
        for h in HOSTS])
    with left_out_of_the_node_sets():
        result = build_report([run], tmp_path / "report", expect=expect, baseline=baseline)
    assert [c["hosts"] for c in result.summary["classes"]] == [["gpu01", OFF_DRIVER, "gpu04"], ["gpu02"]]
    assert result.exit_code == 3
    audit = result.summary["audit"]
    assert audit["exit_code"] == 5
    assert audit["expectations"]["hosts_off"] == ["gpu02", OFF_DRIVER]
    assert [(d["host"], d["kind"]) for d in audit["baseline"]["drift"]] == [("gpu02", "driver")]


def test_cli_report_takes_expect_and_baseline(fleet, tmp_path, capsys):
    run, baseline, expect = fleet
    out = tmp_path / "report"
    assert main(["report", str(run), "--out", str(out), "--expect", str(expect), "--baseline", str(baseline)]) == 5
    text = " ".join(capsys.readouterr().out.split())  # the verdict is the result: stdout
    assert "1 host off expectations (driver): gpu03<b>" in text
    assert "1 host drifted from the baseline (gpu swap): gpu04" in text
    assert json.loads((out / "summary.json").read_text())["audit"]["baseline"]["drifted_hosts"] == [DRIFTED]
