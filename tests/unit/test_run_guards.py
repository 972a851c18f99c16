"""What one hostile input or a second sweep cannot do to a run folder, each refused with exit 2 and one line.

Record names that collide, two sweeps on one folder, symbolic links planted in a run folder, an
empty host name, YAML alias bombs and runaway host ranges: each is refused before anything is
written, with one line naming the file (and line) or the holder and the fix, and nothing is written
outside the run folder. Also: the CSV files of a report neutralise spreadsheet formulas.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweep.cli import main
from sweep.errors import RunFolderError
from sweep.store import RECORD_VERSION, RunFolder, safe_name

REPO = Path(__file__).resolve().parents[2]
HEALTH = json.loads((REPO / "tests" / "fixtures" / "h200" / "idle.health.json").read_text())


def tree(root: Path) -> dict[str, bytes | str]:
    """Every path under root (links not followed) with its content or link target."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                found[rel] = "-> " + os.readlink(path)
            elif path.is_file():
                found[rel] = path.read_bytes()
            else:
                found[rel] = "dir"
    return found


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sweep: error: "), err
    return err[len("sweep: error: "):-1]


def record(host: str, health: dict | None = None) -> dict:
    return {"record_version": RECORD_VERSION, "host": host, "address": "127.0.0.1", "port": None,
            "status": "ok", "failure": None, "attempts": 1, "started_at": "2026-11-30T12:00:00.000Z",
            "ended_at": "2026-11-30T12:00:01.000Z", "duration_s": 1.0, "exit_status": 0, "stderr": "",
            "health": health or HEALTH}


def inventory(tmp_path: Path, hosts=("gpu01", "gpu02")) -> Path:
    path = tmp_path / "inventory.yml"
    lines = ["all:", "  hosts:"] + [f"    {h}: {{ansible_host: 127.0.0.1, ansible_port: 1}}" for h in hosts]
    path.write_text("\n".join(lines) + "\n")
    return path


def finished_run(tmp_path: Path, hosts=("gpu01", "gpu02")) -> Path:
    """A complete run folder of `hosts` as `sweep run` leaves it (no lock held)."""
    inv = inventory(tmp_path, hosts)
    run = tmp_path / "run"
    folder = RunFolder.create(run)
    folder.write_manifest({"format": "sweep-run", "record_version": RECORD_VERSION, "sweep_version": "0.1.0",
                           "inventory": {"path": str(inv), "snapshot": {}}, "options": {},
                           "started_at": "2026-11-30T12:00:00.000Z", "ended_at": None, "state": "running",
                           "hosts": list(hosts), "sessions": []})
    for host in hosts:
        folder.write_record(record(host))
    folder.close()
    return run


# --- record names --------------------------------------------------------------------------------


def test_record_names_keep_the_whole_digest():
    assert safe_name("gpu01.dc1") == "gpu01.dc1"
    name = safe_name("gpu 01/../x")
    cleaned, _, digest = name.partition("~")
    assert len(digest) == 64 and all(c in "0123456789abcdef" for c in digest) and len(name) <= 120


def test_a_record_is_never_written_onto_another_hosts_file(tmp_path, capsys):
    """A file that holds host A's record where host B's would go: --resume refuses, exit 2, A's record kept."""
    run = finished_run(tmp_path, hosts=("gpu01", "gpu02"))
    victim = run / "hosts" / "gpu02.json"
    planted = record("gpu01")
    victim.write_text(json.dumps(planted))  # gpu02's file now holds gpu01's record (an old collision)
    before = tree(tmp_path)
    assert main(["run", "--resume", str(run), "--no-report", "--connect-timeout", "1", "--host-deadline", "2"]) == 2
    line = one_line(capsys)
    assert line == (f"{run / 'hosts'}: gpu02.json holds the record of host 'gpu01', not of 'gpu02': sweep never "
                    "writes one host's record onto another's; move that file out of the run folder, or start a "
                    "new run")
    assert json.loads(victim.read_text()) == planted
    after = tree(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("run/")} == \
        {k: v for k, v in before.items() if not k.startswith("run/")}


def test_two_host_names_on_one_record_file_are_refused_before_any_host_is_contacted(tmp_path, capsys):
    """A case-folding file system makes gpu01 and GPU01 one file: refused up front, nothing written."""
    inv = inventory(tmp_path, hosts=("gpu01", "gpu02"))
    folder = RunFolder.create(tmp_path / "run")
    folder.write_manifest({"format": "sweep-run", "record_version": RECORD_VERSION, "state": "running",
                           "hosts": ["gpu01"], "sessions": []})
    folder.write_record(record("gpu01"))
    with pytest.raises(RunFolderError, match="holds the record of host 'gpu01', not of 'GPU01'"):
        folder.check_record_file("GPU01", path=folder.record_path("gpu01"))
    folder.close()
    assert inv.exists()


# --- one sweep per run folder ---------------------------------------------------------------------

HOLDER = ("import sys, time\nsys.path.insert(0, sys.argv[2])\nfrom sweep.store import RunFolder\n"
          "folder = RunFolder.create(sys.argv[1]) if sys.argv[3] == 'create' else RunFolder.open(sys.argv[1])\n"
          "print('holding', flush=True)\ntime.sleep(60)\n")


