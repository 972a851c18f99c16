"""summary.json is written by orjson (issue 52: the walk that made NaN null and json's indenting
encoder were 0.1 s of a 10,000-host report). What a reader gets must not change: the same values,
every NaN or infinity as null, strict JSON that json's strict parser takes, whatever the summary
holds, and a summary orjson cannot write (a key that is not text, an integer past 64 bits) still
written the old way."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings, strategies as st

from sweep.strictjson import dumps, finite, finite_indented

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(),  # NaN and both infinities included
    st.text(),
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)),
    max_leaves=40,
)


def strict(text: str):
    def refuse(word):
        raise ValueError(f"not strict JSON: {word}")

    return json.loads(text, parse_constant=refuse)


@settings(max_examples=300, deadline=None)
@given(DOCUMENTS)
def test_summary_text_reads_as_the_old_text_read(data):
    new = strict(finite_indented(data).decode("utf-8"))
    old = strict(dumps(finite(data), indent=1))
    assert json.dumps(new, sort_keys=True) == json.dumps(old, sort_keys=True)


@settings(max_examples=300, deadline=None)
@given(st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**64 - 1), st.text()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)),
    max_leaves=40,
))
def test_without_floats_the_text_is_the_old_text_byte_for_byte(data):
    """Indented by one, as before: a diff of two runs' summary.json shows only what changed."""
    assert finite_indented(data) == (dumps(data, indent=1) + "\n").encode("utf-8")


def test_nan_and_infinity_are_null_and_nothing_else_changes():
    data = {"power_w": [math.nan, math.inf, -math.inf, 1.5], "hosts": ["gpu01", "ẞ"], "n": 3}
    assert strict(finite_indented(data).decode("utf-8")) == {
        "power_w": [None, None, None, 1.5], "hosts": ["gpu01", "ẞ"], "n": 3}


def test_what_orjson_cannot_write_is_still_written():
    data = {"big": 2**70, "keys": {1: math.nan}}
    assert strict(finite_indented(data).decode("utf-8")) == {"big": 2**70, "keys": {"1": None}}
