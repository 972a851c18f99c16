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

The rules themselves, each declared once, are `sweep.audit.expect_rules.TABLE`.

Exit code (through `sweep.audit.baseline.audit_section`): 5 when there is a finding; 2 for a bad
file.
"""

from __future__ import annotations

import difflib
import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sweep.analysis.load_record import load_summary
from sweep.analysis.speed_record import read_speed
from sweep.analysis.names import fold_numbers
from sweep.audit.expect_rules import BY_NAME, GPU_RULES, RULES, SPEED_FACTS, TABLE
from sweep.audit.expect_values import TypeProblem as _TypeProblem, type_name as _type_name
from sweep.errors import ConfigError
from sweep.inventory.formats import LineLoader, LineMapping
from sweep.inventory.yaml_lines import plain_yaml_problem
from sweep.text import noun, plural

SECTIONS = ("version", "defaults", "models", "groups", "hosts", "drain")
# `drain: [config]`: drain.sh drains for the node's configuration too (sweep.analysis.owners)
DRAINABLE = ("config",)


@dataclass(frozen=True)
class Setting:
    """A rule's value and the file:line that set it."""

    value: Any
    where: str


@dataclass(frozen=True)
class Expectations:
    """A validated expectations file: section -> name -> rule -> Setting (defaults under name
    '')."""

    path: Path
    defaults: dict
    models: dict
    groups: dict
    hosts: dict
    # (section, name) -> "file:line" of the name
    lines: dict = field(default_factory=dict, compare=False)
    # the owners whose causes drain.sh drains besides the node's (`DRAINABLE`): ("config",) or ()
    drain: tuple = ()

    @property
    def rule_count(self) -> int:
        return sum(
            len(r)
            for r in [
                self.defaults,
                *self.models.values(),
                *self.groups.values(),
                *self.hosts.values(),
            ]
        )


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
        return {
            "host": self.host,
            "rule": self.rule,
            "expected": self.expected,
            "actual": self.actual,
            "message": self.message,
            "detail": self.detail,
        }


# --- validation ------------------------------------------------------------------------------


class _Loader(LineLoader):
    """The inventory's line-keeping YAML loader, refusing a key written twice."""

    refuse_duplicates = True

    def duplicate_key(self, key: Any, first_line: int, node: yaml.Node) -> None:
        raise ConfigError(
            f"key '{key}' appears twice (first on line {first_line})",
            where=f"{self.name}:{node.start_mark.line + 1}",
            fix="keep one of them",
        )


def _parse(text: str, path: Path):
    loader = _Loader(text)
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as err:
        at_end = "end of stream" in (err.problem or "") and err.context_mark
        mark = err.context_mark if at_end else err.problem_mark or err.context_mark
        context = ""
        if (
            err.context
            and err.context_mark
            and mark is not err.context_mark
            and err.context_mark.line != mark.line
        ):
            context = f" ({err.context} that starts on line {err.context_mark.line + 1})"
        elif err.context:
            context = f" ({err.context})"
        fix = "fix the YAML there (indentation, a missing ':' or an unclosed quote)"
        said = plain_yaml_problem(err, text)
        problem = err.problem
        if said is not None:
            (problem, fix), mark, context = said[:2], said[2], ""
        raise ConfigError(
            f"not valid YAML: {problem}{context}",
            where=f"{path}:{mark.line + 1}" if mark else str(path),
            fix=fix,
        ) from None
    except yaml.YAMLError as err:
        raise ConfigError(
            f"not valid YAML: {err}", where=str(path), fix="fix the YAML syntax"
        ) from None
    finally:
        loader.dispose()


