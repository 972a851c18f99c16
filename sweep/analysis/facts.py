"""The fact table: one declaration per comparability key, and every consumer iterates it.

Each `Fact` (its class: `sweep.analysis.fact`) says everything sweep knows about one key: its name
and label, its scope (a host's fact or a GPU's), the frame columns that hold its typed value (and,
for a fact the frames did not carry before, how to read that column from a health document), how to
render it, its impact text, the contract it belongs to, its Prometheus metric (or why it has none),
its kind in audits and baselines (with the health.json paths behind it), its history treatment and
its expectations key. The fleet frames, the classes (`sweep.analysis.keys`), impact, findings,
`sweep diff`, baselines, expectations, history, the export and the report read this table, so adding
a fact is one entry here, the agent's reader, the schema and a fixture (`tests/unit/test_facts.py`
fails when a consumer misses one).

This module declares the configuration facts (the GPU, the driver, its modes, links and the host's
settings) and joins them with the platform facts (`sweep.analysis.platform_facts`: firmware
versions, where each GPU sits) and the speed tier's (`sweep.analysis.speed_facts`) into `FACTS`,
with the views consumers iterate (`derived`). The renderers and readers the declarations name are
`sweep.analysis.fact_values`.

Values are compared, indexed and diffed typed (`typed_value`); `render` makes text only for the
edge (the report, the terminal, Prometheus labels).
"""

from __future__ import annotations

from sweep.analysis import impact as texts
from sweep.analysis.fact import Expect, Fact, Metric
from sweep.analysis.fact_values import (
    as_number,
    clocks_text,
    ecc_text,
    framework_text,
    governor_text,
    link_text,
    mig_text,
    nvlinks_text,
    onoff_text,
    pcie_text,
    port_rate,
    power_text,
    present_text,
)

# imported from the fact table's module too (explicit re-exports): their homes are `fact` and
# `fact_values`
from sweep.analysis.fact import keyed_reader as keyed_reader, path_reader as path_reader
from sweep.analysis.fact_values import mixed_text as mixed_text, onoff as onoff
from sweep.analysis.fact_values import typed_value as typed_value
from sweep.analysis.platform_facts import PLATFORM_FACTS
from sweep.analysis.speed_facts import SPEED_FACTS
from sweep.text import plural

_DRIVER_INFO = Metric.info(
    "sweep_host_driver_info",
    "NVIDIA driver and CUDA driver API versions of the host, value 1.",
    ("driver_version", "driver"),
    ("cuda_driver_version", "cuda_driver"),
)

