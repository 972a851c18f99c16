"""The fact table's own code, judged in-process (issue 39): what a declaration derives, what each key's
value reads as in the report and the terminal, and what a host's mixed GPUs read as.

Every input is built in the test body, and every declaration a test checks is made in the test body:
the module's own table (`facts.FACTS`) is built once, at import, before a mutant is switched on, so a
test that only reads the imported table checks nothing mutmut can change (bench/results/mutation.md).
"""
from __future__ import annotations

import pytest

from sweep.analysis import facts
from sweep.analysis import fact_values, platform_facts, speed_facts, speed_reference
from sweep.analysis import impact as texts
from sweep.analysis.compare import compare
from sweep.analysis.fleet import load_fleet
from sweep.analysis.speed_record import VALIDATED
from sweep.demo.speed import derive_section


def row(fact: str, **values) -> dict:
    """A typed row of `fact`'s columns: the values given, None (not read) for the rest."""
    return {c: values.get(c) for c in facts.BY_NAME[fact].columns}


def shown(fact: str, **values) -> str:
    """What the report shows for `fact` on a host (or GPU) with these typed values."""
    return facts.BY_NAME[fact].render(row(fact, **values))


# --- a fact declared by its health.json path: everything else is derived -----------------------------


def test_a_host_fact_declared_by_its_path_derives_its_column_reader_render_unread_and_info_metric():
    fact = facts.Fact(name="thp_test", label="THP (test)", scope="host", path="host_settings.transparent_hugepages",
                      impact=[(None, "thp {value} vs {reference}")], diff_kind="host settings")
    assert fact.columns == ("thp_test",) and fact.paths == ("host_settings.transparent_hugepages",)
    dtype, read = fact.reads["thp_test"]
    assert dtype == "category"
    assert read({"host_settings": {"transparent_hugepages": "always"}}) == "always"
    assert read({"host_settings": {"transparent_hugepages": ""}}) is None  # an empty text is not a reading
    assert read({"host_settings": "not a section"}) is None and read({}) is None
    assert fact.render({"thp_test": "never"}) == "never" and fact.render({"thp_test": None}) == "not recorded"
    assert fact.unread({"thp_test": None}) is True and fact.unread({"thp_test": "never"}) is False
    assert fact.metric == facts.Metric("sweep_host_thp_test_info",
                                       "THP (test) (host_settings.transparent_hugepages), value 1.",
                                       labels=(("thp_test", "thp_test"),))


def test_a_gpu_fact_declared_by_its_path_reads_the_gpus_dict_under_its_own_column_and_gauges_a_number():
    fact = facts.Fact(name="fan_test", label="Fan (test)", scope="gpu", path="gpus#.fan.speed_pct", dtype="Int64",
                      column="fan_pct", impact=[(None, "fan")], diff_kind="modes")
    assert fact.columns == ("fan_pct",) and fact.paths == ("gpus#.fan.speed_pct",)
    dtype, read = fact.reads["fan_pct"]
    assert dtype == "Int64"
    assert read({"fan": {"speed_pct": 40}}) == 40  # from the GPU's dict: the "gpus#." prefix is the GPU
    assert read({"fan": {"speed_pct": True}}) is None and read({"fan": {"speed_pct": 40.0}}) is None
    assert fact.render({"fan_pct": 40}) == "40" and fact.render({"fan_pct": None}) == "not recorded"
    assert fact.metric == facts.Metric("sweep_gpu_fan_test", "Fan (test) (gpus#.fan.speed_pct).", "fan_pct")


@pytest.mark.parametrize("dtype, info", [("category", True), ("string", True), ("boolean", False), ("Int64", False),
                                         ("Float64", False)])
def test_a_text_fact_exports_an_info_metric_and_a_number_or_mode_a_gauge_of_its_column(dtype, info):
    fact = facts.Fact(name="m_test", label="M", scope="gpu", path="gpus#.m", dtype=dtype, impact=[(None, "x")],
                      diff_kind="modes")
    if info:
        assert fact.metric == facts.Metric("sweep_gpu_m_test_info", "M (gpus#.m), value 1.",
                                           labels=(("m_test", "m_test"),))
    else:
        assert fact.metric == facts.Metric("sweep_gpu_m_test", "M (gpus#.m).", "m_test")


@pytest.mark.parametrize("dtype, value, text", [
    ("boolean", True, "on"), ("boolean", False, "off"), ("Float64", 437.5, "437.5"), ("Float64", 700.0, "700"),
    ("string", "", ""), ("Int64", 0, "0"),
])
def test_a_path_facts_value_renders_by_its_dtype_and_a_false_or_zero_reading_is_still_a_reading(dtype, value, text):
    fact = facts.Fact(name="x_test", label="X", scope="host", path="x.y", dtype=dtype, impact=[(None, "x")],
                      diff_kind="modes")
    _, read = fact.reads["x_test"]
    assert read({"x": {"y": value}}) == value
    assert fact.render({"x_test": value}) == text
    assert fact.unread({"x_test": value}) is False


