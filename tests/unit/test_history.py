"""sweep history on six generated weeks of the demo fleet: change points named with their dates,
the slow sinker ranked first though every one of its runs passes the floor, the index kept
incrementally, and the keys taken from the comparability-key table."""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from history_parts import six_week_history
from sweep.analysis import facts
from sweep.cli import main
from sweep.history import build, build_history
from sweep.history import index as index_module
from sweep.demo.history import START

FLOOR_MHZ = 1300  # a fixed floor every run of the demo story's sinking host still passes

EXPECTED_CHANGE = {  # what: (key, before, after) as the comparability-key table words them
    "power": ("power_limit", "700 W", "500 W (default 700 W)"),
    "driver": ("driver", "580.159.04", "590.44.01"),
    "ecc": ("ecc", "on", "off"),
}


@pytest.fixture()
def history(tmp_path, tmp_path_factory):
    return six_week_history(tmp_path, tmp_path_factory)


def test_history_names_exactly_the_degraded_hosts_with_the_date_of_each_change(history, tmp_path, capsys):
    reports, story = history
    out = tmp_path / "out"
    code = main(["history", "--root", str(reports), "--out", str(out), "--floor", str(FLOOR_MHZ)])
    assert code == 5  # something drifted or changed, like sweep diff
    printed = capsys.readouterr().out  # the history's lines are its result: stdout
    result = json.loads((out / "history.json").read_text())
    stepped = {d.host: d for d in story if d.what != "sink"}
    changed = {c["host"] for c in result["changes"]}
    assert changed == set(stepped)  # the demo fleet's steady variants (ECC off, 250 W, MIG...) are not named
    for host, d in stepped.items():
        key, before, after = EXPECTED_CHANGE[d.what]
        mine = [c for c in result["changes"] if c["host"] == host]
        assert {c["date"] for c in mine} == {d.date.isoformat()}, mine
        assert {c["time"] for c in mine} == {f"{d.at:%Y-%m-%dT%H:%M:%SZ}"}, mine  # the run's time, not only its day
        assert any(c["key"] == key and c["before"] == before and c["after"] == after for c in mine), mine
        line = f"{d.at:%Y-%m-%d %H:%M} UTC: {facts.LABELS[key]} {before} -> {after}"
        assert line in printed
    drifted = [d for d in result["drift"] if d["drifted"]]
    sinker = next(d for d in story if d.what == "sink")
    assert [d["host"] for d in drifted] == [sinker.host]
    top = result["drift"][0]
    assert top["host"] == sinker.host and top["passes_floor"] is True and top["min_run_mhz"] >= FLOOR_MHZ
    assert 0.8 < top["per_week_pct"] < 1.2  # 1% a week
    assert printed.index(f"drift #1 {sinker.host}") < printed.index(f"{stepped['gpu09'].host}:")
    # the capped host fell further since entry, but its fall is explained by its change point
    capped = next(d for d in result["drift"] if d["host"] == "gpu09")
    assert capped["since_entry_pct"] > top["since_entry_pct"] and not capped["drifted"]
    # every run of the sinker passes the fixed floor: the floor alone would never have caught it
    with open(out / "load.csv") as fh:
        rows = [r for r in csv.DictReader(fh) if r["host"] == sinker.host]
    runs = [p for p in reports.iterdir() if (p / "manifest.json").is_file()]
    assert len(runs) == 45 and len({r["run"] for r in rows}) == 45 and min(float(r["sm_mhz"]) for r in rows) >= FLOOR_MHZ


def test_history_files_and_page(history, tmp_path):
    reports, story = history
    out = tmp_path / "out"
    build_history([reports], out, floor_mhz=FLOOR_MHZ)
    assert sorted(p.name for p in out.iterdir()) == ["changes.csv", "drift.csv", "history.html", "history.json",
                                                     "load.csv", "timeline.csv"]
    page = (out / "history.html").read_text()
    assert "<script" not in page and not re.search(r"(src|href)=\"?(https?:)?//", page)
    cards = re.findall(r'class="card[^"]*" id="host-([^"]+)"', page)
    assert cards[0] == "gpu30" and set(cards) == {"gpu09", "gpu15", "gpu22", "gpu30"}
    sinker = page[page.index('id="host-gpu30"'):page.index('id="host-', page.index('id="host-gpu30"') + 1)]
    scale = re.findall(r'<text class="scale"[^>]*>([^<]+)</text>', sinker)  # the sparkline says its scale
    assert len(scale) == 3 and all(re.fullmatch(r"(last )?\d+ MHz", s) for s in scale), scale
    assert f"{START.isoformat()} 03:00 UTC &rarr; 2026-11-15 03:00 UTC" in sinker  # and the runs it spans
    with open(out / "timeline.csv") as fh:
        spans = [r for r in csv.DictReader(fh) if r["host"] == "gpu09" and r["key"] == "power_limit"]
    assert [(s["value"], s["first_seen"], s["last_seen"]) for s in spans] == [  # the cap was lowered in a change window
        ("700 W", f"{START.isoformat()}T03:00:00Z", "2026-10-14T10:00:00Z"),
        ("500 W (default 700 W)", "2026-10-14T11:30:00Z", "2026-11-15T03:00:00Z")]


