"""A machine with no NVIDIA GPU on its PCI bus is told so; a bus with one keeps the driver advice."""
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probe_agent.hostfacts import PCI_DEVICES as SYSFS_PCI, gpu_functions, read_pci_gpus
from probe_agent.source import LiveSource
from sweep.demo import synth

ROOT = Path(__file__).resolve().parents[2]
NO_LIBRARY = {"error": "NVMLError_LibraryNotFound", "message": "NVML Shared Library Not Found"}


def agent(*args):
    proc = subprocess.run([sys.executable, "-m", "probe_agent", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def driver_contract(health):
    return next(c for c in health["contracts"] if c["name"] == "driver")


def read_nvidia_gpus(root=None):
    """The bus's NVIDIA GPU functions as the agent reads them, under `root` (a fake sysfs) or this machine's."""
    return gpu_functions(read_pci_gpus(LiveSource(root=root, journalctl=None)))


def function(root: Path, address: str, vendor: int, klass: int, device: int = 0x2335) -> None:
    folder = root / SYSFS_PCI.lstrip("/") / address
    folder.mkdir(parents=True)
    (folder / "vendor").write_text("0x%04x\n" % vendor)
    (folder / "class").write_text("0x%06x\n" % klass)
    (folder / "device").write_text("0x%04x\n" % device)


def test_only_nvidia_display_and_3d_controllers_count_as_gpus(tmp_path):
    function(tmp_path, "0000:00:02.0", 0x8086, 0x030000, 0x46a6)  # an Intel VGA controller
    function(tmp_path, "0000:18:00.0", 0x10DE, 0x030200)  # H200: a 3D controller
    function(tmp_path, "0000:18:00.1", 0x10DE, 0x040300, 0x22e8)  # the card's HD audio function
    function(tmp_path, "0000:3b:00.0", 0x10DE, 0x030000, 0x2684)  # a VGA-class NVIDIA card
    function(tmp_path, "0000:5e:00.0", 0x10DE, 0x068000, 0x22a3)  # an NVSwitch bridge
    (tmp_path / SYSFS_PCI.lstrip("/") / "0000:7f:00.0").mkdir()  # a function that vanished mid-read
    found = read_nvidia_gpus(str(tmp_path))
    assert [f["address"] for f in found] == ["0000:18:00.0", "0000:3b:00.0"]
    assert found[0] == {"address": "0000:18:00.0", "device": "0x2335", "class": "0x030200"}


def test_a_bus_that_cannot_be_read_is_unknown_not_empty(tmp_path):
    assert read_nvidia_gpus(str(tmp_path / "no-sysfs")) is None
    (tmp_path / SYSFS_PCI.lstrip("/")).mkdir(parents=True)
    assert read_nvidia_gpus(str(tmp_path)) == []


def test_this_machines_bus_as_the_kernel_lists_it():
    """The kernel's own listing (every function's vendor and class files) against the reader."""
    if not os.path.isdir(SYSFS_PCI):
        pytest.fail("this test machine has no /sys/bus/pci/devices")
    listing = subprocess.run(["sh", "-c", f"cd {SYSFS_PCI} && grep -l 0x10de */vendor"], capture_output=True,
                             text=True).stdout.split()
    gpus = [p.split("/")[0] for p in listing
            if (Path(SYSFS_PCI) / p.split("/")[0] / "class").read_text().startswith(("0x0300", "0x0302"))]
    assert [f["address"] for f in read_nvidia_gpus()] == sorted(gpus)


def test_this_machine_without_a_gpu_is_told_so_not_to_install_a_driver(tmp_path):
    if read_nvidia_gpus():
        pytest.skip("this machine has an NVIDIA GPU: the no-GPU message does not apply")
    health = agent("--out", tmp_path)
    driver = driver_contract(health)
    assert health["lowest_broken"] == "driver"
    assert driver["message"].startswith("no NVIDIA GPU on this machine")
    assert "install" not in driver["fix"] and driver["evidence"]["pci_nvidia_gpus"] == 0
    assert "no NVIDIA GPU on this machine" in (tmp_path / "health-report.md").read_text()


def capture_without_library(tmp_path, pci):
    cap = copy.deepcopy(synth.base_capture("h200-idle"))
    cap["nvml"] = {"nvmlInit": NO_LIBRARY}
    cap["files"]["/proc/driver/nvidia/version"] = None
    if pci is not None:
        cap["pci"] = pci
    return synth.write(cap, tmp_path / "cap.json")


def test_a_gpu_on_the_bus_without_a_driver_keeps_the_driver_advice(tmp_path):
    gpu = [{"address": "0000:18:00.0", "device": "0x2335", "class": "0x030200"}]
    driver = driver_contract(agent("--replay", capture_without_library(tmp_path, gpu)))
    assert driver["message"].startswith("no NVIDIA driver is installed")
    assert driver["fix"] == "install the NVIDIA driver that matches this kernel"
    assert driver["evidence"]["pci_nvidia_gpus"] == 1


def test_an_empty_bus_replayed_says_no_gpu(tmp_path):
    driver = driver_contract(agent("--replay", capture_without_library(tmp_path, [])))
    assert driver["message"].startswith("no NVIDIA GPU on this machine")


def test_a_capture_from_before_the_bus_was_read_keeps_the_driver_advice(tmp_path):
    driver = driver_contract(agent("--replay", capture_without_library(tmp_path, None)))
    assert driver["message"].startswith("no NVIDIA driver is installed")
    assert driver["evidence"]["pci_nvidia_gpus"] is None


def test_record_keeps_the_bus_for_replay(tmp_path):
    cap = tmp_path / "here.json"
    agent("--record", cap)
    recorded = json.loads(cap.read_text())
    assert "list " + SYSFS_PCI in recorded["paths"] and "pci" not in recorded
    assert agent("--replay", cap)["pci"] == agent()["pci"]


def persistence_off(gpus):
    """A capture edit: persistence mode off on `gpus`, as NVML answers it."""
    def edit(cap):
        for i in gpus:
            cap["nvml"][f"gpu{i}.persistence"] = {"value": 0}
    return edit


def test_a_finding_on_eight_gpus_is_one_sentence_with_the_gpus_folded(tmp_path):
    cap = synth.derive(synth.base_capture("h200-idle"), [synth.multi_gpu(8), synth.power_cap(250),
                                                          persistence_off([0, 1, 2, 5])])
    health = agent("--replay", synth.write(cap, tmp_path / "capped.json"))
    contracts = {c["name"]: c for c in health["contracts"]}
    assert contracts["power"]["message"] == "GPU 0-7: enforced power limit 250 W is below the default 700 W"
    assert contracts["layout"]["message"] == \
        "GPU 0-2,5: persistence mode off (each new client pays driver start-up)"
    assert contracts["driver"]["message"].endswith(", 8 GPUs")
