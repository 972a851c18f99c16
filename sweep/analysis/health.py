"""The health findings of a loaded Fleet, kept apart from comparability.

Per host: unreachability, the lowest broken contract, an incomplete probe, GPU faults and pending
changes, foreign processes, and selected GPUs that differ within the host. They read the
comparability keys `sweep.analysis.keys` makes; `sweep.analysis.compare.compare()` gathers them
into its `Findings`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from probe_agent.chain import CONTRACTS
from probe_agent.contracts import BUSY_FIX
from sweep.analysis.fleet import rows_at
from sweep.analysis import facts as fact_table
from sweep.analysis.keys import as_number, as_text
from sweep.analysis.names import fold_numbers
from sweep.failures import fix_for
from sweep.text import plural


@dataclass(frozen=True)
class Finding:
    """A health fact about one host, apart from comparability. severity: broken,
    warning, unreachable."""

    host: str
    kind: str
    severity: str
    title: str
    detail: str
    fix: str | None = None
    contract: str | None = None

    @property
    def message(self) -> str:
        """The finding as a user reads it: host, what, where."""
        return f"{self.host}: {self.detail}"

    def to_dict(self) -> dict:
        # flat: no deep copy
        return dict({f.name: getattr(self, f.name) for f in fields(self)}, message=self.message)


GPU_FINDINGS = (  # (GPU column, kind, severity, title, what, fix)
    (
        "hw_slowdown",
        "hw_slowdown",
        "broken",
        "HW slowdown",
        "HW slowdown active",
        "check the host's power delivery and cooling (PSU, fans, inlet temperature)",
    ),
    (
        "hw_thermal_slowdown",
        "hw_thermal_slowdown",
        "broken",
        "HW thermal slowdown",
        "HW thermal slowdown active",
        "check fans, airflow and inlet temperature; the GPU is too hot for its clocks",
    ),
    (
        "hw_power_brake_slowdown",
        "hw_power_brake",
        "broken",
        "HW power brake",
        "HW power brake active",
        "the chassis asserts the power-brake signal: check PSUs and the rack's power budget",
    ),
    (
        "sw_thermal_slowdown",
        "sw_thermal_slowdown",
        "warning",
        "SW thermal slowdown",
        "SW thermal slowdown active",
        "check cooling; the driver lowers clocks to stay below the slowdown temperature",
    ),
    (
        "remap_failure",
        "row_remap_failure",
        "broken",
        "Row remapping failed",
        "row remapping failed",
        "drain the host and replace or RMA the card",
    ),
    (
        "uncorrected",
        "uncorrected_ecc",
        "broken",
        "Uncorrected ECC errors",
        "uncorrected ECC errors since reset",
        "drain the host and have the card checked (nvidia-smi -q -d ECC)",
    ),
    (
        "remap_pending",
        "row_remap_pending",
        "warning",
        "Row remap pending",
        "a row remap is pending",
        "reset the GPU (or reboot) to apply the remap",
    ),
    (
        "ecc_change",
        "ecc_pending",
        "warning",
        "ECC change pending",
        "ECC mode change pending",
        "reset the GPU or reboot to apply it, or revert with nvidia-smi -e",
    ),
    (
        "persistence_off",
        "persistence_off",
        "warning",
        "Persistence mode off",
        "persistence mode off",
        "nvidia-smi -pm 1, or run nvidia-persistenced",
    ),
)


def health_findings(fleet, hosts, keys, mixed, probe_env=frozenset()) -> tuple[Finding, ...]:
    """Per host: the lowest broken contract, GPU faults, foreign processes, pending
    changes, unreachability.
    `probe_env`: the hosts whose lowest broken contract judged only the login session the probe
    ran in (`sweep.analysis.compare.probe_env_only`): it is a warning of kind "probe_env", not
    the host's fault."""
    out = _host_findings(hosts, probe_env) + _gpu_findings(fleet) + _process_findings(fleet)
    out += _mixed_gpu_findings(mixed, keys)
    order = {"unreachable": 0, "broken": 1, "warning": 2}
    return tuple(
        sorted(
            out + _platform_findings(fleet, hosts),
            key=lambda f: (order[f.severity], f.kind, f.host),
        )
    )


