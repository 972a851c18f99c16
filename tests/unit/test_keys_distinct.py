"""The per-host comparability keys find each host's distinct (host, combination) pairs by a mark per
possible pair where there are few of them (issue 52: the sort was half of `host_keys` at 10,000
hosts). numpy's own `unique` is the oracle: the same pairs, in the same ascending order, whichever
way is taken."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from sweep.analysis.keys import _distinct


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=20_000), st.data())
def test_distinct_pairs_are_what_numpy_unique_finds(bound, data):
    values = np.array(
        data.draw(st.lists(st.integers(min_value=0, max_value=bound - 1), max_size=300)),
        dtype=np.int64,
    )
    assert np.array_equal(_distinct(values, bound), np.unique(values))


def test_a_wide_bound_is_sorted_not_marked():
    values = np.array([7, 10**12, 7, 3], dtype=np.int64)
    assert _distinct(values, 10**12 + 1).tolist() == [3, 7, 10**12]
