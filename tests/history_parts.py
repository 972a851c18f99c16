"""What the history and Prometheus tests share: one generated six-week history per test process,
and the real Prometheus parts from Debian (required under CI, skipped with the fix elsewhere)."""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from pathlib import Path

from helpers import require
from sweep.history import build
from sweep.demo.history import six_weeks

PROMTOOL = "/usr/bin/promtool"
PROMETHEUS = "/usr/bin/prometheus"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
INSTALL = "apt-get install -y --no-install-recommends prometheus prometheus-node-exporter"


def require_part(binary: str) -> str:
    """The path of a real Prometheus part; missing: a failure under CI (CI=true), else a skip."""
    require(os.access(binary, os.X_OK), f"{binary} ({INSTALL})")
    return binary


@functools.lru_cache(maxsize=1)
def _generated() -> tuple[Path, tuple]:
    root = Path(tempfile.mkdtemp(prefix="sweep-six-weeks-"))
    atexit.register(shutil.rmtree, root, True)
    story = six_weeks(root / "reports")
    build([root / "reports"])  # the index, once: copies of reports/ carry it (its paths are relative)
    return root / "reports", tuple(story)


def six_week_history(tmp_path: Path) -> tuple[Path, tuple]:
    """A private copy of the generated history (reports/ with 42 daily run folders) and its story."""
    source, story = _generated()
    target = tmp_path / "reports"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("history"))
    return target, story
