"""Expectations: what the fleet is supposed to be (approved drivers, power limits, ECC, MIG, ...).

An expectations file is YAML (docs/expectations.md)::

    version: 1
    defaults: {driver: ["590.44.01"], ecc: true, persistence: true, mig_layout: off}
    models:   {"NVIDIA H200": {power_limit_w: 700}}
    groups:   {rack_b: {power_limit_w: 600}}
    hosts:    {"gpu4*": {sm_clock_floor_mhz: 1400}}

For each host (and GPU) a rule's value is taken from, later winning: defaults, models (the GPU's
name; GPU rules only), groups the host belongs to (in the file's order), hosts (a name or a glob,
in the file's order). `null` in a later section stops a rule from being judged there.
`load_expectations(path)` validates it: every error names the file, line and key
(`ConfigError`). `unmatched_names(expectations, hosts, groups)` names the entries of `hosts:` and
`groups:` that match none of the audited hosts (a typo such as gpu99 or rack_c judges nothing), each
with its file and line. `evaluate_expectations(records, expectations)` returns `Violation`s,
``{"host", "rule", "expected", "actual", "message"}``; a host without health.json (unreachable)
is not judged, nor is a value the probe could not read. A SW power cap is never a finding: the
SM clock floor is judged on the median SM clock under load (`load.summary`), and only when the
probe ran a load.

Exit code (through `sweep.audit.baseline.audit_section`): 5 when there is a finding; 2 for a bad file.
"""
from __future__ import annotations

import difflib
import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from sweep.analysis.load_record import load_summary
from sweep.analysis import facts as table
from sweep.analysis.facts import path_reader
from sweep.analysis.speed_record import read_speed
from sweep.analysis.names import fold_numbers
from sweep.audit.expect_values import (TypeProblem as _TypeProblem, boolean as _boolean, layout as _layout,
                                       number as _number, pcie as _pcie, strings as _strings,
                                       type_name as _type_name)
from sweep.errors import ConfigError
from sweep.inventory.formats import LineLoader, LineMapping
from sweep.inventory.yaml_lines import plain_yaml_problem
from sweep.text import noun, plural

SECTIONS = ("version", "defaults", "models", "groups", "hosts", "drain")
DRAINABLE = ("config",)  # `drain: [config]`: drain.sh drains for the node's configuration too (sweep.analysis.owners)
POWER_TOLERANCE_W = 0.5


@dataclass(frozen=True)
class Setting:
    """A rule's value and the file:line that set it."""

    value: Any
    where: str


@dataclass(frozen=True)
class Expectations:
    """A validated expectations file: section -> name -> rule -> Setting (defaults under name '')."""

    path: Path
    defaults: dict
    models: dict
    groups: dict
    hosts: dict
    lines: dict = field(default_factory=dict, compare=False)  # (section, name) -> "file:line" of the name
    drain: tuple = ()  # the owners whose causes drain.sh drains besides the node's (`DRAINABLE`): ("config",) or ()

    @property
    def rule_count(self) -> int:
        return sum(len(r) for r in [self.defaults, *self.models.values(), *self.groups.values(),
                                    *self.hosts.values()])


@dataclass(frozen=True)
class Violation:
    """A host (or some of its GPUs) off an expectation."""

    host: str
    rule: str
    expected: Any
    actual: Any
    detail: str  # what is off, without the host (entries carry the host beside the text)

    @property
    def message(self) -> str:
        return f"{self.host}: {self.detail}"

    def as_dict(self) -> dict:
        return {"host": self.host, "rule": self.rule, "expected": self.expected, "actual": self.actual,
                "message": self.message, "detail": self.detail}


