"""The history's change points and page, on small histories written here: every stretch of a changed
key drawn and named (a 700 W -> 500 W change seen only in the last run included), change points with
the run's time and links to the two run folders that resolve from the history folder, drift said
"not measured" when no run had load samples, and a 1,000-host history whose page stays small.

Run folders are written as `sweep run` writes them, from the recorded H200 health.json files
(`fleet_variants`), at the times each test names."""
from __future__ import annotations

import csv
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from fleet_variants import base, power_cap
from sweep.cli import main
from sweep.demo.history import change_window
from sweep.history import build, build_history
from sweep.history import index as index_module
from sweep.history.page import MIN_RECT_W, W
from sweep.store import MANIFEST, RECORD_VERSION, RUN_FORMAT


LOAD = Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "load.health.json"


def loaded() -> dict:
    """The real H200 probe taken under --load (its load summary: the SM clock medians drift is judged on)."""
    return json.loads(LOAD.read_text())


@pytest.fixture(autouse=True)
def one_worker(monkeypatch):
    monkeypatch.setattr(index_module, "MAX_WORKERS", 1)  # small runs: no worker processes to start


def write_run(reports: Path, when: str, healths: dict, name: str | None = None) -> Path:
    """A run folder started at `when` (ISO, UTC) holding `healths` (host -> health.json)."""
    folder = reports / (name or f"{when.replace('-', '').replace(':', '')}-test")
    (folder / "hosts").mkdir(parents=True)
    (folder / MANIFEST).write_text(json.dumps({
        "format": RUN_FORMAT, "record_version": RECORD_VERSION, "started_at": when, "state": "complete",
        "hosts": sorted(healths)}))
    for host, health in healths.items():
        record = {"record_version": RECORD_VERSION, "host": host, "address": "127.0.0.1", "status": "ok",
                  "failure": None, "attempts": 1, "duration_s": 1.0, "health": health}
        (folder / "hosts" / f"{host}.json").write_text(json.dumps(record))
    return folder


def fleet(kind: str = "idle", capped=(), n: int = 2) -> dict:
    """host -> a recorded H200 health.json (idle: no load samples), the `capped` hosts at 500 W."""
    return {f"gpu{i:02d}": power_cap(base(kind), 500.0) if f"gpu{i:02d}" in capped else base(kind)
            for i in range(1, n + 1)}


class Page(HTMLParser):
    """The parts of history.html these tests read: each band's rectangles and named stretches, per card,
    and the change points' links."""

    def __init__(self):
        super().__init__()
        self.bands, self.links, self.text = [], [], []
        self._card = self._key = None
        self._in_stretch = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "card" in (a.get("class") or "").split():
            self._card = a["id"][len("host-"):]
        if a.get("class") == "band-block":
            self._key = {"host": self._card, "key": a["data-key"], "rects": [], "named": []}
            self.bands.append(self._key)
        if tag == "rect" and self._key is not None and "y" in a:
            self._key["rects"].append((float(a["x"]), float(a["width"]), a["fill"]))
        if tag == "li" and self._key is not None:
            self._key["named"].append("")
            self._in_stretch = True
        if tag == "span" and self._in_stretch and "sw" in (a.get("class") or ""):
            self._key["named"][-1] = re.search(r"background:(#[0-9a-f]+)", a["style"]).group(1) + " "
        if tag == "a":
            self.links.append((self._card, a["data-run"], a["href"]))

    def handle_endtag(self, tag):
        if tag == "li":
            self._in_stretch = False
        if tag == "ul" and self._key is not None and self._key["named"]:
            self._key = None

    def handle_data(self, data):
        self.text.append(data)
        if self._in_stretch and self._key is not None:
            self._key["named"][-1] += data


def page(out: Path) -> Page:
    p = Page()
    p.feed((out / "history.html").read_text())
    return p


