"""Issue 15's checks over fake /sys, /proc and kernel-log trees and edited H200 captures.

The sysfs and procfs reads go through LiveSource(root=tmp_path): the agent reads a fake tree with
the same code that reads the real one. NVML answers come from the real H200 captures, edited the
way sweep's synth edits them.
"""
import copy
import json
import os
from pathlib import Path

import pytest

from probe_agent.contracts import evaluate
from probe_agent.hostfacts import acs_control, read_host_settings, read_pci_gpus
from probe_agent.source import LiveSource, RecordingSource, ReplaySource
from probe_agent.xid import parse_xid_lines, read_kernel_log

ROOT = Path(__file__).resolve().parents[2]
IDLE = ROOT / "sweep" / "demo" / "captures" / "h200-idle.json"
X2 = ROOT / "tests" / "fixtures" / "x2" / "x2-idle.json"
GPU_BUS = "0000:18:00.0"
XID_79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
XID_48 = "NVRM: Xid (PCI:0000:18:00): 48, pid=1234, name=python, An uncorrectable double bit error (DBE)"
XID_13 = "NVRM: Xid (PCI:0000:18:00): 13, pid=77, name=python, Graphics Exception: ESR 0x514648=0x1000e"


def put(root, path, text):
    p = root / path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def link(root, path, target):
    p = root / path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, p)


def pci_device(root, bdf, vendor="0x10de", cls="0x030200", driver="nvidia", width="16", max_width="16",
               bridges=("0000:00:01.0", "0000:16:00.0")):
    base = "/sys/bus/pci/devices/" + bdf
    put(root, base + "/vendor", vendor + "\n")
    put(root, base + "/class", cls + "\n")
    put(root, base + "/device", "0x2335\n")
    put(root, base + "/numa_node", "0\n")
    put(root, base + "/current_link_speed", "32.0 GT/s PCIe\n")
    put(root, base + "/current_link_width", width + "\n")
    put(root, base + "/max_link_speed", "32.0 GT/s PCIe\n")
    put(root, base + "/max_link_width", max_width + "\n")
    if driver:
        link(root, base + "/driver", "../../../bus/pci/drivers/" + driver)
    (root / base.lstrip("/") / ".path").write_text("/".join(("devices", "pci0000:00") + tuple(bridges) + (bdf,)))


def fake_host(root, gpus=(GPU_BUS,), governor="performance", ib=(("mlx5_0", "400 Gb/sec (4X NDR)"),),
              kmsg=(), modules="nvidia 1 0 - Live\nnvidia_peermem 1 0 - Live\n", driver_gpus=None):
    """A host tree. The sysfs `link` of a PCI device is read by LiveSource.fs('link'): real sysfs
    devices are symlinks, so the fake ones are folders beside a symlink named after them."""
    for bdf in gpus:
        pci_device(root, bdf)
    put(root, "/proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 iommu=pt intel_iommu=on quiet\n")
    put(root, "/proc/modules", modules)
    put(root, "/proc/sys/kernel/numa_balancing", "0\n")
    put(root, "/sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
    for k in range(4):
        put(root, "/sys/devices/system/cpu/cpufreq/policy%d/scaling_governor" % k, governor + "\n")
    for dev, rate in ib:
        base = "/sys/class/infiniband/%s/ports/1/" % dev
        put(root, base + "state", "4: ACTIVE\n")
        put(root, base + "phys_state", "5: LinkUp\n")
        put(root, base + "rate", rate + "\n")
        put(root, base + "link_layer", "InfiniBand\n")
    put(root, "/dev/kmsg", "".join("3,%d,%d,-;%s\n" % (n, n * 1000, line) for n, line in enumerate(kmsg)))
    for bdf in gpus if driver_gpus is None else driver_gpus:
        (root / ("proc/driver/nvidia/gpus/" + bdf)).mkdir(parents=True, exist_ok=True)


class TreeSource(LiveSource):
    """LiveSource over a fake tree; a PCI device folder's `.path` file stands for its sysfs symlink."""

    def fs(self, op, path, limit=65536):
        if op == "link" and path.startswith("/sys/bus/pci/devices/") and path.count("/") == 5:
            p = Path(self.real_path(path)) / ".path"
            return {"link": "../../../" + p.read_text()} if p.exists() else {"error": "FileNotFoundError"}
        return LiveSource.fs(self, op, path, limit)


def capture(path=IDLE):
    return json.loads(Path(path).read_text())


def health_on_tree(tmp_path, cap, **host):
    """Run the whole agent on an edited capture whose sysfs answers come from a fake tree."""
    tree = tmp_path / "tree"
    fake_host(tree, **host)
    src = TreeSource(root=str(tree), journalctl=None)
    cap = copy.deepcopy(cap)
    rec = Recorder(src)
    read_pci_gpus(rec)
    read_host_settings(rec, read_pci_gpus(rec)["gpus"])
    cap["paths"] = rec.answers
    cap["kernel_log"] = src.kernel_log()
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(cap))
    return run_agent(f)


