"""Check a host's health.json against ``probe_agent/schema/health-1.schema.json``, fast; and what a
run folder holds (a host record's envelope, a manifest) before any code reads it back.

The controller checks every host's output before it becomes a record: a host that prints JSON of
the wrong shape is ``bad_output``, not a record that breaks the report later. The check is a
compiled validator library, jsonschema-rs (Rust, JSON Schema 2020-12): 0.017 ms for an eight-GPU
health.json where the hand-written compiler of issue 40 took 1.1 ms and jsonschema 16 ms (issue 52;
`python3 bench/bench_schema.py`). A valid document costs one `is_valid` call; only a refused one is
walked for its errors, and the first is worded as sweep words it (`_worded`:
"health.json.gpus[0].index: expected integer, got string"; "...: a field the schema does not name"),
a keyword sweep does not word by the library's own message.

The published schema leaves a few parts free-form: `load` (any object), each contract's
`evidence`. The controller reads some fields inside them (the load's per-GPU summary and samples,
the driver contract's PCI count, the processes contract's list), so `READ_BY_CONTROLLER` types
those fields, and a host whose output breaks it is `bad_output` at arrival like any other schema
violation: no later command (report, export, history, audit, diff) meets a value it cannot read.
It only narrows what the agent never sends otherwise, so every record the agent writes stays valid.

A record read back from a run folder is checked by `record_problem` (`RECORD`: the envelope the
controller writes, then its health.json as above) and a manifest by `manifest_problem` (`MANIFEST`:
the fields any reader uses): a file that does not fit is named, never read by code that expects it
to.

What the contract chain (`probe_agent.chain.CONTRACTS`) decides is written from it by
``python -m sweep.schema --from-chain``: the schema's contract names and bounds
(`schema_from_chain`), docs/agent.md's table of contracts and the README's line of them
(`docs_from_chain`).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Optional

import jsonschema_rs

import probe_agent
from sweep.errors import SweepError

HEALTH_SCHEMA = Path(probe_agent.__file__).parent / "schema" / "health-1.schema.json"
CHECKOUT = Path(probe_agent.__file__).resolve().parents[1]  # a checkout's docs/ and README.md
AGENT_DOC, README = CHECKOUT / "docs" / "agent.md", CHECKOUT / "README.md"
Check = Callable[..., Optional[str]]  # (value, where) -> the first problem, or None


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
    }.get(type(value), type(value).__name__)


def compile_schema(schema: dict) -> Check:
    """A function (value, where) -> the first violation of `schema` as text, or None."""
    validator = jsonschema_rs.validator_for(schema)

    def check(value: Any, where: str = "health.json") -> str | None:
        if validator.is_valid(value):
            return None
        error = next(iter(validator.iter_errors(value)))
        return _worded(schema, error, where)

    check.is_valid = validator.is_valid  # the verdict alone, without the words
    return check


def _worded(schema: dict, error, where: str) -> str:
    """The first error of a refused document, as sweep words it: the value's path under `where`, and
    what its schema node asks (read from the schema at the error's keyword location)."""
    w = where + "".join(
        f"[{step}]" if isinstance(step, int) else f".{step}" for step in error.instance_path
    )
    node: Any = schema
    try:
        for step in list(error.schema_path)[:-1]:
            node = node[step]
    except (KeyError, IndexError, TypeError):
        node = None
    v, kind = error.instance, type(error.kind).__name__
    if not isinstance(node, dict):
        return f"{w}: {error.message}"
    if kind == "Type":
        kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
        return f"{w}: expected {' or '.join(kinds)}, got {_kind_of(v)}"
    if kind == "AdditionalProperties" and isinstance(v, dict):
        key = next(k for k in v if k not in (node.get("properties") or {}))
        return f"{w}.{key}: a field the schema does not name"
    if kind == "Required" and isinstance(v, dict):
        return f"{w}: '{next(k for k in node['required'] if k not in v)}' is missing"
    worded = {
        "Enum": lambda: (
            f"{w}: {_show(v)} is not one of {', '.join(_show(a) for a in node['enum'])}"
        ),
        "Constant": lambda: f"{w}: must be {_show(node['const'])}, not {_show(v)}",
        "Minimum": lambda: f"{w}: {v} is below the minimum {node['minimum']}",
        "Pattern": lambda: f"{w}: {_show(v)} does not match {node['pattern']!r}",
        "MinItems": lambda: f"{w} has {len(v)} items, at least {node.get('minItems', 0)}",
        "MaxItems": lambda: f"{w} has {len(v)} items, at most {node.get('maxItems')}",
        "FalseSchema": lambda: f"{w}: no value is allowed here",
    }
    return worded.get(kind, lambda: f"{w}: {error.message}")()


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 40 else text[:37] + "..."


_NINT = {"type": ["integer", "null"]}
_NNUM = {"type": ["number", "null"]}
_NSTR = {"type": ["string", "null"]}
# the numbers of one GPU's load summary (health.json's load.gpus[], provenance's samples.gpus[])
LOAD_SUMMARY_NUMBERS = (
    "sm_mhz_min",
    "sm_mhz_median",
    "sm_mhz_max_allowed",
    "power_w_max",
    "power_w_median",
    "enforced_limit_w",
    "sw_power_cap_fraction",
    "hw_slowdown_fraction",
    "sw_thermal_fraction",
)
_LOAD_GPU = {
    "type": "object",
    "properties": {
        "gpu": _NINT,
        "samples": _NINT,
        "pcie_gen_max": _NINT,
        **{k: _NNUM for k in LOAD_SUMMARY_NUMBERS},
    },
}
_SAMPLE_GPU = {
    "type": "object",
    "properties": {
        "index": _NINT,
        "active_reasons": {"type": ["array", "null"], "items": {"type": "string"}},
        **{
            k: _NNUM
            for k in (
                "sm_mhz",
                "mem_mhz",
                "power_w",
                "enforced_limit_w",
                "temperature_c",
                "utilization_gpu_pct",
                "pcie_gen",
            )
        },
    },
}
READ_BY_CONTROLLER = {
    "type": "object",
    "properties": {
        "load": {
            "type": ["object", "null"],
            "properties": {
                "seconds": _NNUM,
                "interval_s": _NNUM,
                "engine": _NSTR,
                "pid": _NINT,
                "exit_code": _NINT,
                "refused": _NSTR,
                "started_s": _NNUM,
                "ended_s": _NNUM,  # the busy window the summary covers
                "summary": {"type": ["array", "null"], "items": _LOAD_GPU},
                "samples": {
                    "type": ["array", "null"],
                    "items": {
                        "type": "object",
                        "properties": {
                            "t": _NNUM,
                            "phase": _NSTR,
                            "gpus": {"type": ["array", "null"], "items": _SAMPLE_GPU},
                        },
                    },
                },
            },
        },
        "contracts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "evidence": {
                        "type": "object",
                        "properties": {
                            "pci": {
                                "type": ["object", "null"],
                                "properties": {
                                    "on_bus": _NINT,
                                    "missing_from_nvml": {
                                        "type": ["array", "null"],
                                        "items": {"type": "string"},
                                    },
                                },
                            },
                            "processes": {
                                "type": ["array", "null"],
                                "items": {
                                    "type": "object",
                                    "properties": {"gpu": _NINT, "pid": _NINT, "name": _NSTR},
                                },
                            },
                        },
                    }
                },
            },
        },
    },
}


