"""The rules of an expectations file, declared once (`TABLE`): how the file writes each rule's
value, what the probe says of it, when that is off, and what the violation says, with its fix.

A rule is the expectations key of a fact of the fact table (`sweep.analysis.facts`, `Fact.expect`),
derived from that declaration where the fact reads its own value, or written by hand here; the speed
tier's floors are `SPEED_FACTS`. `sweep.audit.expect` reads an expectations file against `RULES`
and judges hosts with `TABLE`.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Callable

from sweep.analysis import facts as table
from sweep.analysis.facts import path_reader
from sweep.analysis.names import fold_numbers
from sweep.audit.expect_values import (
    boolean as _boolean,
    layout as _layout,
    number as _number,
    pcie as _pcie,
    strings as _strings,
)
from sweep.text import plural

POWER_TOLERANCE_W = 0.5


@dataclass(frozen=True)
class Rule:
    """One rule of an expectations file, declared once: how the file writes its value, what the
    probe says of it, when that is off, and what the violation says. Its name is the expectations
    key of a fact of the fact table (`sweep.analysis.facts`, `Fact.expect`: its key and kind), or a
    rule of its own (`sm_clock_floor_mhz`: the median clock under load, not a comparability key)."""

    name: str
    # "host": judged once a host; "gpu": each GPU, the violations folded over GPUs
    scope: str
    # (the file's value, key) -> its typed value; TypeProblem says how to write it
    check: Callable
    # host: health.json -> raw; gpu: (GPU dict, its load.summary row or None) -> raw;
    read: Callable
    # None: not read, so not judged
    # (raw, expected) -> the actual value a violation reports; None: the rule holds
    off: Callable
    says: Callable  # host: (expected, raw) -> (text, expected as text, fix);
    # gpu: (expected, actual, "GPUs 0-3", [GPU indices], {index: load row}) -> the same
    per_model: bool = False  # may be set under `models:` (a GPU rule other than the model itself)


def _setting(section: str, key: str) -> Callable:
    # a GPU rule's reader also gets its load row
    return lambda d, *_row: (d.get(section) or {}).get(key)


def _unless_glob(value, patterns):
    return None if any(fnmatch.fnmatchcase(str(value), p) for p in patterns) else value


def _gpus_present(health):
    count = (health.get("driver") or {}).get("gpu_count")
    pci = health.get("pci") or {}
    return (
        None
        if count is None
        else (count, len(pci.get("gpus") or []) if pci.get("readable") else None)
    )


def _gpus_off(raw, expected):
    count, on_bus = raw
    if count == expected and on_bus in (None, expected):
        return None
    return count if on_bus in (None, count) else f"{count} of {on_bus}"


def _gpus_says(expected, raw):
    count, on_bus = raw
    seen = f"GPUs listed by the driver: {count}" + (
        f", on the PCI bus: {on_bus}" if on_bus is not None else ""
    )
    return (
        seen,
        str(expected),
        "look for a card off the bus (Xid 79 in the kernel log), reseat or replace it",
    )


def _ports_off(ports, expected) -> list:
    return [p for p in ports if p.get("state") != "ACTIVE" or p.get("rate_gbps") != expected]


def _ports_says(expected, ports):
    shown = ", ".join(
        f"{p.get('device')}/{p.get('port')} {p.get('state')} at {p.get('rate_gbps') or 0:g} Gb/s"
        for p in _ports_off(ports, expected)
    )
    return (
        f"network ports off: {shown}",
        f"every port ACTIVE at {expected:g} Gb/s",
        "check cables and transceivers (ibstat, ibdiagnet); a port trained down slows every "
        "inter-node collective",
    )


def _governors_off(governors, patterns) -> list:
    return sorted(g for g in governors if not any(fnmatch.fnmatchcase(g, p) for p in patterns))


def _ecc_read(g, _row):
    ecc = g.get("ecc") or {}
    # 1.0: normalize_health
    return None if ecc.get("current") is None else (ecc["current"], ecc.get("pending_mode"))


def _ecc_off(raw, want):
    current, after_reset = raw
    if current != want:
        return current
    return (
        None
        if after_reset in (None, want)
        else f"{_onoff(current)}, {_onoff(after_reset)} after reset"
    )


def _clock_says(expected, actual, on, idx, load):
    row = next(iter(load[i] for i in idx if i in load), {})
    reasons = ", ".join(
        f"{label} {row.get(k, 0) * 100:.0f}% of samples"
        for k, label in (
            ("sw_power_cap_fraction", "power cap"),
            ("hw_slowdown_fraction", "HW slowdown"),
            ("sw_thermal_fraction", "SW thermal"),
        )
        if row.get(k) is not None
    )
    return (
        f"median SM clock under load {actual:g} MHz on {on}, below the floor"
        + (f" ({reasons})" if reasons else ""),
        f"at least {expected:g} MHz",
        "check cooling, power delivery and clock settings on that GPU",
    )


def _pcie_of(g: dict, summary: dict | None) -> str | None:
    """A GPU's link as 'gen5x16': the generation seen under load where the probe ran one, else the
    link's capability (the current generation drops at idle); the trained width."""
    p = g.get("pcie") or {}
    gen = (summary or {}).get("pcie_gen_max") or p.get("max_gen")
    if p.get("width") is None or gen is None:
        return None
    return f"gen{gen}x{p['width']}"


