"""history.html in a real headless Chromium: drifted host first, host strings stay text, no network."""
from __future__ import annotations

import json
import os

import pytest

from helpers import CHROMIUM, Tags, chromium, require
from history_parts import six_week_history
from sweep.history import build_history
from sweep.store import RunFolder

HOSTILE = "<img src=x onerror=document.title='pwned'>"

pytestmark = pytest.mark.integration


def test_history_page_in_a_browser(tmp_path):
    require(os.access(CHROMIUM, os.X_OK), "/usr/bin/chromium is absent: apt-get install -y chromium")
    reports, _ = six_week_history(tmp_path)
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
