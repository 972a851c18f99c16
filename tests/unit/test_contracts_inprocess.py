"""The hardware contracts judged in-process on recorded H200 data: verdict, cause and fix (issue 39).

Most contract tests run the agent as a subprocess, where a mutation tool cannot see which test reaches
which check. These call each `check_*` of probe_agent/contracts.py directly on a variant of the idle
H200 health.json (tests/unit/fleet_variants.py) and pin what an operator reads: the status at each
boundary, the GPU and the value the message names, and the fix.
"""
import copy

import pytest

from probe_agent import contracts as c
from probe_agent.mask import resolve_mask
import fleet_variants as fv


def facts(h):
    """The facts the agent judges, from a (possibly edited) health.json, the mask resolved again."""
    env = h.get("environment") or {}
    return {"driver": h["driver"], "gpus": h["gpus"], "mask": resolve_mask(env, h["gpus"]),
            "frameworks": h["frameworks"], "topology": h["topology"], "env": env,
            "kernel_module": h["driver"].get("kernel_module"), "kernel_log": h.get("kernel_log"),
            "own_pids": h.get("own_pids")}


def judge(check, h):
    return check(copy.deepcopy(facts(h)))


@pytest.fixture
def h():
    return fv.h200(8)


# ---- clocks ---------------------------------------------------------------------------------------

def test_idle_h200_clocks_hold(h):
    r = judge(c.check_clocks, h)
    assert (r["status"], r["message"], r["fix"]) == ("ok", "no clock-event reason beyond idle / power cap", None)
    rows = r["evidence"]["gpus"]
    assert [x["gpu"] for x in rows] == list(range(8))
    assert rows[0] == {"gpu": 0, "sm_mhz": 345, "sm_max_mhz": 1980, "mem_mhz": 3201, "mem_max_mhz": 3201,
                       "active_reasons": ["idle"], "reason_counters_us": h["gpus"][0].get("reason_counters_us")}


def test_hw_thermal_is_a_facility_fault_said_once_with_its_own_fix(h):
    r = judge(c.check_clocks, fv.hw_thermal(h, gpu=5, sm_mhz=1125))
    assert r["status"] == "broken"
    assert r["message"] == "GPU 5: HW thermal slowdown active (SM 1125 of 1980 MHz): a facility fault"
    assert r["fix"] == c.FACILITY_CAUSES["hw_thermal_slowdown"][1]
    assert r["evidence"]["gpus"][5]["active_reasons"] == ["hw_slowdown", "hw_thermal_slowdown"]


def test_hw_slowdown_alone_names_power_delivery(h):
    h["gpus"][2]["clock_event_reasons"]["active"] = ["hw_slowdown"]
    r = judge(c.check_clocks, h)
    assert r["status"] == "broken"
    assert r["message"] == "GPU 2: HW slowdown active (SM 345 of 1980 MHz): a facility fault"
    assert r["fix"] == "check the host's power delivery and cooling (PSU, fans, inlet temperature)"


def test_two_facility_causes_on_two_gpus_each_with_one_line_and_one_fix(h):
    h["gpus"][1]["clock_event_reasons"]["active"] = ["hw_slowdown", "hw_power_brake_slowdown"]
    h["gpus"][6]["clock_event_reasons"]["active"] = ["hw_thermal_slowdown"]
    h["gpus"][7]["clock_event_reasons"]["active"] = ["hw_thermal_slowdown", "sw_thermal_slowdown"]
    r = judge(c.check_clocks, h)
    assert r["status"] == "broken"
    assert r["message"] == ("GPU 1: HW power brake active (SM 345 of 1980 MHz); "
                            "GPU 6-7: HW thermal slowdown active (SM 345 of 1980 MHz): a facility fault")
    assert r["fix"] == "; ".join([c.FACILITY_CAUSES["hw_thermal_slowdown"][1],
                                  c.FACILITY_CAUSES["hw_power_brake_slowdown"][1]])


def test_sw_thermal_slowdown_is_a_warning_with_the_temperature(h):
    h["gpus"][3]["clock_event_reasons"]["active"] = ["sw_thermal_slowdown"]
    h["gpus"][3]["temperature_c"] = 88
    r = judge(c.check_clocks, h)
    assert (r["status"], r["message"]) == ("warning", "GPU 3: SW thermal slowdown active (88 C)")
    assert r["fix"] == "reset clocks with nvidia-smi -rac / -rgc / -rmc if not intended"