def _host_findings(hosts, probe_env) -> list[Finding]:
    """Of each host as a whole: unreachable, its lowest broken contract (a warning where only the
    probe's login session broke it), its probe incomplete."""
    out = []
    failed = hosts[hosts["status"] != "ok"]
    out += [
        Finding(
            h,
            "unreachable",
            "unreachable",
            "Unreachable",
            f"{r.failure_class}: {as_text(r.failure_message) or 'no health.json'}",
            fix_for(r.failure_class),
        )
        # 2 columns, not all
        for h, r in zip(failed.index, failed[["failure_class", "failure_message"]].itertuples())
    ]
    broken = hosts[hosts["lowest_broken"].notna()]
    out += [
        Finding(
            h,
            "lowest_broken",
            "broken",
            f"Lowest broken contract: {r.lowest_broken}",
            as_text(r.lowest_message) or "",
            as_text(r.lowest_fix),
            str(r.lowest_broken),
        )
        if h not in probe_env
        else Finding(
            h,
            "probe_env",
            "warning",
            f"The probe's environment, not a job's: {r.lowest_broken}",
            as_text(r.lowest_message) or "",
            as_text(r.lowest_fix),
            str(r.lowest_broken),
        )
        for h, r in zip(broken.index, broken.itertuples())
    ]
    incomplete = hosts[hosts["probe_complete"].eq(False).fillna(False)]
    out += [
        Finding(
            h,
            "probe_incomplete",
            "warning",
            "Probe incomplete",
            "the probe stopped early: some facts are missing",
            "probe again with a longer --deadline",
        )
        for h in incomplete.index
    ]
    return out


def _gpu_findings(fleet) -> list[Finding]:
    """GPU_FINDINGS of each host, one finding a host and kind, its GPUs folded ("GPU 0-3")."""
    out = []
    g = fleet.gpus
    flags = _gpu_flags(g)
    for column, kind, severity, title, what, fix in GPU_FINDINGS:
        hit = flags[column].fillna(False).to_numpy(dtype=bool)
        if not hit.any():
            continue
        rows = rows_at(g, np.flatnonzero(hit))  # only the GPUs concerned
        # host -> what is said of a GPU -> the GPUs it is said of: "GPU 0-3", not
        # "GPU 0; GPU 1; ..."
        per_host = {}
        for r in rows:
            said = (
                f" (SM {r['sm_mhz']} of {r['sm_max_mhz']} MHz, {as_number(r['temperature_c'])} C)"
                if kind.startswith(("hw_", "sw_"))
                else ""
            )
            per_host.setdefault(r["host"], {}).setdefault(said, []).append(r["index"])
        out += [
            Finding(
                h,
                kind,
                severity,
                title,
                f"{what} on "
                + "; ".join(f"GPU {fold_numbers(ix)}{said}" for said, ix in d.items()),
                fix,
            )
            for h, d in per_host.items()
        ]
    return out


def _mixed_gpu_findings(mixed, keys) -> list[Finding]:
    """Hosts whose selected GPUs differ among themselves in a fact that should be alike."""
    out = []
    # not measured figures, and not what each GPU has its own of by design (its
    # CPUs, its nearest NIC)
    mixed = mixed[
        [
            k
            for k in mixed.columns
            if fact_table.BY_NAME[k].history == "value" and fact_table.BY_NAME[k].alike
        ]
    ]
    mixed_hosts = mixed[mixed.any(axis=1)]
    for h, row in mixed_hosts.iterrows():  # rare: hosts whose selected GPUs differ among themselves
        differ = [k for k in mixed_hosts.columns if row[k]]
        # "700 W x7, 250 W x1 (GPU 3)"
        parts = [f"{fact_table.BY_NAME[k].label} {keys.at[h, k]}" for k in differ]
        out.append(
            Finding(
                h,
                "mixed_gpus",
                "warning",
                "GPUs differ within the host",
                "the selected GPUs differ: " + "; ".join(parts),
                "make the cards alike (power limit, ECC, MIG, clocks) or mask out the odd one",
                fact_table.BY_NAME[differ[0]].contract if len(differ) == 1 else None,
            )
        )
    return out