@pytest.mark.parametrize("dtype, accepted, refused", [
    ("category", ["a"], ["", 1, None]),
    ("string", ["", "a"], [1, None]),
    ("boolean", [True, False], [0, 1, "on", None]),
    ("Int64", [0, 7], [True, 7.0, "7", None]),
    ("Float64", [0, 7, 7.5], [False, "7.5", None]),
    ("any", [0, False, "", [], {}], [None]),
])
def test_a_path_reader_takes_only_a_reading_of_its_dtype(dtype, accepted, refused):
    read = facts.path_reader("gpus#.a.b", dtype)
    for value in accepted:
        assert read({"a": {"b": value}}) == value and type(read({"a": {"b": value}})) is type(value), (dtype, value)
    for value in refused:
        assert read({"a": {"b": value}}) is None, (dtype, value)
    assert read({"a": None}) is None and read({"a": [1]}) is None and read(None) is None


def test_what_a_path_fact_declares_itself_is_kept_not_derived():
    render = lambda r: "own text"  # noqa: E731
    metric = facts.Metric("sweep_host_own", "own.", "own")
    fact = facts.Fact(name="own_test", label="Own", scope="host", path="a.b", impact=[(None, "x")], diff_kind="modes",
                      render=render, metric=metric)
    assert fact.render is render and fact.metric is metric
    unexported = facts.Fact(name="quiet_test", label="Quiet", scope="host", path="a.b", impact=[(None, "x")],
                            diff_kind="modes", no_metric="a test fact")
    assert unexported.metric is None
    by_columns = facts.Fact(name="cols_test", label="Cols", scope="host", columns=("a",), impact=[(None, "x")],
                            diff_kind="modes")  # no path: nothing is derived
    assert by_columns.reads == {} and by_columns.render is None and by_columns.unread is None
    assert by_columns.metric is None and by_columns.paths == ()


@pytest.mark.parametrize("scope, path", [("host", "gpus#.vbios"), ("gpu", "firmware.bios_version")])
def test_a_path_in_the_wrong_scope_is_refused_naming_the_fact(scope, path):
    with pytest.raises(ValueError, match="fact 'bad_test': a GPU fact's path starts with 'gpus#.'"):
        facts.Fact(name="bad_test", label="Bad", scope=scope, path=path, impact=[(None, "x")], diff_kind="modes")


def test_an_expectation_kind_is_one_of_four_and_another_is_refused_naming_the_key_and_the_kinds():
    for kind in ("equal", "glob", "floor", "ceiling"):
        assert facts.Expect("k", kind).kind == kind
    with pytest.raises(ValueError) as err:
        facts.Expect("vbios", "regex")
    assert str(err.value) == "expectation 'vbios': kind 'regex' is none of equal, glob, floor, ceiling"


def test_a_firmware_version_is_expected_by_globs_and_its_violation_says_to_finish_the_upgrade():
    rule = platform_facts.approved("bios")
    assert (rule.key, rule.kind, rule.noun) == ("bios", "glob", "version")
    assert rule.fix == "finish the firmware upgrade of the change window on this host (or approve this version)"
    info = facts.Metric.info("sweep_host_x_info", "X, value 1.", ("version", "x"), ("mode", "y"))
    assert info == facts.Metric("sweep_host_x_info", "X, value 1.", labels=(("version", "x"), ("mode", "y")))
    version = fact_values.version_text
    assert version("fw")({"fw": "1.2"}) == "1.2" and version("fw")({"fw": None}) == "not recorded"
    assert version("fw", "not running")({"fw": None}) == "not running"


# --- the speed tier's figures ----------------------------------------------------------------------


@pytest.mark.parametrize("name, scope, floor, metric, where, value, text, unit", [
    ("hbm", "gpu", "hbm_gbps_min", "sweep_gpu_speed_hbm_bytes_per_second", ("speed.gpus#.figures.hbm.*",),
     4.089e12, "4089 GB/s", "GB/s"),
    ("pcie_d2h", "gpu", "pcie_d2h_gbps_min", "sweep_gpu_speed_pcie_d2h_bytes_per_second",
     ("speed.gpus#.figures.pcie_d2h.*",), 5.5e10, "55 GB/s", "GB/s"),
    ("bf16_gemm", "gpu", "bf16_gemm_tflops_min", "sweep_gpu_speed_bf16_gemm_flops",
     ("speed.gpus#.figures.bf16_gemm.*",),
     7.76e14, "776.0 TFLOP/s", "TFLOP/s"),
    ("p2p", "host", "p2p_gbps_min", "sweep_host_speed_p2p_bytes_per_second", ("speed.p2p#.*",), 3.6e11, "360 GB/s",
     "GB/s"),
    ("allreduce", "host", "allreduce_gbps_min", "sweep_host_speed_allreduce_bytes_per_second", ("speed.allreduce.*",),
     4.8e11, "480 GB/s", "GB/s"),
])
def test_a_speed_figure_is_a_drift_with_a_floor_splits_no_class_and_reads_in_its_unit(name, scope, floor, metric, where,
                                                                                      value, text, unit):
    fact = speed_facts.speed_fact(name, scope, floor)
    column = f"speed_{name}"
    assert (fact.name, fact.scope, fact.columns, fact.paths) == (name, scope, (column,), where)
    assert fact.label == speed_reference.LABELS[name]
    assert (fact.history, fact.compares, fact.diff_kind) == ("drift", False, "speed")
    assert fact.expect == facts.Expect(floor, "floor", unit=unit)
    assert fact.metric.name == metric and fact.metric.column == column
    label, unit_name = speed_reference.LABELS[name], speed_reference.UNITS[name]
    assert fact.metric.help == f"The speed tier's measured {label} ({unit_name}), best of its repetitions."
    assert fact.render({column: value}) == text and fact.render({column: None}) == "not measured"
    (only,) = fact.impact
    assert only[0] is None and only[1] == speed_facts.SPEED_IMPACT[name]
    dtype, read = fact.reads[column]
    assert dtype == "Float64"
    if scope == "gpu":
        assert read({VALIDATED: {name: value}}) == value and read({}) is None
    else:
        assert read({}) is None  # a host that did not run the speed tier
        section = derive_section([0, 1])  # two GPUs: two pairs at 390 GB/s, all-reduce at 360 GB/s
        section["p2p"][1]["value"] = 2.0e11
        assert read({"speed": section}) == {"p2p": 2.0e11, "allreduce": 3.6e11}[name]  # p2p: the slowest pair


