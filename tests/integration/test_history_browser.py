"""history.html in a real headless Chromium: drifted host first, host strings stay text, no network; what a
person reads: every stretch of a changed key drawn and named, change points with their time and links to
their run folders, a legend for every colour and mark, and drift "not measured" said so."""
from __future__ import annotations

import html as html_module
import json
import os
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from helpers import CHROMIUM, Tags, chromium, require
from history_parts import six_week_history
from sweep.history import build_history
from sweep.store import RunFolder

HOSTILE = "<img src=x onerror=document.title='pwned'>"

pytestmark = pytest.mark.integration


def test_history_page_in_a_browser(tmp_path, tmp_path_factory):
    require(os.access(CHROMIUM, os.X_OK), "/usr/bin/chromium is absent: apt-get install -y chromium")
    reports, _ = six_week_history(tmp_path, tmp_path_factory)
    runs = sorted(p for p in reports.iterdir() if (p / "manifest.json").is_file())
    for run, source in ((runs[-2], "gpu09"), (runs[-1], "gpu01")):  # a hostile host whose power limit changes
        folder = RunFolder.open(run)
        record = json.loads(folder.record_path(source).read_text())
        folder.write_record(dict(record, host=HOSTILE))
        manifest = folder.read_manifest()
        folder.write_manifest(dict(manifest, hosts=manifest["hosts"] + [HOSTILE]))
    history = build_history([reports], tmp_path / "out", floor_mhz=1300)
    assert HOSTILE in history.changed_hosts
    dom = chromium("--dump-dom", (tmp_path / "out" / "history.html").resolve().as_uri())
    tags = Tags()
    tags.feed(dom)
    assert tags.title == "sweep history: 1 drifted, 4 changed of 41 hosts"
    names = [t for t, _ in tags.tags]
    assert "script" not in names and "img" not in names and names.count("svg") > 8
    assert "&lt;img src=x onerror=document.title='pwned'&gt;" in dom
    assert dom.index('id="host-gpu30"') < dom.index('id="host-gpu09"')  # the drifted host first


# --- what a person reads on the page: every stretch drawn and named, change points with their time and
# links to their two run folders, a legend for every colour and mark, drift "not measured" said so ---

# The page runs no script (its CSP forbids it): a test page around it reads, in Chromium, what the browser
# laid out and computed (boxes, colours, text, resolved link targets), and writes it as JSON.
PROBE_PAGE = """<!doctype html><html><body><iframe id="f" src="%s" style="width:1400px;height:900px"></iframe>
<pre id="out"></pre><script>
document.getElementById('f').onload = function () {
  var d = document.getElementById('f').contentDocument, cs = function (e) { return getComputedStyle(e); };
  var all = function (root, q) { return Array.prototype.slice.call(root.querySelectorAll(q)); };
  var box = function (e) { var r = e.getBoundingClientRect(); return [r.left, r.width, r.height]; };
  var out = {text: d.body.innerText, legend: [], used: [], cards: []};
  all(d, '#legend li').forEach(function (li) {
    var line = li.querySelector('line'), sw = li.querySelector('.sw');
    out.legend.push({mark: li.dataset.mark, text: li.innerText, height: box(li)[2],
                     colour: line ? cs(line).stroke : (sw ? (sw.classList.contains('card-mark') ?
                       cs(sw).borderTopColor : cs(sw).backgroundColor) : null)});
  });
  all(d, '.card').forEach(function (card) {
    all(card, 'svg.clock line, svg.clock polyline').forEach(function (e) { out.used.push([e.getAttribute('class'), cs(e).stroke]); });
    if (card.classList.contains('drifted')) { out.used.push(['drifted', cs(card).borderTopColor]); }
    out.cards.push({host: card.id.slice(5),
      changes: all(card, 'ul.changes li').map(function (li) {
        return {text: li.innerText, links: all(li, 'a').map(function (a) { return [a.dataset.run, a.href, a.innerText]; })};
      }),
      bands: all(card, '.band-block').map(function (b) {
        var svg = box(b.querySelector('svg'));
        return {key: b.dataset.key, svg: svg,
                rects: all(b, 'rect').map(function (r) { return box(r).concat([cs(r).fill]); }),
                named: all(b, '.stretches li').map(function (li) {
                  var sw = li.querySelector('.sw');
                  return [sw ? cs(sw).backgroundColor : null, li.innerText, box(li)[2]];
                })};
      })});
  });
  document.getElementById('out').textContent = JSON.stringify(out);
};
</script></body></html>"""


def probed(html_path, work):
    """What Chromium laid out of `html_path` (see PROBE_PAGE)."""
    probe = work / "probe.html"
    probe.write_text(PROBE_PAGE % html_path.resolve().as_uri())
    dom = chromium("--allow-file-access-from-files", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="out">(.*?)</pre>', dom, re.S)
    assert found and found.group(1), dom[-2000:]
    return json.loads(html_module.unescape(found.group(1)))


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory):
    """The demo history (six weeks; gpu09's cap lowered in a change window of four runs), as Chromium shows it."""
    require(os.access(CHROMIUM, os.X_OK), "/usr/bin/chromium is absent: apt-get install -y chromium")
    work = tmp_path_factory.mktemp("demo-history")
    reports, story = six_week_history(work, tmp_path_factory)
    out = reports / "history"
    build_history([reports], out, floor_mhz=1300)
    return reports, story, probed(out / "history.html", work)


