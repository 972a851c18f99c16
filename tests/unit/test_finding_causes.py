"""One line per cause in the health findings, each cause with its own fix (issue 41: gpu25 of the demo
fleet read "HW slowdown: HW slowdown active on GPU 6 (...); HW thermal slowdown: HW thermal slowdown
active on GPU 6 (...)" under the first cause's fix)."""
import pytest

import fleet_variants as fv
from sweep.analysis.compare import compare
from sweep.analysis.fleet import load_fleet
from sweep.analysis.health import GPU_FINDINGS
from sweep.report.findings import by_host, fold

FIX = {kind: fix for _, kind, _, _, _, fix in GPU_FINDINGS}


def slowed(h, gpu, reasons, celsius=None):
    g = h["gpus"][gpu]
    g["clock_event_reasons"]["active"] = list(reasons)
    g["clocks"]["sm_mhz"] = 1035
    if celsius is not None:  # at its slowdown threshold: thermal is the lowest broken contract, clocks its consequence
        g["temperature_c"] = celsius
        g["thermal"] = {"gpu_c": celsius, "gpu_slowdown_c": 89}
    return fv.rejudge(h)


def findings_of(tmp_path, health):
    fv.write_run(tmp_path / "run", [fv.record("gpu01", fv.h200(8, "gpu01")), fv.record("gpu02", health)])
    found = compare(load_fleet([tmp_path / "run"])).health
    return [f.to_dict() for f in found if f.host == "gpu02"]


# NVML sets HW slowdown beside the cause it knows: (reasons active, the one cause said, its title)
@pytest.mark.parametrize("reasons,kind,title", [
    (["hw_slowdown", "hw_thermal_slowdown"], "hw_thermal_slowdown", "HW thermal slowdown"),
    (["hw_slowdown", "hw_power_brake_slowdown"], "hw_power_brake", "HW power brake"),
    (["hw_slowdown"], "hw_slowdown", "HW slowdown"),  # no cause named: the generic line and fix
], ids=["thermal", "power_brake", "unnamed"])
@pytest.mark.parametrize("celsius", [None, 91], ids=["clocks_lowest", "thermal_lowest"])
def test_a_hw_slowdown_is_said_once_by_its_cause_with_that_causes_fix(tmp_path, reasons, kind, title, celsius):
    found = findings_of(tmp_path, slowed(fv.h200(8, "gpu02"), 6, reasons, celsius))
    clocks = [f for f in found if f["kind"].startswith("hw_")]
    assert [(f["kind"], f["title"]) for f in clocks] == [(kind, title)]
    assert clocks[0]["detail"].startswith(f"{title} active on GPU 6 (SM 1035 of 1980 MHz")
    assert clocks[0]["fix"] == FIX[kind]
    lowest = [f["contract"] for f in found if f["kind"] == "lowest_broken"]
    assert lowest == ["thermal" if celsius else "clocks"]
    lines = [f for e in by_host(found) for f in e["findings"] if f["contract"] == "clocks"]
    assert len(lines) == 1 and "; " not in lines[0]["detail"] and "hw_" not in lines[0]["detail"]  # never "A: ...; B: ..."
    assert f"{title} active" in lines[0]["detail"] and lines[0]["fix"] == FIX[kind]


def test_two_causes_on_one_host_are_two_lines_each_with_its_fix(tmp_path):
    h = slowed(fv.h200(8, "gpu02"), 6, ["hw_slowdown", "hw_thermal_slowdown"], celsius=91)
    h = slowed(h, 2, ["hw_slowdown", "hw_power_brake_slowdown"])
    found = findings_of(tmp_path, h)
    assert [f["contract"] for f in found if f["kind"] == "lowest_broken"] == ["thermal"]
    entries = [e for e in fold(found) if e["contract"] == "clocks"]
    assert sorted((e["title"], e["fix"]) for e in entries) == [
        ("HW power brake", FIX["hw_power_brake"]), ("HW thermal slowdown", FIX["hw_thermal_slowdown"])]
    said = {e["title"]: e["detail"] for e in entries}
    assert said["HW thermal slowdown"].startswith("HW thermal slowdown active on GPU 6 ")
    assert said["HW power brake"].startswith("HW power brake active on GPU 2 ")


def test_two_causes_in_the_lowest_broken_clocks_contract_are_named_with_both_fixes():
    h = slowed(fv.h200(8, "gpu02"), 6, ["hw_slowdown", "hw_thermal_slowdown"])
    h = slowed(h, 2, ["hw_slowdown", "hw_power_brake_slowdown"])
    c = next(c for c in h["contracts"] if c["name"] == "clocks")
    assert c["message"] == ("GPU 2: HW power brake active (SM 1035 of 1980 MHz); GPU 6: HW thermal slowdown active "
                            "(SM 1035 of 1980 MHz): a facility fault")
    assert c["fix"] == FIX["hw_thermal_slowdown"] + "; " + FIX["hw_power_brake"]


@pytest.mark.parametrize("reasons,said,kind", [
    (["hw_slowdown", "hw_thermal_slowdown"], "GPU 6: HW thermal slowdown active (SM 1035 of 1980 MHz)", "hw_thermal_slowdown"),
    (["hw_slowdown", "hw_power_brake_slowdown"], "GPU 6: HW power brake active (SM 1035 of 1980 MHz)", "hw_power_brake"),
    (["hw_slowdown"], "GPU 6: HW slowdown active (SM 1035 of 1980 MHz)", "hw_slowdown"),
], ids=["thermal", "power_brake", "unnamed"])
def test_the_clocks_contract_names_each_cause_once_with_its_fix(reasons, said, kind):
    """The agent's clocks contract (the lowest broken one when nothing is hot): the cause by name, not
    "hw_slowdown, hw_thermal_slowdown", and that cause's fix, the one the finding of that cause gives."""
    h = slowed(fv.h200(8, "gpu02"), 6, reasons)
    c = next(c for c in h["contracts"] if c["name"] == "clocks")
    assert c["status"] == "broken" and c["message"] == said + ": a facility fault"
    assert c["fix"] == FIX[kind]
