"""The agent bundle: one file, a bare python3, nothing installed, nothing written on the host."""
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from sweep.collect.bundle import build_bundle, bundle_bytes, remote_command, wire_bytes, zipapp_of

from helpers import require

ROOT = Path(__file__).resolve().parents[2]
IDLE = ROOT / "sweep" / "demo" / "captures" / "h200-idle.json"


@pytest.fixture(scope="module")
def pyz(tmp_path_factory):
    return build_bundle(tmp_path_factory.mktemp("bundle") / "agent.pyz")


def test_bundle_runs_isolated_with_help(pyz):
    proc = subprocess.run([sys.executable, "-I", "-S", str(pyz), "--help"], capture_output=True, text=True,
                          cwd="/")
    assert proc.returncode == 0 and "health.json" in proc.stdout


def test_bundle_carries_pynvml_from_the_installed_package(pyz):
    import pynvml
    names = zipfile.ZipFile(pyz).namelist()
    assert "pynvml.py" in names and "probe_agent/main.py" in names
    assert zipfile.ZipFile(pyz).read("pynvml.py") == Path(pynvml.__file__).read_bytes()
    assert not any("sweep/" in n for n in names), "the agent ships without the controller"


def test_bundle_probe_from_an_empty_folder_writes_only_where_told(pyz, tmp_path):
    work = tmp_path / "cwd"
    work.mkdir()
    out = tmp_path / "out"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "SWEEP_REPLAY": str(IDLE)}
    (tmp_path / "home").mkdir()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    proc = subprocess.run([sys.executable, "-I", "-S", str(pyz), "--out", str(out)], capture_output=True,
                          text=True, cwd=work, env=env)
    assert proc.returncode == 0, proc.stderr
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert set(after) - set(before) == {Path("out"), Path("out/health.json"), Path("out/health-report.md")}
    assert json.loads(proc.stdout)["verdict"] == "ok"


def test_bootstrap_reads_the_bundle_from_stdin_and_leaves_nothing(tmp_path):
    payload = bundle_bytes()
    cmd = remote_command(sys.executable, len(payload), ["--replay", str(IDLE)])
    proc = subprocess.run(["sh", "-c", cmd], input=payload, capture_output=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["gpus"][0]["name"] == "NVIDIA H200"
    assert list(tmp_path.iterdir()) == []


def test_what_a_sweep_sends_is_every_source_once_in_one_stream_and_runs_the_same(tmp_path):
    """The wire bundle (issue 52): the zipapp's sources and data files, no .pyc, one zlib stream, and
    the bootstrap answers from it what it answers from the zipapp."""
    import io
    wire, pyz = wire_bytes(), bundle_bytes()
    sent = zipfile.ZipFile(io.BytesIO(zipapp_of(wire)))
    full = zipfile.ZipFile(io.BytesIO(pyz))
    assert sorted(sent.namelist()) == sorted(n for n in full.namelist() if not n.endswith(".pyc"))
    assert all(sent.read(n) == full.read(n) for n in sent.namelist())
    assert len(wire) < len(pyz) / 3, (len(wire), len(pyz))
    answers = []
    for payload in (wire, pyz):
        cmd = remote_command(sys.executable, len(payload), ["--replay", str(IDLE)])
        proc = subprocess.run(["sh", "-c", cmd], input=payload, capture_output=True, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr.decode()
        health = json.loads(proc.stdout)
        answers.append((health["verdict"], health["gpus"], health["contracts"]))
    assert answers[0] == answers[1]
    assert list(tmp_path.iterdir()) == []


def test_a_payload_is_run_as_a_file_by_the_ansible_engine(tmp_path):
    """`zipapp_of` gives a file `python3 FILE` runs, from either payload."""
    for payload in (wire_bytes(), bundle_bytes()):
        path = tmp_path / "agent.pyz"
        path.write_bytes(zipapp_of(payload))
        proc = subprocess.run([sys.executable, "-I", "-S", str(path), "--replay", str(IDLE)],
                              capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 0 and json.loads(proc.stdout)["gpus"][0]["name"] == "NVIDIA H200", proc.stderr


def test_bytecode_for_another_python_falls_back_to_source(tmp_path):
    """A .pyc of another interpreter version is ignored, not fatal."""
    data = bytearray(bundle_bytes())
    z = zipfile.ZipFile(__import__("io").BytesIO(bytes(data)))
    pyc = z.read("probe_agent/main.pyc")
    assert pyc[:4] == __import__("importlib.util").util.MAGIC_NUMBER
    # rebuild the zip with every .pyc's magic number changed
    import io
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as out:
        for name in z.namelist():
            content = z.read(name)
            if name.endswith(".pyc"):
                content = b"\x00\x00\r\n" + content[4:]
            out.writestr(name, content)
    payload = buf.getvalue()
    cmd = remote_command(sys.executable, len(payload), ["--replay", str(IDLE)])
    proc = subprocess.run(["sh", "-c", cmd], input=payload, capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()


def test_agent_code_stays_python_38_compatible():
    vermin = shutil.which("vermin")
    if vermin is None:
        require(False, "vermin is not installed (pip install vermin)")
    proc = subprocess.run([vermin, "-t=3.8-", "--no-tips", "--violations", "--eval-annotations",
                           str(ROOT / "probe_agent")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_bootstrap_ends_a_hung_agent_at_its_lifetime_and_says_so(tmp_path):
    # a driver query that never answers, an agent told to wait far longer than the host may take
    from sweep.collect.bundle import DEADLINE_EXIT, DEADLINE_MARK
    from sweep.collect.outcome import read_agent_output
    from sweep.failures import HostFailure
    from sweep.demo import synth

    hang = synth.write(synth.derive(synth.base_capture("h200-idle"), [synth.hang("gpu0.temp")]), tmp_path / "hang.json")
    payload = bundle_bytes()
    cmd = remote_command(sys.executable, len(payload), ["--replay", str(hang), "--deadline", "600"], lifetime=1.0)
    proc = subprocess.run(["sh", "-c", cmd], input=payload, capture_output=True, timeout=300)
    stderr = proc.stderr.decode()
    assert proc.returncode == DEADLINE_EXIT and f"{DEADLINE_MARK} after 1.0 s" in stderr, stderr
    # the controller reads that as the host's timeout, with the host deadline in words, not as a crash
    host = type("H", (), {"name": "gpu07", "python": "python3"})()
    with pytest.raises(HostFailure) as raised:
        read_agent_output(host, proc.stdout, proc.returncode, stderr, host_deadline=3)
    assert (raised.value.failure_class, raised.value.message) == ("timeout", (
        "gpu07: no answer within the host deadline of 3 s (while the agent ran); check the host, or raise "
        "--host-deadline (sweep_host_deadline)"))
    with pytest.raises(HostFailure) as raised:  # an engine that does not say its deadline: still a timeout
        read_agent_output(host, b"", DEADLINE_EXIT, stderr)
    assert raised.value.failure_class == "timeout"
