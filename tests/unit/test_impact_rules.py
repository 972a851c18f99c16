"""What a differing comparability key means for a benchmark (sweep/analysis/impact.py), judged in-process
at each rule's boundary (issue 39): the rules read the typed rows behind each side (one per distinct
value of the host's GPUs), never the text, and the text names the values.

Each case is built in the test body (no module-scoped fixture: mutmut would run its tests against a
mutant without the code being called again)."""
from __future__ import annotations

import pytest

from sweep.analysis.impact import UNKNOWN, clocks_unread, default_clocks, impact


def says(key, mine, ref, value="this", reference="that", **kw):
    """The impact of `key` for a host whose distinct GPU rows are `mine` against the reference's `ref`."""
    return impact(key, value, reference, rows=mine, ref_rows=ref, **kw)


# --- the frame: not read, a rule list, the texts ------------------------------------------------------


def test_a_side_not_read_is_said_by_which_side_and_this_host_first():
    unread = lambda r: r["x"] is None  # noqa: E731
    assert says("driver", [{"x": None}], [{"x": 1}], unread=unread) == UNKNOWN.format(where="this host")
    assert says("driver", [{"x": 1}], [{"x": None}], unread=unread) == UNKNOWN.format(where="the reference hosts")
    assert says("driver", [{"x": None}], [{"x": None}], unread=unread).startswith("not read on this host: ")
    assert says("driver", [], [{"x": 1}], unread=unread).startswith("not read on this host: ")  # a host without GPUs
    # one GPU row read of two: the side was read, so it is judged
    assert says("driver", [{"x": None}, {"x": 1}], [{"x": 1}], "590", "580", unread=unread).startswith(
        "a different driver (590 vs 580)")
    # no "not read" test: the rows are judged as they are
    assert says("driver", [], [], "590", "580").startswith("a different driver (590 vs 580)")
    assert UNKNOWN.format(where="this host").endswith("read the host's health.json and probe it again")


def test_the_first_rule_that_holds_gives_the_text_filled_in_or_computed():
    rules = [(lambda c: c["value"] == "x", "first {value}"), (lambda c: True, lambda c: f"computed {c['reference']}"),
             (None, "never")]
    assert impact("k", "x", "y", rules) == "first x"
    assert impact("k", "z", "y", rules) == "computed y"
    assert impact("k", "z", "y", [(None, "{value} and {reference}")]) == "z and y"
    assert impact("no_rules_key", "a", "b") == "a instead of b"  # a key without rules
    with pytest.raises(AssertionError, match="no rule for k"):
        impact("k", "z", "y", [(lambda c: False, "never")])


def test_a_host_is_mixed_when_its_gpus_disagree_and_the_references_do_not():
    seen = []
    rules = [(lambda c: seen.append(c["mixed"]), "x"), (None, "y")]
    for mine, ref in (([{}, {}], [{}]), ([{}, {}], []), ([{}], [{}]), ([{}, {}], [{}, {}]), ([], [{}])):
        impact("k", "a", "b", rules, mine, ref)
    assert seen == [True, True, False, False, False]


# --- ECC -----------------------------------------------------------------------------------------


def ecc(current, pending=None):
    return {"ecc_current": current, "ecc_pending": pending}


def test_ecc_a_pending_change_comes_first_then_mixed_gpus_then_off_then_on():
    assert says("ecc", [ecc(True, False)], [ecc(True, True)]).startswith("an ECC mode change is pending")
    assert says("ecc", [ecc(False, True)], [ecc(False, False)]).startswith("an ECC mode change is pending")
    assert says("ecc", [ecc(True, False), ecc(False, False)], [ecc(True, True)]).startswith(
        "an ECC mode change is pending")  # pending on one GPU of two
    assert says("ecc", [ecc(True, True), ecc(False, False)], [ecc(True, True)]).startswith(
        "ECC differs between this host's GPUs")
    assert says("ecc", [ecc(False, False)], [ecc(True, True)]).startswith("ECC off: about 6% more usable memory")
    assert says("ecc", [ecc(False)], [ecc(True)]).startswith("ECC off: ")  # pending not read: no change pending
    assert says("ecc", [ecc(True, True)], [ecc(False, False)]).startswith("ECC on while the reference runs without")
    assert says("ecc", [ecc(True, None)], [ecc(False)]).startswith("ECC on while")
    assert says("ecc", [ecc(None, True), ecc(True, True)], [ecc(False)], unread=None).startswith("ECC differs")


# --- power -----------------------------------------------------------------------------------------


def power(w):
    return {"power_enforced_w": w, "power_default_w": 700.0}