class Recorder(object):
    def __init__(self, src):
        self.src, self.answers = src, {}

    def fs(self, op, path, limit=65536):
        answer = self.src.fs(op, path, limit)
        self.answers["%s %s" % (op, path)] = answer
        return answer


def run_agent(capture_file, *args):
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "probe_agent", "--replay", str(capture_file), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    health = json.loads(proc.stdout)
    assert health["probe"]["complete"], health["probe"].get("traceback")
    return health


def contract(health, name):
    return next(c for c in health["contracts"] if c["name"] == name)


def set_nvml(cap, key, value):
    cap["nvml"][key] = {"value": value}


def idle_with_pcie(width=16, gen=5):
    cap = capture()
    set_nvml(cap, "gpu0.pci", dict(cap["nvml"]["gpu0.pci"]["value"], busId="00000000:18:00.0"))
    for k, v in (("pcie_gen", gen), ("pcie_width", width), ("pcie_max_gen", 5), ("pcie_max_width", 16),
                 ("pcie_gpu_max_gen", 5), ("pcie_replay", 0)):
        set_nvml(cap, "gpu0." + k, v)
    return cap


# --- the healthy host -------------------------------------------------------------------------

def test_healthy_fake_host_holds_every_new_contract(tmp_path):
    h = health_on_tree(tmp_path, idle_with_pcie())
    assert h["verdict"] == "ok", [(c["name"], c["message"]) for c in h["contracts"] if c["status"] != "ok"]
    assert contract(h, "driver")["evidence"]["pci"]["on_bus"] == 1
    assert contract(h, "xid")["message"] == "no Xid since boot (/dev/kmsg)"
    assert contract(h, "links")["message"].startswith("PCIe gen5 x16 link (generation at idle not judged)")
    assert h["host_settings"]["cpu_governor"] == {"performance": 4}
    assert h["host_settings"]["ib_ports"][0]["rate_gbps"] == 400.0
    assert h["host_settings"]["transparent_hugepages"] == "madvise"
    assert h["host_settings"]["kernel_args"] == ["iommu=pt", "intel_iommu=on"]


# --- 1. GPUs present ----------------------------------------------------------------------------

def test_card_on_the_bus_missing_from_nvml_breaks_the_driver_contract(tmp_path):
    h = health_on_tree(tmp_path, idle_with_pcie(), gpus=(GPU_BUS, "0000:3b:00.0"))
    c = contract(h, "driver")
    assert h["lowest_broken"] == "driver" and c["status"] == "broken"
    assert "on the PCI bus but not listed by NVML (NVML lists 1, 1 more on the bus): 0000:3b:00.0" in c["message"]
    assert "0000:3b:00.0" in c["fix"]


def test_card_hidden_from_a_container_is_a_note_not_a_fault(tmp_path):
    # the driver's own list (/proc/driver/nvidia/gpus) lacks the second card: a container's device list
    h = health_on_tree(tmp_path, idle_with_pcie(), gpus=(GPU_BUS, "0000:3b:00.0"), driver_gpus=(GPU_BUS,))
    c = contract(h, "driver")
    assert c["status"] == "ok" and "1 more on the bus hidden from this container" in c["message"]


