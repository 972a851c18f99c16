"""What changed between two probes (health.json files): the conclusion, then its evidence, then the
rest.

`explain_files(a, b)` opens with one or two lines saying what the clock and power evidence means
(`sweep.audit.throttle.conclusion`); `diff_health(a, b)` returns the changed fields, each with its
category (`sweep.audit.fields.PROBE_CATEGORIES`), in the order a person debugging "it got slower"
reads them: the throttle evidence (the fields that prove or clear the conclusion: clock-event
reasons, SM clock, power draw, the load's sample summaries), then link errors (NVLink counters and
PCIe replays that rose, new Xid events), links and fabric, power and clock policy, memory
health and modes, processes, the verdict, identity and software, then readings that prove nothing
by themselves (temperature, utilisation, memory clock, pstate), then the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.audit.fields import PROBE_CATEGORIES, first_match, generic, probe_category
from sweep.errors import HealthFileError
from sweep.schema import LOAD_SUMMARY_NUMBERS
from sweep.store import normalize_health, read_json
from sweep.text import plural


@dataclass(frozen=True)
class Change:
    category: str
    path: str
    before: Any
    after: Any


def _read_json(path: Path):
    return read_json(path, HealthFileError, "give the path of a health.json")


def load_health(path: str | Path) -> dict:
    """A health.json, a host record holding one, or a provenance file's probe before its command."""
    path = Path(path)
    data = _read_json(path)
    if isinstance(data, dict) and isinstance(data.get("health"), dict):
        data = data["health"]
    if isinstance(data, dict) and data.get("kind") == PROVENANCE_KIND:
        data = _check_provenance(data, path)["before"]
    if not isinstance(data, dict) or data.get("kind") != "sweep.health":
        raise HealthFileError(
            "not a sweep health.json (no kind 'sweep.health')",
            where=str(path),
            fix="give a file written by the sweep agent or a run folder's hosts/*.json",
        )
    major = str(data.get("schema_version", "")).split(".")[0]
    if major != "1":
        raise HealthFileError(
            f"health.json schema version {data.get('schema_version')} is not supported by this "
            "sweep (it reads 1.x)",
            where=str(path),
            fix="upgrade sweep to read newer probes",
        )
    return normalize_health(data)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts/lists as {path: leaf}; GPUs and contracts keyed by index / name."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        # `pending`: its alias (store.normalize_health)
        if prefix.endswith(".ecc") and "pending_mode" in value:
            value = {k: v for k, v in value.items() if k != "pending"}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for n, v in enumerate(value):
            key = (
                v.get("name")
                if prefix == "contracts"
                else v.get("index", v.get("gpu", v.get("pid", n)))
            )
            out.update(flatten(v, f"{prefix}[{key}]"))
    else:
        out[prefix] = value
    return out


def rising_link_errors(changes: list[Change]) -> list[str]:
    """The link-error counters that rose between two probes, as findings: NVLink CRC / replay /
    recovery and PCIe replays climb on a link that is failing, before it drops."""
    out = []
    for c in changes:
        if c.category != "link errors" or not all(isinstance(v, int) for v in (c.before, c.after)):
            continue
        if c.after > c.before and not c.path.startswith("kernel_log"):
            out.append(
                f"{c.path} rose by {c.after - c.before} ({c.before} -> {c.after}): a link is "
                "taking errors; watch it (nvidia-smi nvlink -e, -q -d PCIE) and reseat or "
                "replace it if it keeps rising"
            )
        elif c.path == "kernel_log.xid_lines" and c.after > c.before:
            out.append(
                f"{plural(c.after - c.before, 'new Xid line')} in the kernel log: read "
                "kernel_log.xid"
            )
    return out


def diff_health(a: dict, b: dict) -> list[Change]:
    fa, fb = flatten(a), flatten(b)
    order = {name: n for n, (name, _) in enumerate(PROBE_CATEGORIES)}
    changes = []
    for path in sorted(set(fa) | set(fb)):
        before, after = fa.get(path), fb.get(path)
        if before == after:
            continue
        cat = probe_category(path)
        if cat is not None:
            changes.append(Change(cat, path, before, after))
    changes.sort(key=lambda c: (order[c.category], c.path))
    return changes


# --- provenance files (`sweep wrap`): the probe before the command, then what the samples saw ---

PROVENANCE_KIND = "sweep.provenance"
# The run's own evidence, shown after the probes' changes in this order.
RUN_CATEGORIES: list[tuple[str, tuple[str, ...]]] = [
    ("throttle evidence", ("samples.gpus#.*", "samples.hw_slowdown")),
    ("processes", ("samples.other_processes*", "samples.unattributed_processes*")),
    ("changed during the run", ("during.*",)),
    ("command", ("command.*",)),
]
SAMPLE_SUMMARY_FIELDS = LOAD_SUMMARY_NUMBERS
# Run-to-run noise, not a reason: relative for clocks, power and wall time; absolute for fractions
# of samples.
NOISE_RELATIVE = 0.02
NOISE_FRACTION = 0.05


