"""report.html: one self-contained file (inline CSS and SVG, no script, no URL), rendered by Jinja2
with autoescape on: every string that came from a host is shown as text. Big fleets are summarized
(classes instead of hosts in the chart, long lists capped with a pointer to the CSV).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pandas as pd
from jinja2 import Environment, FileSystemBytecodeCache, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from sweep import exitcodes
from sweep.analysis.compare import Findings
from sweep.analysis import facts as fact_table
from sweep.analysis.fleet import Fleet, rows_at
from sweep.analysis.names import abbreviate, fold_hosts
from sweep.analysis.xid import event_name, when
from sweep.report.charts import chart, speed_chart
from sweep.report.findings import by_host, causes_of, fold
from sweep.report.summary import ROWS_MAX, audit_hosts, fold_failures, list_files
from sweep.report.topbox import keepout_rows, next_commands, watch_line
from sweep.folders import PRIVATE, make_dirs
from sweep.analysis.verdict import Verdict
from sweep.report.glance import cause_rows, glance, tiles as state_tiles
from sweep.text import breakable_html, plural, visible

DETAIL_HOSTS_MAX = 300  # per-host <details> blocks; the rest are in hosts.csv

MATRIX_CLASSES_MAX = 8  # classes side by side in the key matrix

# values of one folded finding shown with their sentence (the rest: their hosts)
VARIANTS_MAX = 20

# causes on the first screen, each its hosts folded (the rest: Health findings)
CAUSES_MAX = 12

WATCH_SHOWN = 4  # warnings on pool hosts named in the top box's watch line


def _visible(value):
    """Every {{ }} of the templates: control characters a host sent (ESC, BEL, C1) shown as \\xNN
    text."""
    if isinstance(value, str):
        shown = visible(value, keep="\t\n")
        return Markup(shown) if isinstance(value, Markup) else shown
    return value


class _TemplateCache(FileSystemBytecodeCache):
    """Jinja's own cache of compiled templates, in a private folder of this user's cache home (keyed
    by the template's source, written by rename): report.html.j2 compiles in about 0.15 s, a cached
    one loads in
    5 ms. A cache that cannot be written is no cache, never an error."""

    def dump_bytecode(self, bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def template_cache_dir() -> Path | None:
    """``$XDG_CACHE_HOME/sweep/templates`` (default ``~/.cache``), made 0700 and checked, or None.

    Never chmod-ed, never reached through a link: each folder of the path sweep makes is created
    with mode 0700, and the last two are opened with O_NOFOLLOW and used only when this user owns
    them and no one else may write them (the cache folder: no one else may even read it). Jinja's
    default (a fixed name in the shared temp folder, chmod-ed before it is checked) let another
    local user plant a link there and have sweep chmod its target (issue 36)."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path(os.path.expanduser("~")) / ".cache"
    if not os.path.isdir(root):
        make_dirs(root, PRIVATE)
    # the user's own cache home, as set
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name, mask in (("sweep", 0o022), ("templates", 0o077)):
            try:
                os.mkdir(name, 0o700, dir_fd=fd)
            except FileExistsError:
                pass
            inner = os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
            os.close(fd)
            fd = inner
            info = os.fstat(fd)
            if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & mask:
                return None
    finally:
        os.close(fd)
    return root / "sweep" / "templates"


def _template_cache():
    try:
        folder = template_cache_dir()
    except OSError:  # a link, a file in the way, no home: no cache
        folder = None
    return None if folder is None else _TemplateCache(str(folder))


_env = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    finalize=_visible,
    bytecode_cache=_template_cache(),
)
_env.filters.update(
    abbreviate=abbreviate, plural=plural, breakable=lambda v: Markup(breakable_html(v))
)


def render_html(
    fleet: Fleet, findings: Findings, summary: dict, folded: list | None, verdict: Verdict
) -> str:
    """report.html as a string (`folded`: as for `render_markdown`; `verdict`: the one the summary
    was made from, whose states and causes the first screen shows)."""
    return _env.get_template("report.html.j2").render(
        **html_context(fleet, findings, summary, folded, verdict)
    )