def test_a_speed_figure_reads_in_decimal_units_rounded_half_to_even():
    """GB/s is 10**9 B/s and TFLOP/s 10**12 FLOP/s (not GiB): a figure exactly halfway shows which."""
    hbm, gemm = speed_facts.speed_fact("hbm", "gpu", "hbm_gbps_min"), speed_facts.speed_fact("bf16_gemm", "gpu", "x")
    assert hbm.render({"speed_hbm": 3.5e9}) == "4 GB/s" and hbm.render({"speed_hbm": 2.5e9}) == "2 GB/s"
    assert gemm.render({"speed_bf16_gemm": 7.5e11}) == "0.8 TFLOP/s"


# --- what each key reads as ------------------------------------------------------------------------


def test_ecc_reads_on_off_and_a_pending_change_only_where_both_modes_were_read():
    assert shown("ecc", ecc_current=True, ecc_pending=True) == "on"
    assert shown("ecc", ecc_current=False, ecc_pending=False) == "off"
    assert shown("ecc", ecc_current=True, ecc_pending=False) == "on (pending off)"
    assert shown("ecc", ecc_current=False, ecc_pending=True) == "off (pending on)"
    assert shown("ecc", ecc_current=True) == "on"  # the pending mode not read: nothing said of it
    assert shown("ecc", ecc_pending=False) == "unknown"


def test_mig_reads_its_layout_compacted_and_a_pending_change_only_where_both_modes_were_read():
    assert shown("mig", mig_current=False, mig_pending=False) == "off"
    assert shown("mig", mig_current=True, mig_pending=True, mig_layout="1g.18gb+1g.18gb+3g.71gb") == \
        "on: 2x 1g.18gb + 3g.71gb"
    assert shown("mig", mig_current=True, mig_pending=True, mig_layout="3g.71gb+3g.71gb") == "on: 2x 3g.71gb"
    assert shown("mig", mig_current=True, mig_pending=True, mig_layout="7g.141gb") == "on: 7g.141gb"
    assert shown("mig", mig_current=True, mig_layout="") == "on: no instances"
    assert shown("mig", mig_current=False, mig_pending=True) == "off (pending on)"
    assert shown("mig", mig_current=True, mig_pending=False, mig_layout="7g.141gb") == "on: 7g.141gb (pending off)"
    assert shown("mig", mig_pending=True) == "unknown"
    assert shown("mig", mig_current=False) == "off"


@pytest.mark.parametrize("app, default, sm_max, text", [
    (None, 1980, 1980, "not read"),           # NVML answered no application clock: not read, never "default"
    (1980, 1980, 2100, "default"),            # the default application clock
    (1410, 1980, 1980, "app clocks 1410 MHz"),
    (1980, None, 1980, "default"),            # no default application clock (H100/H200): the max SM clock is
    (1410, None, 1980, "app clocks 1410 MHz"),
    (1410, None, None, "not read"),           # nothing to tell it from
])
def test_the_clock_policy_is_default_unless_an_application_clock_other_than_the_default_is_set(app, default, sm_max,
                                                                                               text):
    assert shown("clock_policy", app_sm_mhz=app, default_app_sm_mhz=default, sm_max_mhz=sm_max) == text
    unread = facts.BY_NAME["clock_policy"].unread(row("clock_policy", app_sm_mhz=app, default_app_sm_mhz=default,
                                                      sm_max_mhz=sm_max))
    assert unread is (text == "not read")


def test_the_power_limit_reads_its_default_only_where_it_differs():
    assert shown("power_limit", power_enforced_w=700.0, power_default_w=700.0) == "700 W"
    assert shown("power_limit", power_enforced_w=437.5, power_default_w=700.0) == "437.5 W (default 700 W)"
    assert shown("power_limit", power_default_w=700.0) == "? W (default 700 W)"
    assert facts.BY_NAME["power_limit"].per_gpu(row("power_limit", power_enforced_w=250.0, power_default_w=700.0)) \
        == "250 W"


@pytest.mark.parametrize("link, selected, text", [
    ("NV18", 8, "NV18 (NVLink)"), ("PIX", 8, "PIX (one PCIe switch)"), ("SYS", 2, "SYS (across NUMA nodes)"),
    ("PHB", None, "PHB (PCIe host bridge)"), ("XYZ", 4, "XYZ (?)"), (None, 8, "unknown"), (None, 1, "single GPU"),
    ("NV18", 1, "single GPU"), (None, 0, "no GPU selected"),
])
def test_the_worst_link_reads_its_code_and_meaning_and_one_gpu_reads_single(link, selected, text):
    assert shown("link", worst_link=link, gpus_selected=selected) == text
    unread = facts.BY_NAME["link"].unread(row("link", worst_link=link, gpus_selected=selected))
    assert unread is (text == "unknown")


