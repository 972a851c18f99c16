"""The published schema is the check of a record's shape (issue 40): every object the agent writes is
closed (`additionalProperties`), so a field the agent starts writing without a schema entry is
`bad_output` at arrival, and the real H200 records of tests/fixtures are valid under it, through the
controller's compiled check (sweep/schema.py) and through jsonschema."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep.schema import HEALTH_SCHEMA, health_problem

ROOT = Path(__file__).resolve().parents[2]
# objects the schema leaves free-form on purpose: what the load child sends (and the speed tier's samples,
# the same shape), each contract's evidence; sweep.schema.READ_BY_CONTROLLER types what is read of them
FREE_FORM = {"/properties/load", "/properties/speed/properties/samples", "/properties/contracts/items/properties/evidence"}


def _objects(node, where=""):
    """(where, schema node) of every object schema: one that names properties or says type object."""
    if isinstance(node, dict):
        kinds = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
        if "properties" in node or "object" in kinds:
            yield where, node
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for name, sub in value.items():
                    yield from _objects(sub, f"{where}/{key}/{name}")
            elif key in ("items", "additionalProperties"):
                yield from _objects(value, f"{where}/{key}")


def _health_documents():
    for path in sorted((ROOT / "tests" / "fixtures").rglob("*.json")):
        doc = json.loads(path.read_text())
        doc = doc.get("health") if isinstance(doc, dict) and "record_version" in doc else doc
        if isinstance(doc, dict) and doc.get("kind") == "sweep.health":
            yield path.relative_to(ROOT), doc


def test_every_object_the_agent_writes_is_closed():
    schema = json.loads(HEALTH_SCHEMA.read_text())
    open_objects = [where for where, node in _objects(schema) if "additionalProperties" not in node
                    and where not in FREE_FORM]
    assert open_objects == [], "objects a field can be added to unseen (give each additionalProperties)"
    assert schema["additionalProperties"] is False and schema["$defs"]["gpu"]["additionalProperties"] is False


DOCUMENTS = list(_health_documents())


def test_the_fixtures_hold_the_real_h200_records():
    names = {str(p) for p, _ in DOCUMENTS}
    assert len(DOCUMENTS) >= 30 and "tests/fixtures/h200/idle.health.json" in names
    assert "tests/fixtures/speed/example.health.json" in names and any("x2" in n for n in names)


@pytest.mark.parametrize("path, doc", DOCUMENTS, ids=[str(p) for p, _ in DOCUMENTS])
def test_every_real_record_is_valid_under_the_closed_schema(path, doc):
    assert health_problem(doc) is None, path
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator(json.loads(HEALTH_SCHEMA.read_text())).validate(doc)


@pytest.mark.parametrize("section", ["mask", "topology", "driver", "host"])
def test_a_field_the_schema_does_not_name_is_bad_output(section):
    doc = json.loads((ROOT / "tests" / "fixtures" / "h200" / "idle.health.json").read_text())
    doc[section]["nvlink_version"] = 4
    problem = health_problem(doc)
    assert problem == f"health.json.{section}.nvlink_version: a field the schema does not name"
    doc["gpus"][0]["power"]["version"] = 4  # and inside a GPU: the agent's reader without its schema entry
    del doc[section]["nvlink_version"]
    assert health_problem(doc) == "health.json.gpus[0].power.version: a field the schema does not name"