# --- validation ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """One rule of an expectations file, declared once: how the file writes its value, what the probe
    says of it, when that is off, and what the violation says. Its name is the expectations key of a
    fact of the fact table (`sweep.analysis.facts`, `Fact.expect`: its key and kind), or a rule of its own
    (`sm_clock_floor_mhz`: the median clock under load, not a comparability key)."""

    name: str
    scope: str            # "host": judged once a host; "gpu": each GPU, the violations folded over GPUs
    check: Callable       # (the file's value, key) -> its typed value; _TypeProblem says how to write it
    read: Callable        # host: health.json -> raw; gpu: (GPU dict, its load.summary row or None) -> raw;
                          # None: not read, so not judged
    off: Callable         # (raw, expected) -> the actual value a violation reports; None: the rule holds
    says: Callable        # host: (expected, raw) -> (text, expected as text, fix);
                          # gpu: (expected, actual, "GPUs 0-3", [GPU indices], {index: load row}) -> the same
    per_model: bool = False  # may be set under `models:` (a GPU rule other than the model itself)


def _setting(section: str, key: str) -> Callable:
    return lambda d, *_row: (d.get(section) or {}).get(key)  # a GPU rule's reader also gets its load row


def _unless_glob(value, patterns):
    return None if any(fnmatch.fnmatchcase(str(value), p) for p in patterns) else value


def _gpus_present(health):
    count = (health.get("driver") or {}).get("gpu_count")
    pci = health.get("pci") or {}
    return None if count is None else (count, len(pci.get("gpus") or []) if pci.get("readable") else None)


def _gpus_off(raw, expected):
    count, on_bus = raw
    if count == expected and on_bus in (None, expected):
        return None
    return count if on_bus in (None, count) else f"{count} of {on_bus}"


def _gpus_says(expected, raw):
    count, on_bus = raw
    seen = f"GPUs listed by the driver: {count}" + (f", on the PCI bus: {on_bus}" if on_bus is not None else "")
    return seen, str(expected), "look for a card off the bus (Xid 79 in the kernel log), reseat or replace it"


def _ports_off(ports, expected) -> list:
    return [p for p in ports if p.get("state") != "ACTIVE" or p.get("rate_gbps") != expected]


def _ports_says(expected, ports):
    shown = ", ".join(f"{p.get('device')}/{p.get('port')} {p.get('state')} at {p.get('rate_gbps') or 0:g} Gb/s"
                      for p in _ports_off(ports, expected))
    return (f"network ports off: {shown}", f"every port ACTIVE at {expected:g} Gb/s",
            "check cables and transceivers (ibstat, ibdiagnet); a port trained down slows every inter-node collective")


def _governors_off(governors, patterns) -> list:
    return sorted(g for g in governors if not any(fnmatch.fnmatchcase(g, p) for p in patterns))


def _ecc_read(g, _row):
    ecc = g.get("ecc") or {}
    return None if ecc.get("current") is None else (ecc["current"], ecc.get("pending_mode"))  # 1.0: normalize_health


def _ecc_off(raw, want):
    current, after_reset = raw
    if current != want:
        return current
    return None if after_reset in (None, want) else f"{_onoff(current)}, {_onoff(after_reset)} after reset"


def _clock_says(expected, actual, on, idx, load):
    row = next(iter(load[i] for i in idx if i in load), {})
    reasons = ", ".join(f"{label} {row.get(k, 0) * 100:.0f}% of samples" for k, label in (
        ("sw_power_cap_fraction", "power cap"), ("hw_slowdown_fraction", "HW slowdown"),
        ("sw_thermal_fraction", "SW thermal")) if row.get(k) is not None)
    return (f"median SM clock under load {actual:g} MHz on {on}, below the floor" + (f" ({reasons})" if reasons else ""),
            f"at least {expected:g} MHz", "check cooling, power delivery and clock settings on that GPU")


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
    return None if all(any(fnmatch.fnmatchcase(part, p) for p in patterns) for part in got.split("/")) else got


def _unless_one_of(value, expected):
    """`equal`: the value, or one of a list of values."""
    return None if value == expected or (isinstance(expected, list) and value in expected) else value


def _below(value, floor):
    return value if value < floor else None


def _above(value, ceiling):
    return value if value > ceiling else None


OFF = {"equal": _unless_one_of, "glob": _unless_glob, "floor": _below, "ceiling": _above}


def _check_of(fact) -> Callable:
    """How the expectations file writes the value of a fact's rule: by the rule's declared kind, then the
    fact's dtype for `equal` (the dtype never picks the kind)."""
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
    return _onoff(value) if isinstance(value, bool) else (f"{value:g}" if isinstance(value, float) else str(value))