def hold(run: Path, how: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run), str(REPO), how], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline() == "holding\n"
    return proc


def test_a_second_sweep_on_a_locked_folder_exits_2_naming_the_holder(tmp_path, capsys):
    run = tmp_path / "run"
    inv = inventory(tmp_path)
    holder = hold(run, "create")
    try:
        before = tree(tmp_path)
        assert main(["run", str(inv), "--out", str(run), "--no-report"]) == 2
        assert one_line(capsys) == (f"{run}: is in use by another sweep (pid {holder.pid}, which holds "
                                    f"{run / '.lock'}); wait for it to end, or choose another --out")
        assert tree(tmp_path) == before
    finally:
        holder.kill()
        holder.wait()


def test_resume_takes_the_same_lock(tmp_path, capsys):
    run = finished_run(tmp_path)
    holder = hold(run, "open")
    try:
        before = tree(tmp_path)
        assert main(["run", "--resume", str(run), "--no-report"]) == 2
        assert f"is in use by another sweep (pid {holder.pid}" in one_line(capsys)
        assert tree(tmp_path) == before
    finally:
        holder.kill()
        holder.wait()
    folder = RunFolder.open(run)  # the holder is gone: its lock went with it
    folder.close()


def test_two_sweeps_started_together_one_wins(tmp_path):
    """Both started at once on one --out: exactly one sweeps, the other exits 2 and mixes nothing in."""
    inv = inventory(tmp_path, hosts=[f"gpu{i:02d}" for i in range(1, 9)])
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "sweep.cli", "run", str(inv), "--out", str(run), "--no-report",
            "--connect-timeout", "1", "--host-deadline", "2"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    codes = sorted(p.wait(timeout=120) for p in procs)
    errs = [p.stderr.read() for p in procs]
    assert codes == [1, 2], errs  # the winner: every host refused (exit 1); the other: exit 2
    # Which refusal the other meets depends on when it starts, and a loaded machine can start it after the
    # winner ended: while the winner sweeps, the lock is held; after, the folder holds a finished run.
    loser = next(e for p, e in zip(procs, errs) if p.returncode == 2)
    assert "is in use by another sweep (pid" in loser or "already holds a sweep run" in loser, loser
    manifest = json.loads((run / "manifest.json").read_text())
    assert len(manifest["sessions"]) == 1 and manifest["state"] == "complete"


# --- symbolic links in a run folder -----------------------------------------------------------------


@pytest.mark.parametrize("planted", ["report/report.html", "report/fleet.csv", "report/hosts.csv", "report/pool.txt",
                                     "report/held_out.txt", "report"])
