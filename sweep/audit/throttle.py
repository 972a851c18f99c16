"""The conclusion `sweep diff` opens with: what the clock and power evidence of two probes says.

One line, two at most, before any field: under a load (the agent's ``--load`` samples, or a wrapped
command's), the share of samples with each clock-event reason, the SM clock against its maximum and
the power against its limit, and what they mean together ("power-capped, as expected"; a HW
slowdown is a facility fault, never the load). Between two idle probes, the clock-event reasons
that appeared or cleared and a changed power limit. The figures come from the samples' summaries
the agent wrote (`probe_agent.load.summarize`, `probe_agent.wrap`); this module only reads them.
"""

from __future__ import annotations

from typing import Any

from probe_agent.contracts import FACILITY_CAUSES
from sweep.analysis.load_record import load_summary
from sweep.analysis.names import fold_numbers

FACILITY = tuple(FACILITY_CAUSES)
CAPPED = 0.05  # a SW power cap in at least this share of samples: the load reached the cap
AT_MAXIMUM = 0.97  # an SM clock median at least this share of its maximum: not throttled
IDLE_DRAW = 0.5  # a full read drawing under this share of the limit was not taken under load


def conclusion(before: dict, after: dict) -> list[str]:
    """The one or two lines that say what changed in the clocks and power, and why."""
    lines = [line for line in (_under_load(after, "under load"),) if line]
    if not lines:
        lines = [_under_load(before, "before, under load") or "", _between_idle(before, after)]
        lines = [line for line in lines if line]
    stale = _read_after_the_load(after)
    return (lines[:1] + [stale]) if stale else lines[:2]


def conclusion_of_runs(before: dict, after: dict) -> list[str]:
    """The same for two wrapped runs (provenance files): what each command's samples saw."""
    lines = []
    for label, run in (("A", before), ("B", after)):
        gpus = (run.get("verdict") or {}).get("gpus") or []
        limits = _default_limits(run.get("before") or {})
        if gpus:
            lines.append(_summary_line(f"run {label}, during the command", gpus, limits))
    return lines


def _under_load(health: dict, label: str) -> str | None:
    load = health.get("load") or {}
    if load.get("refused"):
        return f"{label}: no load ran ({load['refused']})"
    summary = load.get("summary") or []
    if not summary:
        return None
    what = (
        f"{label} ({load.get('engine')}, {load.get('seconds'):g} s)"
        if load.get("seconds")
        else label
    )
    return _summary_line(what, summary, _default_limits(health))


def _summary_line(label: str, gpus: list[dict], default_limits: dict[Any, float]) -> str:
    """'under load: SW power cap active in 79% of samples, SM clock median 1470 of 1980 MHz, power
    689 of 700 W: power-capped, as expected; no HW slowdown' over the GPUs' sample summaries."""
    capped = max(_num(g.get("sw_power_cap_fraction")) for g in gpus)
    slowed = [g for g in gpus if _num(g.get("hw_slowdown_fraction")) > 0]
    hot = [g for g in gpus if _num(g.get("sw_thermal_fraction")) > 0]
    sm, sm_max = (
        _span(g.get("sm_mhz_median") for g in gpus),
        _span(g.get("sm_mhz_max_allowed") for g in gpus),
    )
    power, limit = (
        _span(g.get("power_w_median") for g in gpus),
        _span(g.get("enforced_limit_w") for g in gpus),
    )
    figures = ([f"SW power cap active in {capped:.0%} of samples"] if capped else []) + [
        f"SM clock median {sm} of {sm_max} MHz",
        f"power {power} of {limit} W",
    ]
    if slowed:
        worst = max(_num(g.get("hw_slowdown_fraction")) for g in slowed)
        meaning = (
            f"HW slowdown in {worst:.0%} of samples on GPU {_gpus(slowed)}: a facility fault "
            "(power delivery or cooling), not the load"
        )
    elif hot:
        meaning = f"SW thermal slowdown on GPU {_gpus(hot)}: too hot for its clocks; check cooling"
    elif capped >= CAPPED:
        below = [
            g for g in gpus if _num(g.get("enforced_limit_w")) < default_limits.get(g.get("gpu"), 0)
        ]
        meaning = "power-capped, as expected" + (
            f", at a limit below the default on GPU {_gpus(below)}" if below else ""
        )
    elif all(
        _num(g.get("sm_mhz_median")) >= AT_MAXIMUM * _num(g.get("sm_mhz_max_allowed"), 1)
        for g in gpus
    ):
        meaning = "clocks at their maximum: not throttled"
    else:
        meaning = "SM clock below its maximum with no clock-event reason reported"
    return f"{label}: {', '.join(figures)}: {meaning}" + ("" if slowed else "; no HW slowdown")


