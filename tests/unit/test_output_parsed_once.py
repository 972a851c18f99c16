"""A host's answer is parsed once (issue 52): the transport parses stdout to see that it is whole
(`prober._whole_json`, when the agent has exited but the channel stays open), and the judge takes
that document instead of parsing the same bytes again. What the judge makes of the answer must not
depend on whether the transport parsed it first: the same health.json, the same unknown numbers,
the same failure and words."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from hypothesis import given, settings, strategies as st

from sweep.collect.outcome import read_agent_output
from sweep.collect.ssh.prober import _whole_json
from sweep.failures import HostFailure
from sweep.strictjson import NOT_PARSED

REPO = Path(__file__).resolve().parents[2]
IDLE = (REPO / "tests" / "fixtures" / "h200" / "idle.health.json").read_text()
HOST = SimpleNamespace(name="gpu07", python="python3", become=False)


def judged(out: bytes, parsed=NOT_PARSED):
    """What the judge says of `out`: (health, unknown numbers), or the failure's class and words."""
    try:
        return read_agent_output(HOST, out, 0, "", host_deadline=60.0, parsed=parsed)
    except HostFailure as failure:
        return failure.failure_class, failure.message


def variants() -> list[bytes]:
    """Real answers and what a hostile or broken host prints instead."""
    health = json.loads(IDLE)
    compact = json.dumps(health, separators=(",", ":")).encode()
    gpu = health["gpus"][0]
    nan = json.dumps({**health, "gpus": [{**gpu, "temperature_c": float("nan")}]}).encode()
    big = json.dumps(
        {**health, "gpus": [{**gpu, "memory_used_bytes": 184467440737095516160}]}
    ).encode()
    return [
        compact,
        IDLE.encode(),
        nan,  # json takes NaN, orjson refuses it: whole, not parsed by orjson
        big,  # orjson reads past 2**64 as a float: the strict parse must still see the digits
        b"[" * 3000 + b"]" * 3000,  # deeper than either parser goes
        b'{"schema_version": "1.0"}',
        b"[1, 2, 3]",
        b"null",
    ]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(variants()), st.integers(min_value=0, max_value=200), st.booleans())
def test_the_judge_says_the_same_whether_the_transport_parsed_the_answer_or_not(out, cut, trim):
    """Each answer, whole or cut short (data still in flight), judged with and without the
    transport's parse."""
    if trim:
        out = out[: max(0, len(out) - cut)]
    whole, parsed = _whole_json(out)
    try:
        json.loads(out)
        json_whole = True
    except RecursionError:
        json_whole = True
    except ValueError:
        json_whole = False
    assert whole == json_whole
    if whole:
        assert judged(out, parsed) == judged(out)


def test_a_valid_answer_is_parsed_by_orjson_once_and_judged_from_that_document():
    """The document the transport parsed is the judge's health.json, not a second parse."""
    out = IDLE.encode()
    whole, parsed = _whole_json(out)
    assert whole and parsed is not NOT_PARSED
    health, unknown = read_agent_output(HOST, out, 0, "", parsed=parsed)
    assert health is parsed and unknown == []


def test_an_answer_cut_short_is_not_whole():
    out = IDLE.encode()[:-2]
    assert _whole_json(out) == (False, NOT_PARSED)
