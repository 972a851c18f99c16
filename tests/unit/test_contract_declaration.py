"""A contract is declared once, in the chain (issue 48): the health schema's contract names,
lowest_broken names and contracts.maxItems are generated from `probe_agent.chain.CONTRACTS` (python
-m sweep.schema --from-chain) and checked against it; a record that does not fit the schema says
which schema and how, and says the file was changed only when its digest says so."""
import copy
import hashlib
import json
import re
from pathlib import Path

import pytest

from probe_agent import chain, contracts
from sweep import schema
from sweep.store.files import RECORD_VERSION
from sweep.store.records import read_record

ROOT = Path(__file__).resolve().parents[2]
IDLE = ROOT / "tests" / "fixtures" / "h200" / "idle.health.json"


def declaration_problems(schema_text: str) -> list[str]:
    """What a contract of the chain lacks: its check in the agent, its place in the published
    schema."""
    names = [c.name for c in chain.CONTRACTS]
    out = [f"contract {name!r} is declared in probe_agent/chain.py but has no check in probe_agent/contracts.py "
           "CHECKS" for name in names if name not in contracts.CHECKS]
    out += [f"CHECKS has {name!r}, which the chain does not declare" for name in contracts.CHECKS
            if name not in names]
    return out + chain_problems(json.loads(schema_text))


def chain_problems(health_schema: dict) -> list[str]:
    """What in `health_schema` (the published health schema, parsed) disagrees with the contract
    chain, each naming the place, both values and the fix; [] when it agrees."""
    properties = health_schema["properties"]
    listed = properties["contracts"]
    found = {"contracts.maxItems": listed.get("maxItems"),
             "contracts.items.name.enum": listed["items"]["properties"]["name"].get("enum"),
             "lowest_broken.enum": properties["lowest_broken"].get("enum")}
    return [f"{schema.HEALTH_SCHEMA.name}: {place} is {json.dumps(found[place])}, the contract "
            f"chain (probe_agent/chain.py) declares {json.dumps(want)}: "
            "run python -m sweep.schema --from-chain"
            for place, want in schema.chain_parts().items() if found[place] != want]


def test_every_contract_is_declared_once_checked_and_in_the_schema():
    assert declaration_problems(schema.HEALTH_SCHEMA.read_text()) == []
    text = schema.HEALTH_SCHEMA.read_text()
    assert schema.schema_from_chain(text) == text, "run python -m sweep.schema --from-chain"


@pytest.fixture
def throwaway(monkeypatch):
    """The chain with one more contract on top, as a scratch copy would declare it."""
    spec = chain.Contract("scratch", "A throwaway contract", False, ("driver",), False, None, ())
    monkeypatch.setattr(chain, "CONTRACTS", (*chain.CONTRACTS, spec))
    monkeypatch.setattr(chain, "BY_NAME", {**chain.BY_NAME, spec.name: spec})
    monkeypatch.setattr(contracts, "CONTRACTS", chain.CONTRACTS)
    return spec


def with_scratch(health: dict) -> dict:
    """`health` with every contract of the chain this sweep declares, and the throwaway one after
    them."""
    out = copy.deepcopy(health)
    judged, _ = contracts.evaluate({"driver": {"nvml_error": "NVMLError_DriverNotLoaded"}})
    out["contracts"] = [c for c in judged if c["name"] != "scratch"] + [
        {"name": "scratch", "title": "A throwaway contract", "status": "ok", "message": "it holds", "fix": None,
         "evidence": {}, "consequence_of": None}]
    return out


def test_a_throwaway_contract_is_the_chain_its_check_and_a_generated_schema(throwaway, monkeypatch):
    text = schema.HEALTH_SCHEMA.read_text()
    # declared alone: each missing piece is named, with what to do
    problems = declaration_problems(text)
    assert problems[0] == ("contract 'scratch' is declared in probe_agent/chain.py but has no check in "
                           "probe_agent/contracts.py CHECKS")
    assert [p.split(" is ")[0] for p in problems[1:]] == [
        "health-1.schema.json: contracts.maxItems", "health-1.schema.json: contracts.items.name.enum",
        "health-1.schema.json: lowest_broken.enum"]
    assert all(p.endswith("run python -m sweep.schema --from-chain") for p in problems[1:])
    # its check: the agent judges it, in chain order, last
    monkeypatch.setitem(contracts.CHECKS, "scratch",
                        lambda facts: chain.contract("scratch", "ok",
                                                     "the throwaway contract holds"))
    out, _ = contracts.evaluate({"driver": {"nvml_error": "NVMLError_DriverNotLoaded"}})
    assert [c["name"] for c in out][-1] == "scratch" and len(declaration_problems(text)) == 3
    # a fixture with the new contract does not fit the schema until it is generated: said as what it
    # is
    health = with_scratch(json.loads(IDLE.read_text()))
    assert schema.compile_schema(json.loads(text))(health,
                                                   "health.json") == "health.json.contracts has 15 items, at most 14"
    generated = schema.schema_from_chain(text)
    assert declaration_problems(generated) == []
    assert schema.compile_schema(json.loads(generated))(health, "health.json") is None
    assert re.sub(r'"scratch"\]|, "scratch"|"maxItems": 15', "",
                  generated) == re.sub(r'"maxItems": 14', "", text)


def record_file(tmp_path: Path, health: dict) -> Path:
    path = tmp_path / "gpu01.json"
    path.write_text(json.dumps({"record_version": RECORD_VERSION, "host": "gpu01", "status": "ok",
                                "health": health}))
    return path


def test_a_record_that_does_not_fit_the_schema_says_what_it_is_not_that_it_was_changed(tmp_path):
    path = record_file(tmp_path, with_scratch(json.loads(IDLE.read_text())))
    failure = read_record(path)["failure"]
    assert failure["class"] == "bad_output"
    assert "does not match the health schema this sweep reads (record.health.contracts has 15 items, at most 14)" \
        in failure["message"]
    assert "changed after the sweep" not in failure["message"]
    # the digest this user's sweep listed for the file says its bytes changed: then, and only then,
    # say so
    message = read_record(path, hashlib.sha256(b"other bytes").hexdigest())["failure"]["message"]
    assert "its bytes are not the ones this sweep wrote (records.sha256): the file was changed after the sweep" \
        in message


def test_the_load_summary_has_one_reader():
    """Issue 48: `sweep.analysis.load_record.load_summary` reads the load's per-GPU summary for
    every consumer."""
    reads = re.compile(r'"load"\)?\)?[^\n]{0,40}"summary"|\["load"\]\["summary"\]')
    found = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "sweep").rglob("*.py"))
             if path.name != "load_record.py" and "demo" not in path.parts
             for n, line in enumerate(path.read_text().splitlines(), 1) if reads.search(line)]
    assert found == [], "read the load summary with sweep.analysis.load_record.load_summary"