def test_pci_bus_not_readable_is_an_answer(tmp_path):
    cap = idle_with_pcie()
    cap["paths"] = {"list /sys/bus/pci/devices": {"error": "PermissionError"}}
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(cap))
    h = run_agent(f)
    assert h["pci"] == {"readable": False, "error": "PermissionError", "gpus": []}
    assert contract(h, "driver")["evidence"]["pci"]["error"] == "PermissionError"
    assert contract(h, "driver")["status"] == "ok"


# --- 2. PCIe link -------------------------------------------------------------------------------

def test_x8_instead_of_x16_is_broken_at_any_time(tmp_path):
    h = health_on_tree(tmp_path, idle_with_pcie(width=8))
    c = contract(h, "links")
    assert h["lowest_broken"] == "links"
    assert "PCIe link x8, the link supports x16: half the host-to-GPU bandwidth" in c["message"]
    assert contract(h, "topology")["consequence_of"] is None  # one GPU: topology not applicable


def test_generation_at_idle_is_not_judged_under_load_it_is(tmp_path):
    h = health_on_tree(tmp_path, idle_with_pcie(gen=1))
    assert contract(h, "links")["status"] == "ok"
    assert "gen1 of gen5 at idle" in contract(h, "links")["evidence"]["notes"][0]
    cap = capture(ROOT / "sweep" / "demo" / "captures" / "h200-load.json")
    set_nvml(cap, "gpu0.pcie_gen", 3)
    set_nvml(cap, "gpu0.pcie_max_gen", 5)
    set_nvml(cap, "gpu0.pcie_width", 16)
    set_nvml(cap, "gpu0.pcie_max_width", 16)
    for s in cap["samples"]:
        for g in s["gpus"]:
            g["pcie_gen"] = 3
    f = tmp_path / "load.json"
    f.write_text(json.dumps(cap))
    h = run_agent(f, "--load", "20")
    assert contract(h, "links")["status"] == "broken"
    assert "GPU 0: PCIe gen3 under load, the link supports gen5" in contract(h, "links")["message"]


# --- 3. NVLink ----------------------------------------------------------------------------------

def test_one_nvlink_down_on_an_nv18_pair_is_broken(tmp_path):
    cap = capture(X2)
    set_nvml(cap, "gpu1.nvlink5_state", 0)
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(cap))
    h = run_agent(f)
    c = contract(h, "links")
    assert c["status"] == "broken" and h["lowest_broken"] == "links"
    assert "GPU 1: 17 of 18 NVLinks active (down: 5); NV18 becomes NV17" in c["message"]
    link = h["gpus"][1]["nvlink"]  # the fields of the link count (another NVLink reading may sit beside them)
    assert {k: link[k] for k in ("links", "active", "inactive_links", "errors", "errors_per_link")} == {
        "links": 18, "active": 17, "inactive_links": [5], "errors": None, "errors_per_link": {}}


def test_x2_capture_every_promised_nvlink_active():
    h = run_agent(X2)
    assert [g["nvlink"]["active"] for g in h["gpus"]] == [18, 18]
    assert contract(h, "links")["status"] in ("ok", "unknown")


# --- 4. Xid -------------------------------------------------------------------------------------

def test_xid_79_and_48_are_broken_grouped_per_bus_and_code(tmp_path):
    h = health_on_tree(tmp_path, idle_with_pcie(), kmsg=("usb 1-1: new device", XID_48, XID_48, XID_79, XID_13))
    c = contract(h, "xid")
    assert c["status"] == "broken" and h["lowest_broken"] == "xid"
    groups = {(x["bus_id"], x["code"]): x for x in h["kernel_log"]["xid"]}
    assert groups[("0000:18:00", 48)]["count"] == 2 and groups[("0000:18:00", 48)]["kind"] == "hardware"
    assert groups[("0000:3b:00", 79)]["meaning"] == "GPU has fallen off the bus"
    assert groups[("0000:18:00", 13)]["kind"] == "application"
    assert "Xid 79 on 0000:3b:00 x1" in c["message"] and "Xid 48 on 0000:18:00 x2" in c["message"]
    assert "docs.nvidia.com/deploy/xid-errors" in c["fix"]
    assert contract(h, "memory")["consequence_of"] is None  # memory holds: nothing to be a consequence of


