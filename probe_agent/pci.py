"""NVIDIA GPUs on the PCI bus, read from sysfs without the driver.

The driver contract needs it to tell "no NVIDIA GPU on this machine" from "a GPU the driver does
not answer for": NVML and nvidia-smi cannot, since both need the driver. A GPU is a PCI function
of vendor 0x10de (NVIDIA) and class 0x0300 (VGA controller) or 0x0302 (3D controller); the other
NVIDIA functions of a card (audio, USB-C, NVSwitch bridges) are not GPUs.

A small reader of our own until the agent's PCI-bus facts (issue 15) replace it.
"""
import os

SYSFS_PCI = "/sys/bus/pci/devices"
NVIDIA_VENDOR = 0x10DE
GPU_CLASSES = (0x0300, 0x0302)  # class and subclass: VGA-compatible, 3D controller


def _hex(path):
    with open(path) as fh:
        return int(fh.read().strip(), 16)


def read_nvidia_gpus(root=SYSFS_PCI):
    """The NVIDIA GPU functions on the bus as [{"address", "device", "class"}] in address order,
    or None when the bus cannot be read (no sysfs: a container without /sys, another OS)."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return None
    found = []
    for name in names:
        folder = os.path.join(root, name)
        try:
            vendor = _hex(os.path.join(folder, "vendor"))
            klass = _hex(os.path.join(folder, "class"))
            device = _hex(os.path.join(folder, "device"))
        except (OSError, ValueError):
            continue  # a function that vanished or answers garbage is not evidence of a GPU
        if vendor == NVIDIA_VENDOR and (klass >> 8) in GPU_CLASSES:
            found.append({"address": name, "device": "0x%04x" % device, "class": "0x%06x" % klass})
    return found