def _declared(fact) -> "Rule":
    """The rule of a fact that reads its own value (`Fact.path`, or `Fact.reads` of its first column), all of it from the
    declaration: its key, scope, kind, the fact's reader, its label and fix."""
    exp, kind = fact.expect, fact.expect.kind
    _, read = fact.reads[fact.columns[0]]
    verb = {"floor": ", below the floor", "ceiling": ", above the ceiling"}.get(kind, "")
    if fact.scope == "gpu":
        return Rule(exp.key, "gpu", _check_of(fact), lambda g, _row: read(g), OFF[kind],
                    lambda e, a, on, idx, load: (f"{fact.label} {_shown(a)} on {on}{verb}", _wanted(kind, e), exp.fix),
                    per_model=True)
    return Rule(exp.key, "host", _check_of(fact), read, _unless_glob_each if kind == "glob" else OFF[kind],
                lambda e, got: (f"{fact.label} {_shown(got)} " + ("is not approved" if kind == "glob" else verb.lstrip(", ")
                                                                 or "is not expected"), _wanted(kind, e), exp.fix))


def _declared_rules(scope: str) -> list:
    """The rule of each fact of `scope` that reads its own value and names an expectations key (the
    speed tier's floors are judged on its validated figures: `_judge_speed`)."""
    return [_declared(f) for f in table.FACTS
            if f.scope == scope and f.expect and f.columns[0] in f.reads and f.history == "value"]


def _rule_of(name: str, **how) -> "Rule":
    """The hand-written rule of fact `name` (one the frames read in sweep.analysis.fleet): its key and
    scope from the declaration and, unless `how` says otherwise, the judgement of its declared kind and
    the reading of its first declared path, as it stands."""
    fact = table.BY_NAME[name]
    if "read" not in how:
        read = path_reader(fact.paths[0], "any")
        how["read"] = read if fact.scope == "host" else lambda g, _row: read(g)
    return Rule(fact.expect.key, fact.scope, **{"off": OFF[fact.expect.kind], **how})