def test_application_xid_alone_is_a_warning(tmp_path):
    h = health_on_tree(tmp_path, idle_with_pcie(), kmsg=(XID_13,))
    assert contract(h, "xid")["status"] == "warning"
    assert h["lowest_broken"] is None


def test_kernel_log_fallbacks_and_not_readable(tmp_path):
    root = tmp_path / "t"
    put(root, "/var/log/kern.log", "Nov 30 kernel: [  12.3] " + XID_79 + "\n")
    log = LiveSource(root=str(root), journalctl=None).kernel_log()
    assert log["source"] == "/var/log/kern.log" and log["tried"] == {"/dev/kmsg": "FileNotFoundError"}
    script = tmp_path / "journalctl"
    script.write_text("#!/bin/sh\necho '[ 5.0] kernel: %s'\n" % XID_48)
    script.chmod(0o755)
    log = LiveSource(root=str(root), journalctl=(str(script),)).kernel_log()
    assert log["source"] == "journalctl -k" and XID_48 in log["events"][0][0]
    empty = tmp_path / "empty"
    empty.mkdir()
    log = LiveSource(root=str(empty), journalctl=("/nonexistent/journalctl",)).kernel_log()
    assert log["source"] is None and set(log["tried"]) == {"/dev/kmsg", "journalctl -k", "/var/log/kern.log"}


def test_kernel_log_not_readable_is_unknown_not_ok(tmp_path):
    cap = idle_with_pcie()
    cap["kernel_log"] = {"source": None, "lines": [], "tried": {"/dev/kmsg": "PermissionError"}}
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(cap))
    c = contract(run_agent(f), "xid")
    assert c["status"] == "unknown" and "kernel log not readable (/dev/kmsg: PermissionError)" in c["message"]


def test_xid_parser_reads_real_line_shapes():
    groups = parse_xid_lines([XID_79, "NVRM: Xid (0000:18:00): 140, Unrecovered ECC Error", "unrelated"])
    # the most severe repair first: a reboot (79) before a GPU reset (140)
    assert [(g["bus_id"], g["code"], g["action"]) for g in groups] == [("0000:3b:00", 79, "reboot"),
                                                                       ("0000:18:00", 140, "reset_gpu")]


# --- 5. fabric ----------------------------------------------------------------------------------

def test_fabric_not_initialised_is_broken_right_above_the_driver(tmp_path):
    cap = idle_with_pcie()
    set_nvml(cap, "gpu0.fabric", {"version": 0x02000024, "clusterUuid": [0] * 16, "status": 0, "cliqueId": 0,
                                  "state": 1, "healthMask": 0})
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(cap))
    h = run_agent(f)
    c = contract(h, "fabric")
    assert h["lowest_broken"] == "fabric" and c["status"] == "broken"
    assert "GPU 0 not_started" in c["message"] and "error 802" in c["message"]
    assert "nvidia-fabricmanager" in c["fix"]


def test_fabric_not_supported_without_nvswitch():
    h = run_agent(IDLE)
    assert contract(h, "fabric")["status"] == "not_applicable"
    assert h["gpus"][0]["fabric"]["state"] is None


# --- 6. thermal ---------------------------------------------------------------------------------

def test_hbm_near_slowdown_is_a_warning(tmp_path):
    cap = idle_with_pcie()
    set_nvml(cap, "gpu0.fields", [{"fieldId": 82, "scopeId": 0, "valueType": 1, "nvmlReturn": 0,
                                   "value": {"uiVal": 93, "ullVal": 93}}])
    set_nvml(cap, "gpu0.temp_mem_max", 95)
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(cap))
    h = run_agent(f)
    c = contract(h, "thermal")
    assert c["status"] == "warning" and "GPU 0: HBM at 93 C, 2 C below its slowdown threshold 95 C" in c["message"]
    assert h["gpus"][0]["thermal"]["memory_c"] == 93