def test_the_framework_reads_torch_and_its_cuda_runtime():
    assert shown("framework") == "no torch found"
    assert shown("framework", torch="2.5.1", cuda_runtime="12.4") == "torch 2.5.1, CUDA 12.4"
    assert shown("framework", torch="2.5.1") == "torch 2.5.1, CPU-only"


def test_gpus_present_read_against_the_bus():
    assert shown("gpus_present", gpu_count=8, gpus_on_bus=8) == "8"
    assert shown("gpus_present", gpu_count=7, gpus_on_bus=8) == "7 of 8 on the bus"
    assert shown("gpus_present", gpu_count=8) == "8 (bus not read)"
    assert shown("gpus_present", gpus_on_bus=8) == "unknown"


def test_gsp_firmware_reads_off_its_version_or_that_the_version_was_not_read():
    assert shown("gsp_firmware") == "not recorded"
    assert shown("gsp_firmware", gsp_mode=False, gsp_version="580.1") == "off"
    assert shown("gsp_firmware", gsp_mode=True, gsp_version="580.159.04") == "580.159.04"
    assert shown("gsp_firmware", gsp_version="580.159.04") == "580.159.04"  # the mode not read
    assert shown("gsp_firmware", gsp_mode=True) == "on (version not read)"


def _ports(*ports):
    return {"host_settings": {"ib_ports": list(ports)}}


def test_the_hca_firmware_is_each_distinct_version_and_no_hca_is_said_not_unread():
    read = facts.HOST_READS["hca_firmware"][1]
    assert read(_ports({"fw_ver": "28.40.1000"}, {"fw_ver": "28.39.1002"}, {"fw_ver": "28.39.1002"})) == \
        "28.39.1002/28.40.1000"
    assert read(_ports({"fw_ver": "28.39.1002"}, "junk", {"fw_ver": ""}, {})) == "28.39.1002"
    assert read(_ports()) == "no HCA"
    assert read(_ports({"fw_ver": None})) is None  # ports, but no version read
    assert read({"host_settings": {"ib_ports": None}}) is None and read({}) is None
    assert read({"host_settings": None}) is None


def test_the_port_rates_are_the_slowest_and_fastest_active_port():
    slowest, fastest = facts.HOST_READS["ib_slowest_gbps"][1], facts.HOST_READS["ib_fastest_gbps"][1]
    health = _ports({"state": "ACTIVE", "rate_gbps": 400}, {"state": "ACTIVE", "rate_gbps": 200.0},
                    {"state": "DOWN", "rate_gbps": 100.0}, {"state": "ACTIVE", "rate_gbps": True},
                    {"state": "ACTIVE", "rate_gbps": "800"}, "junk", {"state": "ACTIVE"})
    assert slowest(health) == 200.0 and fastest(health) == 400.0 and type(fastest(health)) is float
    assert slowest(_ports({"state": "DOWN", "rate_gbps": 400.0})) is None
    assert slowest(_ports()) is None and fastest({}) is None and slowest({"host_settings": {"ib_ports": {}}}) is None


def test_on_off_and_numbers_as_the_edge_shows_them():
    assert facts.onoff(True) == "on" and facts.onoff(False) == "off" and facts.onoff(None) == "unknown"
    assert facts.onoff(None, "not reported") == "not reported" and facts.onoff(0, "x") == "off"
    assert facts.as_number(None) == "?" and facts.as_number(700) == "700" and facts.as_number(437.5) == "437.5"
    assert shown("confidential_compute") == "not reported"
    assert shown("confidential_compute", confidential_compute=True) == "on"


# --- a host whose GPUs disagree -----------------------------------------------------------------------


def test_mixed_gpus_read_each_value_with_its_count_the_most_common_first_and_the_others_gpus():
    power = facts.BY_NAME["power_limit"]
    rows = [row("power_limit", power_enforced_w=700.0, power_default_w=700.0),
            row("power_limit", power_enforced_w=250.0, power_default_w=700.0)]
    assert facts.mixed_text(power, rows, [[0, 1, 2, 4, 5, 6, 7], [3]]) == "700 W x7, 250 W x1 (GPU 3)"
    assert facts.mixed_text(power, rows, [[5], [0, 1, 2, 3, 4, 6, 7]]) == "250 W x7, 700 W x1 (GPU 5)"
    # a tie: the value of the lowest GPU index first, the others named
    assert facts.mixed_text(power, rows, [[2, 3], [0, 1]]) == "250 W x2, 700 W x2 (GPU 2-3)"
    assert facts.mixed_text(power, rows, [[1, 3], [0, 2]]) == "250 W x2, 700 W x2 (GPU 1,3)"
    three = rows + [row("power_limit", power_enforced_w=400.0, power_default_w=700.0)]
    assert facts.mixed_text(power, three, [[0, 1, 2, 3, 4, 5], [6], [7]]) == \
        "700 W x6, 250 W x1 (GPU 6), 400 W x1 (GPU 7)"
    # rows that render alike are one value: the host does not read as mixed
    same = [row("power_limit", power_enforced_w=700.0, power_default_w=700.0),
            row("power_limit", power_enforced_w=700.0, power_default_w=600.0)]
    assert facts.mixed_text(power, same, [[0], [1]]) == "700 W"