# the configuration facts: what the driver, NVML and the host's settings say
CONFIGURATION_FACTS: tuple[Fact, ...] = (
    Fact(
        name="gpu_model",
        label="GPU model",
        scope="gpu",
        columns=("name",),
        render=lambda r: r["name"] or "unknown",
        impact=texts.RULES["gpu_model"],
        diff_kind="gpu model",
        paths=("gpus#.name",),
        metric=Metric.info("sweep_gpu_info", "The GPU's model, value 1.", ("model", "name")),
        expect=Expect("gpu_model", "equal"),
        unread=lambda r: not r["name"],
    ),
    Fact(
        name="memory",
        label="GPU memory",
        scope="gpu",
        columns=("memory_total_bytes",),
        render=lambda r: (
            "unknown"
            if r["memory_total_bytes"] is None
            else f"{r['memory_total_bytes'] // 2**20} MiB"
        ),
        impact=texts.RULES["memory"],
        diff_kind="ecc",
        paths=("gpus#.memory_total_bytes",),
        metric=Metric("sweep_gpu_memory_total_bytes", "GPU memory size.", "memory_total_bytes"),
        unread=lambda r: r["memory_total_bytes"] is None,
    ),
    Fact(
        name="gpu_count",
        label="GPUs selected",
        scope="host",
        columns=("gpus_selected",),
        render=lambda r: (
            "unknown" if r["gpus_selected"] is None else plural(r["gpus_selected"], "GPU")
        ),
        impact=texts.RULES["gpu_count"],
        diff_kind="gpus",
        paths=("mask.selected",),
        metric=Metric(
            "sweep_host_gpus_selected",
            "GPUs the device mask selects (visible to CUDA).",
            "gpus_selected",
        ),
        contract="device_mask",
        expect=Expect("gpu_count", "equal"),
        unread=lambda r: r["gpus_selected"] is None,
    ),
    Fact(
        name="driver",
        label="Driver",
        scope="host",
        columns=("driver",),
        render=lambda r: r["driver"] or "unknown",
        impact=texts.RULES["driver"],
        diff_kind="driver",
        paths=("driver.version",),
        metric=_DRIVER_INFO,
        contract="driver",
        expect=Expect("driver", "glob"),
        unread=lambda r: not r["driver"],
    ),
    Fact(
        name="cuda_driver",
        label="CUDA (driver)",
        scope="host",
        columns=("cuda_driver",),
        render=lambda r: f"CUDA {r['cuda_driver'] or '?'}",
        impact=texts.RULES["cuda_driver"],
        diff_kind="driver",
        paths=("driver.cuda_driver_version",),
        metric=_DRIVER_INFO,
        contract="driver",
        expect=Expect("cuda_driver", "glob"),
        unread=lambda r: not r["cuda_driver"],
    ),
    Fact(
        name="framework",
        label="Framework build",
        scope="host",
        columns=("torch", "cuda_runtime"),
        render=framework_text,
        impact=texts.RULES["framework"],
        diff_kind="framework",
        paths=("frameworks#.torch_version", "frameworks#.cuda_runtime"),
        metric=Metric.info(
            "sweep_host_framework_info",
            "The framework build the probe found (torch and its CUDA runtime), value 1.",
            ("torch", "torch"),
            ("cuda_runtime", "cuda_runtime"),
        ),
        contract="framework",
    ),
    Fact(
        name="ecc",
        label="ECC",
        scope="gpu",
        columns=("ecc_current", "ecc_pending"),
        render=ecc_text,
        impact=texts.RULES["ecc"],
        diff_kind="ecc",
        paths=("gpus#.ecc.current", "gpus#.ecc.pending_mode"),
        metric=Metric("sweep_gpu_ecc_enabled", "ECC mode now (1 on, 0 off).", "ecc_current"),
        contract="memory",
        expect=Expect("ecc", "equal"),
        unread=lambda r: r["ecc_current"] is None,
    ),
    Fact(
        name="power_limit",
        label="Power limit",
        scope="gpu",
        columns=("power_enforced_w", "power_default_w"),
        render=power_text,
        impact=texts.RULES["power_limit"],
        diff_kind="power",
        paths=("gpus#.power.enforced_limit_w", "gpus#.power.default_limit_w"),
        metric=Metric(
            "sweep_gpu_power_limit_enforced_watts", "Enforced power limit.", "power_enforced_w"
        ),
        contract="power",
        expect=Expect("power_limit_w", "equal", unit="watts"),
        per_gpu=lambda r: as_number(r["power_enforced_w"]) + " W",
        unread=lambda r: r["power_enforced_w"] is None,
    ),  # the default alone says nothing of the cap
    Fact(
        name="mig",
        label="MIG",
        scope="gpu",
        columns=("mig_current", "mig_pending", "mig_layout"),
        render=mig_text,
        impact=texts.RULES["mig"],
        diff_kind="mig",
        paths=("gpus#.mig.current", "gpus#.mig.pending", "gpus#.mig_layout"),
        metric=Metric("sweep_gpu_mig_enabled", "MIG mode now (1 on, 0 off).", "mig_current"),
        contract="layout",
        expect=Expect("mig_layout", "equal"),
        unread=lambda r: r["mig_current"] is None,
    ),
    Fact(
        name="persistence",
        label="Persistence mode",
        scope="gpu",
        columns=("persistence_mode",),
        render=onoff_text("persistence_mode"),
        impact=texts.RULES["persistence"],
        diff_kind="modes",
        paths=("gpus#.persistence_mode",),
        metric=Metric(
            "sweep_gpu_persistence_mode_enabled",
            "Persistence mode (1 on, 0 off).",
            "persistence_mode",
        ),
        contract="layout",
        expect=Expect("persistence", "equal"),
        unread=lambda r: r["persistence_mode"] is None,
    ),
    Fact(
        name="compute_mode",
        label="Compute mode",
        scope="gpu",
        columns=("compute_mode",),
        render=lambda r: r["compute_mode"] or "unknown",
        impact=texts.RULES["compute_mode"],
        diff_kind="modes",
        paths=("gpus#.compute_mode",),
        metric=Metric.info(
            "sweep_gpu_compute_mode_info",
            "The GPU's compute mode (DEFAULT, EXCLUSIVE_PROCESS, PROHIBITED), value 1.",
            ("mode", "compute_mode"),
        ),
        contract="layout",
        unread=lambda r: not r["compute_mode"],
    ),
    Fact(
        name="confidential_compute",
        label="Confidential computing",
        scope="host",
        columns=("confidential_compute",),
        render=onoff_text("confidential_compute", "not reported"),
        impact=texts.RULES["confidential_compute"],
        diff_kind="modes",
        paths=("driver.confidential_compute",),
        metric=Metric(
            "sweep_host_confidential_compute_enabled",
            "Confidential computing (1 on, 0 off).",
            "confidential_compute",
        ),
    ),
    Fact(
        name="clock_policy",
        label="Clock policy",
        scope="gpu",
        columns=("app_sm_mhz", "default_app_sm_mhz", "sm_max_mhz"),
        render=clocks_text,
        impact=texts.RULES["clock_policy"],
        diff_kind="clock policy",
        paths=("gpus#.clocks.app_sm_mhz", "gpus#.clocks.default_app_sm_mhz"),
        metric=Metric(
            "sweep_gpu_application_sm_clock_hertz",
            "Application SM clock setting.",
            "app_sm_mhz",
            1e6,
        ),
        contract="clocks",
        unread=texts.clocks_unread,
    ),  # "default" only where the clocks say so
    Fact(
        name="link",
        label="Worst link",
        scope="host",
        columns=("worst_link", "gpus_selected"),
        render=link_text,
        impact=texts.RULES["link"],
        diff_kind="topology",
        paths=("topology.worst_link_selected",),
        metric=Metric.info(
            "sweep_host_worst_link_info",
            "The worst link between the selected GPUs (nvidia-smi topo -m: NV#, "
            "PIX, PXB, PHB, NODE, SYS), value 1.",
            ("link", "worst_link"),
        ),
        contract="topology",
        expect=Expect("worst_link", "equal"),
        unread=lambda r: (
            r["worst_link"] is None
            and not (r["gpus_selected"] is not None and r["gpus_selected"] < 2)
        ),
    ),
    Fact(
        name="gpus_present",
        label="GPUs present",
        scope="host",
        columns=("gpu_count", "gpus_on_bus"),
        render=present_text,
        impact=texts.RULES["gpus_present"],
        diff_kind="gpus",
        paths=("driver.gpu_count",),
        metric=Metric(
            "sweep_host_gpus_on_bus",
            "NVIDIA GPUs on the PCI bus (compare with the driver's count).",
            "gpus_on_bus",
        ),
        contract="driver",
        expect=Expect("gpus", "equal"),
        unread=lambda r: r["gpu_count"] is None,
    ),
    Fact(
        name="pcie",
        label="PCIe link",
        scope="gpu",
        columns=("pcie_max_gen", "pcie_width"),
        render=pcie_text,
        impact=texts.RULES["pcie"],
        diff_kind="links",
        paths=("gpus#.pcie.max_gen", "gpus#.pcie.width"),
        metric=Metric(
            "sweep_gpu_pcie_link_width", "Trained PCIe link width (lanes).", "pcie_width"
        ),
        expect=Expect("pcie", "equal"),
        unread=lambda r: r["pcie_width"] is None,
    ),
    Fact(
        name="nvlinks",
        label="NVLinks active",
        scope="gpu",
        columns=("nvlink_links", "nvlink_active", "nvlink_error"),
        render=nvlinks_text,
        impact=texts.RULES["nvlinks"],
        diff_kind="links",
        paths=("gpus#.nvlink.links", "gpus#.nvlink.active"),
        metric=Metric("sweep_gpu_nvlinks_active", "NVLinks up.", "nvlink_active"),
        unread=texts.nvlinks_unread,
    ),  # "none" only where NVML says the GPU has no NVLink
    Fact(
        name="ib_rate",
        label="IB/RoCE rate",
        scope="host",
        columns=("ib_rates", "ib_slowest_gbps", "ib_fastest_gbps"),
        render=lambda r: r["ib_rates"] or "not read",
        impact=texts.RULES["ib_rate"],
        diff_kind="host settings",
        paths=("host_settings.ib_ports#.rate*", "host_settings.ib_ports#.state"),
        metric=Metric.info(
            "sweep_host_ib_rate_info",
            "The rates of the host's active InfiniBand / RoCE ports, value 1.",
            ("rates", "ib_rates"),
        ),
        contract="host",
        expect=Expect("ib_rate_gbps", "equal", unit="Gb/s"),
        reads={
            "ib_slowest_gbps": ("Float64", lambda h: port_rate(h, min)),
            "ib_fastest_gbps": ("Float64", lambda h: port_rate(h, max)),
        },
        unread=lambda r: r["ib_rates"] is None,
    ),  # None: the ports were not read ("no active port" is a reading)
    Fact(
        name="cpu_governor",
        label="CPU governor",
        scope="host",
        columns=("cpu_governor", "cpufreq_exposed"),
        render=governor_text,
        impact=texts.RULES["cpu_governor"],
        diff_kind="host settings",
        paths=("host_settings.cpu_governor*",),
        metric=Metric.info(
            "sweep_host_cpu_governor_info",
            "The CPU frequency governors of the host, value 1.",
            ("governor", "cpu_governor"),
        ),
        contract="host",
        expect=Expect("cpu_governor", "glob"),
        unread=texts.governor_unread,
    ),  # "not exposed" (no cpufreq in sysfs) is a reading
)
FACTS: tuple[Fact, ...] = CONFIGURATION_FACTS + PLATFORM_FACTS + SPEED_FACTS


