"""Issue 53: the agent runs isolated from the login session on the host, as its children do.

A host whose sshd gives every session a PYTHONPATH (``SetEnv``, as a login profile would) holding a
sitecustomize.py that leaves a mark: swept over a real sshd with the ssh engine (the bootstrap,
`python -I -c`), and with the ansible engine (`python -I agent.pyz`), the mark is never made and the
record is the host's health."""
from __future__ import annotations


import pytest

from sweep.collect.run import run_sweep
from sweep.demo.loopback import FleetHost, LocalFleet

from helpers import read_records, require
from test_engines import _ansible_missing


@pytest.fixture(scope="module")
def login_fleet(needs_sshd, tmp_path_factory):
    work = tmp_path_factory.mktemp("isolation")
    evil, marks = work / "login-pythonpath", work / "marks"
    evil.mkdir()
    marks.mkdir(mode=0o777)
    (evil / "sitecustomize.py").write_text(
        "import os, sys\n"
        f"open(os.path.join({str(marks)!r}, 'loaded-' + os.path.basename(sys.argv[0] or 'c')), 'w').close()\n")
    evil.chmod(0o755)
    host = FleetHost("iso01", env=(("PYTHONPATH", str(evil)),))
    with LocalFleet([host], work / "fleet") as fleet:
        yield fleet, marks


@pytest.mark.parametrize("engine", ["ssh", "ansible"])
def test_the_login_sessions_pythonpath_never_loads_into_the_agent(login_fleet, engine, tmp_path):
    if engine == "ansible":
        require(_ansible_missing() is None, f"ansible-core is not installed: {_ansible_missing()}")
    fleet, marks = login_fleet
    for mark in marks.iterdir():
        mark.unlink()
    result = run_sweep(fleet.inventory_path, out=tmp_path / engine, engine=engine,
                       ssh=fleet.ssh_settings(connect_timeout=5, host_deadline=60))
    record = read_records(tmp_path / engine)["iso01"]
    assert record["status"] == "ok", record.get("failure")
    assert sorted(p.name for p in marks.iterdir()) == [], f"{engine}: the login session's sitecustomize loaded"
    assert result.by_class == {}
