"""summary.json's text (issue 52): the walk that writes each NaN or infinity as null cost twice the
encoding of a 10,000-host summary, so it runs only where the strict encoder meets such a float. What a
reader gets must not change: the very text the walk and the encoder wrote, whatever the summary holds."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings, strategies as st

from sweep.strictjson import dumps, finite, finite_indented

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),  # NaN and both infinities included
    st.text(),
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(), st.integers()), inner, max_size=4),
    ),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(DOCUMENTS)
def test_summary_text_is_the_walked_text_byte_for_byte(data):
    assert finite_indented(data) == (dumps(finite(data), indent=1) + "\n").encode("utf-8")


def test_nan_and_infinity_are_null_and_nothing_else_changes():
    data = {"power_w": [math.nan, math.inf, -math.inf, 1.5], "hosts": ["gpu01", "ẞ"], "n": 3}
    assert json.loads(finite_indented(data)) == {
        "power_w": [None, None, None, 1.5], "hosts": ["gpu01", "ẞ"], "n": 3}
