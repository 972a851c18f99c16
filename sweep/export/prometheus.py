"""A run folder as Prometheus metrics for node_exporter's textfile collector
(`sweep export prometheus`).

One series per host (label `host`) or GPU (`host`, `gpu` = the NVML index); nothing with a
high-cardinality label (no UUID, serial, PCI id, timestamp or message text). Versions, the GPU
model, groups and the comparability class are `_info` metrics (value 1, the text in a label).
Units are Prometheus' base units: `_watts`, `_celsius`, `_hertz` (the probe's MHz times 10^6),
`_seconds`, `_ratio`. Booleans are 0/1 gauges. A value the probe could not read is not exported.
A host whose record gives two GPUs the same index (no NVML does; a modified agent or an edited
record may) keeps both: those GPUs also carry `gpu_position`, their place in the record's list,
so neither series overwrites the other.

Metric names are listed in `FAMILIES` (docs/prometheus.md); `sweep.export.rules` alerts on
them. Every fact of the fact table (`sweep.analysis.facts`) is exported by its own declared
metric, from the fleet frames' typed columns: a gauge of one column, or an `_info` metric with
the columns as labels; the rest (draw, clocks, temperatures, load medians, contracts) are
readings of the health.json.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path

from probe_agent.chain import STATUS_NAMES
from sweep.analysis import facts as fact_table
from sweep.judgment import Assessment, assess
from sweep.analysis.load_record import load_summary
from sweep.analysis.owners import drain_hosts
from sweep.analysis.verdict import STATES, cause_key
from sweep.export.textfile import Metrics, write_output
from sweep.analysis.fleet import Fleet, load_fleet, rows_at
from sweep.store import load_run
from sweep.trust import signed

MHZ = 1e6
CONTRACT_STATES = STATUS_NAMES  # the agent's contract table
REASONS = (
    "idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
)
FAMILIES = {
    "sweep_run_timestamp_seconds": "When the sweep run started (Unix time).",
    "sweep_run_hosts": "Hosts of the run by outcome (ok, failed, pending).",
    "sweep_host_up": "1 when the host answered the sweep with a health record, 0 when it failed.",
    "sweep_host_failure_info": "Why a host failed (failure_class), value 1.",
    "sweep_host_group_info": "Inventory groups of the host, value 1.",
    "sweep_host_contract_status": (
        "State of each contract of the host: 1 for the current status, 0 for the others."
    ),
    "sweep_host_comparability_class_info": (
        "The host's comparability class (A is the reference), value 1."
    ),
    "sweep_host_in_reference_class": "1 when the host is in the reference comparability class.",
    "sweep_host_state": (
        "The host's state in the verdict (pool, held_out, broken, other_class, "
        "cannot_run, unreachable, busy): 1 for its state, 0 for the others."
    ),
    "sweep_host_to_drain": (
        "1 when the verdict drains the host: held out or broken for a cause the "
        "node owns (a fault, not its configuration, the probe's environment, a job or a process)."
    ),
    "sweep_host_cause_info": (
        "The one cause the verdict gives a host kept out or warned (its "
        "contract, figure or tier: thermal, xid, speed, processes...) and its severity, value 1."
    ),
    "sweep_gpu_ecc_pending_enabled": "ECC mode after the next reset (1 on, 0 off).",
    "sweep_gpu_power_limit_default_watts": "Default power limit.",
    "sweep_gpu_power_draw_watts": "Power draw when probed.",
    "sweep_gpu_mig_pending_enabled": "MIG mode after the next reset (1 on, 0 off).",
    "sweep_gpu_sm_clock_hertz": "SM clock when probed.",
    "sweep_gpu_sm_clock_max_hertz": "Maximum SM clock.",
    "sweep_gpu_temperature_celsius": "GPU temperature when probed.",
    "sweep_gpu_clock_event_reason_active": (
        "1 when the clock-event (throttle) reason is active, else 0."
    ),
    "sweep_gpu_load_sm_clock_median_hertz": "Median SM clock under the probe's --load.",
    "sweep_gpu_load_power_median_watts": "Median power draw under the probe's --load.",
    "sweep_gpu_load_sw_power_cap_ratio": "Fraction of --load samples with SW power cap active.",
    "sweep_gpu_load_hw_slowdown_ratio": (
        "Fraction of --load samples with a HW slowdown reason active."
    ),
    # each fact's own metric
    **{f.metric.name: f.metric.help for f in fact_table.FACTS if f.metric},
}


def _epoch(text) -> float | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _mul(value, factor):
    return None if value is None else value * factor


def metrics_text(run_dir: str | Path) -> str:
    """The node_exporter textfile of one run folder."""
    run = load_run(run_dir)
    m = Metrics()
    for name, help_text in FAMILIES.items():
        m.family(name, help_text)
    m.add("sweep_run_timestamp_seconds", _epoch(run.manifest.get("started_at")))
    listed = run.listed
    ok = [
        h
        for h, r in run.records.items()
        if r.get("status") == "ok" and isinstance(r.get("health"), dict)
    ]
    m.add("sweep_run_hosts", len(ok), outcome="ok")
    m.add("sweep_run_hosts", len(run.records) - len(ok), outcome="failed")
    m.add("sweep_run_hosts", len([h for h in listed if h not in run.records]), outcome="pending")
    # the report's judgment: the same call, the run's own report options
    judged = _assess(run) if ok else None
    classes = _classes(judged.findings) if ok else {}
    for host, rec in run.records.items():
        for group in rec.get("groups") or ():
            m.add("sweep_host_group_info", 1, host=host, group=group)
        health = rec.get("health") if rec.get("status") == "ok" else None
        m.add("sweep_host_up", isinstance(health, dict), host=host)
        if not isinstance(health, dict):
            m.add(
                "sweep_host_failure_info",
                1,
                host=host,
                failure_class=(rec.get("failure") or {}).get("class") or "unknown",
            )
            continue
        _host(m, host, health, classes.get(host))
    if judged is not None:
        _facts(m, judged.fleet)
        _states(m, judged)
    return m.text()


def _assess(run) -> Assessment:
    """The run folder judged as `sweep run` reported it: its reference, expectations file and
    baseline (the manifest's options), so that the states and causes exported are the report's."""
    # a manifest this user's sweep did not sign names files someone else chose: none of them is
    # opened (docs/security.md); its run is judged without them, as a plain report of it would be
    options = (run.manifest.get("options") or {}) if signed(run.manifest) else {}
    expect, baseline = (options.get(key) for key in ("expect", "baseline"))
    audited = expect is not None or baseline is not None
    fleet = load_fleet([Path(run.path)], keep_health=audited)
    return assess(fleet, baseline, expect, reference=options.get("reference"))


def _gpu_labels(gpus) -> list[dict]:
    """host and gpu labels of each GPU row; GPUs sharing an index on one host also
    get `gpu_position`."""
    hosts, indices = (
        gpus["host"].astype(object).tolist(),
        [str(i) for i in gpus["index"].astype(object).tolist()],
    )
    seen = Counter(zip(hosts, indices))
    position = gpus.groupby("host", observed=True, sort=False).cumcount().tolist()
    return [
        {"host": h, "gpu": i} | ({"gpu_position": str(p)} if seen[(h, i)] > 1 else {})
        for h, i, p in zip(hosts, indices, position)
    ]


def _facts(m: Metrics, fleet: Fleet) -> None:
    """Each fact's metric, for every probed host (host facts) or each of its GPUs (GPU facts)."""
    ok = fleet.hosts[(fleet.hosts["status"] == "ok").to_numpy()]
    gpus = fleet.gpus[fleet.gpus["host"].astype(object).isin(set(ok["host"])).to_numpy()]
    labels = {"host": [{"host": h} for h in ok["host"].tolist()], "gpu": _gpu_labels(gpus)}
    for fact in fact_table.FACTS:
        if fact.metric is None:
            continue
        metric = fact.metric
        columns = [metric.column] if metric.column else [column for _, column in metric.labels]
        frame = ok if fact.scope == "host" else gpus
        for at, row in zip(
            labels[fact.scope], rows_at(frame[list(dict.fromkeys(columns))], range(len(frame)))
        ):
            if metric.column:
                value = row[metric.column]
                m.add(
                    metric.name,
                    None if value is None else value * metric.scale if metric.scale != 1 else value,
                    **at,
                )
            elif any(row[column] is not None for _, column in metric.labels):
                m.add(
                    metric.name,
                    1,
                    **at,
                    **{
                        label: "" if row[column] is None else str(row[column])
                        for label, column in metric.labels
                    },
                )


def _classes(findings) -> dict[str, tuple[str, bool]]:
    ref = findings.reference
    return {h: (c.id, c is ref) for c in findings.classes for h in c.hosts}


def _states(m: Metrics, judged: Assessment) -> None:
    """Each host's state, whether it is drained, and its cause as the report has them
    (`sweep.assess`: the same call)."""
    verdict = judged.verdict
    drained = set(drain_hosts(verdict, judged.drain_config))
    for host, state in verdict.states.items():
        for name in STATES:
            m.add("sweep_host_state", state == name, host=host, state=name)
        m.add("sweep_host_to_drain", host in drained, host=host)
        cause = verdict.cause(host)
        if cause is not None:
            m.add(
                "sweep_host_cause_info",
                1,
                host=host,
                cause=cause_key(cause),
                severity=cause.severity,
            )


def _host(m: Metrics, host: str, health: dict, cls) -> None:
    for c in health.get("contracts") or ():
        for state in CONTRACT_STATES:
            m.add(
                "sweep_host_contract_status",
                c.get("status") == state,
                host=host,
                contract=str(c.get("name")),
                status=state,
            )
    if cls is not None:
        m.add("sweep_host_comparability_class_info", 1, host=host, **{"class": cls[0]})
        m.add("sweep_host_in_reference_class", cls[1], host=host)
    load = load_summary(health)
    gpus = [g for g in health.get("gpus") or () if isinstance(g, dict)]
    seen = Counter(str(g.get("index")) for g in gpus)
    for position, g in enumerate(gpus):
        at = {"host": host, "gpu": str(g.get("index"))}
        if seen[at["gpu"]] > 1:
            at["gpu_position"] = str(position)
        _gpu(m, at, g, load.get(g.get("index")) or {})


def _gpu(m: Metrics, at: dict, g: dict, load: dict) -> None:
    power, ecc, clocks, mig = (g.get(k) or {} for k in ("power", "ecc", "clocks", "mig"))
    m.add("sweep_gpu_ecc_pending_enabled", ecc.get("pending_mode"), **at)
    m.add("sweep_gpu_power_limit_default_watts", power.get("default_limit_w"), **at)
    m.add("sweep_gpu_power_draw_watts", power.get("draw_w"), **at)
    m.add("sweep_gpu_mig_pending_enabled", mig.get("pending"), **at)
    m.add("sweep_gpu_sm_clock_hertz", _mul(clocks.get("sm_mhz"), MHZ), **at)
    m.add("sweep_gpu_sm_clock_max_hertz", _mul(clocks.get("sm_max_mhz"), MHZ), **at)
    m.add("sweep_gpu_temperature_celsius", g.get("temperature_c"), **at)
    reasons = g.get("clock_event_reasons") or {}
    if isinstance(reasons.get("active"), list):
        active = set(reasons["active"])
        for reason in dict.fromkeys([*REASONS, *(reasons.get("supported") or ()), *active]):
            m.add("sweep_gpu_clock_event_reason_active", reason in active, reason=str(reason), **at)
    m.add("sweep_gpu_load_sm_clock_median_hertz", _mul(load.get("sm_mhz_median"), MHZ), **at)
    m.add("sweep_gpu_load_power_median_watts", load.get("power_w_median"), **at)
    m.add("sweep_gpu_load_sw_power_cap_ratio", load.get("sw_power_cap_fraction"), **at)
    m.add("sweep_gpu_load_hw_slowdown_ratio", load.get("hw_slowdown_fraction"), **at)


__all__ = ["FAMILIES", "metrics_text", "write_output"]
