"""Check a host's health.json against ``probe_agent/schema/health-1.schema.json``, fast; and what a run
folder holds (a host record's envelope, a manifest) before any code reads it back.

The controller checks every host's output before it becomes a record: a host that prints JSON of
the wrong shape is ``bad_output``, not a record that breaks the report later. jsonschema takes
~16 ms for an eight-GPU health.json (as much controller CPU as the whole SSH session), so the
schema is compiled once into nested closures covering the keywords it uses (type, enum, const,
required, properties, additionalProperties, items, minItems, maxItems, minimum, pattern, local
``$ref``), ~1 ms a host. A keyword outside that set is refused when the schema is compiled, so a
schema change cannot be skipped silently; tests compare the verdicts with jsonschema's.

The published schema leaves a few parts free-form: `load` (any object), each contract's
`evidence`. The controller reads some fields inside them (the load's per-GPU summary and samples,
the driver contract's PCI count, the processes contract's list), so `READ_BY_CONTROLLER` types
those fields, and a host whose output breaks it is `bad_output` at arrival like any other schema
violation: no later command (report, export, history, audit, diff) meets a value it cannot read.
It only narrows what the agent never sends otherwise, so every record the agent writes stays valid.

Why not a library (issue 40): on an eight-GPU health.json, ``python3 bench/bench_schema.py`` (two runs on
this loaded 2-core machine, fastjsonschema 2.22.3 installed beside it) gave this compiler 1.34 / 0.90 ms
a document, fastjsonschema 1.52 / 2.74 ms plus 270 / 112 ms to compile in every process, a cached
jsonschema 4.26 validator 17.7 / 39.0 ms: no library is faster, and fastjsonschema would be a new
dependency whose compile costs a small report more than its whole read.

A record read back from a run folder is checked by `record_problem` (`RECORD`: the envelope the
controller writes, then its health.json as above) and a manifest by `manifest_problem` (`MANIFEST`:
the fields any reader uses): a file that does not fit is named, never read by code that expects it to.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Optional

import probe_agent
from sweep.errors import SweepError

HEALTH_SCHEMA = Path(probe_agent.__file__).parent / "schema" / "health-1.schema.json"
_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description", "default", "examples",
                          "$defs", "definitions"})
Check = Callable[[Any, str], Optional[str]]  # (value, where) -> the first problem, or None


class UnsupportedSchema(SweepError, ValueError):
    """The schema uses a keyword this compiler does not implement."""


def _is(kind: str, value: Any) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or \
            (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    raise UnsupportedSchema(f"unknown type {kind!r}")


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(value), type(value).__name__)


def compile_schema(schema: dict) -> Check:
    """A function (value, where) -> the first violation of `schema` as text, or None."""
    top = _Compiler(schema).build(schema)
    return lambda value, where="health.json": top(value, where)


class _Compiler:
    """Builds the checks of one schema; `refs` holds the compiled local $ref targets (recursion included)."""

    def __init__(self, root: dict):
        self.root = root
        self.refs: dict[str, Check] = {}

    def ref(self, target: str) -> Check:
        if target not in self.refs:
            if not target.startswith("#/"):
                raise UnsupportedSchema(f"only local $ref are supported, not {target!r}")
            node: Any = self.root
            for part in target[2:].split("/"):
                node = node[part]
            self.refs[target] = lambda v, w: None  # a recursive schema refers to itself while compiling
            self.refs[target] = self.build(node)
        return lambda v, w: self.refs[target](v, w)

    def build(self, node: Any) -> Check:
        if node is True or node == {}:
            return lambda v, w: None
        if node is False:
            return lambda v, w: f"{w}: no value is allowed here"
        unknown = set(node) - _ANNOTATIONS - {word for words, _ in _KEYWORDS for word in words}
        if unknown:
            raise UnsupportedSchema(f"schema {'keyword' if len(unknown) == 1 else 'keywords'} {', '.join(sorted(unknown))} "
                                    "not supported")
        checks = [check for words, make in _KEYWORDS if any(word in node for word in words)
                  for check in [make(self, node)] if check is not None]
        if len(checks) == 1:
            return checks[0]

        def all_of(v, w):
            for check in checks:
                problem = check(v, w)
                if problem:
                    return problem
        return all_of


def _ref(c: _Compiler, node: dict) -> Check:
    return c.ref(node["$ref"])


def _type(c: _Compiler, node: dict) -> Check:
    kinds = tuple(node["type"] if isinstance(node["type"], list) else [node["type"]])
    for kind in kinds:
        _is(kind, None)  # refuse unknown type names now

    def typed(v, w):
        if not any(_is(k, v) for k in kinds):
            return f"{w}: expected {' or '.join(kinds)}, got {_kind_of(v)}"
    return typed


def _enum(c: _Compiler, node: dict) -> Check:
    allowed = node["enum"]
    return lambda v, w: None if any(v == a and isinstance(v, bool) == isinstance(a, bool) for a in allowed) \
        else f"{w}: {_show(v)} is not one of {', '.join(_show(a) for a in allowed)}"


def _const(c: _Compiler, node: dict) -> Check:
    const = node["const"]
    return lambda v, w: None if v == const and isinstance(v, bool) == isinstance(const, bool) \
        else f"{w}: must be {_show(const)}, not {_show(v)}"


def _minimum(c: _Compiler, node: dict) -> Check:
    low = node["minimum"]
    return lambda v, w: f"{w}: {v} is below the minimum {low}" if _is("number", v) and v < low else None


def _pattern(c: _Compiler, node: dict) -> Check:
    pattern = re.compile(node["pattern"])
    return lambda v, w: f"{w}: {_show(v)} does not match {pattern.pattern!r}" \
        if isinstance(v, str) and not pattern.search(v) else None


def _length(c: _Compiler, node: dict) -> Check:
    low, high = node.get("minItems", 0), node.get("maxItems")

    def length(v, w):
        if not isinstance(v, list):
            return None
        if high is not None and len(v) > high:
            return f"{w} has {len(v)} items, at most {high}"
        return f"{w} has {len(v)} items, at least {low}" if len(v) < low else None

    return length


def _items(c: _Compiler, node: dict) -> Check:
    item = c.build(node["items"])

    def items(v, w):
        if isinstance(v, list):
            for i, x in enumerate(v):
                problem = item(x, f"{w}[{i}]")
                if problem:
                    return problem
    return items


def _required(c: _Compiler, node: dict) -> Check:
    need = tuple(node["required"])
    return lambda v, w: next((f"{w}: '{k}' is missing" for k in need if k not in v), None) \
        if isinstance(v, dict) else None


def _members(c: _Compiler, node: dict) -> Check | None:
    props = {k: c.build(s) for k, s in (node.get("properties") or {}).items()}
    extra = c.build(node["additionalProperties"]) if "additionalProperties" in node else None
    if node.get("additionalProperties") is False:  # a closed object (issue 40): say which field it does not name
        extra = lambda v, w: f"{w}: a field the schema does not name"  # noqa: E731
    if not props and extra is None:
        return None

    def members(v, w):
        if not isinstance(v, dict):
            return None
        for key, x in v.items():
            check = props.get(key, extra)
            if check is not None:
                problem = check(x, f"{w}.{key}")
                if problem:
                    return problem
    return members


# (keywords, builder), in the order the checks run: the first problem found is the one reported
_KEYWORDS: tuple[tuple[tuple[str, ...], Callable[[_Compiler, dict], Optional[Check]]], ...] = (
    (("$ref",), _ref), (("type",), _type), (("enum",), _enum), (("const",), _const), (("minimum",), _minimum),
    (("pattern",), _pattern), (("minItems", "maxItems"), _length), (("items",), _items),
    (("required",), _required), (("properties", "additionalProperties"), _members),
)


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


_NINT = {"type": ["integer", "null"]}
_NNUM = {"type": ["number", "null"]}
_NSTR = {"type": ["string", "null"]}
_LOAD_GPU = {"type": "object", "properties": {
    "gpu": _NINT, "samples": _NINT, "pcie_gen_max": _NINT,
    **{k: _NNUM for k in ("sm_mhz_min", "sm_mhz_median", "sm_mhz_max_allowed", "power_w_max", "power_w_median",
                          "enforced_limit_w", "sw_power_cap_fraction", "hw_slowdown_fraction", "sw_thermal_fraction")}}}
_SAMPLE_GPU = {"type": "object", "properties": {
    "index": _NINT, "active_reasons": {"type": ["array", "null"], "items": {"type": "string"}},
    **{k: _NNUM for k in ("sm_mhz", "mem_mhz", "power_w", "enforced_limit_w", "temperature_c", "utilization_gpu_pct",
                          "pcie_gen")}}}
READ_BY_CONTROLLER = {"type": "object", "properties": {
    "load": {"type": ["object", "null"], "properties": {
        "seconds": _NNUM, "interval_s": _NNUM, "engine": _NSTR, "pid": _NINT, "exit_code": _NINT, "refused": _NSTR,
        "started_s": _NNUM, "ended_s": _NNUM,  # the busy window the summary covers
        "summary": {"type": ["array", "null"], "items": _LOAD_GPU},
        "samples": {"type": ["array", "null"], "items": {"type": "object", "properties": {
            "t": _NNUM, "phase": _NSTR, "gpus": {"type": ["array", "null"], "items": _SAMPLE_GPU}}}}}},
    "contracts": {"type": "array", "items": {"type": "object", "properties": {"evidence": {
        "type": "object", "properties": {
            "pci": {"type": ["object", "null"], "properties": {
                "on_bus": _NINT, "missing_from_nvml": {"type": ["array", "null"], "items": {"type": "string"}}}},
            "processes": {"type": ["array", "null"], "items": {"type": "object", "properties": {
                "gpu": _NINT, "pid": _NINT, "name": _NSTR}}}}}}}},
}}


@lru_cache(maxsize=None)
def readable_check() -> Check:
    """The compiled READ_BY_CONTROLLER schema."""
    return compile_schema(READ_BY_CONTROLLER)


def readable_problem(health: Any, where: str = "health.json") -> str | None:
    """Why the controller could not read a part of a schema-valid `health` (READ_BY_CONTROLLER), or None."""
    return readable_check()(health, where)


@lru_cache(maxsize=None)
def health_check() -> Check:
    """The compiled health.json schema (read once per process)."""
    return compile_schema(json.loads(HEALTH_SCHEMA.read_text(encoding="utf-8")))


def health_problem(health: Any) -> str | None:
    """Why `health` is not a valid health.json of schema 1.x, or None when it is."""
    return health_check()(health, "health.json") or readable_problem(health)


_OBJ_OR_NULL = {"type": ["object", "null"]}
RECORD = {"type": "object", "required": ["record_version", "host", "status"], "properties": {
    "record_version": {"type": "integer"}, "host": {"type": "string"}, "address": _NSTR, "port": _NINT,
    "status": {"enum": ["ok", "failed"]},
    "failure": {"type": ["object", "null"], "required": ["class"], "properties": {
        "class": {"type": "string"}, "message": _NSTR}},
    "attempts": _NINT, "started_at": _NSTR, "ended_at": _NSTR, "duration_s": _NNUM, "exit_status": _NINT,
    "stderr": _NSTR, "health": _OBJ_OR_NULL, "wrap": _OBJ_OR_NULL,
    "groups": {"type": ["array", "string", "null"], "items": {"type": "string"}},
    "unknown_numbers": {"type": ["array", "null"], "items": {"type": "object"}}}}
_SNAPSHOT_HOST = {"type": "object", "properties": {
    "name": {"type": "string"}, "groups": {"type": ["array", "null"], "items": {"type": "string"}}}}
_INVENTORY = {"type": "object", "properties": {"path": {"type": "string"}, "snapshot": {
    "type": "object", "properties": {"hosts": {"type": "array", "items": _SNAPSHOT_HOST}}}}}
MANIFEST = {"type": "object", "required": ["format", "record_version"], "properties": {
    "format": {"type": "string"}, "record_version": {"type": "integer"}, "sweep_version": _NSTR,
    "inventory": _INVENTORY, "options": {"type": "object"},  # state and times: each reader words its own check
    "hosts": {"type": "array", "items": {"type": "string"}},
    "sessions": {"type": "array", "items": {"type": "object"}},
    "counts": {"type": ["object", "null"], "additionalProperties": {"type": "integer"}}}}


@lru_cache(maxsize=None)
def _compiled(name: str) -> Check:
    return compile_schema({"RECORD": RECORD, "MANIFEST": MANIFEST}[name])


def record_problem(record: Any, where: str = "record") -> str | None:
    """Why `record` is not a host record the controller can read back (its envelope, then an ok
    record's health.json against the published schema and READ_BY_CONTROLLER), or None."""
    problem = _compiled("RECORD")(record, where)
    if problem is None and record.get("health") is not None:
        health = record["health"]
        problem = health_check()(health, f"{where}.health") or readable_problem(health, f"{where}.health")
    return problem


def manifest_problem(manifest: Any, where: str = "manifest.json") -> str | None:
    """Why `manifest` is not a run manifest a reader can use (`MANIFEST`), or None."""
    return _compiled("MANIFEST")(manifest, where)


# ---------------------------------------------------------------- the contract chain's part of the
# schema

_CHAIN_SPOTS = {  # what the chain declares -> where the schema's text says it
    "contracts.maxItems": re.compile(r'("contracts": \{\s*"type": "array",\s*"minItems": \d+, "maxItems": )(\d+)'),
    "contracts.items.name.enum": re.compile(r'("name": \{"enum": )(\[[^\]]*\])'),
    "lowest_broken.enum": re.compile(r'("lowest_broken": \{"enum": )(\[[^\]]*\])'),
}


def chain_parts() -> dict[str, Any]:
    """The values of the health schema that `probe_agent.chain.CONTRACTS` (the one declaration of a
    contract) decides: how many contracts a health.json holds at most, their names, the lowest
    broken one's names."""
    from probe_agent import chain

    names = [c.name for c in chain.CONTRACTS]
    return {"contracts.maxItems": len(names), "contracts.items.name.enum": names,
            "lowest_broken.enum": [None, *names]}


def schema_from_chain(text: str) -> str:
    """The health schema's text with the chain's parts written in (`chain_parts`), every other byte
    kept."""
    for place, value in chain_parts().items():
        text, count = _CHAIN_SPOTS[place].subn(lambda m, v=value: m.group(1) + json.dumps(v), text)
        if count != 1:
            raise UnsupportedSchema(f"{place} is not where the generator looks for it ({count} places)",
                                    where=str(HEALTH_SCHEMA),
                                    fix="keep the schema's layout, or update _CHAIN_SPOTS")
    return text


# python -m sweep.schema --from-chain: write the chain's parts into the schema
if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--from-chain"]:
        sys.exit("usage: python -m sweep.schema --from-chain")
    HEALTH_SCHEMA.write_text(schema_from_chain(HEALTH_SCHEMA.read_text(encoding="utf-8")),
                             encoding="utf-8")
