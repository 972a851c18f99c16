"""The report's compiled template is kept in Jinja's own cache (a private folder of this user's cache home):
a later report loads it instead of compiling it, and writes the same report.html; a cache home where no
cache can be made gives no cache, never an error; a link planted where the cache would be is never
followed, and its target keeps its mode (issue 36)."""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import fleet_variants as fv

ROOT = Path(__file__).resolve().parents[2]


def _report(run: Path, out: Path, cache_home: Path, tmpdir: Path | None = None) -> str:
    env = dict(os.environ, XDG_CACHE_HOME=str(cache_home), TMPDIR=str(tmpdir or cache_home), PYTHONPATH=str(ROOT))
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
    caches = sorted(temp.glob("sweep/templates/*.cache"))
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


def _planted(tmp_path: Path, where: Path) -> tuple[Path, Path]:
    """A file and a folder of 0644 / 0755 another user's link at `where` points to (the folder first)."""
    target_file, target_dir = tmp_path / "victim-file", tmp_path / "victim-dir"
    target_file.write_text("x")
    target_file.chmod(0o644)
    target_dir.mkdir()
    target_dir.chmod(0o755)
    where.parent.mkdir(parents=True, exist_ok=True)
    return target_file, target_dir


def _as_nobody(*argv: str) -> bool:
    """Run `argv` as the user nobody (setpriv), if this machine lets us; whether it did."""
    if os.getuid() != 0 or not shutil.which("setpriv"):
        return False
    done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *argv],
                          capture_output=True, check=False)
    return done.returncode == 0


@pytest.mark.parametrize("kind", ["file", "dir"])
@pytest.mark.parametrize("place", ["jinja's temp name", "sweep's cache folder", "sweep's cache parent"])
def test_a_link_planted_where_the_cache_would_be_is_never_followed(tmp_path, kind, place):
    run = fv.write_run(tmp_path / "run", [fv.record("gpu01", fv.must_show_health("gpu01", 2))])
    temp, cache = tmp_path / "temp", tmp_path / "cache"
    temp.mkdir()
    temp.chmod(0o1777)  # a shared temp folder, as /tmp
    cache.mkdir()
    where = {"jinja's temp name": temp / f"_jinja2-cache-{os.getuid()}",
             "sweep's cache folder": cache / "sweep" / "templates", "sweep's cache parent": cache / "sweep"}[place]
    target_file, target_dir = _planted(tmp_path, where)
    target = target_file if kind == "file" else target_dir
    if not (place == "jinja's temp name" and _as_nobody("ln", "-s", str(target), str(where))):
        where.symlink_to(target)
    before = stat.S_IMODE(target.stat().st_mode)
    page = _report(run, tmp_path / "out", cache, temp)
    assert stat.S_IMODE(target.stat().st_mode) == before, "sweep changed the mode of a file through a link"
    assert "gpu01" in page
    if kind == "dir":
        assert not list(target.iterdir()), "sweep wrote its cache through a link"


def test_a_cache_folder_another_user_may_read_is_not_used(tmp_path):
    run = fv.write_run(tmp_path / "run", [fv.record("gpu01", fv.must_show_health("gpu01", 2))])
    cache = tmp_path / "cache"
    (cache / "sweep" / "templates").mkdir(parents=True)
    (cache / "sweep" / "templates").chmod(0o755)
    _report(run, tmp_path / "out", cache)
    assert not list((cache / "sweep" / "templates").iterdir())
    assert stat.S_IMODE((cache / "sweep" / "templates").stat().st_mode) == 0o755, "never chmod-ed"
