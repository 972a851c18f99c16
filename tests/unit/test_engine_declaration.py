"""Engines declare what they are (issue 48): a new engine is one module (a `HostProcessEngine` with
its `argv`, or an `Engine`) and one line of `sweep.collect.engines.ENGINES`; no code outside the
engines asks an engine's name."""
import ast
import json
import sys
from pathlib import Path

import pytest

from sweep.cli import main
from sweep.collect import engines
from sweep.collect.engines.base import Engine

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "sweep" / "demo" / "captures" / "h200-idle.json"

SCRATCH = '''"""A throwaway engine: the agent as a local process per host, as `kubectl exec POD --` runs it in a pod."""
from sweep.collect.engines.base import HostProcessEngine


class LocalEngine(HostProcessEngine):
    name = "local"

    def argv(self, host):
        return ["sh", "-c", self.remote(host)]
'''


def test_a_new_engine_is_one_module_and_its_registration(tmp_path, monkeypatch, capsys):
    (tmp_path / "scratch_engine.py").write_text(SCRATCH)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(engines.ENGINES, "local", "scratch_engine:LocalEngine")  # the registration
    # each host's agent answers from the H200 capture
    monkeypatch.setenv("SWEEP_REPLAY", str(CAPTURE))
    inventory = tmp_path / "pods.yml"
    inventory.write_text("all:\n  hosts:\n    pod1: {}\n    pod2: {}\n  vars:\n"
                         f"    ansible_python_interpreter: {sys.executable}\n")
    code = main(["run", str(inventory), "--engine", "local", "--out", str(tmp_path / "run"),
                 "--forks", "2"])
    out = capsys.readouterr().out
    records = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "run" / "hosts").glob("*.json")}
    assert {h: r["status"] for h, r in records.items()} == {"pod1": "ok", "pod2": "ok"}, out
    assert records["pod1"]["health"]["gpus"][0]["name"] == "NVIDIA H200"
    summary = json.loads((tmp_path / "run" / "report" / "summary.json").read_text())
    assert summary["host_sets"]["pool"]["hosts"] == ["pod1",
                                                     "pod2"] and code == summary["exit_code"]
    # what it is not, declared by the base: --transport, --become and --wrap are refused by name,
    # before any host
    code = main(["run", str(inventory), "--engine", "local", "--transport", "openssh", "--out",
                 str(tmp_path / "r2")])
    assert code == 2 and "--transport belongs to the ssh engine, not local" in capsys.readouterr().err


def test_every_engine_declares_what_it_is():
    for name in engines.ENGINES:
        cls = engines.engine_class(name)
        assert issubclass(cls, Engine) and cls.name == name
        assert cls.transport in ("run", "openssh", None)
        assert cls.reads_ssh_config == (cls.transport is not None), name
    assert [n for n in engines.ENGINES if engines.engine_class(n).transport == "run"] == ["ssh"]
    with pytest.raises(Exception, match="unknown engine 'kubectl'"):
        engines.engine_class("kubectl")


def names_asked(path: Path) -> list[str]:
    """Where `path` compares something's `.name` (or an engine option) with an engine's name."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            words = [c.value for c in ast.walk(node) if isinstance(c,
                                                                   ast.Constant) and isinstance(c.value, str)]
            left = ast.unparse(node.left)
            if set(words) & set(engines.ENGINES) and ("name" in left or "engine" in left or "runner" in left):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_code_outside_the_engines_asks_an_engines_name():
    asked = [hit for path in sorted((ROOT / "sweep").rglob("*.py")) if "engines" not in path.parts
             for hit in names_asked(path)]
    assert asked == [], "ask the engine's declared attributes (sweep.collect.engines.base.Engine), not its name"
