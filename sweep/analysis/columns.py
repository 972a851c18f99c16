"""The columns of the fleet's frames, each with its pandas dtype: one table per frame (hosts, GPUs,
contracts, foreign processes), in the frames' column order.

`sweep.analysis.fleet` builds the frames from these; `sweep.analysis.rows` reduces one health.json
to rows in the same order. A fact of the fact table (`sweep.analysis.facts`) brings its own column.
"""

from __future__ import annotations

from sweep.analysis.facts import GPU_READS, HOST_READS

# column -> dtype; the order is the frames' column order
HOST_COLUMNS = {
    "host": "string",
    "groups": "category",
    "source": "string",
    "status": "category",
    "failure_class": "category",
    "failure_message": "string",
    "attempts": "Int64",
    "duration_s": "Float64",
    "address": "string",
    "hostname": "string",
    "probe_complete": "boolean",
    "probe_mode": "category",
    "driver": "category",
    "cuda_driver": "category",
    "nvml_error": "category",
    "gpu_count": "Int64",
    "confidential_compute": "boolean",
    "mask_state": "category",
    "cuda_visible_devices": "category",
    "gpus_selected": "Int64",
    "gpu_model": "category",
    "torch": "category",
    "cuda_runtime": "category",
    "framework_status": "category",
    "worst_link": "category",
    "lowest_broken": "category",
    "verdict": "category",
    "lowest_message": "category",
    "lowest_fix": "category",
    "summary": "category",
    "provenance": "string",
    "gpus_on_bus": "Int64",
    "gpus_missing": "string",
    "cpu_governor": "category",
    # False: sysfs exposes no cpufreq at all (a VM; scaling left to the firmware)
    "cpufreq_exposed": "boolean",
    "ib_rates": "category",
    "ib_ports_down": "Int64",
    # the speed tier (health.json speed, schema 1.4): its status, why, and the fields rejected as no
    # measurement
    "speed_status": "category",
    "speed_reason": "string",
    "speed_rejected": "string",
    "speed_forced": "boolean",
    "speed_skipped": "string",
    "speed_contended": "string",
    # why a --load did not measure (its exit code, its error, no sample under load)
    "load_problem": "string",
    # where the probe ran (`probed_in`): "login" (an SSH / ansible login session), "job" (a Slurm
    # job step), NA (not said: a plain health.json, a record without its run's manifest); and
    # whether the framework was read with an interpreter the operator named (sweep_interpreters /
    # --python), not the login python3
    "probed_in": "category",
    "interpreter_named": "boolean",
    # the worst link among every GPU NVML lists, whatever the mask selects
    "worst_link_nvml": "category",
    **{column: dtype for column, (dtype, _) in HOST_READS.items()},  # the fact table's own columns
}
GPU_COLUMNS = {
    "host": "category",
    "index": "Int64",
    "selected": "boolean",
    "uuid": "string",
    "name": "category",
    "pci_bus_id": "category",
    "memory_total_bytes": "Int64",
    "power_enforced_w": "Float64",
    "power_default_w": "Float64",
    "power_max_w": "Float64",
    "power_draw_w": "Float64",
    "ecc_current": "boolean",
    "ecc_pending": "boolean",
    "ecc_volatile_uncorrected": "Int64",
    "sm_mhz": "Int64",
    "sm_max_mhz": "Int64",
    "app_sm_mhz": "Int64",
    "default_app_sm_mhz": "Int64",
    "reasons_active": "category",
    "idle": "boolean",
    "hw_slowdown": "boolean",
    "hw_thermal_slowdown": "boolean",
    "hw_power_brake_slowdown": "boolean",
    "sw_thermal_slowdown": "boolean",
    "temperature_c": "Float64",
    "mig_current": "boolean",
    "mig_pending": "boolean",
    "mig_layout": "category",
    "persistence_mode": "boolean",
    "compute_mode": "category",
    "processes": "Int64",
    "process_names": "string",
    "remap_pending": "boolean",
    "remap_failure": "boolean",
    "retired_pages_pending": "boolean",
    # medians while the probe's --load ran (health.json load.summary); NA for a probe taken idle
    "sm_load_mhz": "Float64",
    "load_power_w": "Float64",
    "load_limit_w": "Float64",
    "load_sw_power_cap": "Float64",
    "load_hw_slowdown": "Float64",
    "pcie_gen": "Int64",
    "pcie_width": "Int64",
    "pcie_max_gen": "Int64",
    "pcie_max_width": "Int64",
    "pcie_replays": "Int64",
    "nvlink_links": "Int64",
    "nvlink_active": "Int64",
    "nvlink_errors": "Int64",
    # why no NVLink answered a state (NVMLError_NotSupported: the GPU has none)
    "nvlink_error": "category",
    "fabric_state": "category",
    "memory_temperature_c": "Float64",
    "memory_max_c": "Float64",
    # the envelope sampled during the speed tier (medians; NA where the tier did not run)
    "speed_sm_mhz": "Float64",
    "speed_power_w": "Float64",
    "speed_limit_w": "Float64",
    "speed_sw_power_cap": "Float64",
    "speed_hw_slowdown": "Float64",
    **{column: dtype for column, (dtype, _) in GPU_READS.items()},  # the fact table's own columns
}
CONTRACT_COLUMNS = {
    "host": "category",
    "position": "Int64",
    "contract": "category",
    "title": "category",
    "status": "category",
    "message": "category",
    "fix": "category",
    "consequence_of": "category",
}
# a contract's row: its host's position, its position in the chain, then (column, key of the
# contract)
CONTRACT_FIELDS = (
    ("contract", "name"),
    ("title", "title"),
    ("status", "status"),
    ("message", "message"),
    ("fix", "fix"),
    ("consequence_of", "consequence_of"),
)
CONTRACT_ROW = ("host", "position", *(column for column, _ in CONTRACT_FIELDS))
CONTRACT_KEYS = tuple(key for _, key in CONTRACT_FIELDS)


PROCESS_COLUMNS = {
    "host": "category",
    "gpu": "Int64",
    "pid": "Int64",
    "name": "string",
    "used_memory_bytes": "Int64",
    # the Slurm job it belongs to (health.json 1.7), or <NA>
    "user": "string",
    "job": "string",
    "job_user": "string",
}