def test_a_power_limit_lowered_in_the_last_run_draws_and_names_both_states(tmp_path):
    """The issue's case: two runs, the second with the cap lowered; 5c5c097 drew the 500 W stretch at x=300,
    outside its 300-px band, and named neither stretch (only the 700 W one fitted its label)."""
    reports = tmp_path / "reports"
    write_run(reports, "2026-11-02T06:00:00Z", fleet())
    write_run(reports, "2026-11-03T06:00:00Z", fleet(capped={"gpu02"}))
    build_history([reports], tmp_path / "out")
    band = next(b for b in page(tmp_path / "out").bands if b["host"] == "gpu02" and b["key"] == "power_limit")
    assert len(band["rects"]) == 2
    for x, width, _ in band["rects"]:
        assert width >= MIN_RECT_W and 0 <= x and x + width <= W  # inside the band, wide enough to see
    (x0, w0, fill0), (x1, w1, fill1) = band["rects"]
    assert fill0 != fill1 and x0 + w0 <= x1 + 0.1 and w1 == pytest.approx(w0, abs=0.2)  # one step per run each
    assert [n.split(" (2026")[0] for n in band["named"]] == [f"{fill0} 700 W", f"{fill1} 500 W (default 700 W)"]
    assert "2026-11-03 06:00 UTC, 1 run" in band["named"][1]


def test_every_stretch_of_a_flapping_key_is_drawn_one_step_per_run(tmp_path):
    reports = tmp_path / "reports"
    for hour, capped in enumerate(({"gpu02"}, (), {"gpu02"}, {"gpu02"}, ())):  # five runs in one morning
        write_run(reports, f"2026-11-02T{6 + hour:02d}:00:00Z", fleet(capped=capped))
    history = build_history([reports], tmp_path / "out")
    band = next(b for b in page(tmp_path / "out").bands if b["host"] == "gpu02" and b["key"] == "power_limit")
    assert [round(w / (W / 5)) for _, w, _ in band["rects"]] == [1, 1, 2, 1]  # runs per stretch
    assert len(band["named"]) == 4 and len({f for _, _, f in band["rects"]}) == 2  # one colour per value
    assert [c.time for c in history.changes if c.key == "power_limit"] == [
        "2026-11-02 07:00 UTC", "2026-11-02 08:00 UTC", "2026-11-02 10:00 UTC"]


def test_a_change_point_carries_its_time_and_both_runs(tmp_path, capsys):
    reports = tmp_path / "reports"
    write_run(reports, "2026-11-02T03:00:00Z", fleet())
    before = write_run(reports, "2026-11-02T10:00:00Z", fleet())
    after = write_run(reports, "2026-11-02T11:30:00Z", fleet(capped={"gpu02"}))
    write_run(reports, "2026-11-02T15:00:00Z", fleet(capped={"gpu02"}))
    out = tmp_path / "out"
    assert main(["history", "--root", str(reports), "--out", str(out)]) == 5
    printed = capsys.readouterr().out
    assert "gpu02: 2026-11-02 11:30 UTC: Contract: Power ceiling ok -> broken" in printed
    assert "2026-11-02 11:30 UTC: Power limit 700 W -> 500 W (default 700 W)" in printed
    with open(out / "changes.csv") as fh:
        row = next(r for r in csv.DictReader(fh) if r["key"] == "power_limit")
    assert (row["date"], row["time"], row["run"], row["time_before"], row["run_before"]) == (
        "2026-11-02", "2026-11-02T11:30:00Z", after.name, "2026-11-02T10:00:00Z", before.name)
    change = next(c for c in json.loads((out / "history.json").read_text())["changes"] if c["key"] == "power_limit")
    assert change["time"] == "2026-11-02T11:30:00Z" and change["run_before"] == before.name
    with open(out / "timeline.csv") as fh:
        spans = [(r["value"], r["first_seen"], r["last_seen"]) for r in csv.DictReader(fh)
                 if r["host"] == "gpu02" and r["key"] == "power_limit"]
    assert spans == [("700 W", "2026-11-02T03:00:00Z", "2026-11-02T10:00:00Z"),
                     ("500 W (default 700 W)", "2026-11-02T11:30:00Z", "2026-11-02T15:00:00Z")]


