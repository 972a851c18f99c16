"""The agent's own command line: paths it cannot write are refused up front (exit 2, one line, no
traceback), and every option says in --help what it does."""
import subprocess
import sys
from pathlib import Path

import pytest

from probe_agent.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "sweep" / "demo" / "captures" / "h200-idle.json"


def agent(*args):
    return subprocess.run([sys.executable, "-m", "probe_agent", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def place(tmp_path):
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "a-folder").mkdir()
    return tmp_path


@pytest.mark.parametrize("args,line", [
    (["--out", "{p}/a-file"], "sweep-agent: --out {p}/a-file is a file, not a folder; give a folder for "
                              "health.json and health-report.md (it is created if missing)"),
    (["--out", "{p}/a-file/sub"], "sweep-agent: --out {p}/a-file/sub cannot be created (Not a directory); give a "
                                  "folder for health.json and health-report.md (it is created if missing)"),
    (["--record", "{p}/a-folder"], "sweep-agent: --record {p}/a-folder is a folder, not a file; give a file path "
                                   "in a writable folder"),
    (["--record", "{p}/missing/cap.json"], "sweep-agent: --record {p}/missing/cap.json cannot be written: "
                                           "{p}/missing is not a folder; give a file path in a writable folder"),
    (["--wrap", "--out", "{p}/a-file", "--replay", str(CAPTURE), "--", "true"],
     "sweep-agent: --out {p}/a-file is a file, not a folder; give a folder for provenance.json (it is created "
     "if missing)"),
])
def test_a_path_the_agent_cannot_write_is_refused_before_probing(place, args, line):
    before = sorted(p.name for p in place.rglob("*"))
    proc = agent(*[a.format(p=place) for a in args])
    assert proc.returncode == 2
    assert proc.stderr == line.format(p=place) + "\n" and proc.stdout == ""
    assert sorted(p.name for p in place.rglob("*")) == before


def test_every_agent_option_says_what_it_does():
    silent = [a.option_strings[0] for a in build_parser()._actions if not a.help]
    assert silent == [], f"options without help: {silent}"
    proc = agent("--help")
    assert proc.returncode == 0
    assert "--framework-timeout S" in proc.stdout and "--load-engine ENGINE" in proc.stdout
