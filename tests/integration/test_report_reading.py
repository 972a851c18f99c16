"""The report as an operator reads it, in a real headless Chromium: one entry per host with its
findings (one per contract, GPUs folded), an SM-clock chart with bars only for clocks read under
load, and host rows that show they expand."""
import copy
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
import fleet_variants as fv  # noqa: E402

from sweep.report.build import build_report  # noqa: E402

from helpers import chromium  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("needs_chromium")]
LOAD = Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "load.health.json"
# What a test page reads from the report in Chromium: each host row's disclosure marker, open and
# closed, as the browser computes it (the report itself runs no script: its CSP forbids it).
PROBE_PAGE = """<!doctype html><html><body><iframe id="f" src="%s" style="width:1400px;height:900px"></iframe>
<pre id="out"></pre><script>
document.getElementById('f').onload = function () {
  var d = document.getElementById('f').contentDocument, out = [];
  d.querySelectorAll('details.host').forEach(function (det, i) {
    var s = det.querySelector('summary');
    function marker() {
      var b = getComputedStyle(s, '::before'), m = getComputedStyle(s, '::marker'), cs = getComputedStyle(s);
      var shown = cs.display === 'list-item' ? m.content : (b.display === 'none' ? 'none' : b.content);
      return shown + '/' + (cs.display === 'list-item' ? cs.color : b.color);
    }
    var closed = marker(); det.open = true; var opened = marker(); det.open = false;
    out.push([s.querySelector('b').textContent, closed, opened].join('|'));
  });
  document.getElementById('out').textContent = out.join('\\n');
};
</script></body></html>"""


def loaded(name: str) -> dict:
    """The real H200 probe taken under --load (SM median 1470 MHz of 1980 while the load ran)."""
    health = json.loads(LOAD.read_text())
    health["host"]["hostname"] = name
    return health


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    base = tmp_path_factory.mktemp("reading")
    records = [fv.record(f"gpu{n:02d}", fv.h200(8, f"gpu{n:02d}")) for n in range(1, 5)]
    records += [
        fv.record("gpu05", fv.power_cap(fv.h200(8, "gpu05"), 250.0)),  # one finding, eight GPUs
        fv.record("gpu06", fv.hw_thermal(fv.h200(8, "gpu06"), gpu=5, sm_mhz=1035)),  # throttled, probed idle
        # one host, several findings: a power cap, a foreign process and persistence off
        fv.record("gpu07", fv.persistence_off(fv.foreign_process(fv.power_cap(fv.h200(8, "gpu07"), 300.0)),
                                              gpus=[0, 1, 2, 3])),
        fv.record("gpu08", loaded("gpu08")), fv.record("gpu09", loaded("gpu09")),
        fv.record("gpu10", None, failure=("refused", "connection refused on port 22")),
    ]
    fv.write_run(base / "run", records)
    result = build_report([base / "run"], base / "report")
    html = result.files["html"].resolve()
    dom = chromium("--dump-dom", html.as_uri())
    (base / "probe.html").write_text(PROBE_PAGE % html.as_uri())
    probed = chromium("--allow-file-access-from-files", "--virtual-time-budget=5000", "--dump-dom",
                      (base / "probe.html").as_uri())
    markers = re.search(r'<pre id="out">(.*?)</pre>', probed, re.S).group(1).splitlines()
    return result, dom, markers


def entry(dom: str, host: str) -> str:
    """The findings of one host, in its block under Hosts (the health section folds hosts together)."""
    hosts = dom[dom.index('id="hosts"'):]
    block = re.findall(rf'<details class="host" id="[^"]+">\s*<summary>(?:(?!</summary>).)*<b class="mono">{host}</b>.*?</details>',
                       hosts, re.S)
    assert len(block) == 1, f"{host}: {len(block)} blocks under Hosts"
    found = re.findall(r'<ul class="findings".*?</ul>', block[0], re.S)
    assert len(found) <= 1
    return found[0] if found else ""


def test_one_finding_per_host_and_contract_with_the_gpus_folded(report):
    _, dom, _ = report
    capped = entry(dom, "gpu05")
    assert "GPU 0-7: enforced power limit 250 W is below the default 700 W" in capped
    assert capped.count("enforced power limit") == 1
    # the lowest broken contract and both slowdown flags: one finding, its cause
    throttled = entry(dom, "gpu06")
    assert throttled.count('class="finding"') == 1
    assert "HW thermal slowdown active on GPU 5 (SM 1035 of 1980 MHz" in throttled


def test_a_host_with_several_findings_is_one_entry_listing_them(report):
    _, dom, _ = report
    several = entry(dom, "gpu07")
    assert several.count('class="finding"') == 3
    for text in ("GPU 0-7: enforced power limit 300 W is below the default 700 W",
                 "1 other process on the GPUs: python3 (pid 4242",
                 "persistence mode off on GPU 0-3"):
        assert text in several, text
    from ClusterShell.NodeSet import NodeSet

    quiet = re.search(r'id="quiet-hosts">.*?<span class="hosts">([^<]+)</span>', dom).group(1)
    assert "gpu01" in NodeSet(quiet)  # a healthy host has no finding: one of the folded quiet hosts
    assert 'gpu01</b>' not in dom[dom.index('id="hosts"'):]


def test_sm_clock_bars_only_for_clocks_read_under_load(report):
    _, dom, _ = report
    chart = dom[dom.index('id="chart"'):dom.index('id="hosts"')]
    bars = dict(re.findall(r'<rect class="sm-bar" data-host="([^"]+)" [^>]*width="([0-9.]+)"', chart))
    assert sorted(bars) == ["gpu08", "gpu09"]  # the two probes taken under --load
    assert float(bars["gpu08"]) == pytest.approx(340 * 1470 / 1980, abs=0.5)
    labels = dict(re.findall(r'<text class="sm-label" data-host="([^"]+)"[^>]*>(.*?)</text>', chart, re.S))
    assert "gpu01" not in labels  # idle: no bar and no label; the note above says it once for the fleet
    assert re.sub("<[^>]+>", "", labels["gpu06"]).startswith("HW slowdown")  # throttled: no longer a bar
    assert labels["gpu08"].startswith("1470")
    assert "bars only for probes under load" in chart and "an idle clock says nothing about speed" in chart


def test_host_rows_show_their_disclosure_marker(report):
    _, dom, markers = report
    assert len(markers) == dom.count('<details class="host"') >= 4  # the hosts with something to say
    for line in markers:
        host, closed, opened = line.split("|")
        closed_mark, closed_colour = closed.split("/", 1)
        opened_mark = opened.split("/", 1)[0]
        assert closed_mark not in ("none", "normal", '""', ""), f"{host}: no marker while closed ({closed})"
        assert opened_mark not in ("none", "normal", '""', "") and opened_mark != closed_mark, \
            f"{host}: the marker does not change when the row opens ({closed} -> {opened})"
        assert "rgba(0, 0, 0, 0)" not in closed_colour
