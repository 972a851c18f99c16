"""A fact is one declaration (issue 40, docs/adding-a-fact.md): a fact declared once, by its health.json
path, reaches the report, the export, the history and the expectations; every declared path is a
path of the published schema; and the agent writes every declared path.

The throwaway fact is declared in a fresh interpreter before any consumer is imported, as an entry
added to `FACTS` is: the consumers build their tables (frame columns, expectations rules, metric
families, audit paths) from the declaration when they are imported."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.analysis import facts
from sweep.schema import HEALTH_SCHEMA
from test_facts import fleet_health, write_run

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "sweep" / "demo" / "captures"

CONSUMERS = r"""
import json, sys
from pathlib import Path
from sweep.analysis import facts

THROWAWAY = facts.Fact(name="thp_test", label="THP (test)", scope="host", path="host_settings.transparent_hugepages",
                       impact=[(None, "transparent hugepages {value} instead of {reference} (test)")],
                       diff_kind="host settings", expect=facts.Expect("thp_test", "equal"))
for name, value in facts.derived(facts.FACTS + (THROWAWAY,)).items():
    setattr(facts, name, value)

from sweep.analysis.compare import compare
from sweep.analysis.fleet import load_fleet
from sweep.audit.expect import evaluate_expectations, load_expectations
from sweep.store import load_run
from sweep.export.prometheus import metrics_text
from sweep.history import build
from sweep.history import index
from sweep.report.build import build_report

