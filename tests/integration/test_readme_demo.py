"""The README's first command, `sweep demo`, run as a user would run it."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import require

ROOT = Path(__file__).resolve().parents[2]


def test_sweep_demo_sweeps_and_reports_the_demo_fleet(tmp_path):
    require(shutil.which("sshd") is not None or Path("/usr/sbin/sshd").exists(),
            "openssh-server is not installed (apt-get install openssh-server)")
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "demo"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    runs = list((tmp_path / "reports").glob("*-demo"))
    assert len(runs) == 1, proc.stderr
    run = runs[0]
    assert proc.returncode == 1, proc.stderr  # the demo fleet has unreachable hosts
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert summary["hosts_total"] == 43 and summary["comparable"] is False
    assert len(list((run / "hosts").glob("*.json"))) == 43
    assert (run / "report" / "report.html").stat().st_size > 10_000
    assert "report:" in proc.stderr and "demo done" in proc.stderr
    left = subprocess.run(["pgrep", "-f", "sshd.*sweep-demo-"], capture_output=True, text=True).stdout
    assert left == "", "the demo fleet's sshd servers were not torn down"
