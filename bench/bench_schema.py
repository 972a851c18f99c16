"""How long a health.json schema check takes: sweep's compiled validator against the libraries.

    python3 bench/bench_schema.py [--gpus 8]

Checks one generated eight-GPU H200 health.json (tests/unit/fleet_variants.py) against the published
schema, probe_agent/schema/health-1.schema.json, with sweep.schema's check (jsonschema-rs since issue 52;
run it with BENCH_TREE pointing at an older tree for the hand-written compiler), a cached jsonschema
validator and (when installed: it is no dependency of sweep) fastjsonschema; prints the best of 5
repetitions per document, and fastjsonschema's compile time (paid once in every process).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [os.environ.get("BENCH_TREE", str(ROOT)), str(ROOT / "tests" / "unit")]

import fleet_variants as fv  # noqa: E402
import jsonschema  # noqa: E402

from sweep.schema import HEALTH_SCHEMA, health_check  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=8)
    gpus = parser.parse_args().gpus
    health = fv.must_show_health("gpu01", gpus)
    schema = json.loads(HEALTH_SCHEMA.read_text())
    print(f"{len(health['gpus'])} GPUs, {len(json.dumps(health)):,} bytes")
    checks = {"sweep.schema.health_check": (lambda check=health_check(): check(health, "health.json")),
              "jsonschema, validator cached": (lambda v=jsonschema.validators.validator_for(schema)(schema):
                                               v.is_valid(health))}
    try:
        import fastjsonschema
    except ImportError:
        print("fastjsonschema: not installed")
    else:
        started = time.perf_counter()
        compiled = fastjsonschema.compile(schema)
        print(f"fastjsonschema compile: {1e3 * (time.perf_counter() - started):.0f} ms")
        checks["fastjsonschema"] = lambda: compiled(health)
    for name, check in checks.items():
        number = 50 if "jsonschema," in name else 200
        best = min(timeit.repeat(check, number=number, repeat=5)) / number
        print(f"{name}: {best * 1e3:.3f} ms a document")


if __name__ == "__main__":
    main()
