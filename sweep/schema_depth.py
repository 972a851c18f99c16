"""The depth check folded into the schema check: one jsonschema-rs call says a document is valid
and nests no deeper than `sweep.strictjson.MAX_DEPTH` (issue 52).

Every host answer and every record this user's sweep did not sign is parsed by orjson, then had its
depth checked (orjson's indented dump of the whole document, 45-50 us for an eight-GPU health.json:
a quarter of the judge's work per host), then was checked against the schemas. The schemas already
fix the shape, so the depth of all but their free-form parts (`load`, each contract's `evidence`,
the mask's lists, a record's `wrap`...: an object without ``additionalProperties: false``, an array
without ``items``) is bounded by them. `depth_bounded` rewrites a schema so that each free-form
part may nest only as deep as the limit leaves at its place; a document valid under it is valid
under the original and no deeper than the limit. A document it refuses takes the old way (the depth
walk, then each check with its message), so every message stays as it was.

The rewrite knows the keywords the published schema and `sweep.schema.RECORD` use (type,
properties, additionalProperties, items, $ref to $defs, enum, const and the scalar keywords); any
other keyword that takes a subschema is refused (ValueError), so a schema that grows one cannot
leave a part unbounded unnoticed (tests/unit/test_schema_depth.py).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

import jsonschema_rs

from sweep.schema import RECORD, health_schema, readable_check
from sweep.strictjson import MAX_DEPTH

# keywords that constrain a value without a subschema (their value is data, not a schema)
_LEAF_KEYWORDS = {
    "$schema", "$id", "title", "description", "type", "required", "pattern", "const", "enum",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
    "minLength", "maxLength", "format", "default", "examples", "$comment",
}  # fmt: skip
_SUBSCHEMA_KEYWORDS = {"properties", "additionalProperties", "items", "$ref", "$defs"}
_CONTAINER_TYPES = ["object", "array"]


def _level(depth: int) -> str:
    return f"sweep_depth_{depth}"


def _free(depth: int, max_depth: int) -> dict:
    """Any value at `depth` (the root is 1) that nests at most to `max_depth`."""
    if depth > max_depth:
        return {"not": {"type": _CONTAINER_TYPES}}
    return {"$ref": f"#/$defs/{_level(depth)}"}


def depth_bounded(schema: dict, max_depth: int = MAX_DEPTH, depth: int = 1) -> dict:
    """`schema` (for a value at `depth`) with each free-form part bounded to `max_depth`; its own
    $refs inlined, one $defs entry per depth level for the free-form parts."""
    defs = schema.get("$defs", {})
    bounded = _bound(schema, depth, max_depth, defs)
    levels = {
        _level(d): {
            "additionalProperties": _free(d + 1, max_depth),
            "items": _free(d + 1, max_depth),
        }
        for d in range(1, max_depth + 1)
    }
    return {**bounded, "$defs": levels}


def _bound(schema: Any, depth: int, max_depth: int, defs: dict) -> Any:
    if schema is True or schema == {}:
        return _free(depth, max_depth)
    if schema is False:
        return False
    if not isinstance(schema, dict):
        raise ValueError(f"not a schema: {schema!r}")
    unknown = set(schema) - _LEAF_KEYWORDS - _SUBSCHEMA_KEYWORDS
    if unknown:
        raise ValueError(
            f"keyword(s) {', '.join(sorted(unknown))}: the depth rewrite does not know them"
        )
    if "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/$defs/") or ref[len("#/$defs/") :] not in defs:
            raise ValueError(f"$ref {ref}: only refs into the schema's own $defs are inlined")
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return _bound({**defs[ref[len("#/$defs/") :]], **rest}, depth, max_depth, defs)
    out = {k: v for k, v in schema.items() if k in _LEAF_KEYWORDS and k != "$schema"}
    if "$schema" in schema:
        out["$schema"] = schema["$schema"]
    if "enum" in schema or "const" in schema:
        constants = schema.get("enum", [schema.get("const")])
        if any(isinstance(c, (dict, list)) for c in constants):
            raise ValueError("an enum or const of containers: the depth rewrite does not know it")
        return out  # one of these constants, or nothing
    kinds = schema.get("type")
    kinds = set(kinds if isinstance(kinds, list) else [kinds]) if kinds else {"object", "array"}
    if "object" in kinds:
        out["properties"] = {
            name: _bound(sub, depth + 1, max_depth, defs)
            for name, sub in schema.get("properties", {}).items()
        }
        out["additionalProperties"] = _bound(
            schema.get("additionalProperties", True), depth + 1, max_depth, defs
        )
    if "array" in kinds:
        out["items"] = _bound(schema.get("items", True), depth + 1, max_depth, defs)
    if kinds & {"object", "array"} and depth > max_depth:
        out = {"allOf": [out, {"not": {"type": _CONTAINER_TYPES}}]}
    return out


@lru_cache(maxsize=None)
def health_fits() -> Callable[[Any], bool]:
    """True for a valid health.json (the published schema and READ_BY_CONTROLLER) no deeper than
    MAX_DEPTH; False sends the caller the old way."""
    bounded = jsonschema_rs.validator_for(depth_bounded(health_schema())).is_valid
    readable = readable_check().is_valid
    return lambda document: bounded(document) and readable(document)


@lru_cache(maxsize=None)
def record_fits() -> Callable[[Any], bool]:
    """True for a host record (`RECORD`, its health.json as `health_fits` takes it) no deeper than
    MAX_DEPTH."""
    health = health_schema()
    record = {
        **RECORD,
        "$defs": health.get("$defs", {}),
        "properties": {
            **RECORD["properties"],
            "health": {
                **{k: v for k, v in health.items() if k not in ("$defs", "$schema", "$id")},
                "type": ["object", "null"],
            },
        },
    }
    bounded = jsonschema_rs.validator_for(
        {"$schema": health.get("$schema"), **depth_bounded(record)}
    ).is_valid
    readable = readable_check().is_valid

    def fits(document: Any) -> bool:
        if not bounded(document):
            return False
        inner = document.get("health")
        return inner is None or readable(inner)

    return fits
