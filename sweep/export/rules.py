"""Alerting rules for the metrics of `sweep.export.prometheus` (`sweep export prometheus --rules`).

The policy: alert on
  - an enforced power limit other than the intended one (the expectations file's `power_limit_w`;
    without one, the GPU's default limit),
  - any HW slowdown, HW thermal slowdown or HW power brake reason,
  - any change of ECC mode (seen over the last day, or pending after the next reset),
  - a driver not in the approved list (the expectations file's `driver`; no alert without one),
  - an SM clock under load below a fixed floor (`sm_clock_floor_mhz`, else `--floor`),
  - a host the verdict drains (`sweep_host_to_drain`: broken for a cause the node owns, not its
    configuration, the probe's environment, a job or a process: `sweep.analysis.owners`),
  - an Xid (or SXid) that needs a repair (the xid contract broken: a GPU reset, a
    reboot, an inspection),
  - a host that did not answer the sweep (`sweep_host_up == 0`),
  - no sweep for `stale_hours` (the newest export's `sweep_run_timestamp_seconds`, or no export at
all), and never on the SW power cap alone: a loaded GPU at its power limit shows it all the time.

The expectations file is layered (defaults -> models -> groups -> hosts, later wins, null unsets;
docs/expectations.md); the rules keep that meaning in PromQL: each layer that sets a value judges
the GPUs (or hosts) it selects, `unless` a later layer selects them too.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from sweep.audit.expect import Expectations, load_expectations
from sweep.audit.expect_rules import POWER_TOLERANCE_W

ECC_WINDOW = "1d"
STALE_HOURS = 24.0  # no sweep for this long: SweepFleetNotSwept
HW_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
_SPECIAL = set("\\.^$|?*+()[]{}")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def glob_regex(pattern: str) -> str:
    """An fnmatch glob ('580.*', 'gpu4?') as an RE2 regex, anchored the way PromQL anchors =~."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            out.append(
                "[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]"
            )
            i = end
        else:
            out.append("\\" + ch if ch in _SPECIAL else ch)
        i += 1
    return "".join(out)


def _layers(exp: Expectations | None, rule: str, gpu_rule: bool) -> list[tuple[str | None, object]]:
    """[(selector expression of the layer's set, or None for every target; value or
    None), ...] in order."""
    if exp is None:
        return []
    out = []
    if rule in exp.defaults:
        out.append((None, exp.defaults[rule].value))
    if gpu_rule:
        for model, rules in exp.models.items():
            if rule in rules:
                out.append((f"sweep_gpu_info{{model={_quote(model)}}}", rules[rule].value))
    for group, rules in exp.groups.items():
        if rule in rules:
            out.append((f"sweep_host_group_info{{group={_quote(group)}}}", rules[rule].value))
    for pattern, rules in exp.hosts.items():
        if rule in rules:
            out.append((f"sweep_host_up{{host=~{_quote(glob_regex(pattern))}}}", rules[rule].value))
    return out


def _on(selector: str, gpu_rule: bool) -> str:
    return "on(host, gpu)" if gpu_rule and selector.startswith("sweep_gpu_") else "on(host)"


def layered(exp: Expectations | None, rule: str, violation, gpu_rule: bool) -> str | None:
    """The PromQL of `violation(value)` under the layered expectations of `rule`
    (None: nothing set)."""
    layers = _layers(exp, rule, gpu_rule)
    parts = []
    for i, (selector, value) in enumerate(layers):
        if value is None:
            continue
        expr = f"({violation(value)})"
        if selector is not None:
            expr = f"({expr} and {_on(selector, gpu_rule)} {selector})"
        for later, _ in layers[i + 1 :]:
            expr = (
                f"({expr} unless {_on(later, gpu_rule) if later else 'on(host)'} "
                f"{later or 'sweep_host_up'})"
            )
        parts.append(expr)
    return " or ".join(parts) if parts else None


def _alert(name, expr, severity, summary, description) -> dict:
    return {
        "alert": name,
        "expr": expr,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "description": description},
    }


def on_call_alerts(stale_hours: float = STALE_HOURS) -> list[dict]:
    """The states an on-call engineer acts on: a host to drain, an Xid that needs a repair, a host
    that did not answer, a fleet not swept for `stale_hours`."""
    host = "{{ $labels.host }}"
    return [
        _alert(
            "SweepHostBroken",
            "sweep_host_to_drain == 1",
            "critical",
            f"{host}: broken, to drain",
            "The verdict holds the host out for a fault of the node (hardware, driver, fabric, a "
            "repair): drain it (the report's drain.sh), repair it, sweep it again, resume it "
            "(resume.sh).",
        ),
        _alert(
            "SweepHostXidNeedsRepair",
            'sweep_host_contract_status{contract="xid",status="broken"} == 1',
            "critical",
            f"{host}: an Xid event needs a repair",
            "The kernel log holds an Xid or SXid whose NVIDIA resolution is more than restarting "
            "the application (a GPU reset, a reboot, an inspection): the report's Xid repair "
            "section names it.",
        ),
        _alert(
            "SweepHostUnreachable",
            "sweep_host_up == 0",
            "warning",
            f"{host}: did not answer the sweep",
            "No health record: its failure class is sweep_host_failure_info; sweep run --resume "
            "RUN --retry-failed probes it again.",
        ),
        _alert(
            "SweepFleetNotSwept",
            f"(time() - max(sweep_run_timestamp_seconds) > {stale_hours * 3600:.0f}) or "
            "absent(sweep_run_timestamp_seconds)",
            "warning",
            f"no sweep for {stale_hours:g} hours",
            "The newest export is older than the sweep schedule allows (or there is none): check "
            "the timer or cron job that runs sweep run and sweep export prometheus "
            "(docs/scheduling.md).",
        ),
    ]