# The rules, in the order a host's violations are listed (host rules first, then each GPU's).
TABLE: tuple = (
    _rule_of("driver", check=_strings("a driver version (glob)", "'590.44.01', '580.*'"),
             says=lambda e, v: (f"driver {v} is not approved", _one_of(e),
                       "install an approved driver, or approve this one in the expectations file")),
    _rule_of("cuda_driver", check=_strings("a CUDA driver API version", "'13.0'"),
             says=lambda e, v: (f"CUDA driver API {v} is not approved", _one_of(e),
                       "install a driver that ships an approved CUDA version")),
    _rule_of("gpu_count", check=_number("GPUs", "8", integer=True), read=_setting("driver", "gpu_count"),
             says=lambda e, v: (f"{plural(v, 'GPU')} visible to the driver", str(e),
                       "look for a card off the bus (dmesg: Xid 79) or reseat it")),
    _rule_of("link", check=_strings("a link class", "NV18"),
             says=lambda e, v: (f"the worst GPU-to-GPU link is {v}", _one_of(e),
                                   "check NVLink / NVSwitch (nvidia-smi topo -m, nvidia-smi nvlink -s)")),
    _rule_of("gpus_present", check=_number("GPUs present (on the PCI bus and listed by the driver)", "8", integer=True),
             read=_gpus_present, off=_gpus_off, says=_gpus_says),
    _rule_of("ib_rate", check=_number("Gb/s per InfiniBand / RoCE port", "400"), read=_setting("host_settings", "ib_ports"),
             off=lambda ports, e: [p.get("rate_gbps") for p in _ports_off(ports, e)] or None, says=_ports_says),
    _rule_of("cpu_governor", check=_strings("a CPU frequency governor", "performance"),
             read=_setting("host_settings", "cpu_governor"),
             off=lambda governors, e: _governors_off(governors, e) or None,
             says=lambda e, governors: (f"CPU frequency governor {', '.join(_governors_off(governors, e))}", _one_of(e),
                               f"cpupower frequency-set -g {e[0]} (and make it persist, e.g. tuned)")),
    *_declared_rules("host"),
    _rule_of("gpu_model", check=_strings("a GPU name", "'NVIDIA H200'"),
             says=lambda e, a, on, idx, load: (f"{a} on {on}", _one_of(e), "check the host's hardware or its group")),
    _rule_of("power_limit", check=_number("watts", "700"),
             off=lambda v, e: v if abs(v - e) > POWER_TOLERANCE_W else None,
             says=lambda e, a, on, idx, load: (f"enforced power limit {_w(a)} on {on}", _w(e),
                                      f"sudo nvidia-smi -i {fold_numbers(idx)} -pl {e:g}"), per_model=True),
    _rule_of("ecc", check=_boolean, read=_ecc_read, off=_ecc_off,
             says=lambda e, a, on, idx, load: (f"ECC {a if isinstance(a, str) else _onoff(a)} on {on}", f"ECC {_onoff(e)}",
                                      f"sudo nvidia-smi -i {fold_numbers(idx)} -e {int(e)}, then reset the GPUs or "
                                      "reboot"), per_model=True),
    _rule_of("persistence", check=_boolean,
             says=lambda e, a, on, idx, load: (f"persistence mode {_onoff(a)} on {on}", f"persistence {_onoff(e)}",
                                      "enable nvidia-persistenced (or sudo nvidia-smi -pm 1)" if e else
                                      "stop nvidia-persistenced (or sudo nvidia-smi -pm 0)"), per_model=True),
    _rule_of("mig", check=_layout,
             read=lambda g, _row: None if (g.get("mig") or {}).get("current") is None else g.get("mig_layout") or "off",
             says=lambda e, a, on, idx, load: (f"MIG layout {a} on {on}", f"MIG layout {e}",
                                                     "recreate the GPU instances (nvidia-smi mig), or change the "
                                                     "expectation"), per_model=True),
    *_declared_rules("gpu"),
    _rule_of("pcie", check=_pcie, read=_pcie_of,
             says=lambda e, a, on, idx, load: (f"PCIe link {a} on {on}", f"PCIe {e}",
                                      "reseat the card or riser, check the slot's link setting in the BIOS "
                                      "(nvidia-smi -q -d PCIE)"), per_model=True),
    Rule("sm_clock_floor_mhz", "gpu", _number("MHz", "1400"), lambda g, row: (row or {}).get("sm_mhz_median"),
         lambda v, e: v if v < e else None, _clock_says, per_model=True),
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
        _fact.expect.unit, "3800" if _rule.startswith("hbm") else "50")
RULES = {**HOST_RULES, **GPU_RULES}


class _Loader(LineLoader):
    """The inventory's line-keeping YAML loader, refusing a key written twice."""

    refuse_duplicates = True

    def duplicate_key(self, key: Any, first_line: int, node: yaml.Node) -> None:
        raise ConfigError(f"key '{key}' appears twice (first on line {first_line})",
                          where=f"{self.name}:{node.start_mark.line + 1}", fix="keep one of them")