@pytest.mark.parametrize("mine, ref, text", [
    ([power(699.0)], [power(700.0)], "a lower power cap (this vs that)"),
    ([power(700.0)], [power(700.0)], "a higher power cap (this vs that)"),  # at the reference's cap: not lower
    ([power(701.0)], [power(700.0)], "a higher power cap"),
    ([power(450.0)], [power(500.0), power(400.0)], "a higher power cap"),  # against the reference's lowest
    ([power(400.0)], [power(500.0), power(450.0)], "a lower power cap"),
    ([power(None)], [power(700.0)], "a higher power cap"),  # nothing read to be lower (the rule alone: through
    # the fact table the power limit's "not read" test says so first, test_facts_inprocess)
    ([power(400.0)], [power(None)], "a higher power cap"),
    ([power(700.0), power(250.0)], [power(700.0)], "one or more GPUs capped lower than the others"),
])
def test_the_power_cap_is_lower_only_below_the_references_lowest_and_mixed_gpus_say_so_first(mine, ref, text):
    assert says("power_limit", mine, ref).startswith(text)


# --- MIG -------------------------------------------------------------------------------------------


def mig(current, pending=None, layout=None):
    return {"mig_current": current, "mig_pending": pending, "mig_layout": layout}


def test_mig_pending_then_two_layouts_then_a_slice_then_the_whole_gpu():
    assert says("mig", [mig(False, True)], [mig(False, False)]).startswith("a MIG mode change is pending")
    assert says("mig", [mig(True, False)], [mig(True, True)]).startswith("a MIG mode change is pending")
    assert says("mig", [mig(True, True, "3g.71gb")], [mig(True, True, "7g.141gb")], "on: 3g.71gb", "on: 7g.141gb") \
        == ("another MIG layout (on: 3g.71gb vs on: 7g.141gb): the slices have other sizes, so a job lands on a "
            "different fraction of the GPU's SMs, memory and bandwidth")
    assert says("mig", [mig(True, True)], [mig(False, False)], "on: 3g.71gb").startswith(
        "MIG on: 3g.71gb: the benchmark runs on a slice")
    assert says("mig", [mig(False, False)], [mig(True, True)]).startswith("MIG off: the benchmark gets the whole GPU")
    # one GPU off of two is not "MIG on" (no GPU off and some on)
    assert says("mig", [mig(True, True), mig(False, False)], [mig(False, False), mig(False, False)]).startswith(
        "MIG off")
    assert says("mig", [mig(None, None)], [mig(False, False)], unread=None).startswith("MIG off")
    # the reference has a GPU off: not two layouts
    assert says("mig", [mig(True, True)], [mig(True, True), mig(False, False)]).startswith("MIG this: ")
    # the reference's mode not read: not two layouts either (a slice against what cannot be called a slice)
    assert says("mig", [mig(True, True)], [mig(None, None)], unread=None).startswith("MIG this: ")


# --- persistence, confidential computing, compute mode ----------------------------------------------


def test_persistence_off_on_any_gpu_or_mixed_gpus_pays_start_up_else_on_starts_faster():
    off, on = {"persistence_mode": False}, {"persistence_mode": True}
    assert says("persistence", [off], [on]).startswith("persistence mode off: the driver tears the GPU state down")
    assert says("persistence", [on, off], [on]).startswith("persistence mode off")
    assert says("persistence", [on], [off]).startswith("persistence on while the reference has it off")
    assert says("persistence", [{"persistence_mode": None}], [off], unread=None).startswith("persistence on while")


def test_confidential_computing_on_here_slows_copies_else_its_cost_differs():
    on, off = {"confidential_compute": True}, {"confidential_compute": False}
    assert says("confidential_compute", [on], [off]).startswith("confidential computing on: host-GPU copies go through")
    assert says("confidential_compute", [off], [on], "off", "on") == (
        "confidential computing off while the reference has it on: copies and launches run at a different cost")
    assert says("confidential_compute", [{"confidential_compute": None}], [on]).startswith(
        "confidential computing this while")


# --- clocks ------------------------------------------------------------------------------------------


def clocks(app, default=None, sm_max=1980):
    return {"app_sm_mhz": app, "default_app_sm_mhz": default, "sm_max_mhz": sm_max}


@pytest.mark.parametrize("r, default", [
    (clocks(None), False), (clocks(1980), True), (clocks(1979), False), (clocks(1410, 1410), True),
    (clocks(1980, 1410), False), (clocks(1410, None, None), False), (clocks(1410, 1410, None), True),
    (clocks(1980, 1410, 1980), False),  # the default application clock wins over the max SM clock
])
def test_default_clocks_are_the_default_application_clock_read_never_a_clock_not_read(r, default):
    assert default_clocks(r) is default
    assert clocks_unread(r) is (r["app_sm_mhz"] is None or r["default_app_sm_mhz"] is r["sm_max_mhz"] is None)