def card(seen, host):
    return next(c for c in seen["cards"] if c["host"] == host)


def test_both_power_states_are_drawn_and_named(demo_page):
    _, _, seen = demo_page
    band = next(b for b in card(seen, "gpu09")["bands"] if b["key"] == "power_limit")
    svg_left, svg_width, _ = band["svg"]
    assert len(band["rects"]) == 2 and len(band["named"]) == 2
    for (left, width, height, fill), (swatch, text, shown) in zip(band["rects"], band["named"]):
        assert width >= 2 and height > 0 and svg_left <= left and left + width <= svg_left + svg_width + 0.5
        assert swatch == fill and shown > 0  # each stretch named beside its own colour, on screen
    assert band["named"][0][1].startswith("700 W (2026-10-05 03:00 UTC .. 2026-10-14 10:00 UTC, 11 runs)")
    assert band["named"][1][1].startswith("500 W (default 700 W) (2026-10-14 11:30 UTC .. 2026-11-15 03:00 UTC")
    assert band["rects"][0][3] != band["rects"][1][3]


def test_every_stretch_of_every_band_is_inside_its_band_and_named(demo_page):
    _, _, seen = demo_page
    bands = [b for c in seen["cards"] for b in c["bands"]]
    assert len(bands) == 7  # gpu09: power limit, its contract; gpu15: driver, CUDA; gpu22: ECC, memory, contract
    for b in bands:
        left, width, _ = b["svg"]
        assert len(b["rects"]) == len(b["named"]), b["key"]
        for (x, w, _, fill), (swatch, _, shown) in zip(b["rects"], b["named"]):
            assert w >= 2 and left <= x and x + w <= left + width + 0.5 and swatch == fill and shown > 0


def test_a_change_point_shows_its_time_and_links_to_its_two_run_folders(demo_page):
    reports, story, seen = demo_page
    power = next(d for d in story if d.what == "power")
    entry = next(e for e in card(seen, power.host)["changes"] if "Power limit 700 W -> 500 W" in e["text"])
    assert entry["text"].startswith(f"{power.at:%Y-%m-%d %H:%M} UTC: ")  # 11:30, the third of the day's four runs
    links = {which: (href, name) for which, href, name in entry["links"]}
    assert {w: n for w, (_, n) in links.items()} == {"before": "20261014T100000Z-demo", "after": "20261014T113000Z-demo"}
    for which, (href, name) in links.items():
        assert href.startswith("file://")
        target = Path(unquote(urlparse(href).path))
        assert target == (reports / name).resolve() and (target / "manifest.json").is_file(), which
    every = [link for c in seen["cards"] for e in c["changes"] for link in e["links"]]
    assert len(every) == 6 and all(Path(unquote(urlparse(h).path), "manifest.json").is_file() for _, h, _ in every)


def test_the_legend_names_every_colour_and_mark_used(demo_page):
    _, _, seen = demo_page
    legend = {item["mark"]: item for item in seen["legend"]}
    assert set(legend) == {"axis", "clock", "baseline", "floor", "change", "drifted", "bands"}
    assert all(item["height"] > 0 and len(item["text"]) > 20 for item in legend.values())  # shown, with words
    used = {tuple(u) for u in seen["used"]}
    assert {mark for mark, _ in used} == {"clock", "baseline", "floor", "change", "drifted"}  # all drawn here
    for mark, colour in used:  # each drawn as its legend entry says
        assert legend[mark]["colour"] == colour, (mark, colour)
    for c in seen["cards"]:  # the band colours: each named under its band (test above), and the legend says so
        assert all(b["named"] for b in c["bands"])
    assert "named with its colour under the band" in legend["bands"]["text"]
    assert "several runs of a change window each get a step" in legend["axis"]["text"]


def test_drift_not_measured_is_said_and_how_to_measure_it(tmp_path):
    """Runs without load samples: the page says drift was not measured and how to measure it, not '0 drifted'."""
    require(os.access(CHROMIUM, os.X_OK), "/usr/bin/chromium is absent: apt-get install -y chromium")
    reports = tmp_path / "reports"
    idle = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "idle.health.json").read_text())
    for day in (2, 3):
        folder = RunFolder.create(reports / f"202611{day:02d}T060000Z-idle")
        stamp = f"2026-11-{day:02d}T06:00:00Z"
        for host in ("gpu01", "gpu02"):
            folder.write_record({"record_version": 1, "host": host, "address": "127.0.0.1", "status": "ok",
                                 "failure": None, "attempts": 1, "started_at": stamp, "ended_at": stamp,
                                 "duration_s": 0.2, "health": idle})
        folder.write_manifest({"format": "sweep-run", "record_version": 1, "state": "complete", "started_at": stamp,
                               "hosts": ["gpu01", "gpu02"]})
    build_history([reports], reports / "history")
    seen = probed(reports / "history" / "history.html", tmp_path)
    text = seen["text"]
    assert "Drift not measured" in text and "sweep run INVENTORY --load 60" in text
    assert "0 hosts drifted" not in text and "drifted of" not in text
