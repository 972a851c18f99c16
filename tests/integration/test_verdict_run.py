"""`sweep run --speed` over loopback sshds where one host's speed tier failed and another's kernel log is
not readable (issue 35): the terminal and the report's top box (in headless Chromium) name both, with their
hosts and fix, and the run exits 1 as the README's table says (a tier asked for and not measured)."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from sweep.cli import main
from sweep.demo.loopback import FleetHost, LocalFleet

from browser_page import Page
from helpers import CHROMIUM, chromium, require

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "sweep" / "demo" / "captures" / "h200-speed.json"
FAILED = {"status": "failed", "reason": "the speed child exited 1: CUDA error: out of memory", "gpus": [], "p2p": [],
          "allreduce": {"skipped": "the tier failed"}}
UNREAD = {"source": None, "lines": [], "complete": False,
          "tried": {"/dev/kmsg": "PermissionError: [Errno 1] Operation not permitted",
                    "journalctl -k": "FileNotFoundError: journalctl"}}


def variant(folder: Path, name: str, **changes) -> str:
    """The H200 --speed capture with a section replaced: the speed tier failed, or the kernel log unreadable."""
    data = json.loads(CAPTURE.read_text())
    data.update(changes)
    data["note"] = f"derived from {CAPTURE.name}: {', '.join(changes)} replaced (tests/integration/test_verdict_run.py)"
    path = folder / f"{name}.json"
    path.write_text(json.dumps(data))
    path.chmod(0o644)
    return str(path)


@pytest.fixture(scope="module")
def fleet(needs_sshd, tmp_path_factory):
    work = tmp_path_factory.mktemp("verdict")
    os.chmod(work, 0o755)
    hosts = [FleetHost("gpu01", capture=str(CAPTURE)),
             FleetHost("gpu02", capture=variant(work, "speed-failed", speed=FAILED)),
             FleetHost("gpu03", capture=variant(work, "kmsg-unread", kernel_log=UNREAD))]
    with LocalFleet(hosts, work / "fleet") as running:
        yield running


def test_a_failed_tier_and_an_unread_kernel_log_are_said_and_the_run_is_incomplete(fleet, tmp_path, capsys):
    old = os.environ.get("HOME")
    os.environ["HOME"] = str(fleet.home)
    try:
        code = main(["run", str(fleet.inventory_path), "--out", str(tmp_path / "run"), "--speed",
                     "--known-hosts", str(fleet.ssh_settings().known_hosts[0])])
    finally:
        os.environ["HOME"] = old
    out = capsys.readouterr().out
    assert code == 1  # README: a tier asked for (--speed) and not measured on a host: incomplete
    speed = next(line for line in out.splitlines() if line.startswith("speed not measured"))
    assert speed.startswith("speed not measured on 1 host (gpu02; gpu02: failed: the speed child exited 1: "
                            "CUDA error: out of memory): ")
    assert "sweep run --speed again" in speed
    xid = next(line for line in out.splitlines() if line.startswith("xid not read"))
    assert xid.startswith("xid not read on 1 host (gpu03; gpu03: kernel log not readable (/dev/kmsg: PermissionError")
    assert xid.endswith("give the probe read access to the kernel log (dmesg_restrict, systemd-journal group) "
                        "to see Xid events")

    report = tmp_path / "run" / "report"
    summary = json.loads((report / "summary.json").read_text())
    assert summary["exit_code"] == 1 and summary["host_sets"]["pool"]["hosts"] == ["gpu01", "gpu02", "gpu03"]
    assert [n["hosts"] for n in summary["verdict_model"]["notes"] if n["said"] == "not measured"] == [["gpu02"]]
    require(os.access(CHROMIUM, os.X_OK), "/usr/bin/chromium is absent: apt-get install -y chromium")
    with Page((report / "report.html").resolve().as_uri()) as page:  # what a person sees in the top box
        shown = page.text("#verdict")
        tiles = page.evaluate("[...document.querySelectorAll('#verdict a.stat')].map(a => [a.id, "
                              "+a.querySelector('b').innerText])")
    assert f"not measured {speed}" in shown and f"not read {xid}" in shown
    assert "EXIT CODE 1: a figure asked for was not measured on some host" in shown  # the kicker is upper case
    counts = dict(tiles)
    assert counts["pool-size"] == 3 and counts["tile-broken"] == 0 and counts["tile-unreachable"] == 0
    dom = chromium("--dump-dom", (report / "report.html").resolve().as_uri())
    box = dom[dom.index('id="verdict"'):dom.index("</section>")]
    notes = [re.sub(r"\s+", " ", n) for n in re.findall(r'<p class="note verdict-note"[^>]*>(.*?)</p>', box, re.S)]
    assert f'<span class="badge b-unknown">not measured</span> {speed}' in notes
    assert f'<span class="badge b-unknown">not read</span> {xid}' in notes
    assert "exit code 1" in box
