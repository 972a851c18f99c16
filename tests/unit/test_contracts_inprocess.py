"""The hardware contracts judged in-process on recorded H200 data: verdict, cause and fix (issue 39).

Most contract tests run the agent as a subprocess, where a mutation tool cannot see which test reaches
which check. These call each `check_*` of probe_agent/contracts.py directly on a variant of the idle
H200 health.json (tests/unit/fleet_variants.py) and pin what an operator reads: the status at each
boundary, the GPU and the value the message names, and the fix.
"""
import copy

import pytest

from probe_agent import contracts as c
from probe_agent import gpuchecks
from probe_agent.mask import resolve_mask
import fleet_variants as fv


def facts(h):
    """The facts the agent judges, from a (possibly edited) health.json, the mask resolved again."""
    env = h.get("environment") or {}
    return {"driver": h["driver"], "gpus": h["gpus"], "mask": resolve_mask(env, h["gpus"]),
            "frameworks": h["frameworks"], "topology": h["topology"], "env": env,
            "kernel_module": h["driver"].get("kernel_module"), "kernel_log": h.get("kernel_log"),
            "own_pids": h.get("own_pids")}


def run_check(check, h):
    return check(copy.deepcopy(facts(h)))


@pytest.fixture
def h():
    return fv.h200(8)


# ---- clocks ---------------------------------------------------------------------------------------

def test_idle_h200_clocks_hold(h):
    r = run_check(gpuchecks.check_clocks, h)
    assert (r["status"], r["message"], r["fix"]) == ("ok", "no clock-event reason beyond idle / power cap", None)
    rows = r["evidence"]["gpus"]
    assert [x["gpu"] for x in rows] == list(range(8))
    assert rows[0] == {"gpu": 0, "sm_mhz": 345, "sm_max_mhz": 1980, "mem_mhz": 3201, "mem_max_mhz": 3201,
                       "active_reasons": ["idle"], "reason_counters_us": h["gpus"][0].get("reason_counters_us")}


def test_hw_thermal_is_a_facility_fault_said_once_with_its_own_fix(h):
    r = run_check(gpuchecks.check_clocks, fv.hw_thermal(h, gpu=5, sm_mhz=1125))
    assert r["status"] == "broken"
    assert r["message"] == "GPU 5: HW thermal slowdown active (SM 1125 of 1980 MHz): a facility fault"
    assert r["fix"] == gpuchecks.FACILITY_CAUSES["hw_thermal_slowdown"][1]
    assert r["evidence"]["gpus"][5]["active_reasons"] == ["hw_slowdown", "hw_thermal_slowdown"]


def test_hw_slowdown_alone_names_power_delivery(h):
    h["gpus"][2]["clock_event_reasons"]["active"] = ["hw_slowdown"]
    r = run_check(gpuchecks.check_clocks, h)
    assert r["status"] == "broken"
    assert r["message"] == "GPU 2: HW slowdown active (SM 345 of 1980 MHz): a facility fault"
    assert r["fix"] == "check the host's power delivery and cooling (PSU, fans, inlet temperature)"


def test_two_facility_causes_on_two_gpus_each_with_one_line_and_one_fix(h):
    h["gpus"][1]["clock_event_reasons"]["active"] = ["hw_slowdown", "hw_power_brake_slowdown"]
    h["gpus"][6]["clock_event_reasons"]["active"] = ["hw_thermal_slowdown"]
    h["gpus"][7]["clock_event_reasons"]["active"] = ["hw_thermal_slowdown", "sw_thermal_slowdown"]
    r = run_check(gpuchecks.check_clocks, h)
    assert r["status"] == "broken"
    assert r["message"] == ("GPU 1: HW power brake active (SM 345 of 1980 MHz); "
                            "GPU 6-7: HW thermal slowdown active (SM 345 of 1980 MHz): a facility fault")
    assert r["fix"] == "; ".join([gpuchecks.FACILITY_CAUSES["hw_thermal_slowdown"][1],
                                  gpuchecks.FACILITY_CAUSES["hw_power_brake_slowdown"][1]])


def test_sw_thermal_slowdown_is_a_warning_with_the_temperature(h):
    h["gpus"][3]["clock_event_reasons"]["active"] = ["sw_thermal_slowdown"]
    h["gpus"][3]["temperature_c"] = 88
    r = run_check(gpuchecks.check_clocks, h)
    assert (r["status"], r["message"]) == ("warning", "GPU 3: SW thermal slowdown active (88 C)")
    assert r["fix"] == "reset clocks with nvidia-smi -rac / -rgc / -rmc if not intended"


def test_sw_power_cap_under_load_is_ok_and_said(h):
    for g in h["gpus"]:
        g["clock_event_reasons"]["active"] = ["sw_power_cap"]
    r = run_check(gpuchecks.check_clocks, h)
    assert (r["status"], r["message"]) == ("ok", "GPU 0-7: SW power cap active (expected under load)")


@pytest.mark.parametrize("name, said", [("sm", "SM"), ("mem", "memory")])
def test_a_locked_clock_below_the_top_warns_and_at_the_top_holds(h, name, said):
    top = h["gpus"][4]["clocks"]["%s_max_mhz" % name]
    h["gpus"][4]["clocks"].update({"p0_%s_min_mhz" % name: 300, "p0_%s_max_mhz" % name: top - 1})
    r = run_check(gpuchecks.check_clocks, h)
    assert r["status"] == "warning"
    assert r["message"] == "GPU 4: %s clock locked to 300-%d MHz (the GPU allows up to %d MHz)" % (said, top - 1, top)
    h["gpus"][4]["clocks"]["p0_%s_max_mhz" % name] = top
    assert run_check(gpuchecks.check_clocks, h)["status"] == "ok"


def test_application_clocks_off_default_warn(h):
    r = run_check(gpuchecks.check_clocks, fv.app_clocks(h, mhz=1410, default=1980, gpus={0, 1}))
    assert r["status"] == "warning"
    assert r["message"] == "GPU 0-1: application clocks set to 1410 MHz (default 1980)"
    fv.app_clocks(h, mhz=1980, default=1980)
    assert run_check(gpuchecks.check_clocks, h)["status"] == "ok"
    h["gpus"][0]["clocks"]["default_app_sm_mhz"] = None  # as recorded: no default known, nothing to compare
    h["gpus"][0]["clocks"]["app_sm_mhz"] = 1410
    assert run_check(gpuchecks.check_clocks, h)["status"] == "ok"


def test_a_facility_fault_outranks_a_clock_warning(h):
    fv.app_clocks(h, gpus={0})
    r = run_check(gpuchecks.check_clocks, fv.hw_thermal(h, gpu=5))
    assert r["status"] == "broken" and "application clocks" not in r["message"]


# ---- power ----------------------------------------------------------------------------------------

def test_idle_h200_power_holds(h):
    r = run_check(gpuchecks.check_power, h)
    assert (r["status"], r["message"], r["fix"]) == ("ok", "enforced limit = default (700 W)", None)
    assert r["evidence"]["gpus"][3]["gpu"] == 3 and r["evidence"]["gpus"][3]["default_limit_w"] == 700.0


