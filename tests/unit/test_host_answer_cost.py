"""A host's answer costs the controller CPU in proportion to its bytes at C speed, never a Python call
per number it holds (issue 52): 15 MiB of ``[0,0,...]`` took 20-34 s of the controller's CPU through the
strict parse, and sixteen such hosts outlived their deadlines. The calls are counted, not timed
(`sys.setprofile` sees every Python-level call): a count does not depend on how loaded the machine is."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from sweep.collect.outcome import read_agent_output
from sweep.failures import HostFailure
from sweep.strictjson import STRICT_MAX_BYTES, loads

REPO = Path(__file__).resolve().parents[2]
IDLE = (REPO / "tests" / "fixtures" / "h200" / "idle.health.json").read_text()
HOST = SimpleNamespace(name="gpu07", python="python3", become=False)
FIFTEEN_MIB = 15 * 2**20


def python_calls(work):
    """(what `work()` returned or raised, how many Python-level calls it made)."""
    calls = [0]

    def count(frame, event, arg):
        if event == "call":
            calls[0] += 1

    sys.setprofile(count)
    try:
        try:
            got = work()
        except Exception as exc:  # noqa: BLE001 - what the work raised is part of the answer
            got = exc
    finally:
        sys.setprofile(None)
    return got, calls[0]


@pytest.fixture(autouse=True)
def checks_compiled():
    """The schema checks a controller compiles once per process (sweep.schema_depth rewrites the
    schema in Python: ~1,500 calls), compiled before any count: the counts are of each answer."""
    from sweep.schema import health_check
    from sweep.schema_depth import health_fits

    health_check(), health_fits()


def number_array(size: int) -> bytes:
    return b"[" + b"0," * (size // 2 - 1) + b"0]"


def test_a_15_mib_number_array_is_refused_without_a_python_call_per_number():
    out = number_array(FIFTEEN_MIB)
    got, calls = python_calls(lambda: read_agent_output(HOST, out, 0, ""))
    assert isinstance(got, HostFailure) and got.failure_class == "bad_output", got
    assert "is JSON but not an object (list)" in got.message
    assert calls < 1_000, f"{calls} Python calls for {len(out) // 2:,} numbers"


def test_numbers_in_a_health_json_cost_no_python_call_each():
    """The same 7.8 million numbers inside a health.json's free-form part (a contract's evidence)."""
    health = json.loads(IDLE)
    health["contracts"][0]["evidence"]["padding"] = "@@"
    out = json.dumps(health).replace('"@@"', number_array(FIFTEEN_MIB).decode()).encode()
    got, calls = python_calls(lambda: read_agent_output(HOST, out, 0, ""))
    assert isinstance(got, tuple), got  # accepted: the published schema leaves evidence free-form
    assert calls < 20_000, f"{calls} Python calls"


def test_a_large_answer_only_a_strict_parse_reads_is_refused_at_c_speed():
    """NaN (or Infinity, 1e999, a lone surrogate) in an answer past STRICT_MAX_BYTES: refused, naming why,
    instead of the strict parse's Python call per number; the agent never writes NaN."""
    body = number_array(2 * STRICT_MAX_BYTES)[:-1] + b",NaN]"
    out = b'{"schema_version": "1.4", "x": ' + body + b"}"
    got, calls = python_calls(lambda: read_agent_output(HOST, out, 0, ""))
    assert isinstance(got, HostFailure) and got.failure_class == "bad_output", got
    assert "is not JSON (2048 KiB that only a strict parse reads (NaN, Infinity, a number a double cannot " \
           "hold, a lone surrogate, or not JSON), more than the 1024 KiB sweep parses strictly)" in got.message
    assert calls < 1_000, f"{calls} Python calls"


@pytest.mark.parametrize("text", ["18446744073709551615", "-9223372036854775809", "9223372036854775808",
                                  "123456789012345678901234567890", "NaN", "1e999", "-Infinity"])
def test_numbers_a_double_or_int64_cannot_hold_are_still_named(text):
    """orjson reads an integer past 2**64 as a float and one in [2**63, 2**64) as an int: the strict parse
    still names every number no exact column type holds."""
    loaded = loads(('{"a": [1, {"b": ' + text + '}], "c": "1234567890123456789012"}').encode())
    assert loaded.document == {"a": [1, {"b": None}], "c": "1234567890123456789012"}
    assert loaded.unknown_numbers == [{"path": "a[1].b", "text": text}]


def test_a_small_answer_keeps_the_strict_parse_and_its_depth_limit():
    from sweep.strictjson import DepthError

    with pytest.raises(DepthError, match="nests 66 levels deep, more than the 64 levels"):
        loads(b"[" * 65 + b"{}" + b"]" * 65)
    with pytest.raises(DepthError):
        loads(b"[" * 5000 + b"]" * 5000)
    with pytest.raises(DepthError):
        loads(b"[" * (STRICT_MAX_BYTES // 2 + 10) + b"]" * (STRICT_MAX_BYTES // 2 + 10))