def test_sw_power_cap_under_load_is_ok_and_said(h):
    for g in h["gpus"]:
        g["clock_event_reasons"]["active"] = ["sw_power_cap"]
    r = judge(c.check_clocks, h)
    assert (r["status"], r["message"]) == ("ok", "GPU 0-7: SW power cap active (expected under load)")


@pytest.mark.parametrize("name, said", [("sm", "SM"), ("mem", "memory")])
def test_a_locked_clock_below_the_top_warns_and_at_the_top_holds(h, name, said):
    top = h["gpus"][4]["clocks"]["%s_max_mhz" % name]
    h["gpus"][4]["clocks"].update({"p0_%s_min_mhz" % name: 300, "p0_%s_max_mhz" % name: top - 1})
    r = judge(c.check_clocks, h)
    assert r["status"] == "warning"
    assert r["message"] == "GPU 4: %s clock locked to 300-%d MHz (the GPU allows up to %d MHz)" % (said, top - 1, top)
    h["gpus"][4]["clocks"]["p0_%s_max_mhz" % name] = top
    assert judge(c.check_clocks, h)["status"] == "ok"


def test_application_clocks_off_default_warn(h):
    r = judge(c.check_clocks, fv.app_clocks(h, mhz=1410, default=1980, gpus={0, 1}))
    assert r["status"] == "warning"
    assert r["message"] == "GPU 0-1: application clocks set to 1410 MHz (default 1980)"
    fv.app_clocks(h, mhz=1980, default=1980)
    assert judge(c.check_clocks, h)["status"] == "ok"
    h["gpus"][0]["clocks"]["default_app_sm_mhz"] = None  # as recorded: no default known, nothing to compare
    h["gpus"][0]["clocks"]["app_sm_mhz"] = 1410
    assert judge(c.check_clocks, h)["status"] == "ok"


def test_a_facility_fault_outranks_a_clock_warning(h):
    fv.app_clocks(h, gpus={0})
    r = judge(c.check_clocks, fv.hw_thermal(h, gpu=5))
    assert r["status"] == "broken" and "application clocks" not in r["message"]


# ---- power ----------------------------------------------------------------------------------------

def test_idle_h200_power_holds(h):
    r = judge(c.check_power, h)
    assert (r["status"], r["message"], r["fix"]) == ("ok", "enforced limit = default (700 W)", None)
    assert r["evidence"]["gpus"][3]["gpu"] == 3 and r["evidence"]["gpus"][3]["default_limit_w"] == 700.0


def test_a_power_cap_below_the_default_is_broken_with_the_restore_command(h):
    r = judge(c.check_power, fv.power_cap(h, watts=250.0, gpus={3}))
    assert r["status"] == "broken"
    assert r["message"] == "GPU 3: enforced power limit 250 W is below the default 700 W"
    assert r["fix"] == "restore it with nvidia-smi -pl 700 (or record the intended cap in the expectations file)"


@pytest.mark.parametrize("watts, status", [(699.5, "broken"), (700.0, "ok"), (700.5, "warning")])
def test_power_limit_boundary_at_the_default(h, watts, status):
    r = judge(c.check_power, fv.power_cap(h, watts=watts))
    assert r["status"] == status
    if status == "warning":
        assert r["message"] == "GPU 0-7: enforced power limit 700.5 W is above the default 700 W"
        assert r["fix"] == "nvidia-smi -pl DEFAULT if not intended"


def test_a_cap_below_outranks_a_limit_above(h):
    h["gpus"][0]["power"]["enforced_limit_w"] = 650.0
    h["gpus"][1]["power"]["enforced_limit_w"] = 750.0
    r = judge(c.check_power, h)
    assert (r["status"], r["message"]) == ("broken", "GPU 0: enforced power limit 650 W is below the default 700 W")


def test_power_without_readings(h):
    for g in h["gpus"][1:]:
        g["power"]["default_limit_w"] = None  # an unreadable default is not judged on that GPU
    g0 = h["gpus"][0]["power"]
    g0["enforced_limit_w"] = 300.0
    assert judge(c.check_power, h)["message"] == "GPU 0: enforced power limit 300 W is below the default 700 W"
    h["gpus"] = []
    r = judge(c.check_power, h)
    assert (r["status"], r["message"]) == ("unknown", "no power readings")


def test_power_with_no_enforced_limit_read_says_so(h):
    for g in h["gpus"]:
        g["power"]["enforced_limit_w"] = None
    assert judge(c.check_power, h)["message"] == "enforced limit = default (? W)"


# ---- memory ---------------------------------------------------------------------------------------