def test_a_power_cap_below_the_default_is_broken_with_the_restore_command(h):
    r = run_check(gpuchecks.check_power, fv.power_cap(h, watts=250.0, gpus={3}))
    assert r["status"] == "broken"
    assert r["message"] == "GPU 3: enforced power limit 250 W is below the default 700 W"
    assert r["fix"] == "restore it with nvidia-smi -pl 700 (or record the intended cap in the expectations file)"


@pytest.mark.parametrize("watts, status", [(699.5, "broken"), (700.0, "ok"), (700.5, "warning")])
def test_power_limit_boundary_at_the_default(h, watts, status):
    r = run_check(gpuchecks.check_power, fv.power_cap(h, watts=watts))
    assert r["status"] == status
    if status == "warning":
        assert r["message"] == "GPU 0-7: enforced power limit 700.5 W is above the default 700 W"
        assert r["fix"] == "nvidia-smi -pl DEFAULT if not intended"


def test_a_cap_below_outranks_a_limit_above(h):
    h["gpus"][0]["power"]["enforced_limit_w"] = 650.0
    h["gpus"][1]["power"]["enforced_limit_w"] = 750.0
    r = run_check(gpuchecks.check_power, h)
    assert (r["status"], r["message"]) == ("broken", "GPU 0: enforced power limit 650 W is below the default 700 W")


def test_power_without_readings(h):
    for g in h["gpus"][1:]:
        g["power"]["default_limit_w"] = None  # an unreadable default is not judged on that GPU
    g0 = h["gpus"][0]["power"]
    g0["enforced_limit_w"] = 300.0
    assert run_check(gpuchecks.check_power, h)["message"] == "GPU 0: enforced power limit 300 W is below the default 700 W"
    h["gpus"] = []
    r = run_check(gpuchecks.check_power, h)
    assert (r["status"], r["message"]) == ("unknown", "no power readings")


def test_power_with_no_enforced_limit_read_says_so(h):
    for g in h["gpus"]:
        g["power"]["enforced_limit_w"] = None
    assert run_check(gpuchecks.check_power, h)["message"] == "enforced limit = default (? W)"


# ---- memory ---------------------------------------------------------------------------------------

def test_idle_h200_memory_holds(h):
    r = run_check(gpuchecks.check_memory, h)
    assert (r["status"], r["message"], r["fix"]) == ("ok", "ECC on, no pending remap, no uncorrected error", None)
    assert r["evidence"]["gpus"][2]["gpu"] == 2 and r["evidence"]["gpus"][2]["ecc"]["current"] is True


def test_failed_row_remap_is_broken_replace_the_card(h):
    r = run_check(gpuchecks.check_memory, fv.remap(h, gpu=1, failure=True, pending=False))
    assert (r["status"], r["message"]) == ("broken", "GPU 1: row remapping failed: replace the card")
    assert r["fix"] == "drain the host and replace or RMA the card"


@pytest.mark.parametrize("count, status", [(0, "ok"), (1, "broken")])
def test_uncorrected_ecc_since_reset_boundary(h, count, status):
    h["gpus"][2]["ecc"]["volatile_uncorrected"] = count
    r = run_check(gpuchecks.check_memory, h)
    assert r["status"] == status
    if count:
        assert r["message"] == "GPU 2: 1 uncorrected ECC errors since the last reset"


def test_broken_memory_names_only_what_is_broken(h):
    fv.remap(h, gpu=1, failure=True, pending=True)
    h["gpus"][4]["ecc"]["volatile_uncorrected"] = 7
    r = run_check(gpuchecks.check_memory, h)
    assert r["message"] == ("GPU 1: row remapping failed: replace the card; "
                            "GPU 4: 7 uncorrected ECC errors since the last reset")


def test_pending_remap_and_page_retirement_warn(h):
    fv.remap(h, gpu=1, pending=True)
    h["gpus"][6]["retired_pages_pending"] = True
    r = run_check(gpuchecks.check_memory, h)
    assert r["status"] == "warning"
    assert r["message"] == ("GPU 1: a row remap is pending: reset the GPU to apply it; "
                            "GPU 6: page retirement pending: reset the GPU")
    assert r["fix"] == "nvidia-smi -e 1 and a GPU reset to turn ECC on; reset to apply pending changes"


def test_ecc_off_warns_on_every_gpu(h):
    r = run_check(gpuchecks.check_memory, fv.ecc_off(h))
    assert (r["status"], r["message"]) == ("warning", "GPU 0-7: ECC is off")


def test_ecc_change_pending_names_both_modes(h):
    r = run_check(gpuchecks.check_memory, fv.ecc_pending(h, pending=False, gpus={0}))
    assert (r["status"], r["message"]) == ("warning", "GPU 0: ECC change pending (on -> off) until the next reset")
    h = fv.h200(8)
    h["gpus"][3]["ecc"].update(current=False, pending_mode=True)
    assert run_check(gpuchecks.check_memory, h)["message"] == ("GPU 3: ECC is off; "
                                                   "GPU 3: ECC change pending (off -> on) until the next reset")


def test_ecc_pending_mode_is_read_before_the_older_pending_key(h):
    h["gpus"][0]["ecc"].update(current=True, pending=False, pending_mode=True)
    assert run_check(gpuchecks.check_memory, h)["status"] == "ok"
    h["gpus"][0]["ecc"] = {"current": None, "pending": False}  # current mode unread: no change to report
    assert run_check(gpuchecks.check_memory, h)["status"] == "ok"


# ---- topology -------------------------------------------------------------------------------------

def test_one_gpu_has_no_topology():
    r = run_check(gpuchecks.check_topology, fv.h200(1))
    assert (r["status"], r["fix"]) == ("not_applicable", None)
    assert r["evidence"]["selected"] == [0]


def test_nvlinked_h200_topology_holds(h):
    r = run_check(gpuchecks.check_topology, h)
    assert (r["status"], r["message"]) == ("ok", "worst link between the selected GPUs: NV18")
    assert r["evidence"]["worst_link"] == "NV18" and r["evidence"]["selected"] == list(range(8))


def test_a_mask_across_pcie_on_an_nvlink_host_warns(h):
    h["topology"]["pairs"]["0-4"] = "SYS"
    h["environment"]["CUDA_VISIBLE_DEVICES"] = "0,4"
    r = run_check(gpuchecks.check_topology, h)
    assert r["status"] == "warning"
    assert r["message"] == ("the selected GPUs talk over SYS although this host has NVLink between other GPUs: "
                            "the mask crosses PCIe instead of NVLink")
    assert r["fix"] == "choose GPUs joined by NVLink (nvidia-smi topo -m)"
    assert r["evidence"]["selected"] == [0, 4]
    h["environment"]["CUDA_VISIBLE_DEVICES"] = "0,1"
    assert run_check(gpuchecks.check_topology, h)["status"] == "ok"


def test_pcie_only_host_is_ok_with_its_worst_link():
    h = fv.h200(4, link="PIX")
    h["topology"]["pairs"]["1-3"] = "NODE"
    h["topology"]["pairs"]["0-2"] = "PXB"
    r = run_check(gpuchecks.check_topology, h)
    assert (r["status"], r["message"]) == ("ok", "worst link between the selected GPUs: NODE")