def _parse(text: str, path: Path):
    loader = _Loader(text)
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as err:
        at_end = "end of stream" in (err.problem or "") and err.context_mark
        mark = err.context_mark if at_end else err.problem_mark or err.context_mark
        context = ""
        if err.context and err.context_mark and mark is not err.context_mark \
                and err.context_mark.line != mark.line:
            context = f" ({err.context} that starts on line {err.context_mark.line + 1})"
        elif err.context:
            context = f" ({err.context})"
        fix = "fix the YAML there (indentation, a missing ':' or an unclosed quote)"
        said = plain_yaml_problem(err, text)
        problem = err.problem
        if said is not None:
            (problem, fix), mark, context = said[:2], said[2], ""
        raise ConfigError(f"not valid YAML: {problem}{context}",
                          where=f"{path}:{mark.line + 1}" if mark else str(path), fix=fix) from None
    except yaml.YAMLError as err:
        raise ConfigError(f"not valid YAML: {err}", where=str(path), fix="fix the YAML syntax") from None
    finally:
        loader.dispose()


def _unknown(key: Any, where: str, valid, place: str) -> ConfigError:
    close = difflib.get_close_matches(str(key), list(valid), n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return ConfigError(f"unknown key '{key}' {place}", where=where, fix=f"{hint}valid keys: {', '.join(valid)}")


def _rules(body: Any, path: Path, line: int, place: str, allowed: dict, problems: list) -> dict:
    """Validate one section body (rule: value, ...) into rule -> Setting; each mistake is added to
    `problems` (a ConfigError naming its line), so that a file's every mistake is said at once."""
    if body is None:
        return {}
    if not isinstance(body, LineMapping):
        problems.append(
            ConfigError(
                f"{place} must be a mapping of rules, not {_type_name(body)}",
                where=f"{path}:{line}",
                fix="write one 'rule: value' per line under it",
            )
        )
        return {}
    out = {}
    for key, value in body.items():
        where = f"{path}:{body.key_lines[key]}"
        if key not in allowed:
            if key in RULES:
                problems.append(
                    ConfigError(
                        f"'{key}' is a host rule and cannot be set per GPU model ({place})",
                        where=where,
                        fix="set it under defaults, groups or hosts",
                    )
                )
            else:
                problems.append(_unknown(key, where, sorted(allowed), f"in {place}"))
            continue
        if value is None:
            out[key] = Setting(None, where)
            continue
        try:
            out[key] = Setting(allowed[key](value, key), where)
        except _TypeProblem as p:
            problems.append(ConfigError(f"{place}.{key} {p.message}", where=where, fix=p.fix))
    return out


def _drain(value: Any, where: str) -> tuple:
    """The top-level `drain:` list: which owners' causes drain.sh drains too (a policy the operator states)."""
    if value is None:
        return ()
    if not isinstance(value, list) or any(v not in DRAINABLE for v in value):
        raise ConfigError(f"drain must be a list of {', '.join(DRAINABLE)}, not {value!r}"[:200], where=where,
                          fix="write 'drain: [config]' to drain the hosts held out for their configuration (a power "
                              "cap, ECC mode...), or leave it out")
    return tuple(dict.fromkeys(value))


def _all_at_once(problems: list, path: Path) -> None:
    """Raise the file's mistakes: one as it is, several as one error that names each (file:line, fix)."""
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise ConfigError(
            f"{len(problems)} mistakes: "
            + "; ".join(f"{p.where}: {p.message} ({p.fix})" for p in problems),
            where=str(path),
            fix="fix each line named",
        )


def load_expectations(path: str | Path) -> Expectations:
    """Read and validate an expectations file (errors name the file, line and key)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("no such expectations file", where=str(path),
                          fix="give the path of a YAML expectations file (docs/expectations.md)") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot be read ({getattr(err, 'strerror', None) or err})", where=str(path),
                          fix="check the path and its permissions") from None
    data = _parse(text, path)
    if not isinstance(data, LineMapping) or not data:
        raise ConfigError(f"must be a mapping with {', '.join(SECTIONS[1:5])}, not {_type_name(data)}",
                          where=f"{path}:1", fix="start from inventories/expectations.example.yml")
    problems: list[ConfigError] = []
    for key in data:
        if key not in SECTIONS:
            problems.append(_unknown(key, f"{path}:{data.key_lines[key]}", SECTIONS, "at the top level"))
    if "version" in data and (isinstance(data["version"], bool) or data["version"] != 1):
        problems.append(ConfigError(f"version {data['version']!r} is not supported (this sweep reads version 1)",
                                    where=f"{path}:{data.key_lines['version']}", fix="write version: 1"))
    defaults = _rules(data.get("defaults"), path, data.key_lines.get("defaults", 1), "defaults", RULES, problems)
    named, lines = {}, {}
    for section, allowed in (("models", GPU_RULES), ("groups", RULES), ("hosts", RULES)):
        body, line = data.get(section), data.key_lines.get(section, 1)
        named[section] = {}
        if body is None:
            continue
        if not isinstance(body, LineMapping):
            problems.append(ConfigError(f"{section} must be a mapping of names to rules, not {_type_name(body)}",
                                        where=f"{path}:{line}",
                                        fix=f"write '{section}:' then one 'name:' per line, rules under it"))
            continue
        named[section] = {str(name): _rules(rules, path, body.key_lines[name], f"{section}.{name}", allowed,
                                            problems) for name, rules in body.items()}
        lines.update({(section, str(name)): f"{path}:{body.key_lines[name]}" for name in body})
    _all_at_once(problems, path)
    exp = Expectations(path, defaults, named["models"], named["groups"], named["hosts"], lines,
                       _drain(data.get("drain"), f"{path}:{data.key_lines.get('drain', 1)}"))
    if exp.rule_count == 0:
        raise ConfigError("holds no rule", where=f"{path}:1", fix="add rules under defaults, models, groups or hosts")
    return exp


def unmatched_names(exp: Expectations, hosts, groups) -> list[dict]:
    """The `hosts:` patterns that match none of `hosts`, and the `groups:` names none of them is in:
    ``{"section", "name", "where", "message"}`` each, in the file's order (a warning, not an error:
    the file may describe more of the fleet than one run sweeps)."""
    hosts, groups = list(hosts), set(groups)
    out = []
    for section, names, matches in (("groups", exp.groups, lambda name: name in groups),
                                    ("hosts", exp.hosts, lambda name: any(
                                        name == host or fnmatch.fnmatchcase(host, name) for host in hosts))):
        for name in names:
            if matches(name):
                continue
            what = "is the group of none" if section == "groups" else "matches none"
            where = exp.lines.get((section, name), str(exp.path))
            out.append({"section": section, "name": name, "where": where, "message": (
                f"{where}: {section}.{name} {what} of the {plural(len(hosts), 'audited host')}, so its rules "
                f"judge nothing; fix the name, or remove it if it is not in this fleet")})
    return out


# --- judging ---------------------------------------------------------------------------------


def _layers(exp: Expectations, host: str, groups, model: str | None):
    yield exp.defaults
    if model is not None and model in exp.models:
        yield exp.models[model]
    for name, rules in exp.groups.items():
        if name in groups:
            yield rules
    for pattern, rules in exp.hosts.items():
        if pattern == host or fnmatch.fnmatchcase(host, pattern):
            yield rules


def resolve(exp: Expectations, host: str, groups=(), model: str | None = None) -> dict[str, Setting]:
    """rule -> Setting for one host (and GPU model), later sections winning; unset (null) rules dropped."""
    out: dict[str, Setting] = {}
    for layer in _layers(exp, host, set(groups or ()), model):
        out.update(layer)
    return {k: v for k, v in out.items() if v.value is not None}


def _gpus_text(idx) -> str:
    return f"{noun(len(idx), 'GPU')} {fold_numbers(idx)}"


def _w(v) -> str:
    return f"{v:g} W" if isinstance(v, (int, float)) else str(v)


def _onoff(v) -> str:
    return "on" if v else ("off" if v is not None else "unknown")


def _one_of(values) -> str:
    return values[0] if len(values) == 1 else "one of " + ", ".join(values)


def _groups_of(rec: dict):
    g = rec.get("groups")
    return [g] if isinstance(g, str) else list(g or ())


def evaluate_expectations(records, expectations: Expectations) -> list[Violation]:
    """Findings for every reachable host of `records` (host -> record, or an iterable of records)."""
    recs = records.values() if isinstance(records, dict) else records
    findings: list[Violation] = []
    for rec in recs:
        health = rec.get("health")
        if rec.get("status") != "ok" or not isinstance(health, dict):
            continue
        findings.extend(_judge_host(rec["host"], _groups_of(rec), health, expectations))
    return findings


def _judge_host(host: str, groups, health: dict, exp: Expectations) -> list[Violation]:
    out: list[Violation] = []

    def add(rule, expected, actual, said, where):
        text, want, fix = said
        out.append(Violation(host, rule, expected, actual,
                             f"{text}; expected {want} ({where}); {fix}"))

    rules = resolve(exp, host, groups)
    for rule in TABLE:
        s = rules.get(rule.name) if rule.scope == "host" else None
        raw = rule.read(health) if s else None
        actual = None if raw is None else rule.off(raw, s.value)
        if actual is not None:
            add(rule.name, s.value, actual, rule.says(s.value, raw), s.where)
    _judge_speed(health, host, groups, exp, add)
    load = load_summary(health)
    for (name, _, _, where), (expected, actual, idx) in _gpu_checks(host, groups, health, exp, load).items():
        add(name, expected, actual, BY_NAME[name].says(expected, actual, _gpus_text(idx), idx, load), where)
    return out


def _gpu_checks(host: str, groups, health: dict, exp: Expectations, load: dict) -> dict[tuple, list]:
    """(rule, expected, actual, where) -> [expected, actual, [GPU indices]] for every GPU off a rule."""
    per_gpu: dict[tuple, list] = {}
    for g in health.get("gpus") or []:
        idx = g.get("index")
        grules = resolve(exp, host, groups, g.get("name"))
        for rule in TABLE:
            s = grules.get(rule.name) if rule.scope == "gpu" else None
            raw = rule.read(g, load.get(idx)) if s else None
            actual = None if raw is None else rule.off(raw, s.value)
            if actual is not None:
                per_gpu.setdefault((rule.name, _key(s.value), _key(actual), s.where), [s.value, actual, []])[2].append(idx)
    return per_gpu


def _speed_floor(rule: str, value: float, floor: float, on: str, add, where) -> None:
    unit = SPEED_FACTS[rule].expect.unit
    scale = 1e9 if unit == "GB/s" else 1e12
    if value / scale < floor:
        fact = SPEED_FACTS[rule]
        add(rule, floor, round(value / scale, 1), (f"{fact.label} {value / scale:.1f} {unit} on {on}, below the floor",
            f"at least {floor:g} {unit}", "look at the tier's envelope (power cap, slowdown, processes) in the report's "
                                          "Speed section; reseat or replace the card if it stays slow"), where)


def _judge_speed(health: dict, host: str, groups, exp: Expectations, add) -> None:
    """The speed floors (hbm_gbps_min: 3800, ...) against the tier's validated figures."""
    record = read_speed(health)
    if record is None:
        return
    names = {g.get("index"): g.get("name") for g in health.get("gpus") or () if isinstance(g, dict)}
    for index, figures in sorted(record.gpus.items()):
        grules = resolve(exp, host, groups, names.get(index))
        for rule, fact in SPEED_FACTS.items():
            if fact.scope == "gpu" and rule in grules and fact.name in figures:
                _speed_floor(rule, figures[fact.name], grules[rule].value, f"GPU {index}", add, grules[rule].where)
    rules = resolve(exp, host, groups)
    host_values = {"p2p": min((v for *_, v in record.p2p), default=None), "allreduce": record.allreduce}
    for rule, fact in SPEED_FACTS.items():
        if fact.scope == "host" and rule in rules and host_values.get(fact.name) is not None:
            _speed_floor(rule, host_values[fact.name], rules[rule].value, "the host", add, rules[rule].where)


def _key(v: Any) -> str:
    return repr(v)

