"""The depth check folded into the schema check (sweep/schema_depth.py, issue 52): what the one
check takes is valid under the published schema and no deeper than MAX_DEPTH, whatever is nested
where; every health.json the agent writes is taken; anything else goes the old way, with the old
message."""
import copy
import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from sweep.schema import health_problem, record_problem
from sweep.schema_depth import depth_bounded, health_fits, record_fits
from sweep.strictjson import MAX_DEPTH, DepthError, _depth, loads

ROOT = Path(__file__).resolve().parents[2]
WRITTEN = sorted(p for p in (ROOT / "tests" / "fixtures").rglob("*.health.json"))


def _health(path: Path) -> dict:
    return json.loads(path.read_text())


def test_every_health_json_of_the_fixtures_is_taken_in_one_check():
    assert len(WRITTEN) >= 10
    for path in WRITTEN:
        health = _health(path)
        assert health_problem(health) is None, path
        assert health_fits()(health), path
        record = {"record_version": 1, "host": "h", "status": "ok", "health": health, "groups": ["a"]}
        assert record_problem(record) is None and record_fits()(record), path


def _containers(doc, path=()):
    """Every container of `doc` with its path (the root's is ())."""
    yield path, doc
    items = doc.items() if isinstance(doc, dict) else enumerate(doc)
    for key, value in items:
        if isinstance(value, (dict, list)):
            yield from _containers(value, (*path, key))


def _chain(depth: int, kind: str):
    """`depth` containers nested in one another (dicts under "k" or lists), a number innermost."""
    value = 1
    for _ in range(depth):
        value = {"k": value} if kind == "dict" else [value]
    return value


def _nested_into(doc, pick: int, key: str, depth: int, kind: str):
    places = list(_containers(doc))
    _, place = places[pick % len(places)]
    if isinstance(place, dict):
        place[key] = _chain(depth, kind)
    else:
        place.append(_chain(depth, kind))
    return doc


@settings(max_examples=400, deadline=None)
@given(
    which=st.integers(0, 10_000),
    pick=st.integers(0, 10_000),
    key=st.sampled_from(["evidence", "extra", "k", "samples", "note"]),
    depth=st.integers(1, 90),
    kind=st.sampled_from(["dict", "list"]),
    as_record=st.booleans(),
)
def test_what_the_one_check_takes_is_valid_and_not_too_deep(which, pick, key, depth, kind, as_record):
    """Nesting put anywhere (a free-form part, a typed one, a new key): the one check never takes
    a document the old checks refuse or that nests past MAX_DEPTH."""
    health = copy.deepcopy(_health(WRITTEN[which % len(WRITTEN)]))
    doc = {"record_version": 1, "host": "h", "status": "ok", "health": health} if as_record else health
    _nested_into(doc, pick, key, depth, kind)
    fits = (record_fits() if as_record else health_fits())(doc)
    valid = (record_problem(doc) if as_record else health_problem(doc)) is None
    shallow = _depth(doc, 1) <= MAX_DEPTH
    if fits:  # what it refuses goes the old way (walk, then each check): only a shortcut
        assert valid and shallow


def test_nesting_in_a_free_form_part_up_to_the_limit_is_taken_past_it_refused():
    health = copy.deepcopy(_health(ROOT / "tests" / "fixtures" / "h200" / "idle.health.json"))
    evidence = health["contracts"][0].setdefault("evidence", {})
    # health 1, contracts 2, a contract 3, its evidence 4: the chain's innermost dict at 4 + n
    evidence["deep"] = _chain(MAX_DEPTH - 4, "dict")
    assert _depth(health, 1) == MAX_DEPTH and health_fits()(health)
    evidence["deep"] = _chain(MAX_DEPTH - 3, "list")
    assert _depth(health, 1) == MAX_DEPTH + 1 and not health_fits()(health)


def test_a_too_deep_answer_still_gets_the_depth_message():
    health = _health(ROOT / "tests" / "fixtures" / "h200" / "idle.health.json")
    health["load"] = _chain(80, "dict")
    with pytest.raises(DepthError) as raised:
        loads(json.dumps(health).encode(), fits=health_fits())
    assert "nests" in str(raised.value) and str(MAX_DEPTH) in str(raised.value)


def test_a_schema_keyword_the_rewrite_does_not_know_is_refused():
    with pytest.raises(ValueError, match="anyOf"):
        depth_bounded({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}})
    with pytest.raises(ValueError, match="ref"):
        depth_bounded({"$ref": "https://example.com/other.json"})


@settings(max_examples=300, deadline=None)
@given(
    number=st.one_of(
        st.integers(-(2**70), 2**70),
        st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**19, 10**25]),
        st.floats(allow_nan=False, allow_infinity=False),
    ),
    where=st.sampled_from(["evidence", "typed", "load"]),
)
def test_a_number_orjson_would_misread_is_never_taken_by_the_one_check(number, where):
    """An integer token past the 64-bit signed integers (the strict parse names it; orjson reads an
    int or an inexact float) is not taken by the one check: the document reads as without it."""
    health = copy.deepcopy(_health(ROOT / "tests" / "fixtures" / "h200" / "idle.health.json"))
    if where == "evidence":
        health["contracts"][0].setdefault("evidence", {})["n"] = number
    elif where == "load":
        health["load"] = {"x": [number]}
    else:
        health["gpus"][0]["memory_total_bytes"] = number
    text = json.dumps(health).encode()
    with_check, without = loads(text, fits=health_fits()), loads(text)
    assert with_check.document == without.document
    assert with_check.unknown_numbers == without.unknown_numbers
    if isinstance(number, int) and not -(2**63) <= number < 2**63:
        assert not with_check.fitted