def test_mixed_gpus_without_their_indexes_read_the_values_highest_first_by_number():
    power = facts.BY_NAME["power_limit"]
    rows = [row("power_limit", power_enforced_w=w, power_default_w=1000.0) for w in (250.0, 1000.0, 700.0, 700.0)]
    assert facts.mixed_text(power, rows) == "1000 W, 700 W, 250 W"  # 1000 above 700: by number, not as text
    ecc = facts.BY_NAME["ecc"]
    assert facts.mixed_text(ecc, [row("ecc", ecc_current=True), row("ecc", ecc_current=False)]) == "on, off"


def test_a_gpu_index_that_is_no_integer_ranks_as_gpu_0():
    power = facts.BY_NAME["power_limit"]
    rows = [row("power_limit", power_enforced_w=700.0, power_default_w=700.0),
            row("power_limit", power_enforced_w=250.0, power_default_w=700.0)]
    assert facts.mixed_text(power, rows, [[3, 4], [None, "x"]]) == "250 W x2, 700 W x2 (GPU 3-4)"
    assert facts.mixed_text(power, rows, [[2, 3], [1, None]]) == "250 W x2, 700 W x2 (GPU 2-3)"
    assert facts.mixed_text(power, rows, [[1, 2], [None, "x"]]) == "250 W x2, 700 W x2 (GPU 1-2)"


def test_a_typed_value_is_none_only_where_no_column_was_read():
    power = facts.BY_NAME["power_limit"]
    assert facts.typed_value(power, {"power_enforced_w": None, "power_default_w": None}) is None
    assert facts.typed_value(power, {"power_enforced_w": None, "power_default_w": 700.0}) == (None, 700.0)
    assert facts.typed_value(power, {"power_enforced_w": 0.0, "power_default_w": None}) == (0.0, None)


# --- the views of the table --------------------------------------------------------------------------


def _fact(name, scope, compares=True, **more):
    return facts.Fact(name=name, label=name.upper(), scope=scope, impact=[(None, "x")], diff_kind="modes",
                      compares=compares, **more)


def test_the_views_of_a_table_split_compared_facts_and_reads_by_scope():
    reader = lambda d: None  # noqa: E731
    table = (_fact("a", "gpu", reads={"ca": ("Int64", reader)}), _fact("b", "host", compares=False),
             _fact("c", "host", reads={"cc": ("category", reader)}))
    views = facts.derived(table)
    assert views["FACTS"] == table and list(views["BY_NAME"]) == ["a", "b", "c"] and views["BY_NAME"]["b"] is table[1]
    assert views["LABELS"] == {"a": "A", "b": "B", "c": "C"}
    assert views["COMPARED"] == {"a": "A", "c": "C"}  # b splits no class
    assert views["GPU_FACTS"] == (table[0],) and views["HOST_FACTS"] == (table[1], table[2])
    assert views["GPU_READS"] == {"ca": ("Int64", reader)} and views["HOST_READS"] == {"cc": ("category", reader)}


def test_the_comparability_keys_are_the_compared_facts_and_the_measured_or_platform_ones_are_not():
    assert {"driver", "ecc", "power_limit", "mig", "gpu_model", "link", "vbios", "hca_firmware"} <= set(facts.COMPARED)
    assert not {"inforom", "gsp_firmware", "bios", "fabric_manager", "hbm", "allreduce"} & set(facts.COMPARED)


def test_the_signature_names_each_facts_scope_treatment_comparing_and_column_dtypes(monkeypatch):
    table = (_fact("a", "gpu", columns=("x", "y")), _fact("b", "host", compares=False, columns=("z",), history="drift"))
    monkeypatch.setattr(facts, "FACTS", table)
    assert facts.signature({"x": "Int64", "z": "Float64"}) == "a/gpu/value/1/x:Int64,y:;b/host/drift/0/z:Float64"


def test_the_audit_paths_and_labels_are_those_of_facts_read_through_the_table_whose_value_has_change_points(
        monkeypatch):
    reader = lambda d: None  # noqa: E731
    table = (_fact("v", "gpu", paths=("gpus#.v", "gpus#.w"), reads={"v": ("category", reader)}),
             _fact("h", "host", paths=("h.x",), reads={"h": ("category", reader)}),
             _fact("s", "gpu", paths=("speed.s",), history="drift", reads={"s": ("Float64", reader)}),
             _fact("n", "host", paths=("n.x",)))  # the frames read it themselves
    monkeypatch.setattr(facts, "FACTS", table)
    assert facts.own_paths() == [("modes", ("gpus#.v", "gpus#.w")), ("modes", ("h.x",))]
    assert facts.path_labels() == {"v": "V", "w": "V", "h.x": "H"}


# --- impact_of: a fact's rules and its "not read" test ----------------------------------------------


def test_a_fact_not_read_on_one_side_says_so_instead_of_judging_it():
    assert facts.impact_of("vbios", "a", "b").startswith("not read on this host: ")  # no GPU rows at all
    ecc_off = row("ecc", ecc_current=False, ecc_pending=False)
    on = row("ecc", ecc_current=True, ecc_pending=True)
    unread = row("ecc", ecc_pending=True)
    assert facts.impact_of("ecc", "unknown", "on", [unread], [on]).startswith("not read on this host: ")
    assert facts.impact_of("ecc", "off", "unknown", [ecc_off], [unread]).startswith("not read on the reference hosts: ")
    assert facts.impact_of("ecc", "off", "on", [ecc_off], [on]).startswith("ECC off: ")


