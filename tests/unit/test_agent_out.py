"""Agents sharing one --out folder (an NFS home, a scratch folder): each writes a temporary file of its own
and renames it, so every agent succeeds and the folder holds one whole file, never a torn or missing one."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probe_agent import probe
from probe_agent.probe import temp_name, write_atomic

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "sweep" / "demo" / "captures" / "h200-idle.json"
TEMP_NAME = "import sys; from probe_agent.probe import temp_name; print(temp_name(sys.argv[1]))"


def test_two_writers_of_one_file_never_share_a_temporary_name(tmp_path):
    target = str(tmp_path / "health.json")
    other_process = subprocess.run([sys.executable, "-c", TEMP_NAME, target], cwd=ROOT, capture_output=True,
                                   text=True, check=True).stdout.strip()
    names = {temp_name(target), temp_name(target), other_process}
    assert len(names) == 3
    assert all(os.path.dirname(n) == str(tmp_path) and os.path.basename(n).startswith(".health.json.")
               for n in names)  # beside the file (a rename within one filesystem), hidden


def test_a_writer_that_starts_while_another_renames_leaves_both_whole(tmp_path, monkeypatch):
    # the interleaving that broke the ansible recipe, made deterministic: B writes the same file
    # between A's write and A's rename
    target = str(tmp_path / "health.json")
    real_replace, nested = os.replace, []

    def replace(src, dst, **fds):
        if not nested:
            nested.append(src)
            write_atomic(target, '{"writer": "B"}\n')
        real_replace(src, dst, **fds)

    monkeypatch.setattr(probe.os, "replace", replace)
    write_atomic(target, '{"writer": "A"}\n')
    assert json.loads(Path(target).read_text()) == {"writer": "A"}  # the last rename wins, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["health.json"]


def test_a_failed_write_removes_its_temporary_file_and_names_the_file_asked_for(tmp_path, monkeypatch):
    target = str(tmp_path / "health.json")

    def refuse(src, dst, **fds):
        raise OSError(28, "No space left on device", src)

    monkeypatch.setattr(probe.os, "replace", refuse)
    with pytest.raises(OSError) as raised:
        write_atomic(target, "{}\n")
    assert raised.value.filename == target
    assert list(tmp_path.iterdir()) == []


def test_agents_writing_one_out_folder_at_once_all_succeed_with_one_whole_file(tmp_path):
    shared = tmp_path / "sweep-health"
    agents = [subprocess.Popen([sys.executable, "-m", "probe_agent", "--replay", str(CAPTURE), "--out", str(shared)],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(6)]
    done = [agent.communicate(timeout=300) for agent in agents]
    assert [agent.returncode for agent in agents] == [0] * 6, [err for _, err in done]
    kept = (shared / "health.json").read_text()
    assert kept in [out for out, _ in done]  # exactly one agent's whole health.json, as it printed it
    assert json.loads(kept)["gpus"][0]["name"] == "NVIDIA H200"
    assert sorted(p.name for p in shared.iterdir()) == ["health-report.md", "health.json"]
