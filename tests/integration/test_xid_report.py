"""The demo fleet's report, in a real headless Chromium: its Xid hosts grouped by the repair NVIDIA
prescribes, in the top box, each with its counts and first and last times (issue 26's must-show)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.demo.fleet import demo_fleet
from sweep.report.build import build_report

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import chromium  # noqa: E402

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def report(needs_chromium, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("xid")
    files = []
    for h in demo_fleet(tmp / "captures", unreachable=False):
        if h.name in ("gpu01", "gpu19", "gpu21", "gpu23"):  # a healthy twin and the demo's three Xid hosts
            out = subprocess.run([sys.executable, "-m", "probe_agent", "--replay", h.capture], cwd=ROOT,
                                 capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stderr
            files.append(tmp / f"{h.name}.json")
            files[-1].write_text(out.stdout)
    result = build_report(files, tmp / "report")
    return result, chromium("--dump-dom", result.files["html"].resolve().as_uri())


def test_the_top_box_names_each_xid_host_once_with_its_repair(report):
    """The top box: one row per host kept out (issue 35), an Xid host's row its repair and event, its fix."""
    result, dom = report
    box = dom[dom.index('id="verdict"'):dom.index("</section>")]
    rows = re.findall(r'<li class="[\w -]+" data-hosts="(\w+)"(?: data-state="\w+")?>(.*?)</li>', box, re.S)
    assert sorted(host for host, _ in rows) == ["gpu19", "gpu21", "gpu23"]  # each by its cause, the gravest first
    said = {host: re.sub(r"<[^>]+>|\s+", " ", text) for host, text in rows}
    assert "reboot: Xid 79 GPU has fallen off the bus (0000:38:00 x1)" in said["gpu19"]
    assert "fix: drain the host and reboot it" in said["gpu19"]
    assert "reset the GPU: Xid 48 double-bit ECC error" in said["gpu23"]
    for host in ("gpu19", "gpu21", "gpu23"):
        assert box.count(host) == 2  # its row's data-hosts and its text: named once


def test_the_repair_section_groups_the_xid_hosts_by_the_repair_they_need(report):
    result, dom = report
    box = dom[dom.index('<section id="repair">'):dom.index("</section>", dom.index('<section id="repair">'))]
    actions = re.findall(r'<li class="xid-action" data-action="(\w+)"><span class="badge [\w-]+">(.*?)</span>\s*'
                         r'<span class="hosts">(.*?)</span>', box, re.S)
    assert actions == [("reboot", "reboot", "gpu19"), ("reset_gpu", "reset the GPU", "gpu23"),
                       ("restart_app", "check the application", "gpu21")]
    hosts = dict(re.findall(r'<li class="xid-host" data-host="(\w+)">.*?<span class="why">(.*?)</span>', box, re.S))
    assert hosts["gpu23"] == (
        "Xid 48 on 0000:28:00: double-bit ECC error: an uncorrectable memory error, x2, first 2026-11-30T07:00:00Z, "
        "last 2026-11-30T07:00:04Z; Xid 95 on 0000:28:00: uncontained memory error: every application on the GPU "
        "was affected, x1870, first 2026-11-30T07:00:04Z, last 2026-11-30T08:02:22Z")
    assert hosts["gpu19"] == "Xid 79 on 0000:38:00: GPU has fallen off the bus, x1, first 2026-11-30T11:40:17Z"
    assert "x240, first 2026-11-30T08:30:50Z, last 2026-11-30T10:30:20Z" in hosts["gpu21"]


def test_summary_md_and_the_terminal_say_the_same(report):
    result, _ = report
    md = result.files["markdown"].read_text()
    assert "- **reboot**: `gpu19` (1 host): drain the host and reboot it" in md
    assert ("| `gpu23` | reset the GPU | Xid 95: uncontained memory error: every application on the GPU was affected "
            "| `0000:28:00` | x1870, first 2026-11-30T07:00:04Z, last 2026-11-30T08:02:22Z |") in md
    # the terminal says each Xid host's repair once, as its cause (issue 48: the repair in one
    # place)
    terminal = [result.headline, *result.notes, *result.findings_lines]
    for line in ("broken: Xid repair: 1 host gpu19: reboot: Xid 79 GPU has fallen off the bus",
                 "broken: Xid repair: 1 host gpu23: reset the GPU: Xid 48 double-bit ECC error"):
        assert sum(t.startswith(line) for t in terminal) == 1, terminal
    assert sum("Xid 79" in t for t in terminal) == 1
    assert [a["hosts"] for a in result.summary["xid"]["actions"]] == [["gpu19"], ["gpu23"], ["gpu21"]]