def test_the_link_impact_reads_the_topology_codes_of_each_side():
    text = facts.impact_of("link", "NV12 (NVLink)", "NV18 (NVLink)", [{"worst_link": "NV12", "gpus_selected": 8}],
                           [{"worst_link": "NV18", "gpus_selected": 8}])
    assert text == ("NV12 instead of NV18 between the selected GPUs: fewer NVLink links, so all-reduce and other "
                    "collectives run slower here")


def test_a_fact_whose_text_says_what_a_gap_means_is_judged_even_where_not_read():
    unread = row("framework")  # "no torch found": the probe looked and found none
    text = facts.impact_of("framework", "no torch found", "torch 2.5.1, CUDA 12.4", [unread],
                           [row("framework", torch="2.5.1", cuda_runtime="12.4")])
    assert text.startswith("a different framework build (no torch found vs torch 2.5.1, CUDA 12.4)")
    assert facts._every_row_read(unread) is False
    assert facts.impact_of("vbios", "96.00.A5.00.2B", "96.00.A5.00.1A", [{"vbios": "96.00.A5.00.2B"}],
                           [{"vbios": "96.00.A5.00.1A"}]).startswith(
        "firmware differs: a change-window left hosts half-upgraded (96.00.A5.00.2B vs 96.00.A5.00.1A)")


# --- every key's text, and when it counts as not read ---------------------------------------------------


@pytest.mark.parametrize("fact, values, text, unread", [
    ("gpu_model", {"name": "NVIDIA H200"}, "NVIDIA H200", False),
    ("gpu_model", {"name": ""}, "unknown", True), ("gpu_model", {}, "unknown", True),
    ("memory", {"memory_total_bytes": 150754820096}, "143771 MiB", False), ("memory", {}, "unknown", True),
    ("gpu_count", {"gpus_selected": 8}, "8 GPUs", False), ("gpu_count", {"gpus_selected": 1}, "1 GPU", False),
    ("gpu_count", {"gpus_selected": 0}, "0 GPUs", False), ("gpu_count", {}, "unknown", True),
    ("driver", {"driver": "590.44.01"}, "590.44.01", False), ("driver", {"driver": ""}, "unknown", True),
    ("cuda_driver", {"cuda_driver": "13.0"}, "CUDA 13.0", False), ("cuda_driver", {}, "CUDA ?", True),
    ("power_limit", {"power_enforced_w": 700.0, "power_default_w": 700.0}, "700 W", False),
    ("power_limit", {"power_default_w": 700.0}, "? W (default 700 W)", True),
    ("ecc", {"ecc_current": False}, "off", False), ("ecc", {}, "unknown", True),
    ("mig", {"mig_current": False}, "off", False), ("mig", {"mig_pending": False}, "unknown", True),
    ("persistence", {"persistence_mode": True}, "on", False),
    ("persistence", {"persistence_mode": False}, "off", False),
    ("persistence", {}, "unknown", True),
    ("compute_mode", {"compute_mode": "EXCLUSIVE_PROCESS"}, "EXCLUSIVE_PROCESS", False),
    ("compute_mode", {"compute_mode": ""}, "unknown", True), ("compute_mode", {}, "unknown", True),
    ("confidential_compute", {"confidential_compute": False}, "off", None),
    ("gpus_present", {"gpu_count": 0, "gpus_on_bus": 0}, "0", False),
    ("gpus_present", {"gpus_on_bus": 8}, "unknown", True),
    ("pcie", {"pcie_max_gen": 5, "pcie_width": 16}, "gen5 x16", False), ("pcie", {"pcie_width": 8}, "gen? x8", False),
    ("pcie", {"pcie_max_gen": 5}, "unknown", True),
    ("nvlinks", {"nvlink_links": 18, "nvlink_active": 14}, "14 of 18", False),
    ("nvlinks", {"nvlink_links": 0, "nvlink_active": 0, "nvlink_error": "NVMLError_NotSupported"}, "none", False),
    ("nvlinks", {"nvlink_links": 0, "nvlink_active": 0}, "none", False),
    ("nvlinks", {"nvlink_links": 0, "nvlink_active": 0, "nvlink_error": "NVMLError_Unknown"}, "not read", True),
    ("nvlinks", {}, "not read", True),
    ("ib_rate", {"ib_rates": "2x 400 Gb/s"}, "2x 400 Gb/s", False), ("ib_rate", {}, "not read", True),
    ("ib_rate", {"ib_rates": "no active port"}, "no active port", False),
    ("cpu_governor", {"cpu_governor": "performance", "cpufreq_exposed": True}, "performance", False),
    ("cpu_governor", {"cpufreq_exposed": False}, "not exposed", False),  # sysfs has no cpufreq: a reading
    ("cpu_governor", {}, "not read", True), ("cpu_governor", {"cpu_governor": "unreadable"}, "not read", True),
    ("vbios", {"vbios": "96.00.A5.00.1A"}, "96.00.A5.00.1A", False), ("vbios", {}, "not recorded", True),
    ("hca_firmware", {"hca_firmware": "no HCA"}, "no HCA", False), ("hca_firmware", {}, "not recorded", True),
    ("fabric_manager", {}, "not running", True),
])
def test_each_keys_text_and_whether_it_counts_as_not_read(fact, values, text, unread):
    """`unread` None: the fact has no "not read" test, its text says what a gap means (judged as it stands)."""
    assert shown(fact, **values) == text
    test = facts.BY_NAME[fact].unread
    assert (None if test is None else test(row(fact, **values))) is unread


# --- a fact not read on a host, through the comparison an operator reads --------------------------------