# --- 7. clocks ----------------------------------------------------------------------------------

def test_p0_clock_range_is_read_where_exposed(tmp_path):
    cap = idle_with_pcie()
    set_nvml(cap, "gpu0.p0_range_sm", [1000, 1500])
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(cap))
    h = run_agent(f)
    assert h["gpus"][0]["clocks"]["p0_sm_max_mhz"] == 1500
    assert "locked" in contract(h, "clocks")["message"]


# --- 8. host settings ---------------------------------------------------------------------------

def test_ib_port_at_half_rate_and_powersave_governor_are_findings(tmp_path):
    h = health_on_tree(tmp_path, idle_with_pcie(), governor="powersave",
              ib=(("mlx5_0", "400 Gb/sec (4X NDR)"), ("mlx5_1", "200 Gb/sec (4X HDR)")))
    c = contract(h, "host")
    assert c["status"] == "warning"
    assert "CPU frequency governor powersave on 4 policies (not performance)" in c["message"]
    assert "mlx5_1 port 1 at 200 Gb/s while the host's other InfiniBand ports run at 400 Gb/s" in c["message"]


def test_nouveau_and_missing_peermem(tmp_path):
    h = health_on_tree(tmp_path, idle_with_pcie(), modules="nouveau 1 0 - Live\nnvidia 1 0 - Live\n")
    msg = contract(h, "host")["message"]
    assert "nouveau is loaded" in msg and "nvidia_peermem is not loaded" in msg
    assert contract(h, "host")["fix"] == ("blacklist nouveau and rebuild the initramfs; modprobe nvidia_peermem "
                                          "(and load it at boot)")


def test_acs_redirect_read_from_config_space():
    config = bytearray(4096)
    config[0x100:0x104] = (0x000D | (1 << 16) | (0 << 20)).to_bytes(4, "little")
    config[0x106:0x108] = (0x1 | 0x4 | 0x8).to_bytes(2, "little")
    assert acs_control(bytes(config)) == 0xD
    assert acs_control(bytes(64)) == "short"  # what a non-root reader gets


def test_host_settings_not_readable_is_unknown(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    h = read_host_settings(LiveSource(root=str(empty), journalctl=None), [])
    assert h["cpu_governor"] is None and h["unreadable"]["cpu_governor"] == "FileNotFoundError"
    assert h["ib_ports"] == []  # no /sys/class/infiniband: no port, not an error


# --- the source layer ---------------------------------------------------------------------------

def test_record_then_replay_gives_the_same_reads(tmp_path):
    tree = tmp_path / "tree"
    fake_host(tree, kmsg=(XID_79,))
    rec = RecordingSource(root=str(tree), journalctl=None)
    live = (read_pci_gpus(rec), read_kernel_log(rec))
    rec._host = rec._env = rec._files = {}
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(rec.capture("test")))
    rep = ReplaySource(str(f))
    assert (read_pci_gpus(rep), read_kernel_log(rep)) == live
    assert json.loads(f.read_text())["version"] == 3  # 3: the kernel log folded per event kind, with its boot


def test_acs_redirect_on_a_switch_port_above_a_gpu_is_a_host_warning(tmp_path):
    config = bytearray(4096)
    config[0x100:0x104] = (0x000D | (1 << 16)).to_bytes(4, "little")
    config[0x106:0x108] = (0x1 | 0x4 | 0x8).to_bytes(2, "little")  # source validation, P2P request/completion redirect
    tree = tmp_path / "tree"
    bridge = tree / "sys/bus/pci/devices/0000:16:00.0"
    bridge.mkdir(parents=True)
    (bridge / "config").write_bytes(bytes(config))
    h = health_on_tree(tmp_path, idle_with_pcie())
    acs = h["host_settings"]["acs"]
    assert acs == [{"bridge": "0000:16:00.0", "control": 0xD, "error": None,
                    "enabled": ["source_validation", "p2p_request_redirect", "p2p_completion_redirect"]}]
    assert "ACS P2P redirect on PCIe switch port 0000:16:00.0" in contract(h, "host")["message"]


