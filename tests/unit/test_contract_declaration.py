"""A contract is declared once, in the chain (issue 48): the health schema's contract names,
lowest_broken names and contracts.maxItems, docs/agent.md's table of contracts and the README's line
of them are generated from `probe_agent.chain.CONTRACTS` (python -m sweep.schema --from-chain) and
checked against it; a record that does not fit the schema says
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


def declaration_problems(schema_text: str, agent_doc: str | None = None,
                         readme: str | None = None) -> list[str]:
    """What a contract of the chain lacks: its check in the agent, its words, its place in the
    published schema, its row in docs/agent.md and its place in the README's line (the files as
    they are, unless given)."""
    names = [c.name for c in chain.CONTRACTS]
    out = [f"contract {name!r} is declared in probe_agent/chain.py but has no check in probe_agent/contracts.py "
           "CHECKS" for name in names if name not in contracts.CHECKS]
    out += [f"CHECKS has {name!r}, which the chain does not declare" for name in contracts.CHECKS
            if name not in names]
    out += [f"contract {c.name!r} in probe_agent/chain.py says neither when it is broken nor when "
            "it is a warning: give it broken_when or warning_when (docs/agent.md's table shows "
            "them)"
            for c in chain.CONTRACTS if not (c.broken_when or c.warning_when)]
    agent_doc = schema.AGENT_DOC.read_text() if agent_doc is None else agent_doc
    readme = schema.README.read_text() if readme is None else readme
    return out + chain_problems(json.loads(schema_text)) + docs_problems(agent_doc, readme)


def docs_problems(agent_doc: str, readme: str) -> list[str]:
    """What in docs/agent.md's table of contracts and the README's line of them disagrees with the
    chain, naming each contract and the fix; [] when both agree."""
    fix = "run python -m sweep.schema --from-chain"
    names = [c.name for c in chain.CONTRACTS]
    want = dict(zip(names, schema.contract_table().splitlines()[2:]))
    rows = re.finditer(r"^  \| \d+ \| `(\w+)`.*$", agent_doc, re.M)
    have = {m.group(1): m.group(0) for m in rows}
    out = [f"docs/agent.md: the table of contracts has no row for {name!r}, which "
           f"probe_agent/chain.py declares: {fix}" for name in names if name not in have]
    out += [f"docs/agent.md: the table of contracts has a row for {name!r}, which "
            f"probe_agent/chain.py does not declare: {fix}" for name in have if name not in want]
    out += [f"docs/agent.md: the row for {name!r} is not the one probe_agent/chain.py declares "
            f"(its place, title, broken when, warning when): {fix}"
            for name in names if have.get(name, want[name]) != want[name]]
    line = re.search(r"^> (driver .*?)\n\n", readme, re.M | re.S)
    listed = [w.strip() for w in line.group(1).replace("\n>", " ").split("·")] if line else []
    if listed != names:
        out.append(f"README.md: the line of contracts names {' · '.join(listed) or 'none'}, "
                   f"probe_agent/chain.py declares {' · '.join(names)}: {fix}")
    return out


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
    spec = chain.Contract("scratch", "A throwaway contract", False, ("driver",), False, None, (),
                          warning_when="the scratch file is there")
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
    assert [p.split(" is ")[0] for p in problems[1:4]] == [
        "health-1.schema.json: contracts.maxItems", "health-1.schema.json: contracts.items.name.enum",
        "health-1.schema.json: lowest_broken.enum"]
    assert problems[4] == ("docs/agent.md: the table of contracts has no row for 'scratch', which "
                           "probe_agent/chain.py declares: run python -m sweep.schema --from-chain")
    assert problems[5].startswith("README.md: the line of contracts names driver · fabric") and \
        "layout · host · scratch: run" in problems[5]
    assert len(problems) == 6
    assert all(p.endswith("run python -m sweep.schema --from-chain") for p in problems[1:])
    # its check: the agent judges it, in chain order, last
    monkeypatch.setitem(contracts.CHECKS, "scratch",
                        lambda facts: chain.contract("scratch", "ok",
                                                     "the throwaway contract holds"))
    out, _ = contracts.evaluate({"driver": {"nvml_error": "NVMLError_DriverNotLoaded"}})
    assert [c["name"] for c in out][-1] == "scratch" and len(declaration_problems(text)) == 5
    # a fixture with the new contract does not fit the schema until it is generated: said as what it
    # is
    health = with_scratch(json.loads(IDLE.read_text()))
    assert schema.compile_schema(json.loads(text))(health,
                                                   "health.json") == "health.json.contracts has 15 items, at most 14"
    generated = schema.schema_from_chain(text)
    assert len(declaration_problems(generated)) == 2  # the docs: generated too
    agent_doc, readme = schema.docs_from_chain(schema.AGENT_DOC.read_text(),
                                               schema.README.read_text())
    assert declaration_problems(generated, agent_doc, readme) == []
    assert "  | 15 | `scratch`: A throwaway contract | | the scratch file is there |\n" in agent_doc
    assert schema.compile_schema(json.loads(generated))(health, "health.json") is None
    assert re.sub(r'"scratch"\]|, "scratch"|"maxItems": 15', "",
                  generated) == re.sub(r'"maxItems": 14', "", text)


def test_a_contract_says_when_it_is_broken_and_its_row_is_the_chains(monkeypatch):
    """A contract declared without its words is named; so is a row of docs/agent.md edited by hand,
    or one the chain no longer declares."""
    wordless = chain.Contract("scratch", "A throwaway contract", False, ("driver",), False, None,
                              ())
    monkeypatch.setattr(chain, "CONTRACTS", (*chain.CONTRACTS, wordless))
    problems = declaration_problems(schema.HEALTH_SCHEMA.read_text())
    assert ("contract 'scratch' in probe_agent/chain.py says neither when it is broken nor when it "
            "is a warning: give it broken_when or warning_when (docs/agent.md's table shows "
            "them)") in problems
    monkeypatch.setattr(chain, "CONTRACTS", chain.CONTRACTS[:-1])
    doc, readme = schema.AGENT_DOC.read_text(), schema.README.read_text()
    assert docs_problems(doc, readme) == []
    edited = doc.replace("enforced limit below the default",
                         "enforced limit below 90% of the default")
    assert docs_problems(edited, readme) == [
        "docs/agent.md: the row for 'power' is not the one probe_agent/chain.py declares (its "
        "place, title, broken when, warning when): run python -m sweep.schema --from-chain"]
    stale = doc.replace("  | 14 | `host`",
                        "  | 15 | `gone`: A contract no longer declared | x | |\n  | 14 | `host`")
    assert docs_problems(stale, readme) == [
        "docs/agent.md: the table of contracts has a row for 'gone', which probe_agent/chain.py "
        "does not declare: run python -m sweep.schema --from-chain"]


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