@lru_cache(maxsize=None)
def readable_check() -> Check:
    """The compiled READ_BY_CONTROLLER schema."""
    return compile_schema(READ_BY_CONTROLLER)


def readable_problem(health: Any, where: str = "health.json") -> str | None:
    """Why the controller could not read a part of a schema-valid `health` (READ_BY_CONTROLLER), or
    None."""
    return readable_check()(health, where)


@lru_cache(maxsize=None)
def health_schema() -> dict:
    """The published health.json schema, read once per process (not to be changed in place)."""
    return json.loads(HEALTH_SCHEMA.read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def health_check() -> Check:
    """The compiled health.json schema."""
    return compile_schema(health_schema())


def health_problem(health: Any) -> str | None:
    """Why `health` is not a valid health.json of schema 1.x, or None when it is."""
    return health_check()(health, "health.json") or readable_problem(health)


_OBJ_OR_NULL = {"type": ["object", "null"]}
RECORD = {
    "type": "object",
    "required": ["record_version", "host", "status"],
    "properties": {
        "record_version": {"type": "integer"},
        "host": {"type": "string"},
        "address": _NSTR,
        "port": _NINT,
        "status": {"enum": ["ok", "failed"]},
        "failure": {
            "type": ["object", "null"],
            "required": ["class"],
            "properties": {"class": {"type": "string"}, "message": _NSTR},
        },
        "attempts": _NINT,
        "started_at": _NSTR,
        "ended_at": _NSTR,
        "duration_s": _NNUM,
        "exit_status": _NINT,
        "stderr": _NSTR,
        "health": _OBJ_OR_NULL,
        "wrap": _OBJ_OR_NULL,
        "groups": {"type": ["array", "string", "null"], "items": {"type": "string"}},
        "unknown_numbers": {"type": ["array", "null"], "items": {"type": "object"}},
    },
}
_SNAPSHOT_HOST = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "groups": {"type": ["array", "null"], "items": {"type": "string"}},
    },
}
_INVENTORY = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "snapshot": {
            "type": "object",
            "properties": {"hosts": {"type": "array", "items": _SNAPSHOT_HOST}},
        },
    },
}
MANIFEST = {
    "type": "object",
    "required": ["format", "record_version"],
    "properties": {
        "format": {"type": "string"},
        "record_version": {"type": "integer"},
        "sweep_version": _NSTR,
        # state and times: each reader words its own check
        "inventory": _INVENTORY,
        "options": {"type": "object"},
        "hosts": {"type": "array", "items": {"type": "string"}},
        "sessions": {"type": "array", "items": {"type": "object"}},
        "counts": {"type": ["object", "null"], "additionalProperties": {"type": "integer"}},
    },
}