def test_clock_policy_default_here_boosts_freely_else_the_pinned_clock_sets_the_result():
    assert says("clock_policy", [clocks(1980)], [clocks(1410)]).startswith("default clocks while the reference pins")
    assert says("clock_policy", [clocks(None), clocks(1980)], [clocks(1410)]).startswith("default clocks")
    assert says("clock_policy", [clocks(1980), clocks(1410)], [clocks(1980)], "a", "b").startswith(
        "a instead of b: the SM clock under load is fixed")  # one GPU pinned
    assert says("clock_policy", [], [clocks(1980)], "a", "b").startswith("a instead of b")  # nothing to call default
    assert says("clock_policy", [clocks(None)], [clocks(1410)], "a", "b").startswith("a instead of b")  # not read


# --- links -------------------------------------------------------------------------------------------


def link(code, selected=8):
    return {"worst_link": code, "gpus_selected": selected}


@pytest.mark.parametrize("mine, ref, text", [
    ("NV18", "NV12", "NV18 instead of NV12 between the selected GPUs: more NVLink links, so all-reduce and other "
                     "collectives run faster here"),
    ("NV12", "NV18", "NV12 instead of NV18 between the selected GPUs: fewer NVLink links, so all-reduce and other "
                     "collectives run slower here"),
    ("NV18", "PIX", "a better link than the reference (this vs that)"),
    ("PIX", "SYS", "a better link than the reference"),
    ("SYS", "PIX", "the selected GPUs talk over this instead of that"),
    ("PIX", "NV18", "the selected GPUs talk over this instead of that"),
    ("NV", "NV18", "the selected GPUs talk over"),   # no link count: not compared as NVLinks (and not better)
    ("NVX", "NV4", "the selected GPUs talk over"),
])
def test_a_link_is_told_by_its_nvlink_count_then_its_rank(mine, ref, text):
    assert says("link", [link(mine)], [link(ref)]).startswith(text)


def test_a_single_gpu_on_either_side_has_no_gpu_to_gpu_traffic_and_two_gpus_have():
    single = "one side has a single GPU selected: no GPU-to-GPU traffic at all"
    assert says("link", [link(None, 1)], [link("NV18")]).startswith(single)
    assert says("link", [link("NV18")], [link(None, 1)]).startswith(single)
    assert says("link", [link(None, 0)], [link("NV18")]).startswith(
        "one side has no GPU selected: no GPU-to-GPU traffic at all")  # the mask selects none: not "single"
    assert not says("link", [link("SYS", 2)], [link("NV18", 2)]).startswith(single)
    assert not says("link", [link("SYS", None)], [link("NV18")]).startswith(single)


def test_a_links_code_is_the_first_row_that_read_one():
    assert says("link", [link(None), link("NV12")], [link("NV18")]).startswith("NV12 instead of NV18")
    assert says("link", [link("NV18")], [link(None), link("NV4")]).startswith(
        "NV18 instead of NV4 between the selected GPUs: more")


# --- GPUs present, PCIe, NVLinks, network ports --------------------------------------------------------


def test_a_gpu_on_the_bus_the_driver_does_not_list_is_said_else_another_host_size():
    assert says("gpus_present", [{"gpu_count": 7, "gpus_on_bus": 8}], [{"gpu_count": 8, "gpus_on_bus": 8}],
                "7 of 8 on the bus", "8").startswith("7 of 8 on the bus: a GPU is on the PCI bus but the driver")
    assert says("gpus_present", [{"gpu_count": 4, "gpus_on_bus": 4}], [{"gpu_count": 8, "gpus_on_bus": 8}], "4", "8") \
        == "4 GPUs instead of 8: a different host size; per-host throughput differs"
    assert says("gpus_present", [{"gpu_count": 4, "gpus_on_bus": None}], [{"gpu_count": 8, "gpus_on_bus": 8}]) \
        .startswith("this GPUs instead of")
    assert says("gpus_present", [{"gpu_count": None, "gpus_on_bus": 8}], [{"gpu_count": 8, "gpus_on_bus": 8}],
                unread=None).startswith("this GPUs instead of")


def pcie(width, gen=5):
    return {"pcie_width": width, "pcie_max_gen": gen}


@pytest.mark.parametrize("mine, ref, words", [
    ([pcie(8)], [pcie(16)], "the cards trained down to 8 lanes, so host-to-GPU copies, data loading and GPUDirect "
                            "RDMA run at 50% of the reference's bandwidth there"),
    ([pcie(16), pcie(4)], [pcie(16)], "a card trained down to 4 lanes, so host-to-GPU copies, data loading and "
                                      "GPUDirect RDMA run at 25% of"),
    ([pcie(8)], [pcie(8), pcie(16)], "trained down to 8 lanes, so host-to-GPU copies, data loading and GPUDirect RDMA "
                                     "run at 50%"),  # against the reference's widest
])
def test_a_narrower_pcie_link_names_its_lanes_and_share_of_the_bandwidth_and_the_fix(mine, ref, words):
    text = says("pcie", mine, ref, "gen5 x8", "gen5 x16")
    assert text.startswith("PCIe gen5 x8 instead of gen5 x16: ") and words in text
    assert text.endswith("reseat the card or riser")