def _each_gpu(**fields):
    def edit(health):
        for g in health["gpus"]:
            for path, value in fields.items():
                *section, name = path.split("__")
                (g[section[0]] if section else g)[name] = value
    return edit


def _host(section, field, value):
    def edit(health):
        health[section] = {**(health.get(section) or {}), field: value}
    return edit


UNREAD = [
    ("ecc", _each_gpu(ecc__current=None), "on"), ("persistence", _each_gpu(persistence_mode=None), "on"),
    ("memory", _each_gpu(memory_total_bytes=None), "143771 MiB"), ("gpu_model", _each_gpu(name=None), "NVIDIA H200"),
    ("mig", _each_gpu(mig__current=None), "off"), ("driver", _host("driver", "version", None), "580.159.04"),
    ("cuda_driver", _host("driver", "cuda_driver_version", None), "CUDA 13.0"),
    ("power_limit", _each_gpu(power__enforced_limit_w=None), "700 W"),
    ("clock_policy", _each_gpu(clocks__app_sm_mhz=None), "default"),
]


@pytest.mark.parametrize("key, edit, reference", UNREAD, ids=[u[0] for u in UNREAD])
def test_a_fact_not_read_on_a_host_splits_it_off_and_says_not_read_instead_of_judging_it(tmp_path, key, edit,
                                                                                           reference):
    """The host is compared (its other keys match), but on this key it cannot be shown alike: its impact says
    the fact was not read and how to get it, never what a real difference of that key would do."""
    from test_facts import fleet_health, write_run
    found = compare(load_fleet([write_run(tmp_path / "run", 1, fleet_health(3, gpu03=edit))]))
    assert [c.hosts for c in found.classes] == [("gpu01", "gpu02"), ("gpu03",)] and not found.excluded
    (difference,) = found.classes[1].differs
    assert (difference.key, difference.reference) == (key, reference)
    assert difference.impact == texts.UNKNOWN.format(where="this host")


def test_ports_and_hca_firmware_not_read_are_said_so_not_a_half_done_firmware_upgrade(tmp_path):
    from test_facts import fleet_health, hca, write_run
    healths = fleet_health(3, gpu01=hca("28.39.1002"), gpu02=hca("28.39.1002"))  # gpu03: no ib_ports read
    found = compare(load_fleet([write_run(tmp_path / "run", 1, healths)]))
    assert [c.hosts for c in found.classes] == [("gpu01", "gpu02"), ("gpu03",)]
    differs = {d.key: d for d in found.classes[1].differs}
    assert set(differs) == {"ib_rate", "hca_firmware"}
    assert (differs["hca_firmware"].value, differs["ib_rate"].value) == ("not recorded", "not read")
    for d in differs.values():
        assert d.impact == texts.UNKNOWN.format(where="this host"), d.impact
    # the reference hosts not read, this one read: said of the reference
    healths = fleet_health(3, gpu03=hca("28.39.1002"))
    (odd,) = compare(load_fleet([write_run(tmp_path / "again", 1, healths)])).classes[1:]
    assert odd.hosts == ("gpu03",)
    assert {d.key: d.impact for d in odd.differs} == dict.fromkeys(
        ("ib_rate", "hca_firmware"), texts.UNKNOWN.format(where="the reference hosts"))


def test_clocks_not_read_are_not_judged_as_default_clocks_against_pinned_ones(tmp_path):
    """The reference pins application clocks at 1410 MHz; gpu03's application clock was not read: it is
    said so, never "default clocks while the reference pins application clocks: this host boosts freely"."""
    from test_facts import fleet_health, write_run
    pinned = _each_gpu(clocks__app_sm_mhz=1410)
    healths = fleet_health(3, gpu01=pinned, gpu02=pinned, gpu03=_each_gpu(clocks__app_sm_mhz=None))
    found = compare(load_fleet([write_run(tmp_path / "run", 1, healths)]))
    assert [c.hosts for c in found.classes] == [("gpu01", "gpu02"), ("gpu03",)]
    (difference,) = found.classes[1].differs
    assert (difference.key, difference.value, difference.reference) == ("clock_policy", "not read",
                                                                        "app clocks 1410 MHz")
    assert difference.impact == texts.UNKNOWN.format(where="this host")
    # read and default on gpu03: the real difference is still told
    healths = fleet_health(3, gpu01=pinned, gpu02=pinned)
    (difference,) = compare(load_fleet([write_run(tmp_path / "read", 1, healths)])).classes[1].differs
    assert difference.value == "default" and difference.impact.startswith("default clocks while the reference pins")


def _governors(governors, why=None):
    """host_settings as the agent writes them: the governors' policy counts, or None and why not."""
    def edit(health):
        health["host_settings"] = {"cpu_governor": governors, "unreadable": {"cpu_governor": why} if why else {}}
    return edit


PERFORMANCE = _governors({"performance": 64})
VM = _governors(None, "no cpufreq policy (no frequency scaling exposed)")  # as the recorded H200 VM writes it


@pytest.mark.parametrize("edit", [_governors(None, "PermissionError"), _governors({"unreadable": 64}),
                                  lambda health: health.pop("host_settings", None)],
                         ids=["permission", "every-policy-unreadable", "older-agent"])