def rules(
    expectations: Expectations | None = None,
    floor_mhz: float = 1200.0,
    stale_hours: float = STALE_HOURS,
) -> dict:
    """The rules file as a dict (one group, `sweep`): the policy of the module docstring."""
    gpu = "{{ $labels.host }} GPU {{ $labels.gpu }}"
    alerts = [
        _alert(
            "SweepGpuPowerLimitNotIntended",
            _power_limit_expr(expectations),
            "warning",
            f"{gpu}: enforced power limit is not the intended one",
            "The enforced power limit differs from the intended limit (expectations file, else the "
            "default limit); benchmarks on this GPU run capped. Fix: sudo nvidia-smi -i GPU -pl "
            "WATTS.",
        ),
        _alert(
            "SweepGpuHwSlowdown",
            "sweep_gpu_clock_event_reason_active{reason=~"
            + _quote("|".join(HW_REASONS))
            + "} == 1",
            "critical",
            f"{gpu}: {{{{ $labels.reason }}}} active",
            "A facility fault (power delivery, cooling) is slowing the GPU down; SW power cap is "
            "not this.",
        ),
        _alert(
            "SweepGpuEccModeChanged",
            f"changes(sweep_gpu_ecc_enabled[{ECC_WINDOW}]) > 0 or "
            "(sweep_gpu_ecc_pending_enabled != on(host, gpu) sweep_gpu_ecc_enabled)",
            "warning",
            f"{gpu}: ECC mode changed, or will change at the next reset",
            "ECC on or off changes the memory size and speed: the GPU no longer compares with its "
            "peers.",
        ),
        _alert(
            "SweepGpuSmClockUnderLoadBelowFloor",
            _sm_clock_floor_expr(expectations, floor_mhz),
            "warning",
            f"{gpu}: median SM clock under load below the floor",
            "The SM clock under the probe's load fell below the fixed floor. SW power cap alone is "
            "normal; check cooling, power delivery and clock settings.",
        ),
    ]
    alerts += on_call_alerts(stale_hours)
    alerts += _driver_alerts(expectations)
    return {"groups": [{"name": "sweep", "rules": alerts}]}


def _power_limit_expr(exp: Expectations | None) -> str:
    """The expectations' power limits where they set one (per host, group, model), else the
    GPU's default limit, each with POWER_TOLERANCE_W."""
    power = layered(
        exp,
        "power_limit_w",
        lambda v: f"abs(sweep_gpu_power_limit_enforced_watts - {v:g}) > {POWER_TOLERANCE_W:g}",
        True,
    )
    if power is None:
        power = (
            "abs(sweep_gpu_power_limit_enforced_watts - on(host, gpu) "
            f"sweep_gpu_power_limit_default_watts) > {POWER_TOLERANCE_W:g}"
        )
    return power


def _sm_clock_floor_expr(exp: Expectations | None, floor_mhz: float) -> str:
    """The expectations' SM clock floors where they set one, else the fixed `floor_mhz`."""
    return (
        layered(
            exp,
            "sm_clock_floor_mhz",
            lambda v: f"sweep_gpu_load_sm_clock_median_hertz < {v * 1e6:.0f}",
            True,
        )
        or f"sweep_gpu_load_sm_clock_median_hertz < {floor_mhz * 1e6:.0f}"
    )


def _driver_alerts(exp: Expectations | None) -> list[dict]:
    """The alert on a driver the expectations do not approve; none without an approved list."""
    driver = layered(
        exp,
        "driver",
        lambda v: (
            "sweep_host_driver_info{driver_version!~"
            + _quote("|".join(glob_regex(p) for p in v))
            + "}"
        ),
        False,
    )
    if driver is None:
        return []
    return [
        _alert(
            "SweepHostDriverNotApproved",
            driver,
            "warning",
            "{{ $labels.host }}: driver {{ $labels.driver_version }} is not approved",
            "Install an approved driver, or approve this one in the expectations file.",
        )
    ]


def rules_text(
    expect: str | Path | None = None, floor_mhz: float = 1200.0, stale_hours: float = STALE_HOURS
) -> str:
    """The Prometheus rules file (YAML) of the policy, with the expectations file
    `expect` if given."""
    exp = load_expectations(expect) if expect is not None else None
    head = (
        "# Alerting rules for sweep's node_exporter metrics (sweep export prometheus --rules"
        + (f" --expect {expect}" if expect else "")
        + ").\n"
        + (
            ""
            if exp
            else "# No expectations file: intended power limit = the default limit; no driver "
            "alert.\n"
        )
        + "# Never alerts on the SW power cap alone.\n"
    )
    return head + yaml.safe_dump(rules(exp, floor_mhz, stale_hours), sort_keys=False, width=1000)