def _unknown(key: Any, where: str, valid, place: str) -> ConfigError:
    close = difflib.get_close_matches(str(key), list(valid), n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return ConfigError(
        f"unknown key '{key}' {place}", where=where, fix=f"{hint}valid keys: {', '.join(valid)}"
    )


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
    """The top-level `drain:` list: which owners' causes drain.sh drains too (a policy the operator
    states)."""
    if value is None:
        return ()
    if not isinstance(value, list) or any(v not in DRAINABLE for v in value):
        raise ConfigError(
            f"drain must be a list of {', '.join(DRAINABLE)}, not {value!r}"[:200],
            where=where,
            fix="write 'drain: [config]' to drain the hosts held out for their configuration (a "
            "power cap, ECC mode...), or leave it out",
        )
    return tuple(dict.fromkeys(value))


def _all_at_once(problems: list, path: Path) -> None:
    """Raise the file's mistakes: one as it is, several as one error that names each (file:line,
    fix)."""
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
    data = _parse(_read_text(path), path)
    if not isinstance(data, LineMapping) or not data:
        raise ConfigError(
            f"must be a mapping with {', '.join(SECTIONS[1:5])}, not {_type_name(data)}",
            where=f"{path}:1",
            fix="start from inventories/expectations.example.yml",
        )
    problems = _top_level_problems(data, path)
    defaults = _rules(
        data.get("defaults"), path, data.key_lines.get("defaults", 1), "defaults", RULES, problems
    )
    named, lines = _named_rules(data, path, problems)
    _all_at_once(problems, path)
    exp = Expectations(
        path,
        defaults,
        named["models"],
        named["groups"],
        named["hosts"],
        lines,
        _drain(data.get("drain"), f"{path}:{data.key_lines.get('drain', 1)}"),
    )
    if exp.rule_count == 0:
        raise ConfigError(
            "holds no rule",
            where=f"{path}:1",
            fix="add rules under defaults, models, groups or hosts",
        )
    return exp


def _read_text(path: Path) -> str:
    """The expectations file's text; a missing or unreadable file is a ConfigError naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            "no such expectations file",
            where=str(path),
            fix="give the path of a YAML expectations file (docs/expectations.md)",
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(
            f"cannot be read ({getattr(err, 'strerror', None) or err})",
            where=str(path),
            fix="check the path and its permissions",
        ) from None


def _top_level_problems(data: LineMapping, path: Path) -> list[ConfigError]:
    """The top level's unknown keys and an unsupported version, each with its line."""
    problems: list[ConfigError] = []
    for key in data:
        if key not in SECTIONS:
            problems.append(
                _unknown(key, f"{path}:{data.key_lines[key]}", SECTIONS, "at the top level")
            )
    if "version" in data and (isinstance(data["version"], bool) or data["version"] != 1):
        problems.append(
            ConfigError(
                f"version {data['version']!r} is not supported (this sweep reads version 1)",
                where=f"{path}:{data.key_lines['version']}",
                fix="write version: 1",
            )
        )
    return problems


def _named_rules(data: LineMapping, path: Path, problems: list) -> tuple[dict, dict]:
    """The rules of the models, groups and hosts sections by name, and each name's "file:line";
    a section that is no mapping, or a bad rule, is added to `problems`."""
    named, lines = {}, {}
    for section, allowed in (("models", GPU_RULES), ("groups", RULES), ("hosts", RULES)):
        body, line = data.get(section), data.key_lines.get(section, 1)
        named[section] = {}
        if body is None:
            continue
        if not isinstance(body, LineMapping):
            problems.append(
                ConfigError(
                    f"{section} must be a mapping of names to rules, not {_type_name(body)}",
                    where=f"{path}:{line}",
                    fix=f"write '{section}:' then one 'name:' per line, rules under it",
                )
            )
            continue
        named[section] = {
            str(name): _rules(
                rules, path, body.key_lines[name], f"{section}.{name}", allowed, problems
            )
            for name, rules in body.items()
        }
        lines.update({(section, str(name)): f"{path}:{body.key_lines[name]}" for name in body})
    return named, lines


def unmatched_names(exp: Expectations, hosts, groups) -> list[dict]:
    """The `hosts:` patterns that match none of `hosts`, and the `groups:` names none of them is in:
    ``{"section", "name", "where", "message"}`` each, in the file's order (a warning, not an error:
    the file may describe more of the fleet than one run sweeps)."""
    hosts, groups = list(hosts), set(groups)
    out = []
    for section, names, matches in (
        ("groups", exp.groups, lambda name: name in groups),
        (
            "hosts",
            exp.hosts,
            lambda name: any(name == host or fnmatch.fnmatchcase(host, name) for host in hosts),
        ),
    ):
        for name in names:
            if matches(name):
                continue
            what = "is the group of none" if section == "groups" else "matches none"
            where = exp.lines.get((section, name), str(exp.path))
            out.append(
                {
                    "section": section,
                    "name": name,
                    "where": where,
                    "message": (
                        f"{where}: {section}.{name} {what} of the "
                        f"{plural(len(hosts), 'audited host')}, so its rules judge nothing; fix "
                        "the name, or remove it if it is not in this fleet"
                    ),
                }
            )
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


def resolve(
    exp: Expectations, host: str, groups=(), model: str | None = None
) -> dict[str, Setting]:
    """rule -> Setting for one host (and GPU model), later sections winning; unset (null) rules
    dropped."""
    out: dict[str, Setting] = {}
    for layer in _layers(exp, host, set(groups or ()), model):
        out.update(layer)
    return {k: v for k, v in out.items() if v.value is not None}


def _gpus_text(idx) -> str:
    return f"{noun(len(idx), 'GPU')} {fold_numbers(idx)}"


def _groups_of(rec: dict):
    g = rec.get("groups")
    return [g] if isinstance(g, str) else list(g or ())


def evaluate_expectations(records, expectations: Expectations) -> list[Violation]:
    """Findings for every reachable host of `records` (host -> record, or an iterable of
    records)."""
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
        out.append(
            Violation(host, rule, expected, actual, f"{text}; expected {want} ({where}); {fix}")
        )

    rules = resolve(exp, host, groups)
    for rule in TABLE:
        s = rules.get(rule.name) if rule.scope == "host" else None
        raw = rule.read(health) if s else None
        actual = None if raw is None else rule.off(raw, s.value)
        if actual is not None:
            add(rule.name, s.value, actual, rule.says(s.value, raw), s.where)
    _judge_speed(health, host, groups, exp, add)
    load = load_summary(health)
    for (name, _, _, where), (expected, actual, idx) in _gpu_checks(
        host, groups, health, exp, load
    ).items():
        add(
            name,
            expected,
            actual,
            BY_NAME[name].says(expected, actual, _gpus_text(idx), idx, load),
            where,
        )
    return out


def _gpu_checks(
    host: str, groups, health: dict, exp: Expectations, load: dict
) -> dict[tuple, list]:
    """(rule, expected, actual, where) -> [expected, actual, [GPU indices]] for every GPU off a
    rule."""
    per_gpu: dict[tuple, list] = {}
    for g in health.get("gpus") or []:
        idx = g.get("index")
        grules = resolve(exp, host, groups, g.get("name"))
        for rule in TABLE:
            s = grules.get(rule.name) if rule.scope == "gpu" else None
            raw = rule.read(g, load.get(idx)) if s else None
            actual = None if raw is None else rule.off(raw, s.value)
            if actual is not None:
                per_gpu.setdefault(
                    (rule.name, _key(s.value), _key(actual), s.where), [s.value, actual, []]
                )[2].append(idx)
    return per_gpu


def _speed_floor(rule: str, value: float, floor: float, on: str, add, where) -> None:
    unit = SPEED_FACTS[rule].expect.unit
    scale = 1e9 if unit == "GB/s" else 1e12
    if value / scale < floor:
        fact = SPEED_FACTS[rule]
        add(
            rule,
            floor,
            round(value / scale, 1),
            (
                f"{fact.label} {value / scale:.1f} {unit} on {on}, below the floor",
                f"at least {floor:g} {unit}",
                "look at the tier's envelope (power cap, slowdown, processes) in the report's "
                "Speed section; reseat or replace the card if it stays slow",
            ),
            where,
        )


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
                _speed_floor(
                    rule,
                    figures[fact.name],
                    grules[rule].value,
                    f"GPU {index}",
                    add,
                    grules[rule].where,
                )
    rules = resolve(exp, host, groups)
    host_values = {
        "p2p": min((v for *_, v in record.p2p), default=None),
        "allreduce": record.allreduce,
    }
    for rule, fact in SPEED_FACTS.items():
        if fact.scope == "host" and rule in rules and host_values.get(fact.name) is not None:
            _speed_floor(
                rule, host_values[fact.name], rules[rule].value, "the host", add, rules[rule].where
            )


def _key(v: Any) -> str:
    return repr(v)