def html_context(
    fleet: Fleet, findings: Findings, summary: dict, folded: list | None, verdict: Verdict
) -> dict:
    """What the template shows, with every list bounded (big fleets: pointers to the CSV / JSON);
    the first screen (the headline, the tiles, the causes) is the verdict's glance
    (`sweep.report.glance`)."""
    classes = summary["classes"]
    ref = summary["reference_class"]
    matrix = _matrix(classes, ref)
    causes = causes_of(summary)
    finding_hosts = by_host(summary["findings"], causes)
    folded = fold(summary["findings"], causes) if folded is None else folded
    unreachable = fold_failures(summary["unreachable"])
    hosts = host_details(fleet, findings, finding_hosts)
    broken = summary["host_sets"]["broken"]["hosts"]
    notes = summary["verdict_model"]["notes"]
    watch = _watch(summary, notes)
    rows = keepout_rows(summary)
    seen = glance(verdict, summary["classes"], summary["headline"])
    cannot_run = _folded_rows(summary["excluded"], ("contract", "message", "fix"))
    return {
        "glance": seen,
        "causes": cause_rows(seen, summary["host_sets"]["drain"]["hosts"])[:CAUSES_MAX],
        "causes_more": max(0, len(seen.causes) - CAUSES_MAX),
        "s": summary,
        "classes": classes,
        "ref": ref,
        "matrix": matrix,
        "bench": summary.get("benchmark"),
        **_audit_context(summary.get("audit")),
        "matrix_classes": classes[:MATRIX_CLASSES_MAX],
        "matrix_more": max(0, len(classes) - MATRIX_CLASSES_MAX),
        "class_rows": rows["classes"],
        "notes": [n for n in notes if n["said"] != "to watch"],
        "held_out_folded": fold_hosts(h["host"] for h in summary["held_out"]),
        "keepout": _keeps_out(summary, rows),
        "cannot_run": cannot_run[:ROWS_MAX],
        "cannot_run_more": max(0, len(cannot_run) - ROWS_MAX),
        "tiles": state_tiles(seen),
        "watch": watch[:WATCH_SHOWN],
        "watch_more": max(0, len(watch) - WATCH_SHOWN),
        "folded_findings": folded[:ROWS_MAX],
        "folded_more": max(0, len(folded) - ROWS_MAX),
        "variants_max": VARIANTS_MAX,
        "broken_hosts": fold_hosts(broken),
        "broken_count": len(broken),
        "anchors": {b["host"]: b["anchor"] for b in hosts["blocks"]},
        "unreachable": unreachable[:ROWS_MAX],
        "unreachable_more": sum(u["size"] for u in unreachable[ROWS_MAX:]),
        "tone": _tone(summary["exit_code"]),
        "chart": chart(fleet, findings),
        "hosts": hosts,
        "sources": summary.get("sources", []),
        "list_files": list_files(summary),
        "next": next_commands(summary),
        "xid": _xid_box(summary.get("xid")),
        "speed": summary.get("speed"),
        "speed_chart": speed_chart(summary.get("speed")),
    }


def _chains(contracts, order) -> dict:
    """The contract chain of each host at `order`'s row positions: {host: [contract, ...]}."""
    picked = np.isin(contracts["host"].cat.codes.to_numpy(), order)
    chain = {}
    for c in rows_at(contracts, np.flatnonzero(picked)):
        chain.setdefault(c["host"], []).append(
            {
                "name": c["contract"],
                "title": c["title"],
                "status": c["status"],
                "message": c["message"],
                "fix": c["fix"],
                "consequence_of": c["consequence_of"],
            }
        )
    return chain


def _matrix(classes: list, ref: dict) -> list[dict]:
    """The comparability keys on which a shown class differs from the reference: one row per key,
    one cell per class shown (at most MATRIX_CLASSES_MAX)."""
    if not classes:
        return []
    return [
        {
            "key": k,
            "label": label,
            "cells": [
                {"value": c["keys"][k], "differs": c["keys"][k] != ref["keys"][k]}
                for c in classes[:MATRIX_CLASSES_MAX]
            ],
        }
        for k, label in fact_table.COMPARED.items()
        if any(c["keys"][k] != ref["keys"][k] for c in classes[1:MATRIX_CLASSES_MAX])
    ]


def _watch(summary: dict, notes: list) -> list[dict]:
    """The warnings shown: the speed figures to watch (the verdict's words), then the watch line."""
    return [
        {"title": "speed", "detail": n["text"], "folded": ""}
        for n in notes
        if n["said"] == "to watch"
    ] + watch_line(summary)


def _audit_context(audit: dict | None) -> dict:
    """The audit's part of the template's context: its hosts (bounded) and the baseline's gaps."""
    audited = audit_hosts(audit) if audit else []
    base = (audit or {}).get("baseline") or {}
    return {
        "audit": audit,
        "audit_hosts": audited[:ROWS_MAX],
        "audit_more": max(0, len(audited) - ROWS_MAX),
        "audit_no_baseline": fold_hosts(base.get("no_baseline", ())),
        "audit_absent": fold_hosts(base.get("absent", ())),
    }