index.MAX_WORKERS = 1
reports, out = Path(sys.argv[1]), Path(sys.argv[2])
last = reports / "day02"
found = compare(load_fleet([last]))
build_report([last], out / "report")
(out / "expect.yml").write_text("version: 1\ndefaults: {thp_test: always}\n")
history = build([reports])
print(json.dumps({
    "differs": [(d.key, d.value, d.reference, d.impact) for c in found.classes for d in c.differs],
    "markdown": (out / "report" / "summary.md").read_text(),
    "metrics": [line for line in metrics_text(last).splitlines() if "thp_test" in line],
    "changes": [c.text for c in history.changes],
    "violations": [v.message for v in evaluate_expectations(load_run(last).records, load_expectations(out / "expect.yml"))],
}))
"""


def _thp(value):
    def edit(health):
        health["host_settings"] = {"transparent_hugepages": value}
    return edit


def test_a_fact_declared_once_by_its_path_reaches_the_report_export_history_and_expectations(tmp_path):
    reports = tmp_path / "reports"
    same = {f"gpu0{i}": _thp("always") for i in (1, 2, 3)}
    write_run(reports / "day01", 1, fleet_health(3, **same))
    write_run(reports / "day02", 2, fleet_health(3, **{**same, "gpu03": _thp("never")}))
    proc = subprocess.run([sys.executable, "-c", CONSUMERS, str(reports), str(tmp_path / "out")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout)
    assert seen["differs"] == [["thp_test", "never", "always",
                                "transparent hugepages never instead of always (test)"]]  # a class of its own
    assert "THP (test)" in seen["markdown"] and "transparent hugepages never instead of always" in seen["markdown"]
    assert 'sweep_host_thp_test_info{host="gpu03",thp_test="never"} 1' in seen["metrics"]
    assert "# HELP sweep_host_thp_test_info THP (test) (host_settings.transparent_hugepages), value 1." in seen["metrics"]
    assert [c for c in seen["changes"] if "THP (test)" in c] == ["2026-11-02 06:00 UTC: THP (test) always -> never"]
    # the kind is the declaration's (equal), never the dtype's: a text fact is not a firmware version glob
    (message,) = seen["violations"]
    assert message.startswith("gpu03: THP (test) never is not expected; expected always (") and "firmware" not in message


def _in_schema(schema: dict, node: dict, steps: list) -> bool:
    """Whether the flattened `steps` ("#": any index, "name*": any field so named, "*": any field) name a
    field the schema declares."""
    while "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    if not steps:
        return True
    step, rest = steps[0], steps[1:]
    if step == "#":
        return "items" in node and _in_schema(schema, node["items"], rest)
    props = node.get("properties") or {}
    named = [v for k, v in props.items() if k == step or (step.endswith("*") and k.startswith(step[:-1]))]
    if not named and isinstance(node.get("additionalProperties"), dict):  # a map ("clocks": name -> MHz)
        named = [node["additionalProperties"]]
    return bool(named) and any(_in_schema(schema, v, rest) for v in named)


def _steps(path: str) -> list:
    return [part for step in path.split(".") for part in (step.split("#")[:1] + ["#"] if "#" in step else [step])
            if part]


SCHEMA = json.loads(HEALTH_SCHEMA.read_text())
PATHS = sorted({p for f in facts.FACTS for p in f.paths})


@pytest.mark.parametrize("path", PATHS)
def test_every_declared_path_is_a_field_of_the_published_schema(path):
    assert _in_schema(SCHEMA, SCHEMA, _steps(path)), f"{path}: add it to probe_agent/schema/health-1.schema.json"


def test_a_path_the_schema_lacks_is_found_missing():
    assert not _in_schema(SCHEMA, SCHEMA, _steps("gpus#.nvlink.not_a_field"))
    assert _in_schema(SCHEMA, SCHEMA, _steps("gpus#.nvlink.active"))


def _written(doc, steps: list):
    """True: the agent wrote the field (null or not); False: it did not; None: nothing to look in (an
    empty list or map of GPUs, a section the replay cannot fill)."""
    if not steps:
        return True
    if doc is None or doc == [] or (doc == {} and steps[0] == "*"):  # an empty list or map keyed by index
        return None
    step, rest = steps[0], steps[1:]
    if step == "#":
        answers = [_written(item, rest) for item in doc] if isinstance(doc, list) else [False]
        return False if False in answers else (True if True in answers else None)
    if not isinstance(doc, dict):
        return False
    keys = [k for k in doc if k == step or (step.endswith("*") and k.startswith(step[:-1]))] if step != "*" else list(doc)
    answers = [_written(doc[k], rest) for k in keys]
    return True if True in answers else (None if None in answers else False)


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    """The agent's output on the recorded H200 (idle, deep, fault) and its speed tier."""
    out = []
    for name, args in (("h200-idle.json", ()), ("h200-idle-deep.json", ("--deep",)), ("h200-fault.json", ()),
                       ("h200-speed.json", ("--speed",))):
        proc = subprocess.run([sys.executable, "-m", "probe_agent", "--replay", str(CAPTURES / name), *args],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        out.append(json.loads(proc.stdout))
    return out


def test_the_agent_writes_every_declared_path(replays):
    """A declaration without its reader in the agent fails here (its path is in no replay's output)."""
    answers = {path: [_written(doc, _steps(path)) for doc in replays] for path in PATHS}
    unwritten = sorted(p for p, said in answers.items() if True not in said and None not in said)
    assert unwritten == [], "declared paths the agent does not write (add the agent's reader)"
    unseen = sorted(p for p, said in answers.items() if True not in said)
    assert unseen == ["host_settings.ib_ports#.fw_ver", "host_settings.ib_ports#.rate*",
                      "host_settings.ib_ports#.state",  # this VM has no IB HCA (test_facts reads them from sysfs)
                      "host_settings.nearest_nic.*.link", "host_settings.nearest_nic.*.nic",
                      "speed.p2p#.*",
                      # one GPU, no topo -m matrix (test_corpus_hosts replays 8-GPU hosts that carry one)
                      "topology.cpu_affinity.*", "topology.numa_affinity.*"]  # nor a second GPU (tests/unit/test_speed.py measures pairs on two)


def test_a_missing_reader_is_found_missing(replays):
    assert _written(replays[0], _steps("gpus#.nvlink.not_a_field")) is False
    assert _written(replays[0], _steps("host_settings.transparent_hugepages")) is True
