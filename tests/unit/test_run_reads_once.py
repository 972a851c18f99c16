"""`sweep run` reads its run's records once (issue 52): the history index and the report were each
reading every record of the run again (about 4 s of CPU each at 10,000 hosts x 8 GPUs); now the
report's read serves both, and both still come out whole."""

import collections
import json
import sqlite3
import sys
from pathlib import Path

from sweep.analysis import fleet as fleet_module
from sweep.cli import main
from sweep.collect import engines

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "sweep" / "demo" / "captures" / "h200-idle.json"
PODS = ("pod1", "pod2", "pod3")

LOCAL = '''"""The agent as a local process per host (as in test_engine_declaration)."""
from sweep.collect.engines.base import HostProcessEngine


class LocalEngine(HostProcessEngine):
    name = "local"

    def argv(self, host):
        return ["sh", "-c", self.remote(host)]
'''


def sweep_run(tmp_path, monkeypatch, *extra):
    (tmp_path / "local_engine.py").write_text(LOCAL)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(engines.ENGINES, "local", "local_engine:LocalEngine")
    monkeypatch.setenv("SWEEP_REPLAY", str(CAPTURE))
    inventory = tmp_path / "pods.yml"
    inventory.write_text(
        "all:\n  hosts:\n"
        + "".join(f"    {pod}: {{}}\n" for pod in PODS)
        + f"  vars:\n    ansible_python_interpreter: {sys.executable}\n"
    )
    reads = collections.Counter()
    real = fleet_module._read_json

    def counted(path, digest=None):
        reads[Path(path).name] += 1
        return real(path, digest)

    monkeypatch.setattr(fleet_module, "_read_json", counted)
    run = tmp_path / "reports" / "run1"
    code = main(["run", str(inventory), "--engine", "local", "--out", str(run), *extra])
    return code, run, reads


def test_the_records_are_read_once_for_the_history_index_and_the_report(tmp_path, monkeypatch):
    code, run, reads = sweep_run(tmp_path, monkeypatch)
    assert reads == {f"{pod}.json": 1 for pod in PODS}
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert summary["host_sets"]["pool"]["hosts"] == list(PODS) and code == summary["exit_code"]
    with sqlite3.connect(run.parent / ".sweep-history.sqlite") as db:
        indexed = {name for (name,) in db.execute("SELECT name FROM hosts")}
        runs = db.execute("SELECT count(*) FROM runs").fetchone()[0]
    assert indexed == set(PODS) and runs == 1


def test_an_audited_run_reads_once_and_keeps_what_the_audit_judges(tmp_path, monkeypatch):
    expect = tmp_path / "expect.yml"
    expect.write_text("version: 1\ndefaults:\n  ecc: true\n")
    code, run, reads = sweep_run(tmp_path, monkeypatch, "--expect", str(expect))
    assert reads == {f"{pod}.json": 1 for pod in PODS}
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert summary["exit_code"] == code and "audit" in json.dumps(summary)


def test_a_no_report_run_reads_no_record(tmp_path, monkeypatch):
    code, run, reads = sweep_run(tmp_path, monkeypatch, "--no-report")
    assert code == 0 and not reads and not (run / "report").exists()
