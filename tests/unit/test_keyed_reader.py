"""A keyed reader (a host map keyed by GPU index, "topology.cpu_affinity.*") reads the same
whether it finds the host's map once per host (`host_map` then `at`, what the frames do since
issue 52) or walks the whole path for each GPU."""
from hypothesis import given, settings, strategies as st

from sweep.analysis.fact import ACCEPTS, keyed_reader
from sweep.analysis.rows import _PLAIN_READERS, host_maps

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=3))
VALUES = st.recursive(SCALARS, lambda inner: st.dictionaries(st.sampled_from(["0", "1", "nic", "link", "x"]), inner, max_size=4), max_leaves=8)
HEALTHS = st.dictionaries(st.sampled_from(["topology", "host_settings", "gpus"]),
                          st.one_of(VALUES, st.dictionaries(st.sampled_from(["cpu_affinity", "nearest_nic", "numa_affinity"]), VALUES, max_size=3)),
                          max_size=3)


@settings(max_examples=300, deadline=None)
@given(health=HEALTHS, index=st.one_of(st.integers(0, 2), st.none()),
       path=st.sampled_from(["topology.cpu_affinity.*", "host_settings.nearest_nic.*.nic", "topology.*"]),
       dtype=st.sampled_from(["category", "string", "Int64", "any"]))
def test_once_per_host_reads_what_the_whole_path_reads(health, index, path, dtype):
    read = keyed_reader(path, dtype)
    assert read.at(read.host_map(health), index) == walked(health, path, index, dtype)
    assert read(health, index) == walked(health, path, index, dtype)


def walked(health, path, index, dtype):
    """The oracle: the path's steps with the GPU's index for `*`, each a dict lookup, then the
    dtype's test (what the reader did for each GPU before issue 52)."""
    doc = health
    for step in path.replace("*", str(index)).split("."):
        doc = doc.get(step) if isinstance(doc, dict) else None
    return doc if ACCEPTS[dtype](doc) else None


@settings(max_examples=200, deadline=None)
@given(health=HEALTHS, index=st.integers(0, 2))
def test_the_frames_maps_read_as_each_declared_reader_does(health, index):
    maps = host_maps(health)
    for (read, keyed), found in zip(_PLAIN_READERS, maps):
        if keyed:
            assert read.at(found, index) == walked(health, read.path, index, read.dtype)
        else:
            assert found is None