def test_a_card_trained_down_says_what_waits_for_it_and_the_fix():
    assert says("pcie", [pcie(8)], [pcie(16)], "gen5 x8", "gen5 x16") == (
        "PCIe gen5 x8 instead of gen5 x16: the cards trained down to 8 lanes, so host-to-GPU copies, data loading "
        "and GPUDirect RDMA run at 50% of the reference's bandwidth there (half at x8 of x16), and synchronous "
        "multi-GPU steps wait for that GPU; reseat the card or riser")


@pytest.mark.parametrize("mine, ref", [([pcie(16, 4)], [pcie(16)]), ([pcie(16)], [pcie(8)]), ([pcie(None)], [pcie(16)]),
                                       ([pcie(16)], [pcie(None)])])
def test_a_pcie_link_not_narrower_than_the_references_widest_differs_by_generation_only(mine, ref):
    assert says("pcie", mine, ref, "gen4 x16", "gen5 x16", unread=None) == (
        "PCIe gen4 x16 instead of gen5 x16: host-to-GPU bandwidth differs (each generation doubles it), so copies "
        "and data loading run at another speed")


def test_fewer_nvlinks_and_the_cpu_governor_name_their_values():
    assert says("nvlinks", [{}], [{}], "14 of 18", "18 of 18").startswith(
        "14 of 18 NVLinks active instead of 18 of 18: fewer links carry GPU-to-GPU traffic")
    assert says("cpu_governor", [{}], [{}], "powersave", "performance").startswith(
        "CPU governor powersave instead of performance: the CPUs change frequency under load")


def nv(links, active=None):
    return {"nvlink_links": links, "nvlink_active": links if active is None else active}


@pytest.mark.parametrize("mine, ref, more", [
    ([nv(18)], [nv(0)], True),                      # NVLink here, none on the reference ("none" counts 0)
    ([nv(18)], [nv(18, 17)], True), ([nv(18, 17)], [nv(18)], False), ([nv(18)], [nv(18)], False),
    ([nv(18), nv(18, 17)], [nv(18, 17)], False),    # one GPU of this host no better than the reference
    ([nv(0)], [nv(18)], False),
])
def test_more_nvlinks_than_the_reference_are_said_faster_never_fewer(mine, ref, more):
    text = says("nvlinks", mine, ref, "a", "b")
    assert text.startswith("a NVLinks active against b: more links carry GPU-to-GPU traffic here") is more
    assert text.startswith("a NVLinks active instead of b: fewer links") is not more


@pytest.mark.parametrize("mine, ref, faster", [
    (["performance"], ["powersave"], True), (["performance"], ["schedutil,performance"], True),
    (["powersave"], ["performance"], False), (["performance,powersave"], ["powersave"], False),
    (["performance"], ["performance,powersave"], True),
])
def test_the_performance_governor_against_another_is_said_steadier_never_varying(mine, ref, faster):
    text = says("cpu_governor", [{"cpu_governor": g} for g in mine], [{"cpu_governor": g} for g in ref], "a", "b")
    assert text.startswith("CPU governor performance while the reference runs b: these CPUs hold") is faster
    assert ("the CPUs change frequency under load" in text) is not faster


def ports(slowest, fastest):
    return {"ib_slowest_gbps": slowest, "ib_fastest_gbps": fastest}


@pytest.mark.parametrize("mine, ref, slower", [
    (ports(200.0, 400.0), ports(400.0, 400.0), True),
    (ports(399.0, 399.0), ports(200.0, 400.0), True),   # below the reference's fastest port
    (ports(400.0, 400.0), ports(200.0, 400.0), False),  # at it
    (ports(None, None), ports(400.0, 400.0), False), (ports(200.0, 200.0), ports(None, None), False),
])
def test_a_network_port_slower_than_the_references_fastest_is_a_port_trained_down(mine, ref, slower):
    text = says("ib_rate", [mine], [ref], "1x 200 Gb/s", "1x 400 Gb/s")
    if slower:
        assert text.startswith("network ports at 1x 200 Gb/s instead of 1x 400 Gb/s: inter-node all-reduce runs at "
                               "the slowest port's rate")
    else:
        assert text == "network ports 1x 200 Gb/s instead of 1x 400 Gb/s: inter-node collectives run at another rate"