def test_idle_h200_memory_holds(h):
    r = judge(c.check_memory, h)
    assert (r["status"], r["message"], r["fix"]) == ("ok", "ECC on, no pending remap, no uncorrected error", None)
    assert r["evidence"]["gpus"][2]["gpu"] == 2 and r["evidence"]["gpus"][2]["ecc"]["current"] is True


def test_failed_row_remap_is_broken_replace_the_card(h):
    r = judge(c.check_memory, fv.remap(h, gpu=1, failure=True, pending=False))
    assert (r["status"], r["message"]) == ("broken", "GPU 1: row remapping failed: replace the card")
    assert r["fix"] == "drain the host and replace or RMA the card"


@pytest.mark.parametrize("count, status", [(0, "ok"), (1, "broken")])
def test_uncorrected_ecc_since_reset_boundary(h, count, status):
    h["gpus"][2]["ecc"]["volatile_uncorrected"] = count
    r = judge(c.check_memory, h)
    assert r["status"] == status
    if count:
        assert r["message"] == "GPU 2: 1 uncorrected ECC errors since the last reset"


def test_broken_memory_names_only_what_is_broken(h):
    fv.remap(h, gpu=1, failure=True, pending=True)
    h["gpus"][4]["ecc"]["volatile_uncorrected"] = 7
    r = judge(c.check_memory, h)
    assert r["message"] == ("GPU 1: row remapping failed: replace the card; "
                            "GPU 4: 7 uncorrected ECC errors since the last reset")


def test_pending_remap_and_page_retirement_warn(h):
    fv.remap(h, gpu=1, pending=True)
    h["gpus"][6]["retired_pages_pending"] = True
    r = judge(c.check_memory, h)
    assert r["status"] == "warning"
    assert r["message"] == ("GPU 1: a row remap is pending: reset the GPU to apply it; "
                            "GPU 6: page retirement pending: reset the GPU")
    assert r["fix"] == "nvidia-smi -e 1 and a GPU reset to turn ECC on; reset to apply pending changes"


def test_ecc_off_warns_on_every_gpu(h):
    r = judge(c.check_memory, fv.ecc_off(h))
    assert (r["status"], r["message"]) == ("warning", "GPU 0-7: ECC is off")


def test_ecc_change_pending_names_both_modes(h):
    r = judge(c.check_memory, fv.ecc_pending(h, pending=False, gpus={0}))
    assert (r["status"], r["message"]) == ("warning", "GPU 0: ECC change pending (on -> off) until the next reset")
    h = fv.h200(8)
    h["gpus"][3]["ecc"].update(current=False, pending_mode=True)
    assert judge(c.check_memory, h)["message"] == ("GPU 3: ECC is off; "
                                                   "GPU 3: ECC change pending (off -> on) until the next reset")


def test_ecc_pending_mode_is_read_before_the_older_pending_key(h):
    h["gpus"][0]["ecc"].update(current=True, pending=False, pending_mode=True)
    assert judge(c.check_memory, h)["status"] == "ok"
    h["gpus"][0]["ecc"] = {"current": None, "pending": False}  # current mode unread: no change to report
    assert judge(c.check_memory, h)["status"] == "ok"


# ---- topology -------------------------------------------------------------------------------------

def test_one_gpu_has_no_topology():
    r = judge(c.check_topology, fv.h200(1))
    assert (r["status"], r["fix"]) == ("not_applicable", None)
    assert r["evidence"]["selected"] == [0]


def test_nvlinked_h200_topology_holds(h):
    r = judge(c.check_topology, h)
    assert (r["status"], r["message"]) == ("ok", "worst link between the selected GPUs: NV18")
    assert r["evidence"]["worst_link"] == "NV18" and r["evidence"]["selected"] == list(range(8))


def test_a_mask_across_pcie_on_an_nvlink_host_warns(h):
    h["topology"]["pairs"]["0-4"] = "SYS"
    h["environment"]["CUDA_VISIBLE_DEVICES"] = "0,4"
    r = judge(c.check_topology, h)
    assert r["status"] == "warning"
    assert r["message"] == ("the selected GPUs talk over SYS although this host has NVLink between other GPUs: "
                            "the mask crosses PCIe instead of NVLink")
    assert r["fix"] == "choose GPUs joined by NVLink (nvidia-smi topo -m)"
    assert r["evidence"]["selected"] == [0, 4]
    h["environment"]["CUDA_VISIBLE_DEVICES"] = "0,1"
    assert judge(c.check_topology, h)["status"] == "ok"


def test_pcie_only_host_is_ok_with_its_worst_link():
    h = fv.h200(4, link="PIX")
    h["topology"]["pairs"]["1-3"] = "NODE"
    h["topology"]["pairs"]["0-2"] = "PXB"
    r = judge(c.check_topology, h)
    assert (r["status"], r["message"]) == ("ok", "worst link between the selected GPUs: NODE")


