"""Failure classes declared once (`sweep.failures.FailureClass`): what engines record, what the report advises."""
import ast
import json
import subprocess
import sys
from pathlib import Path

from sweep.analysis import compare, fleet as fleet_mod
from sweep.failures import FAILURE_CLASSES, TRANSIENT_CLASSES, FailureClass, HostFailure

ROOT = Path(__file__).resolve().parents[2]


def test_every_class_carries_its_fix_and_whether_it_is_transient():
    for c in FailureClass:
        assert c.fix and isinstance(c.transient, bool), c
        assert str(c) == f"{c}" == c.value and json.dumps(c) == f'"{c.value}"'  # records hold the plain value
    assert TRANSIENT_CLASSES == ("dns", "refused", "timeout", "host_key_unknown")
    assert set(TRANSIENT_CLASSES) <= set(FAILURE_CLASSES)
    assert "not_probed" not in FAILURE_CLASSES and "interrupted" not in FAILURE_CLASSES


def _raised_classes():
    """The class names every `HostFailure("...")` and engine table in sweep/ writes."""
    for path in sorted((ROOT / "sweep").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "HostFailure" and node.args
                    and isinstance(node.args[0], ast.Constant)):
                yield f"{path.relative_to(ROOT)}:{node.lineno}", node.args[0].value
    from sweep.collect.engines import ansible
    for cls, _ in ansible._UNREACHABLE:
        yield "ansible._UNREACHABLE", cls


def test_every_class_the_code_records_is_declared():
    found = list(_raised_classes())
    assert len(found) > 30
    unknown = [(where, cls) for where, cls in found if cls not in {c.value for c in FailureClass}]
    assert not unknown


def test_an_undeclared_class_is_refused_where_it_is_raised():
    try:
        HostFailure("hung", "gpu01: hung")
    except ValueError as err:
        assert "hung" in str(err)
    else:
        raise AssertionError("HostFailure took a class no table declares")


def test_the_ansible_and_slurm_engines_load_no_paramiko():
    code = ("import sys; import sweep.collect.engines.ansible, sweep.collect.engines.slurm; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'paramiko' or m.startswith('sweep.collect.ssh')))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_report_advises_each_unreachable_host_with_its_class_fix(tmp_path):
    """An unreachable host's finding carries the fix its class declares, for every class a record may hold."""
    run = tmp_path / "run"
    (run / "hosts").mkdir(parents=True)
    names = [f"h{n:02d}" for n in range(len(FailureClass))]
    for name, cls in zip(names, FailureClass):
        record = {"record_version": 1, "host": name, "groups": [], "status": "failed", "health": None,
                  "failure": {"class": cls.value, "message": f"{name}: it failed"}}
        (run / "hosts" / f"{name}.json").write_text(json.dumps(record))
    found = compare.compare(fleet_mod.load_fleet([run]))
    fixes = {f.host: f.fix for f in found.health if f.kind == "unreachable"}
    assert fixes == {name: cls.fix for name, cls in zip(names, FailureClass)}


def test_retry_failed_retries_the_declared_transient_classes():
    """`sweep run --resume RUN --retry-failed` with no class named: the classes the enum marks transient."""
    import pytest

    from sweep.collect.resume import retry_classes
    from sweep.errors import ConfigError

    assert retry_classes([]) == tuple(c.value for c in FailureClass if c.probed and c.transient)
    assert retry_classes(["auth"]) == ("auth",)
    with pytest.raises(ConfigError) as refused:
        retry_classes(["not_probed"])  # not a class a probe ends with: nothing to retry by it
    assert "name one of dns, refused, timeout, host_key_unknown, host_key_changed" in str(refused.value)
