"""The before and after of a change window: what differs between two run folders of one fleet.

`diff_runs(load_run(A), load_run(B))` sorts every host into one of: added, removed, newly
unreachable (ok -> failed), recovered (failed -> ok), still failing, not swept (named in B's
manifest, no record), changed (its health.json differs in a field that describes the machine) or
unchanged. Field changes come from `sweep.audit.diff.diff_health`, after the GPUs of both probes are
matched card by card (`match_gpus`: same UUID, else same PCI slot), and are grouped by kind:
gpus, gpu swap, driver, ecc, power, clock policy, mig, modes, topology, firmware, gpu model,
memory errors, framework, host, environment, other. The same change on several GPUs is one
change listing them.

Volatile fields are not changes: current clocks, temperatures, power draw, utilisation, pstate,
throttle reasons and counters, memory used, processes, the load section, probe timestamps and
durations; nor are the contract verdicts and the device mask, which are derived from other fields.

Exit code of ``sweep diff RUN_A RUN_B`` (see docs/audits.md): 0 the runs describe the same fleet;
5 something changed (a host added, removed, unreachable, recovered or a field changed); 2 bad input.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from sweep import exitcodes
from sweep.analysis.names import fold_hosts, fold_numbers, host_key
from sweep.analysis.speed_record import read_speed
from sweep.audit.diff import diff_health
from sweep.audit.fields import KIND_ORDER, run_kind
from sweep.store import Run
from sweep.text import show_value, visible, plural

_GPU_PATH = re.compile(r"^gpus\[([^\]]*)\]\.(.*)$")


# --- one host --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldChange:
    """One changed field of a host; `gpus` lists the GPU indices (or GPU pairs) it holds for."""

    kind: str
    field: str
    gpus: tuple = ()
    before: Any = None
    after: Any = None

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "field": self.field,
            "gpus": list(self.gpus) or None,
            "before": self.before,
            "after": self.after,
        }


def match_gpus(before: list[dict], after: list[dict]):
    """Pair the cards of two probes: same UUID, else same PCI slot (a swapped card), else same
    index.

    Returns (pairs [(b, a)], missing [b], added [a]).
    """
    rest_b, rest_a, pairs = list(before), list(after), []
    for key in ("uuid", "pci_bus_id", "index"):
        by_key = {}
        for g in rest_a:
            if g.get(key) is not None:
                by_key.setdefault(g[key], g)
        keep_b = []
        for g in rest_b:
            other = by_key.pop(g.get(key), None) if g.get(key) is not None else None
            if other is None:
                keep_b.append(g)
            else:
                pairs.append((g, other))
                rest_a = [x for x in rest_a if x is not other]
        rest_b = keep_b
    pairs.sort(key=lambda p: _index(p[0]))
    return pairs, rest_b, rest_a


def _index(g: dict):
    return g.get("index") if isinstance(g.get("index"), int) else 10**6


def _card(g: dict | None) -> dict | None:
    if g is None:
        return None
    return {
        "index": g.get("index"),
        "uuid": g.get("uuid"),
        "serial": g.get("serial"),
        "name": g.get("name"),
    }


def host_changes(a: dict, b: dict) -> list[FieldChange]:
    """What changed on one host between health.json `a` and `b` (volatile fields left out), by
    kind."""
    pairs, missing, added = match_gpus(list(a.get("gpus") or []), list(b.get("gpus") or []))
    a2, b2 = dict(a), dict(b)
    a2["gpus"], b2["gpus"] = [], []
    raw: list[tuple[str, str, Any, Any, Any]] = []  # kind, field, item, before, after
    for n, (ga, gb) in enumerate(pairs):
        label = ga.get("index") if isinstance(ga.get("index"), int) else f"#{n}"
        a2["gpus"].append(dict(ga, index=label))
        b2["gpus"].append(dict(gb, index=label))
        if ga.get("index") != gb.get("index"):
            raw.append(("gpus", "index", label, ga.get("index"), gb.get("index")))
    for g in missing:
        raw.append(("gpus", "gpu", g.get("index"), _card(g), None))
    for g in added:
        raw.append(("gpus", "gpu", g.get("index"), None, _card(g)))
    for c in diff_health(a2, b2):
        kind = run_kind(c.path)
        if kind is None:
            continue
        m = _GPU_PATH.match(c.path)
        if m:
            item = int(m.group(1)) if m.group(1).lstrip("-").isdigit() else m.group(1)
            raw.append((kind, m.group(2), item, c.before, c.after))
        elif c.path.startswith("topology.pairs."):
            raw.append(
                (kind, "topology.pairs", c.path[len("topology.pairs.") :], c.before, c.after)
            )
        else:
            raw.append((kind, c.path, None, c.before, c.after))
    raw += speed_changes(a, b)
    folded: dict[tuple, list] = {}
    for kind, fld, item, before, after in raw:
        key = (
            kind,
            fld,
            json.dumps(before, sort_keys=True, default=str),
            json.dumps(after, sort_keys=True, default=str),
        )
        entry = folded.setdefault(key, [before, after, []])
        if item is not None:
            entry[2].append(item)
    out = [
        FieldChange(
            kind,
            fld,
            tuple(sorted(items, key=lambda i: (isinstance(i, str), host_key(str(i))))),
            before,
            after,
        )
        for (kind, fld, _, _), (before, after, items) in folded.items()
    ]
    order = {k: n for n, k in enumerate(KIND_ORDER)}
    out.sort(key=lambda c: (order[c.kind], c.field, host_key(str(c.gpus[:1]))))
    return out


# a measured figure that moved less than 10% between two runs is run-to-run noise
SPEED_MOVED = 0.10


def speed_changes(a: dict, b: dict) -> list[tuple]:
    """(kind, field, GPU, before, after) of each speed-tier figure (validated) that moved by more
    than SPEED_MOVED between health.json `a` and `b`, or that one side measured and the other did
    not."""
    ra, rb = read_speed(a), read_speed(b)
    if ra is None or rb is None:
        return []
    out = []
    for index in sorted(set(ra.gpus) | set(rb.gpus)):
        fa, fb = ra.gpus.get(index, {}), rb.gpus.get(index, {})
        for name in sorted(set(fa) | set(fb)):
            before, after = fa.get(name), fb.get(name)
            if before is None or after is None or abs(after / before - 1) > SPEED_MOVED:
                out.append(("speed", f"speed.{name}", index, _round(before), _round(after)))
    for name, before, after in (
        ("speed.allreduce", ra.allreduce, rb.allreduce),
        (
            "speed.p2p_slowest",
            min((v for *_, v in ra.p2p), default=None),
            min((v for *_, v in rb.p2p), default=None),
        ),
    ):
        if (before is None) != (after is None) or (
            before and after and abs(after / before - 1) > SPEED_MOVED
        ):
            out.append(("speed", name, None, _round(before), _round(after)))
    return out


def _round(value):
    return None if value is None else float(f"{value:.4g}")


def fold_probe_changes(changes) -> list[FieldChange]:
    """A probe diff's changes (`diff.Change`) named and folded as the run diff names and folds them:
    the run diff's kind where the field is one (`power`, `ecc`, ...), else the probe diff's heading
    (`throttle evidence`, `other readings`); the same change on several GPUs is one row listing
    them."""
    folded: dict[tuple, list] = {}
    for c in changes:
        m = _GPU_PATH.match(c.path)
        fld, item = (
            (m.group(2), int(m.group(1)) if m.group(1).lstrip("-").isdigit() else m.group(1))
            if m
            else (c.path, None)
        )
        kind = run_kind(c.path) or c.category
        key = (
            kind,
            fld,
            json.dumps(c.before, sort_keys=True, default=str),
            json.dumps(c.after, sort_keys=True, default=str),
        )
        entry = folded.setdefault(key, [c.before, c.after, []])
        if item is not None:
            entry[2].append(item)
    return [
        FieldChange(kind, fld, tuple(items), before, after)
        for (kind, fld, _, _), (before, after, items) in folded.items()
    ]


def probe_exit_code(before: dict, after: dict) -> int:
    """`sweep diff A B` of two probes: 5 when the machine changed in a field the run diff counts
    (the same change between two run folders exits 5 too), 0 when only readings moved."""
    return exitcodes.OFF if host_changes(before, after) else exitcodes.OK


# --- two runs --------------------------------------------------------------------------------


@dataclass
class RunDiff:
    """Hosts sorted by what happened to them between run `before` and run `after`, with field
    changes."""

    before: str
    after: str
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    # {"host", "failure_class", "failure_message"}
    unreachable: list[dict] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    still_failing: list[str] = field(default_factory=list)
    not_swept: list[str] = field(default_factory=list)
    changed: dict[str, list[FieldChange]] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (
            self.added or self.removed or self.unreachable or self.recovered or self.changed
        )

    @property
    def exit_code(self) -> int:
        return exitcodes.OK if self.empty else exitcodes.OFF

    def by_kind(self) -> dict[str, list[tuple[str, FieldChange]]]:
        """kind -> [(host, change)], kinds in display order, hosts in natural order."""
        out: dict[str, list] = {k: [] for k in KIND_ORDER}
        for host, changes in self.changed.items():
            for c in changes:
                out[c.kind].append((host, c))
        return {k: v for k, v in out.items() if v}

    def folded(self) -> dict[str, list[tuple[list[str], FieldChange]]]:
        """`by_kind` with the same change on several hosts as one row: kind -> [(hosts, change)]."""
        out = {}
        for kind, items in self.by_kind().items():
            rows: dict[tuple, tuple[list[str], FieldChange]] = {}
            for host, c in items:
                key = (
                    c.field,
                    c.gpus,
                    json.dumps(c.before, sort_keys=True, default=str),
                    json.dumps(c.after, sort_keys=True, default=str),
                )
                rows.setdefault(key, ([], c))[0].append(host)
            out[kind] = list(rows.values())
        return out

    def headline(self) -> str:
        if self.empty:
            return f"no change between {self.before} and {self.after}"
        parts = [
            f"{len(v)} {name}"
            for name, v in (
                ("added", self.added),
                ("removed", self.removed),
                ("newly unreachable", self.unreachable),
                ("recovered", self.recovered),
                ("changed", self.changed),
            )
            if v
        ]
        kinds = ", ".join(f"{k} ({len({h for h, _ in v})})" for k, v in self.by_kind().items())
        return "hosts: " + ", ".join(parts) + (f"; changes: {kinds}" if kinds else "")

    def as_dict(self) -> dict:
        """The JSON of ``sweep diff RUN_A RUN_B --json`` (shape in docs/audits.md)."""
        return {
            "format": "sweep-rundiff",
            "version": 1,
            "before": self.before,
            "after": self.after,
            "hosts": {
                "added": self.added,
                "removed": self.removed,
                "unreachable": self.unreachable,
                "recovered": self.recovered,
                "still_failing": self.still_failing,
                "not_swept": self.not_swept,
                "changed": list(self.changed),
                "unchanged": self.unchanged,
            },
            "changes": [dict(host=h, **c.as_dict()) for v in self.by_kind().values() for h, c in v],
            "by_kind": {
                k: sorted({h for h, _ in v}, key=host_key) for k, v in self.by_kind().items()
            },
            "exit_code": self.exit_code,
        }


def _failure(rec: dict) -> dict:
    f = rec.get("failure") or {}
    return {
        "host": rec["host"],
        "failure_class": f.get("class"),
        "failure_message": f.get("message"),
    }


def _ok(rec: dict | None) -> bool:
    return bool(rec) and rec.get("status") == "ok" and isinstance(rec.get("health"), dict)


def diff_runs(before: Run, after: Run) -> RunDiff:
    """Compare two runs of one fleet (see the module docstring for the host categories)."""
    out = RunDiff(str(before.path), str(after.path))
    ra, rb = before.records, after.records
    listed_b = set(after.listed)
    for host in sorted(set(ra) | set(rb) | listed_b, key=host_key):
        a, b = ra.get(host), rb.get(host)
        if a is None and b is None:
            continue  # listed in B, never swept in either
        if b is None:
            (out.not_swept if host in listed_b else out.removed).append(host)
        elif a is None:
            out.added.append(host)
        elif _ok(a) and not _ok(b):
            out.unreachable.append(_failure(b))
        elif not _ok(a) and _ok(b):
            out.recovered.append(host)
        elif not _ok(a):
            out.still_failing.append(host)
        else:
            changes = host_changes(a["health"], b["health"])
            if changes:
                out.changed[host] = changes
            else:
                out.unchanged.append(host)
    return out


# --- rendering -------------------------------------------------------------------------------


# a field's unit, by the end of its name, as the report writes it ("700 W", "1980 MHz")
UNITS = (
    ("_w", "W"),
    ("_mhz", "MHz"),
    ("_c", "°C"),
    ("_mib", "MiB"),
    ("_gib", "GiB"),
    ("_gbps", "GB/s"),
    ("_pct", "%"),
)


def show_field(field_name: str, value: Any) -> str:
    """A changed field's value as the report prints it: a number as ``700`` (not ``700.0``), with
    the unit its name ends in (``power.enforced_limit_w`` 700.0 -> ``700 W``); text as it is; else
    JSON."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        unit = next((u for end, u in UNITS if field_name.endswith(end)), None)
        number = f"{value:g}" if isinstance(value, float) else str(value)
        return f"{number} {unit}" if unit else number
    return show_value(value)