def test_unreadable_link_classes_are_unknown(h):
    h["topology"]["pairs"] = {}
    r = run_check(gpuchecks.check_topology, h)
    assert (r["status"], r["fix"]) == ("unknown", "run nvidia-smi topo -m on the host")
    assert r["evidence"]["worst_link"] is None


def test_link_rank_orders_the_classes():
    assert [gpuchecks.link_rank(x) for x in ("NV4", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS", "X")] == [0, 0, 1, 2, 3, 4, 5, 6]
    assert gpuchecks.link_rank(None) is None


# ---- layout ---------------------------------------------------------------------------------------

def test_idle_h200_layout_holds(h):
    r = run_check(gpuchecks.check_layout, h)
    assert (r["status"], r["message"], r["fix"]) == ("ok", "MIG off; persistence on; compute mode default", None)
    row = r["evidence"]["gpus"][3]
    assert (row["gpu"], row["uuid"], row["pci_bus_id"]) == (3, h["gpus"][3]["uuid"], "00000000:48:00.0")
    assert row["mig_layout"] is None


def test_mig_on_is_counted_and_its_layout_recorded(h):
    r = run_check(gpuchecks.check_layout, fv.mig(h, profiles=("3g.71gb", "1g.18gb"), gpus={0, 1}))
    assert (r["status"], r["message"]) == ("ok", "MIG on for 2 GPUs; persistence on; compute mode default")
    assert r["evidence"]["gpus"][0]["mig_layout"] == "1g.18gb+3g.71gb"
    assert r["evidence"]["gpus"][2]["mig_layout"] is None


def test_mig_change_pending_warns(h):
    h["gpus"][2]["mig"].update(current=False, pending=True)
    r = run_check(gpuchecks.check_layout, h)
    assert (r["status"], r["message"]) == ("warning", "GPU 2: MIG mode change pending (off -> on) until the next reset")
    assert r["fix"] == "nvidia-smi -pm 1 for persistence (or nvidia-persistenced); reset the GPU for pending modes"


def test_persistence_off_and_compute_mode_warn(h):
    fv.persistence_off(h, gpus={0, 1, 2})
    h["gpus"][5]["compute_mode"] = "exclusive_process"
    h["gpus"][6]["compute_mode"] = None  # not read: not a warning
    r = run_check(gpuchecks.check_layout, h)
    assert r["status"] == "warning"
    assert r["message"] == ("GPU 0-2: persistence mode off (each new client pays driver start-up); "
                            "GPU 5: compute mode exclusive_process")


def test_mig_layout_of_odd_records():
    assert gpuchecks.mig_layout({"mig": {"current": True, "devices": []}}) == "(no instances)"
    assert gpuchecks.mig_layout({"mig": {"current": True, "devices": [{"profile": None}, {"profile": "2g.35gb"}]}}) == "2g.35gb+?"
    assert gpuchecks.mig_layout({}) is None


# ---- processes and helpers ------------------------------------------------------------------------

def test_a_foreign_process_warns_with_pid_memory_and_gpu(h):
    r = run_check(c.check_processes, fv.foreign_process(h, name="python3", pid=4242, gpu=2, used=8 << 30))
    assert r["status"] == "warning"
    assert r["message"] == "1 other process on the GPUs: python3 (pid 4242, 8192 MiB) on GPU 2"
    assert r["fix"] == "stop them, or benchmark elsewhere: they take memory and SM time"
    h["own_pids"] = [4242]
    assert run_check(c.check_processes, h)["status"] == "ok"


def test_many_processes_are_counted_and_five_named(h):
    for i, g in enumerate(h["gpus"]):
        g["processes"] = [{"pid": 100 + i, "name": "p%d" % i, "used_memory_bytes": None}]
    h["gpus"][7]["processes"] = None
    r = run_check(c.check_processes, h)
    assert r["message"].startswith("7 other processes on the GPUs: p0 (pid 100, ?) on GPU 0, ")
    assert "p4 (pid 104, ?) on GPU 4" in r["message"] and "p5" not in r["message"]
    assert r["evidence"]["note"] == "process list not readable on some GPUs"


def test_fold_numbers_and_gpus():
    assert gpuchecks.fold_numbers([5, 0, 1, 2, 4, 1]) == "0-2,4-5"
    assert gpuchecks.fold_numbers([3]) == "3"
    assert gpuchecks.fold_gpus(["GPU 0: X", "GPU 1: X", "GPU 3: Y", "host: Z", "GPU 2: X"]) == "GPU 0-2: X; GPU 3: Y; host: Z"
    assert gpuchecks.onoff(True) == "on" and gpuchecks.onoff(False) == "off"


# ---- driver ---------------------------------------------------------------------------------------

def on_bus(h, *extra, driver_gpus=None):
    """The PCI bus as the agent reads it: the H200's own cards, plus `extra` bus ids NVML does not list."""
    gpus = [{"bus_id": "0000:%s" % g["pci_bus_id"][9:].lower(), "driver": "nvidia"} for g in h["gpus"]]
    gpus += [{"bus_id": b, "driver": "nvidia"} for b in extra]
    h["pci"] = {"readable": True, "gpus": gpus, "driver_gpus": driver_gpus}
    return h


def driver_facts(h):
    f = facts(h)
    f["pci"] = h.get("pci")
    f["pci_gpus"] = None if h.get("pci") is None else [{"address": g["bus_id"]} for g in h["pci"]["gpus"]]
    f["smi_present"] = h.get("smi_present")
    return copy.deepcopy(f)


def test_idle_h200_driver_holds_and_names_version_cuda_and_count(h):
    r = c.check_driver(driver_facts(on_bus(h)))
    assert (r["status"], r["message"], r["fix"]) == ("ok", "driver 580.159.04, CUDA 13.0, 8 GPUs", None)
    ev = r["evidence"]
    assert (ev["version"], ev["nvml_version"], ev["cuda_driver_version"], ev["gpu_count"]) == (
        "580.159.04", "13.580.159.04", "13.0", 8)
    assert ev["kernel_module"].startswith("NVRM version: NVIDIA UNIX Open Kernel Module")
    assert ev["pci_nvidia_gpus"] == 8 and ev["pci"]["on_bus"] == 8 and "nvml_error" not in ev
    h.pop("pci")
    r = c.check_driver(driver_facts(h))  # the bus not read: NVML's word stands
    assert (r["status"], r["evidence"]["pci_nvidia_gpus"]) == ("ok", None)


def test_no_nvidia_gpu_on_the_bus_is_said_before_any_nvml_error(h):
    h["pci"] = {"readable": True, "gpus": []}
    h["driver"] = {"nvml_error": "NVMLError_LibraryNotFound"}
    r = c.check_driver(driver_facts(h))
    assert (r["status"], r["message"], r["fix"]) == ("broken",) + c.NO_GPU
    assert r["evidence"]["nvml_error"] == "NVMLError_LibraryNotFound" and r["evidence"]["pci_nvidia_gpus"] == 0
    h["driver"] = {"gpu_count": 0}  # NVML up, no GPU, none on the bus: the same
    assert c.check_driver(driver_facts(h))["message"] == c.NO_GPU[0]
    h["driver"] = {"nvml_error": "NVMLError_LibraryNotFound"}
    h["pci"] = None  # the bus unread: no claim that there is no GPU
    r = c.check_driver(driver_facts(h))
    assert r["message"] == "no NVIDIA driver is installed (libnvidia-ml.so not found)"


@pytest.mark.parametrize("err", sorted(c.NVML_INIT_ERRORS))
def test_each_nvml_init_error_is_named_with_its_fix(h, err):
    h["driver"] = {"nvml_error": err}
    h["smi_present"] = False
    r = c.check_driver(driver_facts(h))
    assert (r["status"], r["message"], r["fix"]) == ("broken",) + c.NVML_INIT_ERRORS[err]
    assert r["evidence"]["nvml_error"] == err and r["evidence"]["nvidia_smi_found"] is False


def test_nvml_errors_the_table_lacks_and_what_the_bus_adds(h):
    on_bus(h)
    h["driver"] = {"nvml_error": "NVMLError_Unknown"}
    h["smi_present"] = True
    r = c.check_driver(driver_facts(h))
    assert r["message"] == "NVML failed to initialise (NVMLError_Unknown); 8 NVIDIA GPUs on the PCI bus"
    assert r["fix"] == "read dmesg and nvidia-bug-report.sh output"
    assert r["evidence"]["nvidia_smi_found"] is True
    h["pci"]["gpus"] = h["pci"]["gpus"][:1]
    h["driver"] = {"nvml_error": "NVMLError_DriverNotLoaded"}
    assert c.check_driver(driver_facts(h))["message"] == (
        "the NVIDIA kernel module is not loaded; 1 NVIDIA GPU on the PCI bus")


def test_a_loaded_module_without_its_libraries_is_not_called_no_driver(h):
    h["driver"] = {"nvml_error": "NVMLError_LibraryNotFound", "kernel_module": "NVRM version: 580.159.04"}
    r = c.check_driver(driver_facts(h))
    assert r["message"] == "the kernel module is loaded but libnvidia-ml.so is not found"
    assert r["fix"] == "install the driver's user-space libraries (same version as the module)"
    h["driver"]["nvml_error"] = "NVMLError_DriverNotLoaded"  # the module's presence changes only LibraryNotFound
    assert c.check_driver(driver_facts(h))["message"] == "the NVIDIA kernel module is not loaded"


def test_a_card_on_the_bus_nvml_lacks_breaks_the_driver_and_is_named_in_the_fix(h):
    r = c.check_driver(driver_facts(on_bus(h, "0000:f8:00.0", "0000:f9:00.0")))
    assert r["status"] == "broken"
    assert r["message"] == ("on the PCI bus but not listed by NVML (NVML lists 8, 2 more on the bus): 0000:f8:00.0, "
                            "0000:f9:00.0: fallen off the bus or failed to initialise")
    assert r["fix"] == ("drain the host; read the kernel log for Xid 79 / RmInitAdapter on 0000:f8:00.0; reseat or "
                        "replace the card, then reboot")
    h = on_bus(fv.h200(8), "0000:f8:00.0", driver_gpus=[])  # hidden from this container: a note
    r = c.check_driver(driver_facts(h))
    assert (r["status"], r["message"]) == ("ok", "driver 580.159.04, CUDA 13.0, 8 GPUs; 1 more on the bus hidden "
                                                 "from this container")


def test_a_gpu_nvml_lost_is_missing_and_a_count_nvml_cannot_give_is_zero(h):
    h["gpus"][6]["lost"] = True
    h["driver"]["gpu_count"] = None
    r = c.check_driver(driver_facts(h))
    assert r["message"].startswith("on the PCI bus but not listed by NVML (NVML lists 0, 1 more on the bus): GPU 6: ")
    assert "RmInitAdapter on GPU 6;" in r["fix"]


def test_nvml_up_with_no_gpu_while_the_bus_has_some_is_broken(h):
    on_bus(h)
    h["driver"]["gpu_count"] = 0
    h["gpus"] = []
    r = c.check_driver(driver_facts(h))
    assert (r["status"], r["message"]) == ("broken", "on the PCI bus but not listed by NVML (NVML lists 0, 8 more on "
                                                     "the bus): " + ", ".join(g["bus_id"] for g in h["pci"]["gpus"])
                                           + ": fallen off the bus or failed to initialise")
    h.pop("pci")
    r = c.check_driver(driver_facts(h))
    assert (r["status"], r["message"]) == ("broken", "NVML initialised but sees no GPU")
    assert r["fix"] == ("check that the GPUs are on the bus (lspci), passed through to this VM or container, "
                        "and not fallen off the bus (dmesg: Xid 79)")
    h["driver"]["gpu_count"] = 1
    assert c.check_driver(driver_facts(h))["message"] == "driver 580.159.04, CUDA 13.0, 1 GPU"


# ---- framework ------------------------------------------------------------------------------------

DEEP = fv.FIXTURES.parent / "h200" / "idle-deep.health.json"


def deep_torch():
    """The torch record of a real --deep probe of the H200 (torch 2.11.0+cu130, sm_75..sm_120)."""
    import json
    return json.loads(DEEP.read_text())["frameworks"][0]


def framework(h, *records):
    if records:
        h["frameworks"] = list(records)
    return run_check(c.check_framework, h)


def test_idle_h200_torch_holds_and_says_how_it_was_read(h):
    r = framework(h)
    assert (r["status"], r["message"], r["fix"]) == (
        "ok", "torch 2.11.0+cu130, CUDA runtime 13.0 (metadata; --deep imports torch)", None)
    assert r["evidence"] == {"interpreters": h["frameworks"], "driver_cuda": "13.0", "compute_capabilities": ["9.0"]}
    r = framework(h, deep_torch())
    assert (r["status"], r["message"]) == ("ok", "torch 2.11.0+cu130, CUDA runtime 13.0")


def test_no_interpreter_checked_is_not_applicable(h):
    h["frameworks"] = []
    r = framework(h)
    assert (r["status"], r["message"], r["evidence"], r["fix"]) == (
        "not_applicable", "no interpreter was checked", {}, None)


def test_a_cpu_only_wheel_is_broken_and_the_fix_names_the_drivers_cuda(h):
    fv.cpu_torch(h)
    r = framework(h)
    assert r["status"] == "broken"
    assert r["message"] == "python3: torch 2.11.0+cpu is a CPU-only wheel (torch.version.cuda is None)"
    assert r["fix"] == "install a CUDA build of torch for driver CUDA 13.0 (a cuXXX wheel with XXX <= the driver's)"
    h["driver"]["cuda_driver_version"] = None  # the driver's CUDA unknown (driver down): no version to name
    r = framework(h)
    assert (r["status"], r["fix"]) == ("broken", "install a CUDA build of torch once the driver works")


def test_a_rocm_build_is_broken_on_an_nvidia_host(h):
    h["frameworks"][0].update(torch_version="2.11.0+rocm6.4", cuda_runtime=None, hip_runtime="6.4.43482")
    r = framework(h)
    assert r["status"] == "broken"
    assert r["message"] == "python3: torch 2.11.0+rocm6.4 is a ROCm build (HIP 6.4.43482) on an NVIDIA host"
    assert r["fix"] == "rebuild or reinstall torch for this host's GPUs and driver"


@pytest.mark.parametrize("runtime, status", [("12.9", "ok"), ("13.0", "ok"), ("13.0.2", "warning"),
                                              ("13.1", "warning"), ("14.0", "broken")])
def test_torchs_cuda_against_the_drivers_at_the_boundaries(h, runtime, status):
    fv.torch(h, version="2.11.0+cu" + runtime.replace(".", ""), cuda=runtime)
    r = framework(h)
    assert r["status"] == status
    tv = h["frameworks"][0]["torch_version"]
    if status == "warning":
        assert r["message"] == ("python3: torch's CUDA %s is newer than the driver's 13.0 (minor-version "
                                "compatibility: PTX JIT and new APIs may fail)" % runtime)
        assert r["fix"] is None
    if status == "broken":
        assert r["message"] == ("python3: torch %s needs CUDA 14.0 but the driver supports CUDA 13.0: crossing a "
                                "major version needs the forward-compatibility package or a newer driver" % tv)
        assert r["fix"] == "rebuild or reinstall torch for this host's GPUs and driver"


def test_a_driver_cuda_unknown_does_not_judge_the_runtime(h):
    h["driver"]["cuda_driver_version"] = None
    fv.torch(h, cuda="99.0")
    assert framework(h)["status"] == "ok"


def test_a_build_without_the_gpus_arch_is_broken_and_ptx_for_it_is_enough(h):
    fw = deep_torch()
    fw["arch_list"] = ["sm_75", "sm_80", "sm_86"]
    r = framework(h, fw)
    assert r["status"] == "broken"
    assert r["message"] == ("python3: torch was built for sm_75,sm_80,sm_86, not for compute capability 9.0: "
                            "'no kernel image is available'")
    assert r["fix"] == "rebuild or reinstall torch for this host's GPUs and driver"
    fw["arch_list"] = ["sm_80", "compute_90"]  # PTX for 9.0: the driver JIT-compiles it
    assert framework(h, fw)["status"] == "ok"
    fw["arch_list"] = ["sm_80", "sm_90a"]  # an arch-specific build is not sm_90
    assert framework(h, fw)["status"] == "broken"


def test_the_arch_list_is_judged_against_every_gpus_capability(h):
    h["gpus"][3]["compute_capability"] = "10.0"
    h["gpus"][4]["compute_capability"] = None
    fw = deep_torch()
    fw["arch_list"] = ["sm_90"]
    r = framework(h, fw)
    assert r["message"] == ("python3: torch was built for sm_90, not for compute capability 10.0: "
                            "'no kernel image is available'")
    assert r["evidence"]["compute_capabilities"] == ["10.0", "9.0"]


def test_cuda_unavailable_in_a_deep_probe_is_broken_and_the_arch_list_not_judged(h):
    fw = deep_torch()
    fw.update(cuda_available=False, arch_list=["sm_80"])
    r = framework(h, fw)
    assert (r["status"], r["message"]) == ("broken", "python3: torch.cuda.is_available() is False")
    fw["mode"] = "metadata"  # a metadata read cannot know: not judged
    assert framework(h, fw)["status"] == "ok"
    fw.update(mode="deep", cuda_available=None, arch_list=["sm_90"])  # not read: not a failure
    assert framework(h, fw)["status"] == "ok"


def test_every_interpreters_problem_is_said_once_in_order(h):
    cpu = dict(h["frameworks"][0], interpreter="/opt/a/python", torch_version="2.11.0+cpu", cuda_runtime=None)
    new = dict(h["frameworks"][0], interpreter="/opt/b/python", torch_version="2.12.0+cu140", cuda_runtime="14.0")
    r = framework(h, cpu, new)
    assert r["message"] == ("/opt/a/python: torch 2.11.0+cpu is a CPU-only wheel (torch.version.cuda is None); "
                            "/opt/b/python: torch 2.12.0+cu140 needs CUDA 14.0 but the driver supports CUDA 13.0: "
                            "crossing a major version needs the forward-compatibility package or a newer driver")
    assert r["fix"].startswith("install a CUDA build of torch for driver CUDA 13.0")  # the CPU wheel's fix first


def test_an_interpreter_that_failed_is_broken_one_not_found_a_warning(h):
    good = h["frameworks"][0]
    r = framework(h, good, {"interpreter": "/opt/x/python", "error": "timed out after 30 s"})
    assert (r["status"], r["message"]) == ("broken", "/opt/x/python: timed out after 30 s")
    r = framework(h, good, {"interpreter": "python3.11", "error": "not found", "not_found": True})
    assert (r["status"], r["message"], r["fix"]) == ("warning", "python3.11: not found", None)


def test_a_named_training_interpreter_that_is_missing_or_lacks_torch_is_a_warning_naming_it(h):
    good = h["frameworks"][0]
    gone = {"interpreter": "/opt/train/bin/python", "error": "not found", "not_found": True, "named": True}
    r = framework(h, good, gone)
    assert r["status"] == "warning"
    assert r["message"] == "/opt/train/bin/python: the training interpreter named for this host is not here"
    assert r["fix"] == ("install the training environment on this host, or correct sweep_interpreters / "
                        "--interpreter (/opt/train/bin/python)")
    bare = {"interpreter": "/opt/env/bin/python", "torch_version": None, "named": True}
    r = framework(h, gone, bare)
    assert r["status"] == "warning"
    assert r["message"] == ("/opt/train/bin/python: the training interpreter named for this host is not here; "
                            "/opt/env/bin/python: no torch installed")
    assert r["fix"].endswith("--interpreter (/opt/train/bin/python, /opt/env/bin/python)")


def test_no_torch_anywhere_is_not_applicable_and_asks_for_the_interpreter(h):
    good = h["frameworks"][0]
    r = framework(h, {"interpreter": "python3", "torch_version": None},
                  {"interpreter": "python3.12", "error": "not found", "not_found": True})
    assert (r["status"], r["message"]) == ("not_applicable", "python3: no torch installed; python3.12: not found")
    assert r["fix"] == "name the training interpreter with sweep_interpreters / --interpreter"
    r = framework(h, {"interpreter": "python3", "torch_version": None}, good)
    assert (r["status"], r["message"], r["fix"]) == ("warning", "python3: no torch installed", None)


# ---- evaluate: the chain, the lowest broken contract, its consequences -----------------------------

def chain_of(h):
    out, lowest = c.evaluate(copy.deepcopy(facts(h)))
    return {x["name"]: x for x in out}, lowest


def test_a_healthy_h200_has_no_lowest_broken_and_no_consequence(h):
    by, lowest = chain_of(h)
    assert lowest is None
    assert list(by) == [s.name for s in c.CONTRACTS]
    assert all(x["consequence_of"] is None for x in by.values())
    assert by["driver"]["status"] == "ok" and by["memory"]["status"] == "ok"


def test_the_lowest_broken_is_the_first_in_chain_order_and_only_what_stands_on_it_is_a_consequence(h):
    fv.xid(h, code=79, bus="0000:18:00.0")
    h["gpus"][2]["ecc"]["volatile_uncorrected"] = 3  # memory stands on xid: a consequence
    fv.power_cap(h, watts=250.0, gpus={1})           # power stands on the driver only: its own finding
    h["gpus"][4]["persistence_mode"] = False          # a warning above is never a consequence
    by, lowest = chain_of(h)
    assert lowest == "xid"
    assert (by["xid"]["status"], by["xid"]["consequence_of"]) == ("broken", None)
    assert (by["memory"]["status"], by["memory"]["consequence_of"]) == ("broken", "xid")
    assert (by["links"]["status"], by["links"]["consequence_of"]) == ("unknown", "xid")  # unknown, stands on xid
    assert (by["power"]["status"], by["power"]["consequence_of"]) == ("broken", None)
    assert (by["thermal"]["status"], by["thermal"]["consequence_of"]) == ("unknown", None)
    assert (by["layout"]["status"], by["layout"]["consequence_of"]) == ("warning", None)


def test_a_broken_contract_below_moves_the_lowest_down(h):
    fv.power_cap(h, watts=250.0, gpus={1})
    h["gpus"][2]["ecc"]["volatile_uncorrected"] = 3
    by, lowest = chain_of(h)
    assert lowest == "power" and by["memory"]["consequence_of"] is None
    fv.empty_mask(h)
    by, lowest = chain_of(h)
    assert lowest == "device_mask"
    assert by["power"]["consequence_of"] is None and by["device_mask"]["consequence_of"] is None


def test_a_check_that_fails_is_unknown_never_a_crash_and_can_be_a_consequence(h):
    h["gpus"][3]["power"]["enforced_limit_w"] = "n/a"
    h["gpus"][2]["ecc"] = "n/a"
    by, lowest = chain_of(h)
    assert by["power"]["status"] == "unknown"
    assert by["power"]["message"] == ("could not be judged (TypeError: '<' not supported between instances of "
                                      "'str' and 'float')")
    assert (by["power"]["evidence"], by["power"]["fix"]) == ({}, None)
    assert by["memory"]["message"] == "could not be judged (AttributeError: 'str' object has no attribute 'get')"
    assert lowest is None
    fv.xid(h, code=79, bus="0000:18:00.0")
    by, lowest = chain_of(h)
    assert (lowest, by["memory"]["consequence_of"], by["power"]["consequence_of"]) == ("xid", "xid", None)


@pytest.mark.parametrize("driver", [{"nvml_error": "NVMLError_DriverNotLoaded"}, {"gpu_count": 0}])
def test_nvml_unusable_leaves_its_contracts_unread(h, driver):
    h["driver"] = dict(driver, cuda_driver_version="13.0")
    by, lowest = chain_of(h)
    assert lowest == "driver"
    for spec in c.CONTRACTS:
        if spec.needs_nvml:
            assert (by[spec.name]["status"], by[spec.name]["message"]) == (
                "unknown", "not read: NVML is unusable on this host"), spec.name
            assert by[spec.name]["consequence_of"] == "driver"
    assert by["framework"]["status"] == "ok"  # judged without NVML: torch is fine, not a consequence
    assert by["framework"]["consequence_of"] is None


# ---- device mask ----------------------------------------------------------------------------------

def masked(h, **env):
    h["environment"] = env
    return run_check(c.check_mask, h)


def test_no_mask_cuda_sees_every_gpu_and_the_evidence_keeps_the_environment(h):
    r = masked(h)
    assert (r["status"], r["message"], r["fix"]) == ("ok", "unset: CUDA sees all 8 GPUs", None)
    assert set(r["evidence"]) == {"cuda_visible_devices", "cuda_device_order", "nvidia_visible_devices", "state",
                                  "selected", "invalid", "ignored", "lenient", "cuda_error"}
    assert r["evidence"]["state"] == "unset" and len(r["evidence"]["selected"]) == 8
    r = masked(h, CUDA_VISIBLE_DEVICES="0,1", CUDA_DEVICE_ORDER="PCI_BUS_ID", NVIDIA_VISIBLE_DEVICES="all")
    assert (r["status"], r["message"]) == ("ok", "CUDA sees 2 GPUs")
    assert (r["evidence"]["cuda_visible_devices"], r["evidence"]["cuda_device_order"],
            r["evidence"]["nvidia_visible_devices"]) == ("0,1", "PCI_BUS_ID", "all")
    assert masked(h, CUDA_VISIBLE_DEVICES="6")["message"] == "CUDA sees 1 GPU; cuda:0 is physical GPU 6"


def test_a_renumbering_mask_says_which_cuda_index_is_which_gpu(h):
    r = masked(h, CUDA_VISIBLE_DEVICES="5,1,0")  # cuda:1 is GPU 1: not said
    assert (r["status"], r["message"]) == ("ok", "CUDA sees 3 GPUs; cuda:0 is physical GPU 5; cuda:2 is physical GPU 0")


def test_an_empty_mask_is_broken_and_names_what_nvml_still_sees(h):
    r = masked(h, CUDA_VISIBLE_DEVICES="")
    assert r["status"] == "broken"
    assert r["message"] == ("device mask is set but empty (CUDA_VISIBLE_DEVICES=''): every GPU is hidden from CUDA "
                            "while NVML still sees 8")
    assert r["fix"] == "fix the launcher or scheduler that exports the empty mask"


def test_a_bad_device_order_is_broken_with_its_fix(h):
    r = masked(h, CUDA_DEVICE_ORDER="pci")
    assert r["status"] == "broken"
    assert r["message"] == ("CUDA_DEVICE_ORDER=pci: CUDA_DEVICE_ORDER is neither PCI_BUS_ID nor FASTEST_FIRST "
                            "(exactly), so CUDA sees no GPU (CUDA_ERROR_INVALID_DEVICE)")
    assert r["fix"] == "unset CUDA_DEVICE_ORDER or set it to PCI_BUS_ID"


def test_a_mask_naming_no_gpu_is_broken_and_the_fix_names_the_index_range(h):
    r = masked(h, CUDA_VISIBLE_DEVICES="8")
    assert r["status"] == "broken"
    assert r["message"] == ("device mask '8' names no GPU of this host: CUDA sees none (first entry '8': no GPU 8 "
                            "on this host (it has 8))")
    assert r["fix"] == "use indices below 8, or this host's GPU UUIDs (nvidia-smi -L), not both"
    assert masked(h, CUDA_VISIBLE_DEVICES="7")["status"] == "ok"


def test_a_repeated_gpu_is_refused_whole(h):
    r = masked(h, CUDA_VISIBLE_DEVICES="3,3")
    assert r["status"] == "broken"
    assert r["message"] == ("device mask '3,3': entry '3' names the same GPU as entry '3' again, so CUDA refuses "
                            "the whole mask and sees no GPU (CUDA_ERROR_INVALID_DEVICE)")
    assert r["fix"] == "name each GPU once"


def test_an_ambiguous_uuid_prefix_is_broken_with_the_fix(h):
    prefix = h["gpus"][0]["uuid"][:12]  # the fake UUIDs of one host share their first 8 digits
    r = masked(h, CUDA_VISIBLE_DEVICES=prefix)
    assert r["status"] == "broken"
    assert r["message"].startswith("device mask %r: first entry %r is ambiguous: its UUID prefix matches 8 GPUs"
                                   % (prefix, prefix))
    assert r["message"].endswith("the agent counts on CUDA seeing no GPU (what CUDA does with an ambiguous prefix "
                                 "is not recorded)")
    assert r["fix"] == "write enough of the UUID to name one GPU (nvidia-smi -L lists them)"


def test_an_invalid_entry_after_good_ones_warns_and_names_what_is_dropped(h):
    r = masked(h, CUDA_VISIBLE_DEVICES="3,x,5,6")
    assert r["status"] == "warning"
    assert r["message"] == "device mask entry 'x' is invalid (not an index): CUDA stops there and drops '5', '6'"
    assert r["fix"] == "remove the invalid entry"
    assert masked(h, CUDA_VISIBLE_DEVICES="3,x")["message"].endswith("CUDA stops there and drops nothing more")


def test_a_loosely_written_mask_warns_with_what_cuda_reads(h):
    r = masked(h, CUDA_VISIBLE_DEVICES="3x,5y")
    assert r["status"] == "warning"
    assert r["message"] == ("device mask '3x,5y': CUDA reads '3x' as 3, '5y' as 5 (it ignores what follows a number "
                            "or a UUID)")
    assert r["fix"] == "write plain indices or UUIDs separated by commas"


# ---- the evidence each record keeps (health.json's contracts[].evidence) ---------------------------

def test_no_foreign_process_is_ok_and_a_readable_list_adds_no_note(h):
    r = run_check(c.check_processes, h)
    assert (r["status"], r["message"], r["fix"]) == ("ok", "no other compute process on the GPUs", None)
    assert r["evidence"] == {"processes": []}


def test_the_memory_record_keeps_each_gpus_ecc_remap_and_retirement(h):
    h["gpus"][5]["retired_pages_pending"] = False
    row = run_check(gpuchecks.check_memory, h)["evidence"]["gpus"][5]
    assert row == {"gpu": 5, "ecc": h["gpus"][5]["ecc"], "remapped_rows": h["gpus"][5]["remapped_rows"],
                   "retired_pages_pending": False}


def test_an_ecc_change_pending_is_read_from_the_older_pending_key_alone(h):
    h["gpus"][1]["ecc"] = {"current": True, "pending": False, "volatile_uncorrected": 0}  # an older agent's record
    r = run_check(gpuchecks.check_memory, h)
    assert (r["status"], r["message"]) == ("warning", "GPU 1: ECC change pending (on -> off) until the next reset")


def test_the_topology_record_keeps_the_matrix_and_the_affinities(h):
    h["topology"].update(source="nvidia-smi topo -m", cpu_affinity={"0": "0-47"}, numa_affinity={"0": "0"})
    r = run_check(gpuchecks.check_topology, h)
    assert r["evidence"] == {"pairs": h["topology"]["pairs"], "source": "nvidia-smi topo -m",
                             "cpu_affinity": {"0": "0-47"}, "numa_affinity": {"0": "0"},
                             "selected": list(range(8)), "worst_link": "NV18"}
    h["environment"]["CUDA_VISIBLE_DEVICES"] = "3"
    r = run_check(gpuchecks.check_topology, h)
    assert (r["status"], r["message"]) == ("not_applicable", "fewer than two GPUs selected: no GPU-to-GPU link")
    assert r["evidence"]["selected"] == [3]


def test_the_layout_record_keeps_each_gpus_identity_and_modes(h):
    h["driver"]["confidential_compute"] = False
    h["gpus"][2]["mig"].update(current=False, pending=False)
    r = run_check(gpuchecks.check_layout, h)
    g = h["gpus"][2]
    assert r["evidence"]["confidential_compute"] is False
    assert r["evidence"]["gpus"][2] == {
        "gpu": 2, "name": "NVIDIA H200", "uuid": g["uuid"], "serial": g["serial"], "vbios": "96.00.A5.00.1A",
        "pci_bus_id": "00000000:38:00.0", "memory_total_bytes": fv.H200_MEMORY, "mig_current": False,
        "mig_pending": False, "mig_layout": None, "persistence_mode": True, "compute_mode": "default"}
    fv.mig(h, gpus={2})
    assert run_check(gpuchecks.check_layout, h)["evidence"]["gpus"][2]["mig_pending"] is True


# ---- after the first re-run -----------------------------------------------------------------------

def test_nvml_gpus_the_bus_listing_lacks_are_trusted_not_called_absent(h):
    h["pci"] = {"readable": True, "gpus": []}  # a container whose sysfs shows no NVIDIA function
    r = c.check_driver(driver_facts(h))
    assert (r["status"], r["message"]) == ("ok", "driver 580.159.04, CUDA 13.0, 8 GPUs")
    assert r["evidence"]["pci_nvidia_gpus"] == 0


def test_a_broken_mask_keeps_the_mask_as_evidence(h):
    for value, state in (("", "empty"), ("3,3", "invalid")):
        r = masked(h, CUDA_VISIBLE_DEVICES=value)
        assert r["status"] == "broken"
        ev = r["evidence"]
        assert (ev["cuda_visible_devices"], ev["state"], ev["selected"]) == (value, state, [])
    assert ev["cuda_error"] == "CUDA_ERROR_INVALID_DEVICE" and ev["invalid"][0]["entry"] == "3"


def test_an_interpreter_that_failed_does_not_stop_the_next_being_judged(h):
    cpu = dict(h["frameworks"][0], torch_version="2.11.0+cpu", cuda_runtime=None)
    r = framework(h, {"interpreter": "/opt/x/python", "error": "timed out after 30 s"}, cpu)
    assert r["message"] == ("/opt/x/python: timed out after 30 s; "
                            "python3: torch 2.11.0+cpu is a CPU-only wheel (torch.version.cuda is None)")


def test_a_framework_warning_keeps_the_interpreters_as_evidence(h):
    fv.torch(h, version="2.11.0+cu131", cuda="13.1")
    r = framework(h)
    assert r["status"] == "warning"
    assert r["evidence"] == {"interpreters": h["frameworks"], "driver_cuda": "13.0", "compute_capabilities": ["9.0"]}


def test_a_probe_stopped_before_any_read_is_judged_never_a_crash_and_never_healthy():
    """build_health judges whatever the deadline left: here nothing (not even the driver section)."""
    out, lowest = c.evaluate({})
    assert [x["name"] for x in out] == [s.name for s in c.CONTRACTS]
    assert lowest == "driver" and out[0]["status"] == "broken"
    assert all(x["status"] == "unknown" for x, s in zip(out, c.CONTRACTS) if s.needs_nvml)
    # not "NVML initialised but sees no GPU": NVML was never asked (it said so before this fix)
    assert out[0]["message"] == ("NVML not read: the probe stopped before NVML counted the GPUs "
                                 "(probe.incomplete_reason says where)")
    assert out[0]["fix"].startswith("probe again with a longer --deadline")


@pytest.mark.parametrize("driver", [{}, {"unsupported": {}, "version": "580.159.04", "nvml_version": "13.580.159.04"}])
def test_a_probe_stopped_inside_nvml_does_not_say_nvml_sees_no_gpu(h, driver):
    """The deadline during nvmlInit (driver section empty) or before nvmlDeviceGetCount answered."""
    h["driver"] = driver
    r = c.check_driver(driver_facts(h))
    assert r["status"] == "broken" and r["message"].startswith("NVML not read: the probe stopped before")
    h["driver"] = dict(driver, gpu_count=None)  # NVML answered, without a count: it sees none
    assert c.check_driver(driver_facts(h))["message"] == "NVML initialised but sees no GPU"


# ---- after the whole-module run -------------------------------------------------------------------

def test_every_judged_branch_keeps_its_evidence(h):
    """health.json's contracts[].evidence on the broken and warning paths, not only the ok one."""
    checks = []
    g = copy.deepcopy(h)
    g["gpus"][6]["lost"] = True
    checks.append((c.check_driver(driver_facts(g)), "pci"))                      # a GPU missing from NVML
    g = copy.deepcopy(h)
    g["driver"] = {"gpu_count": 0}
    checks.append((c.check_driver(driver_facts(g)), "pci"))                      # NVML sees no GPU
    g["driver"] = {}
    checks.append((c.check_driver(driver_facts(g)), "pci"))                      # NVML not read
    for value in ("9", "GPU-", "3,x,5", "3x", "%s" % h["gpus"][0]["uuid"][:12]):
        checks.append((masked(copy.deepcopy(h), CUDA_VISIBLE_DEVICES=value), "state"))
    checks.append((masked(copy.deepcopy(h), CUDA_DEVICE_ORDER="pci"), "state"))
    gone = {"interpreter": "/opt/train/bin/python", "error": "not found", "not_found": True, "named": True}
    checks.append((framework(copy.deepcopy(h), h["frameworks"][0], gone), "interpreters"))
    checks.append((framework(copy.deepcopy(h), {"interpreter": "python3", "torch_version": None}), "interpreters"))
    checks.append((run_check(gpuchecks.check_clocks, fv.app_clocks(copy.deepcopy(h), gpus={0})), "gpus"))
    checks.append((run_check(gpuchecks.check_power, fv.power_cap(copy.deepcopy(h), watts=250.0)), "gpus"))
    checks.append((run_check(gpuchecks.check_power, fv.power_cap(copy.deepcopy(h), watts=750.0)), "gpus"))
    checks.append((run_check(gpuchecks.check_memory, fv.remap(copy.deepcopy(h), gpu=1, failure=True)), "gpus"))
    checks.append((run_check(gpuchecks.check_memory, fv.ecc_off(copy.deepcopy(h))), "gpus"))
    checks.append((run_check(gpuchecks.check_layout, fv.persistence_off(copy.deepcopy(h), gpus={0})), "gpus"))
    for r, key in checks:
        assert r["status"] in ("broken", "warning", "not_applicable"), r
        assert r["evidence"].get(key) is not None, (r["name"], r["message"])
    g = copy.deepcopy(h)
    g["gpus"] = []
    assert run_check(gpuchecks.check_power, g)["evidence"] == {"gpus": []}


def test_the_not_read_drivers_fix_names_nvmlinit(h):
    h["driver"] = {}
    assert c.check_driver(driver_facts(h))["fix"] == (
        "probe again with a longer --deadline; if nvmlInit itself hangs, read dmesg for the driver")


def test_two_framework_warnings_are_said_in_one_sentence(h):
    fv.torch(h, version="2.11.0+cu131", cuda="13.1")
    r = framework(h, h["frameworks"][0], {"interpreter": "python3.11", "error": "not found", "not_found": True})
    assert r["message"] == ("python3: torch's CUDA 13.1 is newer than the driver's 13.0 (minor-version compatibility: "
                            "PTX JIT and new APIs may fail); python3.11: not found")


def test_the_agents_own_process_does_not_hide_a_foreign_one_on_the_same_gpu(h):
    h["gpus"][2]["processes"] = [{"pid": 77, "name": "probe", "used_memory_bytes": 1 << 20},
                                 {"pid": 4242, "name": "python3", "used_memory_bytes": 8 << 30}]
    h["own_pids"] = [77]
    r = run_check(c.check_processes, h)
    assert r["message"] == "1 other process on the GPUs: python3 (pid 4242, 8192 MiB) on GPU 2"


def test_a_gpu_without_power_readings_does_not_stop_the_others_being_judged(h):
    h["gpus"][0]["power"]["enforced_limit_w"] = None
    h["gpus"][3]["power"]["enforced_limit_w"] = 250.0
    r = run_check(gpuchecks.check_power, h)
    assert (r["status"], r["message"]) == ("broken", "GPU 3: enforced power limit 250 W is below the default 700 W")


def test_gpus_with_different_default_limits_are_each_at_theirs(h):
    for g in h["gpus"][4:]:
        g["power"].update(enforced_limit_w=600.0, default_limit_w=600.0)
    r = run_check(gpuchecks.check_power, h)
    assert (r["status"], r["message"]) == ("ok", "enforced limit = default (600, 700 W)")


def test_unreadable_link_classes_are_said_so(h):
    h["topology"]["pairs"] = {}
    assert run_check(gpuchecks.check_topology, h)["message"] == "link classes could not be read"


def test_a_mask_across_a_pcie_switch_on_an_nvlink_host_warns_too(h):
    h["topology"]["pairs"]["0-4"] = "PIX"  # the best PCIe class, still not NVLink
    h["environment"]["CUDA_VISIBLE_DEVICES"] = "0,4"
    r = run_check(gpuchecks.check_topology, h)
    assert r["status"] == "warning" and "talk over PIX although this host has NVLink" in r["message"]


def test_the_worst_nvlink_is_the_one_with_fewest_links(h):
    """Bug fixed here: every NVx ranked alike, so the first pair's NV18 was said over a later NV4."""
    h["topology"]["pairs"]["5-6"] = "NV4"
    r = run_check(gpuchecks.check_topology, h)
    assert (r["status"], r["message"]) == ("ok", "worst link between the selected GPUs: NV4")
    assert gpuchecks.worst_link(facts(h)) == "NV4"
    h["topology"]["pairs"]["5-6"] = "NV18"
    h["topology"]["pairs"]["0-1"] = "NV4"  # the first pair: kept against the later, wider ones
    assert gpuchecks.worst_link(facts(h)) == "NV4"
    assert [gpuchecks.link_order(x) < gpuchecks.link_order(y) for x, y in (("NV18", "NV4"), ("NV4", "PIX"), ("NV4", "NV"))] == [
        True, True, True]


def test_a_mig_change_from_on_to_off_names_both_modes(h):
    h["gpus"][2]["mig"].update(current=True, pending=False)
    r = run_check(gpuchecks.check_layout, h)
    assert r["message"] == "GPU 2: MIG mode change pending (on -> off) until the next reset"
