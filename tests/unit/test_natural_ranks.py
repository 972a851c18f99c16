"""A verdict sorts its hosts by ranks found once (`sweep.analysis.names.natural_ranks`), not by each
host's `host_key` again: the order must be host_key's (gpu2 before gpu10) whatever the names."""
from hypothesis import given, settings, strategies as st

from sweep.analysis.names import by_rank, natural_ranks
from sweep.text import host_key

NAMES = st.lists(st.from_regex(r"[a-z]{1,3}(0{0,2}[0-9]{1,4})?(-[a-z0-9]{1,3})?", fullmatch=True), max_size=40)


@settings(max_examples=300, deadline=None)
@given(universe=NAMES, pick=st.lists(st.integers(0, 10**6), max_size=40))
def test_ranked_names_are_in_host_key_order(universe, pick):
    ranks = natural_ranks(universe)
    names = {universe[i % len(universe)] for i in pick} if universe else set()
    got = by_rank(names, ranks)
    assert sorted(got) == sorted(names)
    assert [host_key(n) for n in got] == sorted(host_key(n) for n in names)
    if len({host_key(n) for n in names}) == len(names):  # no two names read as one key
        assert got == sorted(names, key=host_key)


def test_a_name_without_a_rank_still_sorts_naturally():
    assert by_rank(["gpu10", "gpu9", "gpu2"], natural_ranks(["gpu10", "gpu2"])) == ["gpu2", "gpu9", "gpu10"]
