"""One declaration per contract: `probe_agent.chain.CONTRACTS` is what the agent, the schema and the controller read."""
import json
import re
from pathlib import Path

from probe_agent import chain
from probe_agent.contracts import CHECKS, evaluate
from probe_agent.report import MARK, render_markdown
from sweep.analysis import compare, health
from sweep.export import prometheus
from sweep.report import findings

NAMES = tuple(c.name for c in chain.CONTRACTS)  # the chain's names, in its order

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "probe_agent" / "schema" / "health-1.schema.json").read_text())


def test_the_published_schema_enums_are_the_table():
    item = SCHEMA["properties"]["contracts"]["items"]["properties"]
    assert item["name"]["enum"] == list(NAMES)  # in chain order, as documents list them
    assert SCHEMA["properties"]["lowest_broken"]["enum"] == [None, *NAMES]
    assert set(item["status"]["enum"]) == set(chain.STATUS_NAMES)
    assert len(item["status"]["enum"]) == len(chain.STATUS_NAMES)
    assert SCHEMA["properties"]["contracts"]["maxItems"] == len(chain.CONTRACTS)


def test_the_table_is_consistent():
    assert len(set(NAMES)) == len(NAMES)
    for n, c in enumerate(chain.CONTRACTS):
        below = NAMES[:n]
        assert set(c.consequence_of) <= set(below), f"{c.name} stands on a contract above it"
        assert c.title and isinstance(c.needs_nvml, bool) and isinstance(c.blocks_benchmark, bool)
    kinds = [k for c in chain.CONTRACTS for k in c.findings] + [c.finding[0] for c in chain.CONTRACTS if c.finding]
    assert len(kinds) == len(set(kinds)), "a fleet finding is about one contract"


def test_the_agent_judges_every_contract_in_table_order():
    assert set(CHECKS) == set(NAMES)
    out, lowest = evaluate({"driver": {"nvml_error": "NVMLError_DriverNotLoaded"}})
    assert [c["name"] for c in out] == list(NAMES)
    assert [c["title"] for c in out] == [c.title for c in chain.CONTRACTS]
    assert lowest == "driver"
    by_name = {c["name"]: c for c in out}
    not_read = {n for n, c in by_name.items() if c["message"] == "not read: NVML is unusable on this host"}
    assert not_read == {c.name for c in chain.CONTRACTS if c.needs_nvml}
    for spec in chain.CONTRACTS[1:]:
        c = by_name[spec.name]
        judged_consequence = c["status"] in ("broken", "unknown") and "driver" in spec.consequence_of
        assert c["consequence_of"] == ("driver" if judged_consequence else None), spec.name


def test_the_report_marks_every_status():
    assert set(MARK) == set(chain.STATUS_NAMES)
    out, lowest = evaluate({"driver": {"nvml_error": "NVMLError_DriverNotLoaded"}})
    text = render_markdown({"contracts": out, "lowest_broken": lowest, "host": {}, "probe": {}})
    assert "| 1 | Kernel driver and NVML | BROKEN |" in text
    assert "unknown (consequence of driver)" in text


def test_the_controller_reads_the_table():
    assert compare.BLOCKING == tuple(c.name for c in chain.CONTRACTS if c.blocks_benchmark)
    assert set(compare.BLOCKING) == {"driver", "fabric", "device_mask", "framework"}
    assert health.PLATFORM_CONTRACTS == {c.name: c.finding for c in chain.CONTRACTS if c.finding}
    assert prometheus.CONTRACT_STATES == chain.STATUS_NAMES


def test_every_finding_the_analysis_makes_of_gpu_facts_belongs_to_a_contract():
    """A GPU finding the table does not place is filed under its own kind in the report, not its contract."""
    emitted = {row[1] for row in health.GPU_FINDINGS} | {"foreign_process"}
    placed = {kind: findings.contract_of({"kind": kind}) for kind in emitted}
    assert all(contract in NAMES for contract in placed.values()), placed


def test_the_docs_list_the_chain_in_order():
    """docs/agent.md's table of contracts, and the README's one line of them, in the chain's order
    (both generated from it: tests/unit/test_contract_declaration.py checks them row by row)."""
    text = (ROOT / "docs" / "agent.md").read_text()
    rows = re.findall(r"^  \| (\d+) \| `(\w+)`", text, re.M)
    assert rows == [(str(n), c.name) for n, c in enumerate(chain.CONTRACTS, 1)]
    line = re.search(r"^> (driver ·.*?)\n\n", (ROOT / "README.md").read_text(), re.M | re.S).group(1)
    assert [w.strip() for w in line.replace("\n>", " ").split("·")] == [n for _, n in rows]


def test_one_contract_record_has_its_keys_fix_and_evidence_and_fits_the_schema():
    """Issue 39 (mutation score): the record every check returns, key by key, and valid as a health.json item."""
    import jsonschema

    rec = chain.contract("xid", "warning", "2 Xid 13 events", {"count": 2}, "restart the application")
    assert rec == {"name": "xid", "title": "Xid events in the kernel log", "status": "warning",
                   "message": "2 Xid 13 events", "fix": "restart the application", "evidence": {"count": 2},
                   "consequence_of": None}
    assert chain.contract("driver", "ok", "m")["evidence"] == {} and chain.contract("driver", "ok", "m")["fix"] is None
    item = dict(SCHEMA["properties"]["contracts"]["items"], **{"$defs": SCHEMA.get("$defs", {})})
    jsonschema.validate(rec, item)  # (the item schema is open: it would not catch a misspelt "fix" by itself)


def test_plural_says_one_or_many_never_gpu_s():
    assert [chain.plural(n, "GPU") for n in (0, 1, 2)] == ["0 GPUs", "1 GPU", "2 GPUs"]
    assert chain.plural(2, "other process", "other processes") == "2 other processes"
    assert chain.plural(1, "other process", "other processes") == "1 other process"