def _check_provenance(data: dict, path: Path) -> dict:
    major = str(data.get("schema_version", "")).split(".")[0]
    if major != "1":
        raise HealthFileError(
            f"provenance schema version {data.get('schema_version')} is not supported by this "
            "sweep (it reads 1.x)",
            where=str(path),
            fix="upgrade sweep to read newer provenance",
        )
    if not isinstance(data.get("before"), dict):
        raise HealthFileError(
            "provenance file without its probe before the command",
            where=str(path),
            fix="give a provenance.json written by sweep wrap",
        )
    return data


def load_provenance(path: str | Path) -> dict:
    """A provenance.json written by `sweep wrap`."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict) or data.get("kind") != PROVENANCE_KIND:
        raise HealthFileError(
            "not a sweep provenance.json (no kind 'sweep.provenance')",
            where=str(path),
            fix="give a provenance.json written by sweep wrap",
        )
    return _check_provenance(data, path)


def _run_view(p: dict) -> dict:
    """What a provenance file says beyond its probe before, in the shape `flatten` keys well."""
    v = p.get("verdict") or {}
    procs = lambda key: [
        {"pid": x.get("pid"), "name": x.get("name"), "gpus": x.get("gpus")}
        for x in v.get(key) or []
    ]
    cmd = p.get("command") or {}
    return {
        "samples": {
            "hw_slowdown": v.get("hw_slowdown"),
            "gpus": [
                dict({"gpu": g.get("gpu")}, **{k: g.get(k) for k in SAMPLE_SUMMARY_FIELDS})
                for g in v.get("gpus") or []
            ],
            "other_processes": procs("other_processes"),
            "unattributed_processes": procs("unattributed_processes"),
        },
        "during": {
            c.get("field"): {"before": c.get("before"), "after": c.get("after")}
            for c in v.get("changes") or []
        },
        "command": {
            "argv": cmd.get("argv"),
            "exit_code": cmd.get("exit_code"),
            "wall_s": cmd.get("wall_s"),
        },
    }


def _is_noise(path: str, a: Any, b: Any) -> bool:
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b)):
        return False
    g = generic(path)
    if g.endswith("_fraction"):
        return abs(a - b) < NOISE_FRACTION
    if g.startswith("samples.gpus#.") or g == "command.wall_s":
        return abs(a - b) <= NOISE_RELATIVE * max(abs(a), abs(b))
    return False


def _run_category(path: str) -> str:
    return first_match(RUN_CATEGORIES, generic(path))


def diff_provenance(a: dict, b: dict) -> list[Change]:
    """Why two wrapped runs differ: the probes before them first (`before.*`), then what their
    samples saw (`samples.*`), what changed during each run (`during.*`), the command (`command.*`).
    Differences within run-to-run noise (NOISE_RELATIVE, NOISE_FRACTION) are left out."""
    changes = [
        Change(c.category, "before." + c.path, c.before, c.after)
        for c in diff_health(a["before"], b["before"])
    ]
    fa, fb = flatten(_run_view(a)), flatten(_run_view(b))
    order = {name: n for n, (name, _) in enumerate(RUN_CATEGORIES)}
    run = [
        Change(_run_category(path), path, fa.get(path), fb.get(path))
        for path in sorted(set(fa) | set(fb))
        if fa.get(path) != fb.get(path) and not _is_noise(path, fa.get(path), fb.get(path))
    ]
    run.sort(key=lambda c: (order[c.category], c.path))
    changes += run
    # an empty list that gained items flattens to "[] -> None" beside the items' own changes: drop
    # it
    return [
        c
        for c in changes
        if not (_emptied(c) and any(d.path.startswith(c.path + "[") for d in changes))
    ]


def _emptied(c: Change) -> bool:
    return (c.before == [] and c.after is None) or (c.before is None and c.after == [])


def explain_files(before: str | Path, after: str | Path) -> tuple[list[str], list[Change]]:
    """`sweep diff`: (the conclusion in one or two lines, the changes in reading order). Two
    provenance files compare as runs; otherwise as probes (a provenance file standing for its probe
    before the command)."""
    from sweep.audit.throttle import conclusion, conclusion_of_runs

    if _kind(before) == _kind(after) == PROVENANCE_KIND:
        a, b = load_provenance(before), load_provenance(after)
        return conclusion_of_runs(a, b), diff_provenance(a, b)
    a, b = load_health(before), load_health(after)
    return conclusion(a, b), diff_health(a, b)


def probes_of(before: str | Path, after: str | Path) -> tuple[dict, dict]:
    """The two health documents `sweep diff A B` compares as machines (a provenance file: its probe
    before)."""
    return load_health(before), load_health(after)


def _kind(path: str | Path):
    data = _read_json(Path(path))
    return data.get("kind") if isinstance(data, dict) else None
