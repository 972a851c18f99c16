"""Who owns each cause the verdict holds against a host, and what that owner's cause does: the one
table.

A host out of the pool is not always a faulty node. Each verdict entry
(`sweep.analysis.verdict.Entry`) names one cause; `owner_of` says whose it is, from `CAUSES` (the
finding kind, else the contract, else the entry's source), and `OWNERS` says what follows:

    node        hardware, driver, firmware, fabric, an Xid or a speed figure that needs a repair, HW
                slowdown: broken, drained with the cause and its fix
    config      the node's configuration (power cap, ECC mode, MIG layout, persistence, clocks, host
                settings, a driver that differs from the fleet's or the expectations'): out of the
                pool and named with its fix; drained only when the operator asks
                (``--drain-config``), since a policy change is not a fault
    probe_env   the environment the probe ran in (the SSH session's device mask, the login shell's
                Python and its framework build): the host is not judged by it (a Slurm job gets its
                own mask from gres and usually its own Python); never drained; probe the job's
                environment instead
    busy        processes of a running Slurm job: out of the pool as busy, never drained; probed
                again by ``sweep run --retry-failed busy`` or a later sweep
    process     processes of no job holding the GPUs: held out, named with pid and user; not drained
                (draining stops no process: its owner does)

Every view that decides whether a host is drained (`drain_hosts`, the scripts, summary.json's
"owners") reads this module; nothing else names an owner.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweep.analysis.names import host_key
from sweep.analysis.verdict import Entry, Verdict, cause_key


@dataclass(frozen=True)
class Owner:
    """What a cause of one owner does to a host."""

    name: str
    label: str  # who owns it, as a sentence says it
    drain: str  # "always", "asked" (--drain-config), "never"
    action: str  # what the report says to do, beside the cause's own fix


PROBE_ENV_FIX = (
    "the probe ran in the SSH session's environment, not a job's: probe the job's "
    "environment with the "
    "Slurm engine (sweep run --engine slurm), the job's interpreter per group "
    "(sweep_interpreters in "
    "the inventory), or the agent from a prolog / HealthCheckProgram (docs/slurm.md)"
)

OWNERS = {
    o.name: o
    for o in (
        Owner(
            "node",
            "the node",
            "always",
            "drain it, repair it, probe it again, then resume it (resume.sh)",
        ),
        Owner(
            "config",
            "the node's configuration",
            "asked",
            "out of the pool: apply the fix, or record the intended value in the "
            "expectations file; drained only "
            "with --drain-config",
        ),
        Owner("probe_env", "the probe's environment", "never", PROBE_ENV_FIX),
        Owner(
            "busy",
            "a running job",
            "never",
            "out of the pool while the job runs: sweep run --retry-failed busy probes it again",
        ),
        Owner(
            "process",
            "a process of no job",
            "never",
            "held out: stop the process (its pid and user are named), then probe again",
        ),
    )
}

# cause -> owner: a health finding's kind, a contract's name, or an entry's source, looked up in
# that order
CAUSES = {
    # findings
    "busy": "busy",
    "foreign_process": "process",
    "probe_env": "probe_env",
    "persistence_off": "config",
    "ecc_pending": "config",
    "mixed_gpus": "config",
    "host_settings": "config",
    "hw_slowdown": "node",
    "hw_thermal_slowdown": "node",
    "hw_power_brake": "node",
    "sw_thermal_slowdown": "node",
    "row_remap_failure": "node",
    "uncorrected_ecc": "node",
    "row_remap_pending": "node",
    "links": "node",
    "fabric_not_ready": "node",
    "thermal_headroom": "node",
    "xid": "node",
    "probe_incomplete": "node",
    # contracts (the lowest broken contract's finding, and the contract an entry is about)
    # HW slowdown
    "driver": "node",
    "fabric": "node",
    "memory": "node",
    "thermal": "node",
    "clocks": "node",
    "power": "config",
    "layout": "config",
    "topology": "config",
    "host": "config",
    "device_mask": "probe_env",
    "framework": "probe_env",
    "processes": "process",
    # sources
    "speed": "node",
    "audit": "config",
    "reach": "node",
    "tier": "node",
    "contract": "node",
}


def owner_of(entry: Entry) -> str:
    """The owner of one entry's cause (`OWNERS`'s name)."""
    for key in (
        entry.finding if entry.finding != "lowest_broken" else None,
        entry.contract,
        entry.about,
        entry.source,
    ):
        if key in CAUSES:
            return CAUSES[key]
    return "node"


def _drains(owner: str, drain_config: bool) -> bool:
    rule = OWNERS[owner].drain
    return rule == "always" or (rule == "asked" and drain_config)


def causes(verdict: Verdict, host: str) -> list[Entry]:
    """The entries that keep `host` out of the pool: broken, or holding it out."""
    return [e for e in verdict.of(host) if e.severity == "broken" or e.holds_out]


def drain_entries(verdict: Verdict, host: str, drain_config: bool = False) -> list[Entry]:
    """The entries of `host` its owner drains it for (empty: not drained)."""
    return [e for e in causes(verdict, host) if _drains(owner_of(e), drain_config)]


def drain_hosts(verdict: Verdict, drain_config: bool = False) -> list[str]:
    """The hosts to drain: held out or broken (`Verdict.drain_candidates`) for a cause whose owner
    drains."""
    return [h for h in verdict.drain_candidates if drain_entries(verdict, h, drain_config)]


def held_back(verdict: Verdict, drain_config: bool = False) -> list[dict]:
    """The hosts out of the pool and not drained (busy, held out or broken by a cause that is not
    the node's), and the hosts judged on NVML whose probe ran in a login session's broken mask or
    framework (an entry of finding "probe_env": in the pool or a class, named with how to probe the
    job's environment), each once, with the owner of its cause (`Verdict.cause`), the cause and its
    fix: {"host", "owner", "label", "key", "cause", "fix", "action"}."""
    drained = set(drain_hosts(verdict, drain_config))
    # judged on NVML, in the pool or a class
    env = {e.host for e in verdict.entries if e.finding == "probe_env"}
    out = []
    for host in sorted({*verdict.drain_candidates, *verdict.hosts_in("busy"), *env}, key=host_key):
        items = causes(verdict, host) or [e for e in verdict.of(host) if e.finding == "probe_env"]
        if host in drained or not items:
            continue
        cause = verdict.cause(host)
        first = cause if cause in items else items[0]  # the verdict's one cause of the host
        owner = OWNERS[owner_of(first)]
        out.append(
            {
                "host": host,
                "owner": owner.name,
                "label": owner.label,
                "key": cause_key(first),
                "cause": first.cause,
                "fix": first.fix,
                "action": owner.action,
            }
        )
    return out
