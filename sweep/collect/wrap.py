"""`sweep run INVENTORY --wrap -- COMMAND`: the benchmark on every host, inside the agent's
envelope.

On each host the agent probes, refuses to start the command on a broken contract or another
process on the GPUs (unless `--force`, which the record keeps), runs it in its own process group
(probe before, samples during, probe after) and prints provenance.json with the command's exit
code and the tail of its output (`probe_agent/wrap/`, `--emit`). The SSH session's stdin stays
open (`--tether`): when the controller closes the session (Ctrl-C, its host deadline) the agent
ends the command, and at its own `--command-timeout` it ends it anyway.

Everything the host sends is checked before use: the provenance against its published schema,
the output tail held to `--output-tail` bytes here too (a host may send more than it was asked),
the figures taken from it only as numbers (finite, parsed by Python's float) under names of
printable characters, at most FIGURES_MAX names a host (the record says how many were dropped).
What the controller knows itself is compared with what the provenance says (`provenance_mismatches`:
the command it sent, the agent version it pushed, the sampling it asked for, how long the session
lasted, one host before and after): a mismatch makes the host's benchmark ``failed`` with the
mismatch as the reason, and none of its figures is kept.
The names the operator gave with `--metric` are read from the operator's expressions only: a
JSON line the command prints under such a name is ignored.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from probe_agent import AGENT_VERSION
from sweep.errors import ConfigError
from sweep.text import plural, visible

PROVENANCE_KIND = "sweep.provenance"
NAME = re.compile(r"[A-Za-z0-9_.:/%+-]{1,64}\Z")
JSON_LINE_MAX = 4096  # a longer line is not a figure
FIGURES_MAX = 32  # figure names kept per host from JSON lines (the --metric ones are always kept)
# what became of the benchmark on one host; "ok" is the only one with a figure to compare


@dataclass(frozen=True)
class Metric:
    """`--metric NAME=REGEX`: the first group is the number, a second group (if any) its unit."""

    name: str
    pattern: str

    @classmethod
    def parse(cls, text: str) -> "Metric":
        name, sep, pattern = text.partition("=")
        if not sep or not NAME.match(name) or not pattern:
            raise ConfigError(
                f"--metric {text!r} is not NAME=REGEX",
                where="--metric",
                fix="write it as --metric 'tflops=TFLOP/s: ([0-9.]+)' (a name of letters, digits "
                "and _.:/%+-, then =, then a regular expression whose first group is the number)",
            )
        try:
            groups = re.compile(pattern).groups
        except re.error as err:
            raise ConfigError(
                f"--metric {name}: the regular expression does not compile ({err})",
                where="--metric",
                fix="fix the expression (Python re syntax)",
            ) from None
        if groups < 1:
            raise ConfigError(
                f"--metric {name}: the regular expression has no group",
                where="--metric",
                fix="put the number in parentheses: 'TFLOP/s: ([0-9.]+)'",
            )
        return cls(name, pattern)


@dataclass(frozen=True)
class WrapSpec:
    """What `sweep run --wrap` runs on every host, and how the figures are read from its output."""

    command: tuple[str, ...]
    metrics: tuple[Metric, ...] = ()
    force: bool = False
    interval: float = 0.2
    max_samples: int = 1000
    output_tail: int = 65536

    def __post_init__(self):
        if not self.command:
            raise ConfigError(
                "--wrap needs a command", fix="sweep run INVENTORY --wrap -- COMMAND [ARGS...]"
            )
        if not self.interval > 0:
            raise ConfigError(
                f"--interval is {self.interval}; it must be above 0", where="--interval"
            )

    def agent_args(self, host_deadline: float) -> list[str]:
        """The agent's arguments for a host whose deadline is `host_deadline` seconds."""
        probe, timeout = budget(host_deadline)
        args = [
            "--wrap",
            "--emit",
            "--refuse",
            "--tether",
            "--deadline",
            f"{probe:g}",
            "--command-timeout",
            f"{timeout:g}",
            "--interval",
            f"{self.interval:g}",
            "--max-samples",
            str(self.max_samples),
            "--output-tail",
            str(self.output_tail),
        ]
        return args + (["--force"] if self.force else []) + ["--", *self.command]

    def to_dict(self) -> dict:
        return {
            "command": list(self.command),
            "metrics": [f"{m.name}={m.pattern}" for m in self.metrics],
            "force": self.force,
            "interval": self.interval,
            "max_samples": self.max_samples,
            "output_tail": self.output_tail,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "WrapSpec":
        return cls(
            tuple(d["command"]),
            tuple(Metric.parse(m) for m in d.get("metrics") or ()),
            bool(d.get("force")),
            float(d.get("interval", 0.2)),
            int(d.get("max_samples", 1000)),
            int(d.get("output_tail", 65536)),
        )


def budget(host_deadline: float) -> tuple[float, float]:
    """(seconds each probe may take, seconds the command may run) within one host's deadline.

    The two probes and the transfer must fit beside the command: a probe gets a tenth of the
    deadline (2 to 30 s) and 5% (at least 3 s) is kept for the connection and the answer.
    """
    probe = min(30.0, max(2.0, 0.1 * host_deadline))
    command = host_deadline - 2 * probe - max(3.0, 0.05 * host_deadline)
    if command < 1.0:
        raise ConfigError(
            f"--host-deadline {host_deadline:g} s leaves no time for the command (the probes "
            f"before and after take up to {2 * probe:g} s)",
            where="--host-deadline",
            fix="give the benchmark's run time plus a minute: --host-deadline 900, say",
        )
    return round(probe, 1), round(command, 1)


@lru_cache(maxsize=None)
def _validator():
    import jsonschema
    from referencing import Registry, Resource

    root = Path(__file__).resolve().parents[2] / "probe_agent" / "schema"
    health = json.loads((root / "health-1.schema.json").read_text(encoding="utf-8"))
    prov = json.loads((root / "provenance-1.schema.json").read_text(encoding="utf-8"))
    registry = Registry().with_resource(health["$id"], Resource.from_contents(health))
    return jsonschema.Draft202012Validator(prov, registry=registry)


def provenance_problem(doc: Any) -> str | None:
    """Why `doc` is not a provenance.json of schema 1.x with the output tail, or None when it is."""
    if not isinstance(doc, dict) or doc.get("kind") != PROVENANCE_KIND:
        return "not a sweep.provenance document"
    version = doc.get("schema_version")
    if not isinstance(version, str) or not re.match(r"1\.\d+\Z", version):
        return f"schema_version {version!r} is not 1.x"
    error = next(iter(_validator().iter_errors(doc)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "provenance.json"
        return f"{where}: {error.message[:160]}"
    if not isinstance(doc.get("output"), dict):
        return "no output section (an agent without --emit)"
    from sweep.schema import readable_problem

    for part in ("before", "after"):
        problem = readable_problem(doc.get(part), part) if isinstance(doc.get(part), dict) else None
        if problem:
            return problem
    return None


def read_figures(tail: str, metrics: tuple[Metric, ...]) -> tuple[dict, int]:
    """(the figures, how many other figure names were dropped past FIGURES_MAX).

    The operator's --metric names come first and are never taken from a JSON line; of the JSON
    lines, the last value of each of the first FIGURES_MAX names is kept.
    """
    found: dict[str, dict] = {}
    for m in metrics:
        for match in reversed(list(re.finditer(m.pattern, tail))):
            value = _number(match.group(1))
            if value is not None:
                unit = match.group(2) if match.re.groups >= 2 else None
                found[m.name] = {"value": value, "unit": _unit(unit), "source": "--metric"}
                break
    named = {m.name for m in metrics}
    dropped: set[str] = set()
    for doc in _json_lines(tail):
        name, value = doc["metric"], _number(doc.get("value"))
        if value is None or name in named:
            continue
        if name not in found and len(found) - len(named & set(found)) >= FIGURES_MAX:
            dropped.add(name)
            continue
        found[name] = {"value": value, "unit": _unit(doc.get("unit")), "source": "json line"}
    return found, len(dropped)


def _json_lines(tail: str):
    """The metric lines of the output: JSON objects with a "metric" name of NAME's characters."""
    for line in tail.splitlines():
        line = line.strip()
        if not (line.startswith("{") and len(line) <= JSON_LINE_MAX and '"metric"' in line):
            continue
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if (
            isinstance(doc, dict)
            and isinstance(doc.get("metric"), str)
            and NAME.match(doc["metric"])
        ):
            yield doc


def held_tail(output: dict, limit: int) -> dict:
    """The output section with its tail held to the last `limit` bytes (UTF-8), whatever the host
    sent."""
    raw = output["tail"].encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return output
    kept = raw[-limit:].decode("utf-8", "ignore")
    return dict(
        output,
        tail=kept,
        truncated=True,
        tail_limit_bytes=limit,
        bytes=max(output.get("bytes") or 0, len(raw)),
    )


def _number(raw) -> float | None:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        return None
    if isinstance(raw, str) and (len(raw) > 40 or not re.fullmatch(r"\s*[-+]?[0-9.eE+-]+\s*", raw)):
        return None
    try:
        value = float(raw)
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def _unit(raw) -> str | None:
    return visible(raw.strip(), keep="")[:32] or None if isinstance(raw, str) else None


def bench_status(provenance: dict, figures: dict) -> tuple[str, str]:
    """(ok, refused, failed, timed_out or no_figure, a line saying why) for one host's run."""
    cmd = provenance["command"]
    if cmd.get("refused"):
        return "refused", f"not started: {cmd['refused']}; --force runs it anyway (recorded)"
    if cmd.get("timed_out"):
        return "timed_out", (
            f"ended at the command timeout of {cmd.get('timeout_s'):g} s (its process group); "
            "raise --host-deadline"
        )
    if cmd.get("ended_by"):
        return "failed", f"ended: {cmd['ended_by']}"
    if cmd.get("error"):
        return "failed", f"could not start: {cmd['error']} (exit {cmd['exit_code']})"
    if cmd.get("exit_code"):
        sig = f", {cmd['signal']}" if cmd.get("signal") else ""
        return (
            "failed",
            f"the command failed (exit {cmd['exit_code']}{sig}); the output's tail is in the "
            "record",
        )
    if not figures:
        return "no_figure", (
            "the command printed no figure: give --metric NAME=REGEX, or print a JSON line "
            '{"metric": NAME, "value": NUMBER}'
        )
    return "ok", ", ".join(
        f"{k} {v['value']:g}{' ' + v['unit'] if v['unit'] else ''}" for k, v in figures.items()
    )


def provenance_mismatches(
    provenance: dict, spec: WrapSpec, session_s: float | None = None
) -> list[str]:
    """What a host's provenance says against what the controller knows: the command it sent, the
    agent it pushed, the sampling it asked for, the session's length (`session_s`), one host before
    and after."""
    found = []
    argv = provenance["command"].get("argv")
    if list(argv) != list(spec.command):
        found.append(
            f"command.argv {visible(json.dumps(argv))[:200]} is not the command sent "
            f"{visible(json.dumps(list(spec.command)))[:200]}"
        )
    version = (provenance.get("agent") or {}).get("version")
    if version != AGENT_VERSION:
        found.append(
            f"agent.version {visible(str(version))[:40]!r} is not the agent sent ({AGENT_VERSION})"
        )
    interval = (provenance.get("sampler") or {}).get("interval_s")
    if not isinstance(interval, (int, float)) or abs(interval - spec.interval) > 1e-9 * max(
        1.0, spec.interval
    ):
        found.append(
            f"sampler.interval_s {interval!r} is not the --interval sent ({spec.interval:g})"
        )
    kept = (provenance.get("thinning") or {}).get("max_samples", spec.max_samples)
    if kept != spec.max_samples:
        found.append(
            f"thinning.max_samples {kept!r} is not the --max-samples sent ({spec.max_samples})"
        )
    wall = provenance["command"].get("wall_s")
    if session_s is not None and isinstance(wall, (int, float)) and wall > session_s + 1.0:
        found.append(
            f"command.wall_s {wall:g} s is longer than the whole SSH session ({session_s:.1f} s)"
        )
    names = [
        ((provenance.get(part) or {}).get("host") or {}).get("hostname")
        for part in ("before", "after")
    ]
    if all(isinstance(n, str) for n in names) and names[0] != names[1]:
        found.append(
            f"the probes name two hosts: {visible(names[0])[:64]!r} before, "
            f"{visible(names[1])[:64]!r} after"
        )
    return found


def split_record(
    provenance: dict, spec: WrapSpec, session_s: float | None = None
) -> tuple[dict, dict]:
    """(the health.json of the probe before, the record's `wrap` section) of one host's answer;
    `session_s`: how long the controller's session with the host lasted."""
    output = held_tail(provenance["output"], spec.output_tail)
    figures, dropped = read_figures(output["tail"], spec.metrics)
    status, why = bench_status(provenance, figures)
    mismatches = provenance_mismatches(provenance, spec, session_s)
    # a forged or foreign provenance: its figures are not the benchmark the operator ran
    if mismatches:
        status, why = (
            "failed",
            (
                "the provenance does not match what the controller sent or saw: "
                + "; ".join(mismatches)
                + "; its figures were dropped"
            ),
        )
        figures, dropped = {}, 0
    rest = {k: v for k, v in provenance.items() if k != "before"}
    rest["output"] = output
    wrapped = {"status": status, "why": why, "figures": figures, "provenance": rest}
    if mismatches:
        wrapped["mismatches"] = mismatches
    if dropped:
        wrapped["figures_dropped"] = {
            "names": dropped,
            "kept_max": FIGURES_MAX,
            "why": f"the output named more than {FIGURES_MAX} figures: "
            f"{plural(dropped, 'name')} past the first ones were dropped",
        }
    return provenance["before"], wrapped