def _unless_glob_each(got, patterns):
    """A host's text value may be several ("28.39.1002/28.40.1000", one an HCA): each must match."""
    return (
        None
        if all(any(fnmatch.fnmatchcase(part, p) for p in patterns) for part in got.split("/"))
        else got
    )


def _unless_one_of(value, expected):
    """`equal`: the value, or one of a list of values."""
    return (
        None if value == expected or (isinstance(expected, list) and value in expected) else value
    )


def _below(value, floor):
    return value if value < floor else None


def _above(value, ceiling):
    return value if value > ceiling else None


OFF = {"equal": _unless_one_of, "glob": _unless_glob, "floor": _below, "ceiling": _above}


def _check_of(fact) -> Callable:
    """How the expectations file writes the value of a fact's rule: by the rule's declared kind,
    then the fact's dtype for `equal` (the dtype never picks the kind)."""
    exp = fact.expect
    what = " ".join(w for w in (fact.label, exp.noun) if w)
    if exp.kind == "glob":
        return _strings(f"a {what} (glob)", "'96.00.*'")
    if exp.kind in ("floor", "ceiling") or fact.dtype in ("Int64", "Float64"):
        return _number(exp.unit or fact.label, "1", integer=fact.dtype == "Int64")
    if fact.dtype == "boolean":
        return _boolean
    return _strings(f"a {what}", "'value'")


def _wanted(kind: str, expected) -> str:
    if kind in ("floor", "ceiling"):
        return f"{'at least' if kind == 'floor' else 'at most'} {expected:g}"
    return _one_of(expected) if isinstance(expected, list) else str(expected)


def _shown(value) -> str:
    return (
        _onoff(value)
        if isinstance(value, bool)
        else (f"{value:g}" if isinstance(value, float) else str(value))
    )


def _declared(fact) -> "Rule":
    """The rule of a fact that reads its own value (`Fact.path`, or `Fact.reads` of its first
    column), all of it from the declaration: its key, scope, kind, the fact's reader, its label and
    fix."""
    exp, kind = fact.expect, fact.expect.kind
    _, read = fact.reads[fact.columns[0]]
    verb = {"floor": ", below the floor", "ceiling": ", above the ceiling"}.get(kind, "")
    if fact.scope == "gpu":
        return Rule(
            exp.key,
            "gpu",
            _check_of(fact),
            lambda g, _row: read(g),
            OFF[kind],
            lambda e, a, on, idx, load: (
                f"{fact.label} {_shown(a)} on {on}{verb}",
                _wanted(kind, e),
                exp.fix,
            ),
            per_model=True,
        )
    return Rule(
        exp.key,
        "host",
        _check_of(fact),
        read,
        _unless_glob_each if kind == "glob" else OFF[kind],
        lambda e, got: (
            f"{fact.label} {_shown(got)} "
            + ("is not approved" if kind == "glob" else verb.lstrip(", ") or "is not expected"),
            _wanted(kind, e),
            exp.fix,
        ),
    )


