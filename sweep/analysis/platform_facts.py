"""The fact table's platform facts: the firmware and platform versions (schema 1.3), where a mixed
fleet is a half-done change window, and where each GPU sits (nvidia-smi topo -m, schema 1.7), shown
per GPU and never a comparability key.

The whole table, and every view of it that consumers iterate, is `sweep.analysis.facts`; the code
each declaration here names (renderers, readers) is `sweep.analysis.fact_values`.
"""

from __future__ import annotations

from sweep.analysis.fact import Expect, Fact, Metric, keyed_reader, path_reader
from sweep.analysis.fact_values import gsp_text, hca_firmware, nearest_nic_text, version_text

# what a fleet that differs in any firmware version suffers (the impact of every firmware fact)
FIRMWARE = [
    (
        None,
        "firmware differs: a change-window left hosts half-upgraded ({value} vs {reference}); "
        "firmware changes clocks, power management, error handling and link training, so the hosts "
        "may not behave alike; finish the upgrade (or roll it back) on every host",
    )
]
CPU_PLACEMENT = (
    "the GPU is attached to {value} instead of {reference}: a process pinned by the reference's "
    "layout feeds this GPU across the CPU interconnect (slower host-to-GPU copies and launches); "
    "pin each rank to its GPU's CPUs and NUMA node"
)
UPGRADE = "finish the firmware upgrade of the change window on this host (or approve this version)"


def approved(key: str) -> Expect:
    """The expectations rule of a firmware version: a glob or a list of globs of approved
    versions."""
    return Expect(key, "glob", fix=UPGRADE, noun="version")


PLATFORM_FACTS: tuple[Fact, ...] = (
    Fact(
        name="vbios",
        label="VBIOS",
        scope="gpu",
        path="gpus#.vbios",
        impact=FIRMWARE,
        diff_kind="firmware",
        metric=Metric.info(
            "sweep_gpu_vbios_info", "The GPU's VBIOS version, value 1.", ("version", "vbios")
        ),
        expect=approved("vbios"),
    ),
    Fact(
        name="hca_firmware",
        label="HCA firmware",
        scope="host",
        columns=("hca_firmware",),
        render=version_text("hca_firmware"),
        impact=FIRMWARE,
        diff_kind="firmware",
        paths=("host_settings.ib_ports#.fw_ver",),
        metric=Metric.info(
            "sweep_host_hca_firmware_info",
            "The firmware of the host's InfiniBand / RoCE HCAs, value 1.",
            ("version", "hca_firmware"),
        ),
        expect=approved("hca_firmware"),
        reads={"hca_firmware": ("category", hca_firmware)},
        unread=lambda r: r["hca_firmware"] is None,
    ),
    Fact(
        name="inforom",
        label="InfoROM image",
        scope="gpu",
        path="gpus#.inforom_image",
        column="inforom_image",
        impact=FIRMWARE,
        diff_kind="firmware",
        metric=Metric.info(
            "sweep_gpu_inforom_info",
            "The GPU's InfoROM image version, value 1.",
            ("version", "inforom_image"),
        ),
        expect=approved("inforom"),
        compares=False,
    ),
    Fact(
        name="gsp_firmware",
        label="GSP firmware",
        scope="gpu",
        columns=("gsp_version", "gsp_mode"),
        render=gsp_text,
        impact=FIRMWARE,
        diff_kind="firmware",
        paths=("gpus#.gsp_firmware.*",),
        metric=Metric.info(
            "sweep_gpu_gsp_firmware_info",
            "The GPU's GSP firmware version (empty when GSP is off), value 1.",
            ("version", "gsp_version"),
        ),
        expect=approved("gsp_firmware"),
        compares=False,
        reads={
            "gsp_version": ("category", path_reader("gpus#.gsp_firmware.version", "category")),
            "gsp_mode": ("boolean", path_reader("gpus#.gsp_firmware.enabled", "boolean")),
        },
    ),
    Fact(
        name="bios",
        label="System BIOS",
        scope="host",
        path="firmware.bios_version",
        column="bios_version",
        impact=FIRMWARE,
        diff_kind="firmware",
        metric=Metric.info(
            "sweep_host_bios_info",
            "The system BIOS version (/sys/class/dmi/id/bios_version), value 1.",
            ("version", "bios_version"),
        ),
        expect=approved("bios"),
        compares=False,
    ),
    Fact(
        name="fabric_manager",
        label="Fabric manager",
        scope="host",
        path="firmware.fabric_manager_version",
        column="fabric_manager_version",
        render=version_text("fabric_manager_version", "not running"),
        impact=FIRMWARE,
        diff_kind="firmware",
        metric=Metric.info(
            "sweep_host_fabric_manager_info",
            "The NVIDIA fabric manager's version where it runs, value 1.",
            ("version", "fabric_manager_version"),
        ),
        contract="fabric",
        expect=approved("fabric_manager"),
        compares=False,
    ),
    # where each GPU sits (nvidia-smi topo -m, schema 1.7): shown per GPU, never a comparability key
    # (two GPUs of one host have different CPUs and NICs by design); "not read" where the agent left
    # the row unread
    Fact(
        name="cpu_affinity",
        label="CPU affinity",
        scope="gpu",
        path="topology.cpu_affinity.*",
        render=version_text("cpu_affinity", "not read"),
        impact=[(None, CPU_PLACEMENT)],
        diff_kind="topology",
        contract="topology",
        compares=False,
        alike=False,
    ),
    Fact(
        name="numa_affinity",
        label="NUMA affinity",
        scope="gpu",
        path="topology.numa_affinity.*",
        render=version_text("numa_affinity", "not read"),
        impact=[(None, CPU_PLACEMENT)],
        diff_kind="topology",
        contract="topology",
        compares=False,
        alike=False,
    ),
    Fact(
        name="nearest_nic",
        label="Nearest NIC",
        scope="gpu",
        columns=("nearest_nic", "nearest_nic_link"),
        render=nearest_nic_text,
        diff_kind="topology",
        contract="topology",
        compares=False,
        alike=False,
        impact=[
            (
                None,
                "the GPU's nearest NIC is {value} instead of {reference}: GPUDirect RDMA traffic "
                "from this GPU crosses more of the PCIe tree (or the CPU's root complex), so its "
                "share of a collective across hosts is slower; check the NIC's cabling and the "
                "launcher's NIC-to-GPU mapping",
            )
        ],
        paths=("host_settings.nearest_nic.*.nic", "host_settings.nearest_nic.*.link"),
        metric=Metric.info(
            "sweep_gpu_nearest_nic_info",
            "The GPU's nearest NIC in nvidia-smi topo -m and its link to it "
            "(PIX, PXB, PHB, NODE, SYS), value 1.",
            ("nic", "nearest_nic"),
            ("link", "nearest_nic_link"),
        ),
        reads={
            "nearest_nic": (
                "category",
                keyed_reader("host_settings.nearest_nic.*.nic", "category"),
            ),
            "nearest_nic_link": (
                "category",
                keyed_reader("host_settings.nearest_nic.*.link", "category"),
            ),
        },
        unread=lambda r: r["nearest_nic"] is None,
    ),
)