def test_unreadable_link_classes_are_unknown(h):
    h["topology"]["pairs"] = {}
    r = judge(c.check_topology, h)
    assert (r["status"], r["fix"]) == ("unknown", "run nvidia-smi topo -m on the host")
    assert r["evidence"]["worst_link"] is None


def test_link_rank_orders_the_classes():
    assert [c.link_rank(x) for x in ("NV4", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS", "X")] == [0, 0, 1, 2, 3, 4, 5, 6]
    assert c.link_rank(None) is None


# ---- layout ---------------------------------------------------------------------------------------

def test_idle_h200_layout_holds(h):
    r = judge(c.check_layout, h)
    assert (r["status"], r["message"], r["fix"]) == ("ok", "MIG off; persistence on; compute mode default", None)
    row = r["evidence"]["gpus"][3]
    assert (row["gpu"], row["uuid"], row["pci_bus_id"]) == (3, h["gpus"][3]["uuid"], "00000000:48:00.0")
    assert row["mig_layout"] is None


def test_mig_on_is_counted_and_its_layout_recorded(h):
    r = judge(c.check_layout, fv.mig(h, profiles=("3g.71gb", "1g.18gb"), gpus={0, 1}))
    assert (r["status"], r["message"]) == ("ok", "MIG on for 2 GPUs; persistence on; compute mode default")
    assert r["evidence"]["gpus"][0]["mig_layout"] == "1g.18gb+3g.71gb"
    assert r["evidence"]["gpus"][2]["mig_layout"] is None


def test_mig_change_pending_warns(h):
    h["gpus"][2]["mig"].update(current=False, pending=True)
    r = judge(c.check_layout, h)
    assert (r["status"], r["message"]) == ("warning", "GPU 2: MIG mode change pending (off -> on) until the next reset")
    assert r["fix"] == "nvidia-smi -pm 1 for persistence (or nvidia-persistenced); reset the GPU for pending modes"


def test_persistence_off_and_compute_mode_warn(h):
    fv.persistence_off(h, gpus={0, 1, 2})
    h["gpus"][5]["compute_mode"] = "exclusive_process"
    h["gpus"][6]["compute_mode"] = None  # not read: not a warning
    r = judge(c.check_layout, h)
    assert r["status"] == "warning"
    assert r["message"] == ("GPU 0-2: persistence mode off (each new client pays driver start-up); "
                            "GPU 5: compute mode exclusive_process")


def test_mig_layout_of_odd_records():
    assert c.mig_layout({"mig": {"current": True, "devices": []}}) == "(no instances)"
    assert c.mig_layout({"mig": {"current": True, "devices": [{"profile": None}, {"profile": "2g.35gb"}]}}) == "2g.35gb+?"
    assert c.mig_layout({}) is None


# ---- processes and helpers ------------------------------------------------------------------------

def test_a_foreign_process_warns_with_pid_memory_and_gpu(h):
    r = judge(c.check_processes, fv.foreign_process(h, name="python3", pid=4242, gpu=2, used=8 << 30))
    assert r["status"] == "warning"
    assert r["message"] == "1 other process on the GPUs: python3 (pid 4242, 8192 MiB) on GPU 2"
    assert r["fix"] == "stop them, or benchmark elsewhere: they take memory and SM time"
    h["own_pids"] = [4242]
    assert judge(c.check_processes, h)["status"] == "ok"


def test_many_processes_are_counted_and_five_named(h):
    for i, g in enumerate(h["gpus"]):
        g["processes"] = [{"pid": 100 + i, "name": "p%d" % i, "used_memory_bytes": None}]
    h["gpus"][7]["processes"] = None
    r = judge(c.check_processes, h)
    assert r["message"].startswith("7 other processes on the GPUs: p0 (pid 100, ?) on GPU 0, ")
    assert "p4 (pid 104, ?) on GPU 4" in r["message"] and "p5" not in r["message"]
    assert r["evidence"]["note"] == "process list not readable on some GPUs"


def test_fold_numbers_and_gpus():
    assert c.fold_numbers([5, 0, 1, 2, 4, 1]) == "0-2,4-5"
    assert c.fold_numbers([3]) == "3"
    assert c.fold_gpus(["GPU 0: X", "GPU 1: X", "GPU 3: Y", "host: Z", "GPU 2: X"]) == "GPU 0-2: X; GPU 3: Y; host: Z"
    assert c.onoff(True) == "on" and c.onoff(False) == "off"