def test_nearest_nic_from_the_topology_matrix():
    from probe_agent.collect import parse_topo_matrix
    from probe_agent.hostfacts import nearest_nics
    topo = parse_topo_matrix(
        "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tNV18\tPIX\tSYS\t0-31\t0\t\tN/A\n"
        "GPU1\tNV18\t X \tSYS\tPXB\t32-63\t1\t\tN/A\n"
        "NIC0\tPIX\tSYS\t X \tSYS\n\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n")
    assert topo["pairs"] == {"0-1": "NV18"} and topo["nic_legend"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    ports = [{"device": "mlx5_0"}, {"device": "mlx5_1"}]
    near = nearest_nics([{"index": 0, "pci_bus_id": None}, {"index": 1, "pci_bus_id": None}], [], ports, topo)
    assert near == {"0": {"nic": "mlx5_0", "link": "PIX", "source": "nvidia-smi topo -m"},
                    "1": {"nic": "mlx5_1", "link": "PXB", "source": "nvidia-smi topo -m"}}


def test_kernel_log_cut_at_its_bound_is_not_passed_as_clean(tmp_path, monkeypatch):
    import probe_agent.kernlog as kernlog
    root = tmp_path / "t"
    put(root, "/dev/kmsg", "".join("6,%d,0,-;line %d\n" % (n, n) for n in range(5000)))
    monkeypatch.setattr(kernlog, "MAX_BYTES", 1000)
    log = LiveSource(root=str(root), journalctl=None).kernel_log()
    assert log["source"] == "/dev/kmsg" and log["complete"] is False
    cap = idle_with_pcie()
    cap["kernel_log"] = log
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(cap))
    c = contract(run_agent(f), "xid")
    assert c["status"] == "unknown" and "before its bound" in c["message"]


# --- each cause of a broken links contract, its own fix (issue 41) ----------------------------------

def _links_facts(pcie=None, nvlink=None, loaded=False):
    g = {"index": 3, "pci_bus_id": "00000000:48:00.0", "pcie": dict({"gen": 5, "max_gen": 5, "width": 16,
                                                                   "max_width": 16}, **(pcie or {})),
         "nvlink": nvlink or {}}
    facts = {"gpus": [g], "topology": {"pairs": {"2-3": "NV18"}}}
    if loaded:
        facts["load"] = {"samples": [{}], "summary": [{"gpu": 3, "pcie_gen_max": g["pcie"]["gen"]}]}
    return facts


@pytest.mark.parametrize("facts,said,fix,not_fix", [
    (_links_facts(pcie={"width": 8}), "PCIe link x8, the link supports x16",
     "reseat the card and check its slot and riser", "NVLink"),
    (_links_facts(pcie={"gen": 3}, loaded=True), "PCIe gen3 under load, the link supports gen5",
     "BIOS PCIe generation setting", "NVLink"),
    (_links_facts(nvlink={"links": 18, "active": 17, "inactive_links": [5]}), "17 of 18 NVLinks active",
     "replace the NVLink bridge or board if links stay down", "riser"),
], ids=["pcie_width", "pcie_gen", "nvlink"])
def test_each_cause_of_a_broken_link_gets_its_own_fix(facts, said, fix, not_fix):
    """gpu09's PCIe x8 told the operator to replace the NVLink bridge: a narrow PCIe link is a seating,
    slot or riser fault, and only an NVLink down is the bridge's."""
    from probe_agent.hostchecks import check_links

    c = check_links(facts)
    assert c["status"] == "broken" and said in c["message"]
    assert fix in c["fix"] and not_fix not in c["fix"]


def test_two_causes_of_a_broken_link_get_both_fixes_once():
    from probe_agent.hostchecks import LINK_FIXES, check_links

    facts = _links_facts(pcie={"width": 8}, nvlink={"links": 18, "active": 17, "inactive_links": [5]})
    facts["gpus"].append(dict(facts["gpus"][0], index=4, nvlink={}))  # a second narrow GPU: its fix once
    c = check_links(facts)
    assert c["fix"] == LINK_FIXES["pcie_width"] + "; " + LINK_FIXES["nvlink"]
