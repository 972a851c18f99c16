"""The report's compiled template is kept in Jinja's own cache (a folder of this user's under the temp
folder): a later report loads it instead of compiling it, and writes the same report.html; a temp
folder where no cache can be made gives no cache, never an error."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import fleet_variants as fv

ROOT = Path(__file__).resolve().parents[2]


def _report(run: Path, out: Path, tmpdir: Path) -> str:
    env = dict(os.environ, TMPDIR=str(tmpdir), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "sweep.cli", "report", str(run), "--out", str(out)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert (out / "report.html").is_file(), done.stderr  # exit 0-3: the verdict; the page is written either way
    page = (out / "report.html").read_text(encoding="utf-8").replace(str(out), "OUT")
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "WHEN", page)  # the time it was written


def test_a_report_after_the_first_loads_the_cached_template_and_writes_the_same_page(tmp_path):
    run = fv.write_run(tmp_path / "run", [fv.record(name, fv.must_show_health(name, 2)) for name in ("gpu01", "gpu05")])
    temp = tmp_path / "temp"
    temp.mkdir()
    first = _report(run, tmp_path / "first", temp)
    caches = sorted(temp.glob("_jinja2-cache-*/*.cache"))
    assert len(caches) == 1 and caches[0].stat().st_size > 10_000
    assert oct(caches[0].parent.stat().st_mode & 0o777) == "0o700"
    stamp = caches[0].stat().st_mtime_ns
    second = _report(run, tmp_path / "second", temp)
    assert caches[0].stat().st_mtime_ns == stamp, "the second report compiled the template again"
    assert second == first


def test_a_temp_folder_that_cannot_hold_a_cache_still_gives_the_report(tmp_path):
    run = fv.write_run(tmp_path / "run", [fv.record("gpu01", fv.must_show_health("gpu01", 2))])
    not_a_folder = tmp_path / "temp-is-a-file"
    not_a_folder.write_text("")
    cached_dir = tmp_path / "temp"
    cached_dir.mkdir()
    page = _report(run, tmp_path / "out", not_a_folder)
    assert page == _report(run, tmp_path / "out", cached_dir)