def derived(table: tuple) -> dict:
    """The views of a fact table that consumers iterate, by the module attribute each is (a test
    that declares another fact sets them all)."""
    return {
        "FACTS": tuple(table),
        "BY_NAME": {f.name: f for f in table},
        "LABELS": {f.name: f.label for f in table},  # every fact's label, in the table's order
        # the comparability keys: they split the fleet
        "COMPARED": {f.name: f.label for f in table if f.compares},
        "GPU_FACTS": tuple(f for f in table if f.scope == "gpu"),
        "HOST_FACTS": tuple(f for f in table if f.scope == "host"),
        # columns a fact reads from a health document itself: name -> (dtype, reader), by scope
        "GPU_READS": {c: spec for f in table if f.scope == "gpu" for c, spec in f.reads.items()},
        "HOST_READS": {c: spec for f in table if f.scope == "host" for c, spec in f.reads.items()},
    }


_VIEWS = derived(FACTS)
BY_NAME: dict = _VIEWS["BY_NAME"]
LABELS: dict = _VIEWS["LABELS"]
COMPARED: dict = _VIEWS["COMPARED"]
GPU_FACTS: tuple = _VIEWS["GPU_FACTS"]
HOST_FACTS: tuple = _VIEWS["HOST_FACTS"]
GPU_READS: dict = _VIEWS["GPU_READS"]
HOST_READS: dict = _VIEWS["HOST_READS"]