@lru_cache(maxsize=None)
def _compiled(name: str) -> Check:
    return compile_schema({"RECORD": RECORD, "MANIFEST": MANIFEST}[name])


def record_problem(record: Any, where: str = "record") -> str | None:
    """Why `record` is not a host record the controller can read back (its envelope, then an ok
    record's health.json against the published schema and READ_BY_CONTROLLER), or None."""
    problem = _compiled("RECORD")(record, where)
    if problem is None and record.get("health") is not None:
        health = record["health"]
        problem = health_check()(health, f"{where}.health") or readable_problem(
            health, f"{where}.health"
        )
    return problem


def manifest_problem(manifest: Any, where: str = "manifest.json") -> str | None:
    """Why `manifest` is not a run manifest a reader can use (`MANIFEST`), or None."""
    return _compiled("MANIFEST")(manifest, where)


# ---------------------------------------------------------------- the contract chain's part of the
# schema

_CHAIN_SPOTS = {  # what the chain declares -> where the schema's text says it
    "contracts.maxItems": re.compile(
        r'("contracts": \{\s*"type": "array",\s*"minItems": \d+, "maxItems": )(\d+)'
    ),
    "contracts.items.name.enum": re.compile(r'("name": \{"enum": )(\[[^\]]*\])'),
    "lowest_broken.enum": re.compile(r'("lowest_broken": \{"enum": )(\[[^\]]*\])'),
}


def chain_parts() -> dict[str, Any]:
    """The values of the health schema that `probe_agent.chain.CONTRACTS` (the one declaration of a
    contract) decides: how many contracts a health.json holds at most, their names, the lowest
    broken one's names."""
    from probe_agent import chain

    names = [c.name for c in chain.CONTRACTS]
    return {
        "contracts.maxItems": len(names),
        "contracts.items.name.enum": names,
        "lowest_broken.enum": [None, *names],
    }


def schema_from_chain(text: str) -> str:
    """The health schema's text with the chain's parts written in (`chain_parts`), every other byte
    kept."""
    for place, value in chain_parts().items():
        text, count = _CHAIN_SPOTS[place].subn(lambda m, v=value: m.group(1) + json.dumps(v), text)
        if count != 1:
            raise SweepError(
                f"{place} is not where the generator looks for it ({count} places)",
                where=str(HEALTH_SCHEMA),
                fix="keep the schema's layout, or update _CHAIN_SPOTS",
            )
    return text


# docs/agent.md's table of contracts, and the README's line of them, are the chain's too
_TABLE = re.compile(r"^  \| # \| contract \| broken when \| warning when \|\n(?:  \|.*\n)*", re.M)
_LINE = re.compile(r"(naming the lowest broken one:\n\n)((?:> .*\n)+)")


def contract_table() -> str:
    """docs/agent.md's table of contracts: one row per contract of the chain, in its order, with its
    name, its title and when it is broken and when it is a warning."""
    from probe_agent import chain

    def cell(text: str) -> str:
        return f" {text.replace('|', chr(92) + '|')} " if text else " "

    rows = "".join(
        f"  | {n} | `{c.name}`: {c.title} |{cell(c.broken_when)}|{cell(c.warning_when)}|\n"
        for n, c in enumerate(chain.CONTRACTS, 1)
    )
    return "  | # | contract | broken when | warning when |\n  |---|---|---|---|\n" + rows


def contract_line() -> str:
    """The README's line of the chain: its contracts' names in order, as a quote of at most 100
    columns."""
    from probe_agent import chain

    lines, line = [], ">"
    for n, c in enumerate(chain.CONTRACTS):
        word = c.name + (" ·" if n < len(chain.CONTRACTS) - 1 else "")
        if len(line) + 1 + len(word) > 100:
            lines.append(line)
            line = ">"
        line += " " + word
    return "\n".join([*lines, line]) + "\n"


def docs_from_chain(agent_doc: str, readme: str) -> tuple[str, str]:
    """docs/agent.md and README.md with the chain's table and line written in, every other byte
    kept."""
    agent_doc, tables = _TABLE.subn(lambda m: contract_table(), agent_doc)
    readme, lines = _LINE.subn(lambda m: m.group(1) + contract_line(), readme)
    for path, count, what in (
        (AGENT_DOC, tables, "the table of contracts"),
        (README, lines, "the line of contracts"),
    ):
        if count != 1:
            raise SweepError(
                f"{what} is not where the generator looks for it ({count} places)",
                where=str(path),
                fix="keep its layout, or update _TABLE / _LINE in sweep/schema.py",
            )
    return agent_doc, readme


# python -m sweep.schema --from-chain: the chain's parts into the schema, docs/agent.md and README
if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--from-chain"]:
        sys.exit("usage: python -m sweep.schema --from-chain")
    HEALTH_SCHEMA.write_text(
        schema_from_chain(HEALTH_SCHEMA.read_text(encoding="utf-8")), encoding="utf-8"
    )
    doc, front = docs_from_chain(
        AGENT_DOC.read_text(encoding="utf-8"), README.read_text(encoding="utf-8")
    )
    AGENT_DOC.write_text(doc, encoding="utf-8")
    README.write_text(front, encoding="utf-8")