def _between_idle(before: dict, after: dict) -> str:
    """Reasons that appeared or cleared, and changed power limits; the same statement on several
    GPUs is one, naming them ("power limit 700 -> 250 W on GPU 0-7")."""
    was = {g.get("index"): g for g in before.get("gpus") or []}
    said: dict[str, list] = {}  # statement -> its GPUs, in the order first met
    for g in after.get("gpus") or []:
        old, index = was.get(g.get("index"), {}), g.get("index")
        now, then = set(_reasons(g)) - {"idle"}, set(_reasons(old)) - {"idle"}
        clocks = g.get("clocks") or {}
        at = f"(SM {_shown(clocks.get('sm_mhz'))} of {_shown(clocks.get('sm_max_mhz'))} MHz)"
        for reason in _causes(now - then):
            kind = (
                f"a facility fault: {FACILITY_CAUSES[reason][1]}"
                if reason in FACILITY
                else "now active"
            )
            said.setdefault(f"{_named(reason)} on GPU {{gpus}} {at}: {kind}", []).append(index)
        for reason in _causes(then - now):
            said.setdefault(f"{_named(reason)} cleared on GPU {{gpus}}", []).append(index)
        limit, old_limit = (
            (g.get("power") or {}).get("enforced_limit_w"),
            (old.get("power") or {}).get("enforced_limit_w"),
        )
        if old and limit != old_limit:
            said.setdefault(
                f"power limit {_shown(old_limit)} -> {_shown(limit)} W on GPU {{gpus}}", []
            ).append(index)
    if not said:
        return (
            "no throttle evidence: no clock-event reason appeared or cleared, and no power "
            "limit changed"
        )
    lines = [text.format(gpus=fold_numbers(gpus)) for text, gpus in said.items()]
    return "; ".join(lines[:4]) + (f"; and {len(lines) - 4} more" if len(lines) > 4 else "")


def _causes(reasons: set) -> list[str]:
    """The reasons to name, one line each: the generic HW slowdown only where no cause of it is
    named (NVML sets it beside HW thermal slowdown and HW power brake; issue 41: one line per
    cause)."""
    if {"hw_thermal_slowdown", "hw_power_brake_slowdown"} & reasons:
        reasons = reasons - {"hw_slowdown"}
    return sorted(reasons)


def _named(reason: str) -> str:
    """'HW thermal slowdown', 'SW power cap': a reason as the report names it, not NVML's key."""
    if reason in FACILITY_CAUSES:
        return FACILITY_CAUSES[reason][0]
    head, _, rest = reason.partition("_")
    return (
        f"{head.upper()} {rest.replace('_', ' ')}"
        if head in ("sw", "hw")
        else reason.replace("_", " ")
    )


def _shown(value: Any) -> str:
    """A figure as the report prints it: 700, not 700.0; ? when not read."""
    if isinstance(value, float):
        return f"{value:g}"
    return "?" if value is None else str(value)


def _read_after_the_load(health: dict) -> str | None:
    """The per-GPU fields of a --load probe read while no load ran (agents before sweep 0.1's fix
    read them a fixed time after starting the load child, which `import torch` alone could outlast;
    a load that ended early does the same): say so, or they mislead."""
    summary = list(load_summary(health).values())
    if not summary or max(_num(g.get("sw_power_cap_fraction")) for g in summary) < 0.5:
        return None
    idle = [
        g
        for g in health.get("gpus") or []
        if not set(_reasons(g)) - {"idle"}
        and _num((g.get("power") or {}).get("draw_w"))
        < IDLE_DRAW * _num((g.get("power") or {}).get("enforced_limit_w"), 1)
    ]
    if not idle:
        return None
    g = idle[0]
    return (
        f"the per-GPU fields below were not read under the load (GPU {g.get('index')}: SM "
        f"{(g.get('clocks') or {}).get('sm_mhz')} MHz at {(g.get('power') or {}).get('draw_w')} "
        "W, no reason active): the load's samples are the evidence; probe again with this "
        "sweep's agent"
    )


def _reasons(gpu: dict) -> list[str]:
    return (gpu.get("clock_event_reasons") or {}).get("active") or []


def _default_limits(health: dict) -> dict[Any, float]:
    return {
        g.get("index"): _num((g.get("power") or {}).get("default_limit_w"))
        for g in health.get("gpus") or []
    }


def _num(value: Any, default: float = 0.0) -> float:
    return (
        float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default
    )


def _span(values) -> str:
    """'1455' or '1455-1470': the figure, or its range over the GPUs."""
    found = sorted(
        {round(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)}
    )
    if not found:
        return "?"
    return str(found[0]) if found[0] == found[-1] else f"{found[0]}-{found[-1]}"


def _gpus(gpus: list[dict]) -> str:
    return ",".join(str(g.get("gpu", g.get("index"))) for g in gpus)
