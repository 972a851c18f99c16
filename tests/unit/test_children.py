"""Every child the agent starts (probe_agent.children.CHILDREN) starts from an agent imported from memory.

Each entry is started by an agent that the real bootstrap (sweep/collect/bundle.py's BOOTSTRAP, as
remote_command() runs it) imported from stdin, with nothing of probe_agent on disk for the child to
find; the driver-API children answer through the stand-in libcuda (tests/cuda_shim.c). The same
children start from a zipapp file and from the source checkout.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probe_agent import children
from probe_agent.load import PTX
from sweep.collect.bundle import BOOTSTRAP, MAIN_CALL, build_bundle, wire_bytes, zipapp_of

import cuda_shim

ROOT = Path(__file__).resolve().parents[2]
UUID = "GPU-217ee39e-ed23-4138-ecce-08c8168c2179"

# what each child must show when started (no GPU, no torch needed): its name -> check(rc, stdout, stderr)
PLAN = json.dumps({"stop_at": 0, "budgets": {"hbm": 0.05, "fp32": 0.05, "pcie": 0.05, "p2p": 0.0}})


def events(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def driver_measured(rc, out, err):
    figures = {e["key"]: e for e in events(out) if e.get("event") == "figure"}
    assert rc == 0 and set(figures) == {"hbm", "fp32", "pcie_h2d", "pcie_d2h"}, (out, err)
    hbm = figures["hbm"]
    assert hbm["uuid"] == UUID and abs(hbm["work"] / hbm["times"][0] / cuda_shim.RATES["hbm"] - 1) < 1e-4
    assert events(out)[-1] == {"event": "done"}


def torch_started(rc, out, err):
    # this machine's python has no torch: the child ran its own code and said why it stopped
    assert "probe_agent" not in err, err
    assert any(e.get("event") == "ready" for e in events(out)) or "No module named 'torch'" in err, (out, err)


def load_ran(rc, out, err):
    assert rc == 0 and "sweep-load-started" in out and "sweep-load-ended" in out, (out, err)


def inspected(rc, out, err):
    assert rc == 0 and json.loads(out)["python"] == sys.version.split()[0], (out, err)


CHECKS = {
    "speed-driver": ([PLAN], driver_measured),
    "speed-torch": ([], torch_started),
    "load-ptx": (["0.2", PTX], load_ran),
    "load-torch": (["0.2"], torch_started),
    "framework": (["metadata"], inspected),
}

STARTER = """
import json, subprocess, sys
from probe_agent import children
name, python, args = json.loads(sys.argv[1])
argv, preamble = children.command(name, args, python=python)
done = subprocess.run(argv, input=preamble, capture_output=True, timeout=120, cwd='/')
print(json.dumps([done.returncode, done.stdout.decode(), done.stderr.decode()]))
"""


@pytest.fixture(scope="module")
def shim_env(tmp_path_factory):
    folder = cuda_shim.build(tmp_path_factory.mktemp("libcuda"))
    return {"PATH": os.environ["PATH"], **cuda_shim.environment(folder, UUID)}


def start_from_memory(name, args, env, cwd):
    """Child `name` started by an agent that the real bootstrap imported from stdin."""
    assert BOOTSTRAP.endswith(MAIN_CALL)
    bootstrap = BOOTSTRAP[: -len(MAIN_CALL)] + STARTER
    payload = wire_bytes()  # what a sweep sends: the children get it as it came
    done = subprocess.run([sys.executable, "-c", bootstrap, str(len(payload)),
                           json.dumps([name, sys.executable, args])],
                          input=payload, capture_output=True, env=env, cwd=cwd, timeout=180)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout.decode().splitlines()[-1])


def test_every_child_entry_has_a_check_here():
    assert set(CHECKS) == set(children.BY_NAME)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_each_child_starts_from_an_agent_loaded_from_memory(name, shim_env, tmp_path):
    args, check = CHECKS[name]
    rc, out, err = start_from_memory(name, args, shim_env, tmp_path)
    check(rc, out, err)
    assert list(tmp_path.iterdir()) == [], "nothing is written where the agent runs"


@pytest.mark.parametrize("where", ["zipapp", "checkout"])
def test_the_driver_child_starts_from_a_zipapp_file_and_from_the_checkout(where, shim_env, tmp_path):
    if where == "zipapp":
        pyz = build_bundle(tmp_path / "agent.pyz")
        path = str(pyz)
    else:
        path = str(ROOT)
    code = ("import sys; sys.path.insert(0, %r)\n" % path) + STARTER
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, json.dumps(["speed-driver", None, [PLAN]])],
                          capture_output=True, env=shim_env, cwd="/", timeout=180)
    assert done.returncode == 0, done.stderr.decode()
    driver_measured(*json.loads(done.stdout.decode().splitlines()[-1]))


def test_only_the_children_table_starts_the_agents_own_python():
    """A new child that re-executes python outside probe_agent.children would miss the memory path."""
    found = []
    for path in sorted((ROOT / "probe_agent").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr == "executable" and \
                    isinstance(node.value, ast.Name) and node.value.id == "sys":
                found.append(path.relative_to(ROOT / "probe_agent").as_posix())
    assert set(found) == {"children.py"}, found



def test_every_agent_module_subpackages_included_imports_from_the_memory_loaded_bundle(tmp_path):
    """The bundle carries probe_agent's packages (probe_agent/speed/) and the bootstrap serves them."""
    payload = wire_bytes()
    import io
    import zipfile
    names = sorted(n[:-3].replace("/", ".").removesuffix(".__init__")
                   for n in zipfile.ZipFile(io.BytesIO(zipapp_of(payload))).namelist()
                   if n.startswith("probe_agent/") and n.endswith(".py") and not n.endswith("__main__.py"))
    assert "probe_agent.speed" in names and "probe_agent.speed.tier" in names
    importer = BOOTSTRAP[: -len(MAIN_CALL)] + (
        "import importlib, json\n"
        "mods = [importlib.import_module(n) for n in json.loads(sys.argv[1])]\n"
        "print(json.dumps([m.__file__ for m in mods]))\n")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", importer, str(len(payload)), json.dumps(names)],
                          input=payload, capture_output=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    files = json.loads(done.stdout.decode().splitlines()[-1])
    assert all(f.startswith("<sweep-bundle>/probe_agent/") for f in files), files