@pytest.mark.parametrize("out_name", ["history", "../elsewhere/hist"])
def test_the_links_of_a_change_point_resolve_to_its_two_run_folders(tmp_path, out_name):
    """Relative links, from the history folder (the default ROOT/history, or one outside the root); a run
    folder's name may hold characters a URL reads otherwise ('#', '%', '?', a space)."""
    reports = tmp_path / "root" / "reports"
    before = write_run(reports, "2026-11-02T10:00:00Z", fleet(), name="run #1 100%?")
    after = write_run(reports, "2026-11-02T11:30:00Z", fleet(capped={"gpu02"}), name="run-2")
    out = reports / out_name
    build_history([reports], out)
    links = {(host, which): href for host, which, href in page(out).links}
    assert set(links) == {("gpu02", "before"), ("gpu02", "after")}
    assert not any(re.match(r"^[a-z]+:|^/", href) for href in links.values())  # relative, no scheme
    targets = {which: (out / unquote(href)).resolve() for (_, which), href in links.items()}
    assert targets == {"before": before.resolve(), "after": after.resolve()}
    assert all((t / MANIFEST).is_file() for t in targets.values())


def test_without_load_samples_drift_is_not_measured_and_said_so(tmp_path, capsys):
    """5c5c097 said '0 hosts drifted' of a history in which no run sampled a clock under load."""
    reports = tmp_path / "reports"
    write_run(reports, "2026-11-02T06:00:00Z", fleet())
    write_run(reports, "2026-11-03T06:00:00Z", fleet())
    out = tmp_path / "out"
    assert main(["history", "--root", str(reports), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "0 hosts drifted" not in printed and "drifted" not in printed.replace("drift not measured", "")
    assert "2 runs, drift not measured, 0 hosts changed" in printed
    assert ("drift not measured: no host has 2 runs with load samples; `sweep run INVENTORY --load 60` samples the "
            "SM clock under load on every host") in printed
    saved = json.loads((out / "history.json").read_text())
    assert saved["drift_measured"] is False and saved["drift_not_measured"] == ["gpu01", "gpu02"]
    html = (out / "history.html").read_text()
    assert "<title>sweep history: drift not measured, 0 changed of 2 hosts</title>" in html
    assert "0</strong> hosts drifted" not in html and "Drift not measured." in html
    assert "sweep run INVENTORY --load 60" in html


def test_hosts_without_load_samples_are_named_not_counted_as_steady(tmp_path):
    reports = tmp_path / "reports"
    for day in (2, 3, 4):
        write_run(reports, f"2026-11-{day:02d}T06:00:00Z", {"gpu01": loaded(), "gpu02": base("idle")})
    history = build([reports])
    assert history.unmeasured == ["gpu02"] and [d.host for d in history.drift if d.measured] == ["gpu01"]
    assert history.drift_text(short=True) == "0 hosts drifted of 1 measured, 1 not measured"
    assert history.drift_text().startswith("0 hosts drifted of 1 measured; drift not measured on 1 host (fewer "
                                           "than 2 of its runs had load samples; `sweep run INVENTORY --load 60`")
    build_history([reports], tmp_path / "out")
    text = " ".join(page(tmp_path / "out").text)
    assert "Drift not measured on 1 host." in text and "(gpu02)" in text


def test_one_run_under_load_is_not_yet_a_measured_drift(tmp_path):
    reports = tmp_path / "reports"
    write_run(reports, "2026-11-02T06:00:00Z", {"gpu01": loaded()})
    history = build([reports])
    assert [(d.host, d.runs, d.measured) for d in history.drift] == [("gpu01", 1, False)]
    assert history.drift_text(short=True) == "drift not measured"


def test_a_thousand_host_history_renders_and_stays_small(tmp_path):
    """1,000 hosts, four runs: 300 hosts whose power limit flaps (more cards than the page draws, each with three
    changed keys of four stretches: a worst case, ~1.1 MB), the rest steady under load. The page is bounded
    by its caps (cards, rows, stretches, change points), not by the fleet; under the report's 2 MB."""
    reports = tmp_path / "reports"
    steady = loaded()
    steady["load"]["samples"] = []  # the summary is what the history reads: 1,000 records stay small
    capped = power_cap(json.loads(json.dumps(steady)), 500.0)
    names = [f"node{n:04d}" for n in range(1000)]
    flappers = set(names[::3][:300])
    for run, lowered in enumerate((False, True, False, True)):
        write_run(reports, f"2026-11-02T{6 + run:02d}:00:00Z",
                  {h: capped if lowered and h in flappers else steady for h in names})
    history = build_history([reports], tmp_path / "out")
    assert len(history.changed_hosts) == 300 and len(history.host_names) == 1000
    html = (tmp_path / "out" / "history.html").read_text()
    size = len(html.encode())
    assert size < 1_500_000, size
    assert len(re.findall(r'class="card( drifted)?"', html)) == 200 and "100 more changed hosts: see changes.csv." in html
    assert html.count("<tr><td>node") == 500 and "200 more: see drift.csv." in html  # 700 steady, 500 rows
    print(f"1,000-host history.html: {size} bytes")


def test_the_change_window_demo_is_the_issues_case(tmp_path):
    """sweep.demo.history.change_window (the screenshots' one-day history): the cap lowered in the last of three
    runs, none with --load. Both states drawn, the change at 11:30 after the 10:00 run, drift not measured."""
    (lowered,) = change_window(tmp_path / "reports")
    history = build_history([tmp_path / "reports"], tmp_path / "out")
    assert history.drift_text(short=True) == "drift not measured"
    (change,) = [c for c in history.changes if c.key == "power_limit"]
    assert (change.host, change.time, change.run_before, change.run) == (
        lowered.host, "2026-10-05 11:30 UTC", "20261005T100000Z-demo", "20261005T113000Z-demo")
    band = next(b for b in page(tmp_path / "out").bands if b["host"] == lowered.host and b["key"] == "power_limit")
    assert [round(w / (W / 3)) for _, w, _ in band["rects"]] == [2, 1] and len(band["named"]) == 2


def test_a_host_broken_in_every_run_is_a_chronic_fault_beside_the_change_points(tmp_path, capsys):
    """gpu02 is capped in every run (no change point: the page used to say "No host changed" and nothing of
    it), gpu03 from the second run on: the history names both faults and since when, the one of every run
    as chronic, on the terminal, in history.json and on the page."""
    reports = tmp_path / "reports"
    for day, capped in ((1, ("gpu02",)), (2, ("gpu02", "gpu03")), (3, ("gpu02", "gpu03"))):
        write_run(reports, f"2026-11-0{day}T03:00:00Z", fleet(capped=capped, n=3))
    out = tmp_path / "out"
    assert main(["history", "--root", str(reports), "--out", str(out)]) == 5  # gpu03 changed
    printed = capsys.readouterr().out.splitlines()
    assert "chronic: gpu02: Contract: Power ceiling broken in every run since 2026-11-01 03:00 UTC (3 runs)" \
        in printed, printed
    assert "faulty: gpu03: Contract: Power ceiling broken since 2026-11-02 03:00 UTC (2 runs)" in printed, printed
    assert any(line.endswith("1 host faulty in every run; index: 3 runs read, 0 unchanged") for line in printed)
    chronic = json.loads((out / "history.json").read_text())["chronic"]
    assert [(c["host"], c["key"], c["every_run"], c["since"]) for c in chronic] == [
        ("gpu02", "contract:power", True, "2026-11-01 03:00 UTC"),
        ("gpu03", "contract:power", False, "2026-11-02 03:00 UTC")]
    page = (out / "history.html").read_text()
    section = page[page.index('<h2 id="chronic">'):page.index("<h2>Drifted and changed hosts</h2>")]
    assert "<strong>1 host</strong> was faulty in every run" in section
    assert '<tr class="chronic every-run"><td>gpu02</td><td>1</td><td>Contract: Power ceiling</td>' in section
