"""Hostile round 3 on the engines and ssh_config (issue 37): what a host, a node or an inventory value
can make the controller do. Real parts: loopback sshds (`LocalFleet`), a one-node Slurm as
tests/slurm_parts.py starts it, ansible-core's own ``ansible``, OpenSSH's ``ssh``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from slurm_parts import one_node_slurm

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024


def records(run_dir: Path) -> dict[str, dict]:
    return {r["host"]: r for r in (json.loads(p.read_text()) for p in sorted((run_dir / "hosts").glob("*.json")))}


# --- Slurm: one node's flood is bounded as it comes ---------------------------------------------

_PEAK = ("import resource, sys\nfrom sweep.cli import main\ncode = main(sys.argv[2:])\n"
         "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))\n"
         "sys.exit(code)\n")


def test_slurm_task_output_is_bounded_stream_wise(tmp_path):
    """A node whose interpreter prints 384 MiB (24 times the 16 MiB bound) is output_too_large, and the
    controller's own peak RSS (getrusage of the sweep process, not srun's) stays far below what it printed."""
    (tmp_path / "slurm").mkdir()
    with one_node_slurm(tmp_path / "slurm") as cluster:
        node = cluster["node"]
        flood = tmp_path / "flood-python"
        flood.write_text("#!/bin/sh\nhead -c %d /dev/zero | tr '\\0' x\n" % (384 * MiB))
        flood.chmod(0o755)
        inventory = tmp_path / "nodes.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": {node: {"ansible_python_interpreter": str(flood)}}}}))
        peak = tmp_path / "peak"
        env = {**os.environ, "SLURM_CONF": cluster["conf"], "PYTHONPATH": str(REPO)}
        done = subprocess.run([sys.executable, "-c", _PEAK, str(peak), "run", str(inventory), "--engine", "slurm",
                               "--host-deadline", "300", "--out", str(tmp_path / "run"), "--no-report"],
                              env=env, capture_output=True, text=True, timeout=600)
        found = records(tmp_path / "run")
        assert found[node]["status"] == "failed", done.stderr
        assert found[node]["failure"]["class"] == "output_too_large", found[node]["failure"]
        assert "16 MiB" in found[node]["failure"]["message"]
        peak_kib = int(peak.read_text())
        print(f"\ncontroller peak RSS with a 384 MiB flood: {peak_kib / 1024:.0f} MiB")
        assert peak_kib * 1024 < 200 * MiB, peak_kib
