"""drain.sh and resume.sh applied to a real one-node Slurm (slurmctld + slurmd on loopback): the
report's broken host is this machine's Slurm node, with an Xid 79 in its kernel log."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
import fleet_variants as fv  # noqa: E402

from sweep.report.build import build_report  # noqa: E402

from slurm_parts import one_node_slurm  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    with one_node_slurm(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster


def _slurm(env: dict, *argv: str) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _node(env: dict, node: str) -> dict:
    """`scontrol show node -o NODE` as a dict; Reason (the last field, with blanks) kept whole."""
    line = _slurm(env, "scontrol", "show", "node", "-o", node).strip()
    head, _, reason = line.partition(" Reason=")
    fields = dict(item.split("=", 1) for item in head.split() if "=" in item)
    if reason:
        fields["Reason"] = reason
    return fields


def test_drain_sh_drains_the_broken_node_with_its_reason_and_resume_sh_resumes_it(slurm, tmp_path):
    node, env = slurm["node"], dict(os.environ, SLURM_CONF=slurm["conf"])
    records = [fv.record(node, fv.xid(fv.h200(8, node), code=79)),
               *(fv.record(name, fv.h200(8, name)) for name in ("gpu02", "gpu03"))]
    fv.write_run(tmp_path / "run", records)
    report = build_report([tmp_path / "run"], tmp_path / "report")
    [drain] = report.summary["drain"]
    assert drain["hosts"] == [node] and drain["reason"] == "sweep: reboot: Xid 79 GPU has fallen off the bus"
    assert report.summary["host_sets"]["broken"]["hosts"] == [node]
    assert not _node(env, node)["State"].endswith("DRAIN")

    subprocess.run(["sh", str(report.files["drain"])], env=env, check=True, timeout=120)
    shown = _node(env, node)
    assert "DRAIN" in shown["State"].split("+")
    assert shown["Reason"].startswith(drain["reason"] + " [")  # Slurm appends [user@time]
    listed = _slurm(env, "sinfo", "-R", "-h", "-N", "-o", "%N|%E").strip()
    assert listed == f"{node}|{drain['reason']}"

    subprocess.run(["sh", str(report.files["resume"])], env=env, check=True, timeout=120)
    shown = _node(env, node)
    assert "DRAIN" not in shown["State"].split("+") and "Reason" not in shown
    assert _slurm(env, "sinfo", "-R", "-h", "-N", "-o", "%N|%E").strip() == ""