def impact_of(key: str, value: str, reference: str, rows=(), ref_rows=()) -> str:
    """What a host with `value` for `key` suffers or gains against `reference` (the fact's impact
    rules, judging the typed `rows` behind each side: one per distinct value of its GPUs)."""
    fact = BY_NAME[key]
    return texts.impact(
        key, value, reference, fact.impact, rows, ref_rows, fact.unread or _every_row_read
    )


def _every_row_read(_row) -> bool:
    """The "not read" test of a fact whose text says what a gap means ("not recorded"): every row
    is read."""
    return False


def signature(dtypes: dict) -> str:
    """What the table declares, for caches built from it (the history index): each fact's name,
    scope, history treatment, columns and their dtypes (`dtypes`: column -> dtype of the fleet
    frames)."""
    return ";".join(
        f"{f.name}/{f.scope}/{f.history}/{int(f.compares)}/"
        + ",".join(f"{c}:{dtypes.get(c, '')}" for c in f.columns)
        for f in FACTS
    )


def own_paths() -> list:
    """(kind, paths) of the facts the frames read through the table itself (`reads`): the audit
    field tables put them first, so that their kind is the table's."""
    return [(f.diff_kind, f.paths) for f in FACTS if f.reads and f.history == "value"]


def path_labels() -> dict:
    """A GPU-relative or host path of a fact (as audits name a changed field) -> the fact's
    label."""
    return {
        p.removeprefix("gpus#."): f.label
        for f in FACTS
        if f.reads and f.history == "value"
        for p in f.paths
    }