def _keeps_out(summary: dict, rows: dict) -> bool:
    """Whether the report has hosts kept out of the pool to show: another class, a host that
    cannot run, is unreachable, held out or broken."""
    return bool(
        len(summary["classes"]) > 1
        or summary["excluded"]
        or summary["unreachable"]
        or summary["held_out"]
        or rows["broken"]
    )


def _folded_rows(rows: list[dict], keys: tuple[str, ...]) -> list[dict]:
    """Rows that share the values of `keys` as one row, its hosts folded into a node set (`hosts`,
    `count`), in the order each first appears: a long section says each value once."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(row.get(k) for k in keys), []).append(row)
    return [
        dict(zip(keys, values), hosts=fold_hosts(r["host"] for r in members), count=len(members))
        for values, members in groups.items()
    ]


XID_HOSTS_SHOWN = 12  # hosts named with their events under the top box's repair lines


def _xid_box(section: dict | None) -> dict:
    """The top box's repair lines: per action its hosts, then the first hosts' events in words."""
    if not section:
        return {"actions": [], "hosts": [], "more": 0}
    hosts = [
        {
            "host": h["host"],
            "label": h["label"],
            "action": h["action"],
            "events": [
                f"{event_name(e)} on {e['bus_id']}: {e['meaning']}, {when(e)}"
                for e in h["events"][:4]
            ]
            + ([f"and {len(h['events']) - 4} more"] if len(h["events"]) > 4 else []),
        }
        for h in section["hosts"][:XID_HOSTS_SHOWN]
    ]
    return {
        "actions": section["actions"],
        "hosts": hosts,
        "more": max(0, len(section["hosts"]) - XID_HOSTS_SHOWN),
    }


def _tone(exit_code: int) -> str:
    return {exitcodes.OK: "good", exitcodes.BROKEN: "warn", exitcodes.OFF: "warn"}.get(
        exit_code, "bad"
    )


def host_details(fleet: Fleet, findings: Findings, finding_hosts=()) -> dict:
    """Per-host blocks with the contract chain (and the host's findings, `findings.by_host`) of the
    hosts with something to say (unreachable, a broken contract, a warning), at most
    DETAIL_HOSTS_MAX; each with an anchor the folded findings link to. The hosts with nothing to say
    are one folded node set (`quiet`)."""
    hosts = fleet.hosts
    rank = np.full(len(hosts), 3)
    rank[hosts["verdict"].astype("string").eq("warning").fillna(False).to_numpy(dtype=bool)] = 2
    rank[hosts["lowest_broken"].notna().to_numpy()] = 1
    rank[(hosts["status"] != "ok").to_numpy()] = 0
    sorted_rows = np.lexsort((hosts["host"].to_numpy(dtype=object), rank))
    # nothing to say: folded into one line, not a block each
    quiet = sorted_rows[rank[sorted_rows] == 3]
    problems = sorted_rows[rank[sorted_rows] < 3]
    order = problems[:DETAIL_HOSTS_MAX]
    chosen = rows_at(hosts, order)
    klass = findings.host_keys["comparability_class"].to_numpy(dtype=object)
    chain = _chains(fleet.contracts, order)
    said = {h["host"]: h["findings"] for h in finding_hosts}
    texts = findings.host_keys[[f.name for f in fact_table.GPU_FACTS]].to_numpy(dtype=object)
    labels = [f.label for f in fact_table.GPU_FACTS]
    blocks = []
    for position, r in zip(order.tolist(), chosen):
        failed = r["status"] != "ok"
        blocks.append(
            {
                "host": r["host"],
                "status": r["status"],
                "class": klass[position] if pd.notna(klass[position]) else None,
                "verdict": "unreachable" if failed else r["verdict"] or "unknown",
                "summary": f"{r['failure_class']}: {r['failure_message'] or ''}"
                if failed
                else r["summary"],
                "groups": r["groups"],
                "contracts": chain.get(r["host"], []),
                "provenance": r["provenance"],
                "findings": said.get(r["host"], []),
                "anchor": f"host-{position}",
                # its GPUs' facts, each as the table renders it (a value per GPU where they differ)
                "gpus": []
                if failed
                else [
                    {"label": label, "value": v}
                    for label, v in zip(labels, texts[position])
                    if not pd.isna(v)
                ],
            }
        )
    quiet_names = hosts["host"].to_numpy(dtype=object)[quiet].tolist()
    return {
        "blocks": blocks,
        "more": max(0, len(problems) - len(blocks)),
        "total": len(hosts),
        "quiet": fold_hosts(quiet_names),
        "quiet_count": len(quiet_names),
    }