def test_sweep_report_never_writes_through_a_link(tmp_path, capsys, planted):
    run = finished_run(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / ("dir" if planted == "report" else "victim")
    if planted == "report":
        target.mkdir()
    else:
        target.write_text("precious\n")
        (run / "report").mkdir()
    (run / planted).symlink_to(target)
    before = tree(outside)
    assert main(["report", str(run)]) == 2
    assert one_line(capsys) == (f"{run}: {planted} is a symbolic link; sweep never writes through a link in a "
                                "run folder; remove the link, or write the report elsewhere with --out")
    assert tree(outside) == before


def test_resume_never_follows_a_linked_hosts_folder(tmp_path, capsys):
    run = finished_run(tmp_path)
    outside = tmp_path / "outside"
    (run / "hosts").rename(outside)
    (outside / ".tmp-keep.json").write_text("not sweep's\n")
    (run / "hosts").symlink_to(outside)
    before = tree(outside)
    assert main(["run", "--resume", str(run), "--no-report"]) == 2
    assert one_line(capsys) == (f"{run}: hosts is a symbolic link; sweep never writes through a link in a run "
                                "folder; remove the link, or start a new run")
    assert tree(outside) == before


# --- spreadsheet formulas ---------------------------------------------------------------------------


def test_csv_cells_from_hosts_are_inert_in_a_spreadsheet(tmp_path):
    hostile = json.loads(json.dumps(HEALTH))
    hostile["host"]["hostname"] = "=HYPERLINK(\"http://x\",\"y\")"
    hostile["gpus"][0]["name"] = "+cmd|' /C calc'!A0"
    hostile["summary"] = "@SUM(A1)\x00\u202eevil\u202c"
    hostile["verdict"] = "warning"  # a host with something to say: its block under Hosts shows its summary
    hostile["gpus"][0]["power"]["draw_w"] = -12.5
    run = tmp_path / "run"
    folder = RunFolder.create(run)
    folder.write_manifest({"format": "sweep-run", "record_version": RECORD_VERSION, "state": "complete",
                           "hosts": ["-2+3", "\tgpu02"], "sessions": []})
    folder.write_record(record("-2+3", hostile))
    folder.write_record(record("\tgpu02"))
    folder.close()
    assert main(["report", str(run)]) in (0, 1, 3, 4)
    hosts = list(csv.DictReader(open(run / "report" / "hosts.csv", newline="", encoding="utf-8")))
    gpus = list(csv.DictReader(open(run / "report" / "fleet.csv", newline="", encoding="utf-8")))
    names = {row["host"] for row in hosts}
    assert names == {"'-2+3", "'\tgpu02"}
    row = next(r for r in hosts if r["host"] == "'-2+3")
    assert row["hostname"] == "'=HYPERLINK(\"http://x\",\"y\")"
    assert row["summary"] == "'@SUM(A1)\\u202eevil\\u202c"
    gpu = next(r for r in gpus if r["host"] == "'-2+3")
    assert gpu["name"] == "'+cmd|' /C calc'!A0"
    assert gpu["power_draw_w"] == "-12.5"  # a real negative number stays a number
    for rows in (hosts, gpus):
        for r in rows:
            for cell in r.values():
                assert cell[:1] not in ("=", "+", "@", "\t", "\r") and "\x00" not in cell
                assert not cell.startswith("-") or float(cell) < 0
    html = (run / "report" / "report.html").read_text(encoding="utf-8")
    assert "\u202e" not in html and "\\u202e" in html


# --- inventories -----------------------------------------------------------------------------------


def test_an_empty_host_name_is_refused_with_its_line(tmp_path, capsys):
    inv = tmp_path / "inventory.yml"
    inv.write_text("all:\n  children:\n    rack_a:\n      hosts:\n        gpu01:\n        '': {ansible_host: 127.0.0.1}\n")
    before = tree(tmp_path)
    assert main(["run", str(inv), "--out", str(tmp_path / "run")]) == 2
    assert one_line(capsys) == (f"{inv}:6: empty host name in group 'rack_a'; give the host a name (its address "
                                "goes in ansible_host)")
    assert tree(tmp_path) == before


def test_an_empty_host_name_in_ini_is_refused_too(tmp_path, capsys):
    inv = tmp_path / "hosts.ini"
    inv.write_text("[rack_a]\ngpu01\n'' ansible_host=127.0.0.1\n")
    assert main(["run", str(inv), "--out", str(tmp_path / "run")]) == 2
    assert one_line(capsys).startswith(f"{inv}:3: empty host name in group 'rack_a'")
    assert not (tmp_path / "run").exists()


def laughs(levels: int, width: int) -> str:
    lines = ["all:", "  vars:", "    l0: &l0 [lol]"]
    for n in range(1, levels + 1):
        lines.append(f"    l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * width)}]")
    lines += ["  hosts:", "    gpu01: {ansible_host: 127.0.0.1}"]
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_before_it_is_expanded(tmp_path, capsys):
    inv = tmp_path / "inventory.yml"
    inv.write_text(laughs(9, 10))  # 10**9 values once expanded
    before = tree(tmp_path)
    start = time.monotonic()
    assert main(["run", str(inv), "--out", str(tmp_path / "run")]) == 2
    assert time.monotonic() - start < 10
    assert one_line(capsys) == (f"{inv}:1: YAML aliases expand this file by more than 1,000,000 values (an alias "
                                "bomb?); write the values out, or raise the limit with --max-yaml-values")
    assert tree(tmp_path) == before


def test_the_alias_limit_is_a_flag(tmp_path, capsys):
    inv = tmp_path / "inventory.yml"
    inv.write_text(laughs(3, 10))  # 1,111 values expanded
    assert main(["run", str(inv), "--out", str(tmp_path / "run"), "--max-yaml-values", "500"]) == 2
    assert "more than 500 values" in one_line(capsys)
    assert main(["run", str(inv), "--out", str(tmp_path / "run"), "--max-yaml-values", "5000", "--no-report",
                 "--connect-timeout", "1", "--host-deadline", "2"]) == 1  # loads; its one host refuses


def test_a_runaway_host_range_is_refused_with_its_line(tmp_path, capsys):
    inv = tmp_path / "inventory.yml"
    inv.write_text("all:\n  children:\n    big:\n      hosts:\n        h[0000000:9999999]:\n")
    before = tree(tmp_path)
    start = time.monotonic()
    assert main(["run", str(inv), "--out", str(tmp_path / "run")]) == 2
    assert time.monotonic() - start < 10
    assert one_line(capsys) == (f"{inv}:5: host range 'h[0000000:9999999]' makes 10,000,000 hosts, more than the "
                                "limit of 100,000; split the range, or raise the limit with --max-range-hosts")
    assert tree(tmp_path) == before


def test_the_range_limit_is_a_flag(tmp_path, capsys):
    inv = tmp_path / "hosts.ini"
    inv.write_text("[rack]\nh[00:19] ansible_host=127.0.0.1 ansible_port=1\n")
    assert main(["run", str(inv), "--out", str(tmp_path / "a"), "--max-range-hosts", "10"]) == 2
    assert "makes 20 hosts, more than the limit of 10" in one_line(capsys)
    assert not (tmp_path / "a").exists()
    assert main(["run", str(inv), "--out", str(tmp_path / "b"), "--max-range-hosts", "20", "--no-report",
                 "--connect-timeout", "1", "--host-deadline", "2"]) == 1
    assert len(list((tmp_path / "b" / "hosts").iterdir())) == 20
