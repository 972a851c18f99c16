"""What the history and Prometheus tests share: one generated six-week history per test run (all
pytest-xdist workers share it), and the real Prometheus parts from Debian (required under CI, skipped
with the fix elsewhere)."""
from __future__ import annotations

import fcntl
import functools
import os
import shutil
from pathlib import Path

from helpers import require
from sweep.history import build
from sweep.demo.history import degradations, six_weeks

PROMTOOL = "/usr/bin/promtool"
PROMETHEUS = "/usr/bin/prometheus"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
INSTALL = "apt-get install -y --no-install-recommends prometheus prometheus-node-exporter"


def require_part(binary: str) -> str:
    """The path of a real Prometheus part; missing: a failure under CI (CI=true), else a skip."""
    require(os.access(binary, os.X_OK), f"{binary} ({INSTALL})")
    return binary


def run_temp(tmp_path_factory) -> Path:
    """A folder of this test run that every pytest-xdist worker shares: the run's base temp (pytest keeps the
    last three runs' and removes older ones); without xdist, this process's."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@functools.lru_cache(maxsize=None)
def _generated(shared: Path) -> tuple[Path, tuple]:
    """The six weeks under `shared`, written once per test run: the first worker writes them (the others
    wait on the lock), the index built once with them (copies of reports/ carry it: its paths are relative)."""
    root = shared / "six-weeks"
    with open(shared / "six-weeks.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "written").is_file():
            shutil.rmtree(root, ignore_errors=True)  # a worker that died half way
            six_weeks(root / "reports")  # the demo's own story (degradations()), the same in every worker
            build([root / "reports"])
            (root / "written").touch()
    return root / "reports", tuple(degradations())


def six_week_history(tmp_path: Path, tmp_path_factory) -> tuple[Path, tuple]:
    """A private copy of the generated history (reports/ with 42 daily run folders) and its story."""
    source, story = _generated(run_temp(tmp_path_factory))
    target = tmp_path / "reports"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("history"))
    return target, story