def _declared_rules(scope: str) -> list:
    """The rule of each fact of `scope` that reads its own value and names an expectations key (the
    speed tier's floors are judged on its validated figures: `_judge_speed`)."""
    return [
        _declared(f)
        for f in table.FACTS
        if f.scope == scope and f.expect and f.columns[0] in f.reads and f.history == "value"
    ]


def _rule_of(name: str, **how) -> "Rule":
    """The hand-written rule of fact `name` (one the frames read in sweep.analysis.rows): its key
    and scope from the declaration and, unless `how` says otherwise, the judgement of its declared
    kind and the reading of its first declared path, as it stands."""
    fact = table.BY_NAME[name]
    if "read" not in how:
        read = path_reader(fact.paths[0], "any")
        how["read"] = read if fact.scope == "host" else lambda g, _row: read(g)
    return Rule(fact.expect.key, fact.scope, **{"off": OFF[fact.expect.kind], **how})


# The rules, in the order a host's violations are listed (host rules first, then each GPU's).
TABLE: tuple = (
    _rule_of(
        "driver",
        check=_strings("a driver version (glob)", "'590.44.01', '580.*'"),
        says=lambda e, v: (
            f"driver {v} is not approved",
            _one_of(e),
            "install an approved driver, or approve this one in the expectations file",
        ),
    ),
    _rule_of(
        "cuda_driver",
        check=_strings("a CUDA driver API version", "'13.0'"),
        says=lambda e, v: (
            f"CUDA driver API {v} is not approved",
            _one_of(e),
            "install a driver that ships an approved CUDA version",
        ),
    ),
    _rule_of(
        "gpu_count",
        check=_number("GPUs", "8", integer=True),
        read=_setting("driver", "gpu_count"),
        says=lambda e, v: (
            f"{plural(v, 'GPU')} visible to the driver",
            str(e),
            "look for a card off the bus (dmesg: Xid 79) or reseat it",
        ),
    ),
    _rule_of(
        "link",
        check=_strings("a link class", "NV18"),
        says=lambda e, v: (
            f"the worst GPU-to-GPU link is {v}",
            _one_of(e),
            "check NVLink / NVSwitch (nvidia-smi topo -m, nvidia-smi nvlink -s)",
        ),
    ),
    _rule_of(
        "gpus_present",
        check=_number("GPUs present (on the PCI bus and listed by the driver)", "8", integer=True),
        read=_gpus_present,
        off=_gpus_off,
        says=_gpus_says,
    ),
    _rule_of(
        "ib_rate",
        check=_number("Gb/s per InfiniBand / RoCE port", "400"),
        read=_setting("host_settings", "ib_ports"),
        off=lambda ports, e: [p.get("rate_gbps") for p in _ports_off(ports, e)] or None,
        says=_ports_says,
    ),
    _rule_of(
        "cpu_governor",
        check=_strings("a CPU frequency governor", "performance"),
        read=_setting("host_settings", "cpu_governor"),
        off=lambda governors, e: _governors_off(governors, e) or None,
        says=lambda e, governors: (
            f"CPU frequency governor {', '.join(_governors_off(governors, e))}",
            _one_of(e),
            f"cpupower frequency-set -g {e[0]} (and make it persist, e.g. tuned)",
        ),
    ),
    *_declared_rules("host"),
    _rule_of(
        "gpu_model",
        check=_strings("a GPU name", "'NVIDIA H200'"),
        says=lambda e, a, on, idx, load: (
            f"{a} on {on}",
            _one_of(e),
            "check the host's hardware or its group",
        ),
    ),
    _rule_of(
        "power_limit",
        check=_number("watts", "700"),
        off=lambda v, e: v if abs(v - e) > POWER_TOLERANCE_W else None,
        says=lambda e, a, on, idx, load: (
            f"enforced power limit {_w(a)} on {on}",
            _w(e),
            f"sudo nvidia-smi -i {fold_numbers(idx)} -pl {e:g}",
        ),
        per_model=True,
    ),
    _rule_of(
        "ecc",
        check=_boolean,
        read=_ecc_read,
        off=_ecc_off,
        says=lambda e, a, on, idx, load: (
            f"ECC {a if isinstance(a, str) else _onoff(a)} on {on}",
            f"ECC {_onoff(e)}",
            f"sudo nvidia-smi -i {fold_numbers(idx)} -e {int(e)}, then reset the GPUs or reboot",
        ),
        per_model=True,
    ),
    _rule_of(
        "persistence",
        check=_boolean,
        says=lambda e, a, on, idx, load: (
            f"persistence mode {_onoff(a)} on {on}",
            f"persistence {_onoff(e)}",
            "enable nvidia-persistenced (or sudo nvidia-smi -pm 1)"
            if e
            else "stop nvidia-persistenced (or sudo nvidia-smi -pm 0)",
        ),
        per_model=True,
    ),
    _rule_of(
        "mig",
        check=_layout,
        read=lambda g, _row: (
            None if (g.get("mig") or {}).get("current") is None else g.get("mig_layout") or "off"
        ),
        says=lambda e, a, on, idx, load: (
            f"MIG layout {a} on {on}",
            f"MIG layout {e}",
            "recreate the GPU instances (nvidia-smi mig), or change the expectation",
        ),
        per_model=True,
    ),
    *_declared_rules("gpu"),
    _rule_of(
        "pcie",
        check=_pcie,
        read=_pcie_of,
        says=lambda e, a, on, idx, load: (
            f"PCIe link {a} on {on}",
            f"PCIe {e}",
            "reseat the card or riser, check the slot's link setting in the BIOS "
            "(nvidia-smi -q -d PCIE)",
        ),
        per_model=True,
    ),
    Rule(
        "sm_clock_floor_mhz",
        "gpu",
        _number("MHz", "1400"),
        lambda g, row: (row or {}).get("sm_mhz_median"),
        lambda v, e: v if v < e else None,
        _clock_says,
        per_model=True,
    ),
)
BY_NAME = {rule.name: rule for rule in TABLE}
# rule -> validator: the host rules (and the GPU model itself) may be set under defaults, groups and
# hosts; the other GPU rules under models too
HOST_RULES: dict[str, Callable] = {r.name: r.check for r in TABLE if not r.per_model}
GPU_RULES: dict[str, Callable] = {r.name: r.check for r in TABLE if r.per_model}
# the speed tier's figures (the fact table's measured facts): a floor each, in GB/s or TFLOP/s
SPEED_FACTS = {f.expect.key: f for f in table.FACTS if f.history == "drift" and f.expect}
for _rule, _fact in SPEED_FACTS.items():
    (GPU_RULES if _fact.scope == "gpu" else HOST_RULES)[_rule] = _number(
        _fact.expect.unit, "3800" if _rule.startswith("hbm") else "50"
    )
RULES = {**HOST_RULES, **GPU_RULES}


def _w(v) -> str:
    return f"{v:g} W" if isinstance(v, (int, float)) else str(v)


def _onoff(v) -> str:
    return "on" if v else ("off" if v is not None else "unknown")


def _one_of(values) -> str:
    return values[0] if len(values) == 1 else "one of " + ", ".join(values)
