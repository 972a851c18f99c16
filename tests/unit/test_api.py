"""The public API (`import sweep`): the five steps an operator scripts, end to end on recorded hosts."""
import subprocess
import sys
from pathlib import Path

import fleet_variants as fv
import sweep

ROOT = Path(__file__).resolve().parents[2]


def test_import_sweep_is_cheap_and_lists_its_api():
    code = "import sys, sweep; print(sorted(m for m in ('pandas', 'paramiko', 'jinja2') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert {"load_inventory", "run_sweep", "load_fleet", "compare", "build_report"} <= set(dir(sweep))
    for name in sweep.__all__[1:]:
        assert getattr(sweep, name).__doc__, name


def test_inventory_fleet_compare_report(tmp_path):
    inventory = sweep.load_inventory(ROOT / "inventories" / "example.yml")
    assert inventory.hosts and all(isinstance(h, sweep.Host) for h in inventory.hosts)
    fv.write_run(tmp_path / "run", [fv.record(n, fv.h200(2, n)) for n in ("gpu01", "gpu02")])
    fleet = sweep.load_fleet([tmp_path / "run"])
    findings = sweep.compare(fleet)
    assert len(findings.classes) == 1
    report = sweep.build_report([tmp_path / "run"], tmp_path / "report")
    assert report.exit_code == 0 and report.files["html"].is_file()


def test_unknown_name_is_an_attribute_error():
    try:
        sweep.no_such_thing
    except AttributeError as err:
        assert "no_such_thing" in str(err)
    else:
        raise AssertionError("no AttributeError")