def _process_findings(fleet) -> list[Finding]:
    """Per host, its foreign processes: "busy" when every one belongs to a running Slurm
    job (the node runs a
    job: not a fault), else "foreign_process" (a process of no job holding memory), each
    with pid and user."""
    per_host, jobs = {}, {}
    # one row per foreign process
    for p in rows_at(fleet.processes, np.arange(len(fleet.processes))):
        used = "?" if p["used_memory_bytes"] is None else p["used_memory_bytes"] // 2**20
        user = f", user {p['user']}" if p.get("user") else ""
        per_host.setdefault(p["host"], []).append(
            f"{p['name']} (pid {p['pid']}{user}, {used} MiB) on GPU {p['gpu']}"
        )
        job = (
            f"job {p['job']} (user {p.get('job_user') or p.get('user') or '?'})"
            if p.get("job")
            else None
        )
        jobs.setdefault(p["host"], []).append(job)
    out = []
    for h, items in per_host.items():
        if all(jobs[h]):
            said = list(dict.fromkeys(jobs[h]))
            out.append(
                Finding(
                    h,
                    "busy",
                    "warning",
                    "Busy: running a job",
                    "busy: "
                    + ", ".join(said[:5])
                    + (f" and {len(said) - 5} more" if len(said) > 5 else "")
                    + ": "
                    + ", ".join(items[:5]),
                    BUSY_FIX,
                    "processes",
                )
            )
            continue
        out.append(
            Finding(
                h,
                "foreign_process",
                "warning",
                "Foreign processes",
                f"{plural(len(items), 'other process', 'other processes')} on the GPUs: "
                f"{', '.join(items[:5])}"
                + (f" and {len(items) - 5} more" if len(items) > 5 else ""),
                "stop them, or benchmark elsewhere: they take memory and SM time",
                "processes",
            )
        )
    return out


def _gpu_flags(g) -> dict:
    """GPU column of GPU_FINDINGS -> which GPUs (rows of fleet.gpus) it is said of."""
    # NVML sets HW slowdown beside its cause (HW thermal slowdown, HW power brake): one line per
    # cause, so the generic line (and its generic fix) is said only of a GPU whose slowdown names
    # no cause (issue 41)
    caused = g["hw_thermal_slowdown"].fillna(False).astype(bool) | g[
        "hw_power_brake_slowdown"
    ].fillna(False).astype(bool)
    return {
        "hw_slowdown": g["hw_slowdown"].fillna(False).astype(bool) & ~caused,
        "hw_thermal_slowdown": g["hw_thermal_slowdown"],
        "hw_power_brake_slowdown": g["hw_power_brake_slowdown"],
        "sw_thermal_slowdown": g["sw_thermal_slowdown"],
        "remap_failure": g["remap_failure"],
        "remap_pending": g["remap_pending"],
        "uncorrected": g["ecc_volatile_uncorrected"] > 0,
        "ecc_change": g["ecc_pending"] != g["ecc_current"],
        "persistence_off": ~g["persistence_mode"],
    }


# Contracts whose broken or warning state is a finding of its own (the lowest broken contract
# already has one): kind, title, from the agent's contract table.
PLATFORM_CONTRACTS = {c.name: c.finding for c in CONTRACTS if c.finding}


def _platform_findings(fleet, hosts) -> list[Finding]:
    c = fleet.contracts
    hit = c["contract"].isin(list(PLATFORM_CONTRACTS)) & c["status"].isin(["broken", "warning"])
    lowest = dict(zip(hosts.index, hosts["lowest_broken"].astype(object)))
    out = []
    for r in rows_at(c, np.flatnonzero(hit.to_numpy(dtype=bool))):
        if r["consequence_of"] is not None or lowest.get(r["host"]) == r["contract"]:
            continue  # a consequence is no clue; the lowest broken contract has its finding already
        kind, title = PLATFORM_CONTRACTS[r["contract"]]
        out.append(
            Finding(r["host"], kind, r["status"], title, r["message"], r["fix"], r["contract"])
        )
    return out