def few_runs(reports: Path, target: Path, count: int) -> list[Path]:
    """The first `count` run folders of the history copied under `target`, without its index: a smaller
    history of the same fleet (each run holds every host) for what the number of runs does not change."""
    runs = sorted(p for p in reports.iterdir() if (p / "manifest.json").is_file())[:count]
    for run in runs:
        shutil.copytree(run, target / run.name)
    return [target / run.name for run in runs]


def test_index_is_updated_incrementally(history, tmp_path):
    reports, _ = history
    reports = tmp_path / "few"  # six runs: a full build, a kept, touched, added, changed, removed and named run
    runs = few_runs(history[0], reports, 6)
    last = runs[-1]
    parked = tmp_path / last.name
    shutil.move(last, parked)
    assert not (reports / ".sweep-history.sqlite").exists()  # a full build, in worker processes (several runs)
    first = build([reports])
    assert len(first.update.read) == 5 and first.update.kept == 0
    again = build([reports])
    assert again.update.read == () and again.update.kept == 5
    os.utime(runs[0] / "manifest.json")  # touched, not changed: the digest says so
    assert build([reports]).update.read == ()
    shutil.move(parked, last)  # a new run
    added = build([reports])
    assert [os.path.basename(p) for p in added.update.read] == [last.name] and added.update.kept == 5
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    manifest["state"] = "interrupted"
    (runs[0] / "manifest.json").write_text(json.dumps(manifest))
    assert [os.path.basename(p) for p in build([reports]).update.read] == [runs[0].name]
    shutil.rmtree(runs[1])
    gone = build([reports])
    assert [os.path.basename(p) for p in gone.update.removed] == [runs[1].name]
    assert len(gone.selection.runs) == 5
    two = build([runs[-3], runs[-2]])  # named run folders: read those, keep the rest of the root's index
    assert len(two.selection.runs) == 2 and two.update.removed == () and two.update.read == ()
    everything = build([reports])
    assert len(everything.selection.runs) == 5 and everything.update.read == ()


def test_since_and_host_select(history):
    reports, _ = history
    now = datetime(2026, 11, 15, 12, tzinfo=timezone.utc).timestamp()
    recent = build([reports], since="3w", now=now)
    assert len(recent.selection.runs) == 21  # 2026-10-26 .. 2026-11-15
    assert {c.host for c in recent.changes} == {"gpu15"}  # the driver changed on 2026-11-02
    assert recent.update.read == ()  # the copy's index is current
    one = build([reports], host="gpu2*")
    assert {c.host for c in one.changes} == {"gpu22"} and {d.host for d in one.drift} <= {
        f"gpu{n}" for n in range(20, 30)}


def add_fact(monkeypatch, fact) -> None:
    """Declare one more fact in the fact table (every view of it) for this test."""
    for name, value in facts.derived(facts.FACTS + (fact,)).items():
        monkeypatch.setattr(facts, name, value)


def test_keys_come_from_the_comparability_key_table(history, tmp_path, monkeypatch):
    """A fact added to the fact table (as other work adds PCIe, NVLink, IB) is in the history unchanged."""
    reports = tmp_path / "few"  # every run holds all 40 hosts: three runs show the new key as well as 45
    few_runs(history[0], reports, 3)
    monkeypatch.setattr(index_module, "MAX_WORKERS", 1)  # runs read here: spawned workers would not see the patch
    add_fact(monkeypatch, facts.Fact(name="kernel_test", label="Kernel (test)", scope="host", columns=("hostname",),
                                     render=lambda r: "odd" if r["hostname"] == "gpu07" else "even",
                                     impact=[(None, "{value}")], diff_kind="host", no_metric="a test"))
    result = build([reports])
    spans = result.spans[result.spans["key"] == "kernel_test"]
    assert set(spans["value"]) == {"odd", "even"} and set(spans[spans["value"] == "odd"]["host"]) == {"gpu07"}