def test_a_cpu_governor_not_read_is_said_so_not_judged_as_a_governor_that_changes_frequency(tmp_path, edit):
    from test_facts import fleet_health, write_run
    healths = fleet_health(3, gpu01=PERFORMANCE, gpu02=PERFORMANCE, gpu03=edit)
    found = compare(load_fleet([write_run(tmp_path / "run", 1, healths)]))
    assert [c.hosts for c in found.classes] == [("gpu01", "gpu02"), ("gpu03",)]
    (difference,) = found.classes[1].differs
    assert (difference.key, difference.value, difference.reference) == ("cpu_governor", "not read", "performance")
    assert difference.impact == texts.UNKNOWN.format(where="this host")


def test_a_host_whose_sysfs_exposes_no_cpufreq_is_a_real_state_told_without_claiming_what_its_cpus_do(tmp_path):
    """A VM (the recorded H200s) exposes no cpufreq at all: a reading, compared (never "not read", which
    a probe again cannot cure) but never said to "change frequency under load" either."""
    from test_facts import fleet_health, write_run
    found = compare(load_fleet([write_run(tmp_path / "run", 1, fleet_health(
        3, gpu01=PERFORMANCE, gpu02=PERFORMANCE, gpu03=VM))]))
    assert [c.hosts for c in found.classes] == [("gpu01", "gpu02"), ("gpu03",)]
    (difference,) = found.classes[1].differs
    assert (difference.value, difference.reference) == ("not exposed", "performance")
    assert difference.impact.startswith("no CPU frequency governor exposed here while the reference runs "
                                        "performance: a VM, or frequency scaling left to the BIOS")
    assert "change frequency" not in difference.impact
    # the reference hosts are the VMs: said of them
    (odd,) = compare(load_fleet([write_run(tmp_path / "vms", 1, fleet_health(3, gpu01=VM, gpu02=VM,
                                                                             gpu03=PERFORMANCE))])).classes[1:]
    assert odd.differs[0].impact.startswith("CPU governor performance while the reference hosts expose none")
    # a fleet of VMs is alike on this key
    found = compare(load_fleet([write_run(tmp_path / "all", 1, fleet_health(3, **dict.fromkeys(
        ("gpu01", "gpu02", "gpu03"), VM)))]))
    assert [c.hosts for c in found.classes] == [("gpu01", "gpu02", "gpu03")]


def _nvlink(links, active=None, error=None):
    """Each GPU's nvlink section as the agent writes it (None: no section), and NVML's answer to the first
    link's state where none answered."""
    def edit(health):
        for g in health["gpus"]:
            if links is None:
                g.pop("nvlink", None)
            else:
                g["nvlink"] = {"links": links, "active": links if active is None else active, "inactive_links": [],
                               "errors": None, "errors_per_link": {}}
            g["unsupported"] = {k: v for k, v in (g.get("unsupported") or {}).items() if k != "nvlink"}
            if error:
                g["unsupported"]["nvlink"] = error
    return edit


@pytest.mark.parametrize("edit", [_nvlink(None), _nvlink(0, error="NVMLError_Unknown")],
                         ids=["older-agent", "nvml-error"])
def test_nvlinks_not_read_are_said_so_not_judged_as_a_host_without_nvlink(tmp_path, edit):
    from test_facts import fleet_health, write_run
    nv18 = _nvlink(18)
    found = compare(load_fleet([write_run(tmp_path / "run", 1, fleet_health(3, gpu01=nv18, gpu02=nv18, gpu03=edit))]))
    assert [c.hosts for c in found.classes] == [("gpu01", "gpu02"), ("gpu03",)]
    (difference,) = found.classes[1].differs
    assert (difference.key, difference.value, difference.reference) == ("nvlinks", "not read", "18 of 18")
    assert difference.impact == texts.UNKNOWN.format(where="this host")


def test_a_gpu_nvml_says_has_no_nvlink_is_a_real_difference(tmp_path):
    """NVML's "not supported" for the first link's state (the recorded H200 VM): the GPU has no NVLink,
    a reading judged against hosts that have them."""
    from test_facts import fleet_health, write_run
    nv18 = _nvlink(18)
    found = compare(load_fleet([write_run(tmp_path / "run", 1, fleet_health(
        3, gpu01=nv18, gpu02=nv18, gpu03=_nvlink(0, error="NVMLError_NotSupported")))]))
    (difference,) = found.classes[1].differs
    assert (difference.value, difference.reference) == ("none", "18 of 18")
    assert "fewer links carry GPU-to-GPU traffic" in difference.impact


def test_a_mask_that_selects_no_gpu_reads_no_gpu_selected_not_single_gpu(tmp_path):
    """CUDA_VISIBLE_DEVICES='' (the demo's gpu29): the host is kept out (its device mask is broken), and
    what it shows for the worst link is that no GPU is selected, never "single GPU"."""
    from test_facts import fleet_health, write_run

    def empty_mask(health):
        health["environment"] = {**(health.get("environment") or {}), "CUDA_VISIBLE_DEVICES": ""}
    found = compare(load_fleet([write_run(tmp_path / "run", 1, fleet_health(3, gpu03=empty_mask))]))
    assert [(e["host"], e["contract"]) for e in found.excluded] == [("gpu03", "device_mask")]
    assert (found.host_keys.loc["gpu03", "link"], found.host_keys.loc["gpu03", "gpu_count"]) == (
        "no GPU selected", "0 GPUs")
    assert facts.impact_of("link", "no GPU selected", "NV18 (NVLink)", [row("link", gpus_selected=0)],
                           [row("link", worst_link="NV18", gpus_selected=8)]).startswith(
        "one side has no GPU selected: no GPU-to-GPU traffic at all")
