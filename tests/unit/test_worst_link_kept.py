"""The fleet reader keeps the agent's worst_link per (GPU indices, topology pairs) (issue 52): the
same answer as the agent's for every topology, from the cache or not."""

from hypothesis import given, settings
from hypothesis import strategies as st

from probe_agent.contracts import worst_link
from sweep.analysis import rows

LINKS = st.sampled_from(["NV18", "NV4", "NV12", "PIX", "PXB", "PHB", "NODE", "SYS", "X", "??"])


@st.composite
def topologies(draw):
    n = draw(st.integers(0, 8))
    indices = draw(st.permutations(range(8)))[:n]
    pairs = {
        f"{a}-{b}": draw(LINKS)
        for a in range(8)
        for b in range(a + 1, 8)
        if draw(st.integers(0, 9))  # some pairs not read
    }
    return {"pairs": pairs}, [{"index": i} for i in indices]


@settings(max_examples=150, deadline=None)
@given(topologies())
def test_the_kept_worst_link_is_the_agents(topology_and_gpus):
    topology, gpus = topology_and_gpus
    expected = worst_link({"topology": topology, "gpus": gpus})
    assert rows._worst_link(topology, gpus) == expected
    assert rows._worst_link(topology, gpus) == expected  # the second from the cache


def test_a_changed_pair_is_a_new_answer_and_what_cannot_be_kept_is_computed():
    gpus = [{"index": 0}, {"index": 1}]
    assert rows._worst_link({"pairs": {"0-1": "NV18"}}, gpus) == "NV18"
    assert rows._worst_link({"pairs": {"0-1": "SYS"}}, gpus) == "SYS"
    unhashable = {"pairs": {"0-1": ["not", "a", "link"]}}
    try:
        expected = worst_link({"topology": unhashable, "gpus": gpus})
    except Exception as err:  # noqa: BLE001 - whatever the agent's own function does with it
        expected = type(err)
    try:
        got = rows._worst_link(unhashable, gpus)
    except Exception as err:  # noqa: BLE001
        got = type(err)
    assert got == expected
