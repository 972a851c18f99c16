"""A GPU's row is one generated function (`rows._plain_row`, issue 52): it reads what the
declarations say, value for value, for whatever a GPU's dict holds (each declared reader called on
its own, the section maps read key by key, is the oracle)."""
from hypothesis import given, settings, strategies as st

from sweep.analysis import rows
from sweep.analysis.fact import ACCEPTS, ACCEPTS_SOURCE
from sweep.analysis.rows import GPU_ROW, _NO_SPEED, _PLAIN_READERS, gpu_facts, host_maps

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False),
                    st.text(max_size=2))
KEYS = sorted({key for _, keys in rows._SECTIONS for key in keys} | set(rows._OWN_KEYS)
              | {"version", "enabled", "nic", "link", "0", "1", "vbios", "inforom_image"})
VALUES = st.recursive(SCALARS, lambda inner: st.dictionaries(st.sampled_from(KEYS), inner, max_size=4),
                      max_leaves=10)
# each section with its own keys (and the fact readers' steps), so that the values are found; a
# section is a dict or nothing (the schema checked it)
SECTION_KEYS = {**{section: list(keys) for section, keys in rows._SECTIONS},
                "gsp_firmware": ["version", "enabled"]}
SECTIONS = {section: st.one_of(st.none(), st.sampled_from([0, "", False]),
                               st.fixed_dictionaries({}, optional={key: VALUES for key in keys + ["x"]}))
            for section, keys in SECTION_KEYS.items()}
GPUS = st.fixed_dictionaries(
    {"index": st.one_of(st.integers(0, 1), st.none())},
    optional={**{key: SCALARS for key in rows._OWN_KEYS if key != "index"}, **SECTIONS,
              "vbios": SCALARS, "inforom_image": SCALARS})
HEALTHS = st.fixed_dictionaries({}, optional={
    "topology": st.dictionaries(st.sampled_from(["cpu_affinity", "numa_affinity"]), VALUES, max_size=2),
    "host_settings": st.dictionaries(st.sampled_from(["nearest_nic"]), VALUES, max_size=1)})
LOADS = st.dictionaries(st.sampled_from([key for _, key in rows.LOAD_FIELDS]), SCALARS, max_size=3)


def declared_row(g, load, host, selected, maps):
    """The oracle: each declaration read on its own, as the frames read a GPU before issue 52."""
    row = [host, selected, *(g.get(key) for key in rows._OWN_KEYS)]
    for section, keys in rows._SECTIONS:
        row += [(g.get(section) or {}).get(key) for key in keys]
    row += [load.get(key) for key in rows._LOAD_KEYS]
    row += list(rows._gpu_computed(g))
    row += [read.at(found, g.get("index")) if keyed else read(g)
            for (read, keyed), found in zip(_PLAIN_READERS, maps)]
    return row + list(_NO_SPEED)


@settings(max_examples=400, deadline=None)
@given(g=GPUS, health=HEALTHS, load=LOADS, selected=st.booleans())
def test_the_generated_row_reads_what_each_declaration_reads(g, health, load, selected):
    maps = host_maps(health)
    got = gpu_facts(g, load, 7, selected, maps)
    assert got == declared_row(g, load, 7, selected, maps)
    assert len(got) == len(GPU_ROW)


def test_a_gpu_of_a_real_capture_fills_its_declared_columns():
    """A real capture's GPU (two-H100 host): the row names its facts where GPU_ROW says, not
    shifted."""
    import json
    from pathlib import Path

    health = json.loads((Path(__file__).parents[1] / "fixtures/x2/i15/x2-idle.health.json").read_text())
    g = health["gpus"][0]
    row = dict(zip(GPU_ROW, gpu_facts(g, {}, 0, True, host_maps(health))))
    assert row["uuid"] == g["uuid"] and row["index"] == g["index"]
    assert row["power_enforced_w"] == g["power"]["enforced_limit_w"]
    assert row["sm_max_mhz"] == g["clocks"]["sm_max_mhz"]
    assert row["vbios"] == g["vbios"] and row["cpu_affinity"] == "0-31"


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(SCALARS, st.lists(SCALARS, max_size=2), st.dictionaries(st.text(max_size=1), SCALARS, max_size=1)),
       dtype=st.sampled_from(sorted(ACCEPTS)))
def test_each_inlined_dtype_test_accepts_what_the_reader_accepts(value, dtype):
    assert bool(eval(ACCEPTS_SOURCE[dtype], {}, {"v": value})) == bool(ACCEPTS[dtype](value))