def show_gpus(items: Iterable) -> str:
    items = list(items)
    if not items:
        return ""
    if len(items) > 6 and not all(isinstance(i, int) for i in items):
        return f"{fold_numbers(items[:6])},… ({len(items)})"
    return fold_numbers(items)


def render_terminal(diff: RunDiff, console) -> None:
    """Print the run diff as rich tables: hosts first, then the changes by kind."""
    from rich.markup import escape
    from rich.table import Table

    def esc(text) -> str:
        return escape(visible(text))

    console.print(
        f"{esc(diff.before)} -> {esc(diff.after)}: {esc(diff.headline())}", soft_wrap=True
    )
    hosts = Table(title=None)
    hosts.add_column("what")
    hosts.add_column("hosts")
    rows = [
        ("added", diff.added),
        ("removed", diff.removed),
        (
            "newly unreachable",
            [
                f"{u['host']} ({u['failure_class']}: {u['failure_message']})"
                for u in diff.unreachable
            ],
        ),
        ("recovered", diff.recovered),
        ("still failing", diff.still_failing),
        ("not swept in the later run", diff.not_swept),
        ("changed", list(diff.changed)),
        ("unchanged", [plural(len(diff.unchanged), "host")] if diff.unchanged else []),
    ]
    for label, names in rows:
        if names:
            hosts.add_row(label, esc(", ".join(names)))
    # a title of its own line: a table's title wraps at the table's width
    console.print("Hosts", soft_wrap=True)
    console.print(hosts)
    groups = diff.folded()
    if not groups:
        return
    table = Table()
    for col in ("kind", "hosts", "field", "GPUs", "before", "after"):
        table.add_column(col, overflow="fold", min_width=len(col))
    for kind, items in groups.items():
        for n, (names, c) in enumerate(items):
            table.add_row(
                kind if n == 0 else "",
                esc(fold_hosts(names)),
                esc(c.field),
                esc(show_gpus(c.gpus)),
                escape(show_field(c.field, c.before)),
                escape(show_field(c.field, c.after)),
            )
        table.add_section()
    console.print("Changes by kind (the same change on several hosts is one row)", soft_wrap=True)
    console.print(table)


def render_html(diff: RunDiff) -> str:
    """The run diff as one self-contained HTML page (autoescaped: host text is shown as text)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader(Path(__file__).parents[1] / "report" / "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(visible=visible, value=show_field, gpus=show_gpus, hosts=fold_hosts)
    return env.get_template("rundiff.html.j2").render(diff=diff, groups=diff.folded())
