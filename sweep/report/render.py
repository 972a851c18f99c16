"""Writers of a report folder: report.html, summary.md, summary.json, hosts.csv, fleet.csv.

The HTML is one self-contained file (inline CSS and SVG, no script, no URL), rendered by Jinja2
with autoescape on: every string that came from a host is shown as text. Big fleets are
summarized (classes instead of hosts in the chart, long lists capped with a pointer to the CSV).
"""
from __future__ import annotations

import math
import os
import re
import stat
import warnings
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
from jinja2 import Environment, FileSystemBytecodeCache, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from sweep import exitcodes
from sweep import __version__
from sweep.analysis.actions import drain_groups, host_sets
from sweep.analysis.compare import Findings
from sweep.analysis.verdict import Verdict
from sweep.analysis import facts as table
from sweep.analysis.names import abbreviate, fold_hosts, host_key
from sweep.analysis.names import fold_failures as names_fold_failures
from sweep.analysis.fleet import Fleet, rows_at
from sweep.analysis.xid import event_name, when
from sweep.errors import InventoryWarning
from sweep.report.bench import markdown_bench
from sweep.report.findings import by_host, fold
from sweep.report.topbox import HELD_OUT_SHOWN, SETS_SAID, held_out_rows, keepout_rows, tiles, watch_line
from sweep.store import write_bytes_atomic
from sweep.strictjson import dumps, finite
from sweep.report.summary_file import folded_summary
from sweep.text import breakable_html, csv_cell, csv_cells, plural, visible

SUMMARY_SCHEMA = "sweep.summary/1"  # the summary as rendered; summary.json is sweep.summary/2 (folded)
CHART_HOSTS_MAX = 64      # above this many hosts the chart shows one bar per class
DETAIL_HOSTS_MAX = 300    # per-host <details> blocks; the rest are in hosts.csv
ROWS_MAX = 200            # rows per findings kind / unreachable table
MATRIX_CLASSES_MAX = 8    # classes side by side in the key matrix
VARIANTS_MAX = 20         # values of one folded finding shown with their sentence (the rest: their hosts)
WATCH_SHOWN = 4           # warnings on pool hosts named in the top box's watch line

def _visible(value):
    """Every {{ }} of the templates: control characters a host sent (ESC, BEL, C1) shown as \\xNN text."""
    if isinstance(value, str):
        shown = visible(value, keep="\t\n")
        return Markup(shown) if isinstance(value, Markup) else shown
    return value


class _TemplateCache(FileSystemBytecodeCache):
    """Jinja's own cache of compiled templates, in a private folder of this user's cache home (keyed by the
    template's source, written by rename): report.html.j2 compiles in about 0.15 s, a cached one loads in
    5 ms. A cache that cannot be written is no cache, never an error."""

    def dump_bytecode(self, bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def template_cache_dir() -> Path | None:
    """``$XDG_CACHE_HOME/sweep/templates`` (default ``~/.cache``), made 0700 and checked, or None.

    Never chmod-ed, never reached through a link: each folder of the path sweep makes is created with
    mode 0700, and the last two are opened with O_NOFOLLOW and used only when this user owns them and
    no one else may write them (the cache folder: no one else may even read it). Jinja's default (a
    fixed name in the shared temp folder, chmod-ed before it is checked) let another local user plant a
    link there and have sweep chmod its target (issue 36)."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path(os.path.expanduser("~")) / ".cache"
    if not os.path.isdir(root):
        os.makedirs(root, mode=0o700)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the user's own cache home, as set
    try:
        for name, mask in (("sweep", 0o022), ("templates", 0o077)):
            try:
                os.mkdir(name, 0o700, dir_fd=fd)
            except FileExistsError:
                pass
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
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


_env = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"), autoescape=True,
                   undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, finalize=_visible,
                   bytecode_cache=_template_cache())
_env.filters.update(abbreviate=abbreviate, plural=plural, breakable=lambda v: Markup(breakable_html(v)))


def summary_dict(findings: Findings, exit_code: int, exit_meaning: str, sources=(), audit: dict | None = None,
                 bench: dict | None = None, xid: dict | None = None, speed: dict | None = None,
                 verdict: Verdict | None = None) -> dict:
    """The machine-readable verdict written to summary.json (`audit`: sweep.audit.baseline.audit_section, or None;
    `bench`: sweep.analysis.bench.bench_section of a `sweep run --wrap` run, or None; `verdict`: the one
    verdict (`sweep.analysis.verdict.judge`) its sets, reasons and code are read from)."""
    out = {"schema": SUMMARY_SCHEMA, "generated_at": _now(), "sweep_version": __version__,
           "sources": list(sources)}
    out.update(findings.to_dict())
    out["host_sets"] = host_sets(verdict, findings)
    out["drain"] = drain_groups(verdict, {h["host"]: h for h in (xid or {}).get("hosts", [])})
    out["verdict_model"] = verdict.to_dict()  # every host's state and the entries it comes from
    out["xid"] = xid
    out["audit"] = audit
    out["benchmark"] = bench
    out["speed"] = speed  # sweep.analysis.speed.speed_section: the speed tier's figures and judgments, or None
    out["exit_code"] = exit_code
    out["exit_meaning"] = exit_meaning
    return out


def write_summary_json(summary: dict, path: Path) -> Path:
    """summary.json, strict JSON (a value that is not a finite number is written as null), its per-host lists
    folded (`sweep.report.summary_file`)."""
    write_text(path, dumps(finite(folded_summary(summary)), indent=1) + "\n")  # per-host lists folded (issue 41)
    return path


def write_text(path: Path, text: str) -> None:
    """A report file whole, never through a symbolic link (`sweep.store.write_bytes_atomic`)."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_limit_file(path: Path, hosts) -> Path:
    """Host names one per line, read back by ``--limit @FILE`` (sweep run, ansible) as those very hosts.

    A name that would read as a pattern (``!``, ``&``, ``~`` or ``@`` first, a glob character, blanks at
    an end, a control character) cannot be written so: it is left out with an `InventoryWarning`.
    """
    names = list(hosts)
    kept = [n for n in names if _LIMIT_LINE.match(n) and n.isprintable()]
    shown = set(kept)  # a set: the pool of 10,000 hosts is 10,000 lookups, not 50 million comparisons
    for name in names:
        if name not in shown:
            warnings.warn(f"{path}: host {visible(name)!r} left out: as a line of a --limit file it would read as "
                          "a pattern, not as its name; name it in --limit by hand", InventoryWarning, stacklevel=2)
    write_text(path, "".join(f"{name}\n" for name in kept))
    return path


_LIMIT_LINE = re.compile(r"^[^\s!&~@*?\[](?:[^*?\[]*[^\s*?\[])?$")


def write_hosts_csv(fleet: Fleet, findings: Findings, path: Path, states: dict | None = None) -> Path:
    """hosts.csv: one row per host, its facts, its comparability key values, its class and (`states`: the
    verdict's) its state: pool, held_out, broken, other_class, cannot_run, unreachable."""
    keys = findings.host_keys.add_prefix("key_").rename(columns={"key_comparability_class": "comparability_class"})
    frame = fleet.hosts.join(keys, on="host")
    if states is not None:
        frame = frame.assign(state=pd.array([states.get(h) for h in frame["host"].astype(str)], dtype="string"))
    _write_csv(frame, path)
    return path


def write_fleet_csv(fleet: Fleet, path: Path) -> Path:
    """fleet.csv: one row per GPU."""
    _write_csv(fleet.gpus, path)
    return path


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    """The frame as CSV (NA as an empty field), byte for byte as the csv module's excel dialect writes
    it (minimal quoting, CRLF), each column made text at once and each line joined by `str.join`:
    fleet.csv of 80,000 GPUs in under half of csv.writer's time (0.4-0.5 against 1.05-1.26 CPU-s).

    Every text cell goes through `csv_cell`: a host's text is never a formula in a spreadsheet,
    carries no control character, and shows bidi overrides; numbers stay numbers.
    """
    columns = [_csv_fields(frame[name]) for name in frame.columns]
    lines = [",".join(csv_field(csv_cell(name)) for name in frame.columns), *map(",".join, zip(*columns))]
    if len(columns) == 1:  # a line of one empty field is written "" (an empty line would be no row)
        lines = [line or '""' for line in lines]
    write_text(path, "\r\n".join(lines) + "\r\n")


def csv_field(value) -> str:
    """A cell's text as the csv module writes it: None empty, a float by repr, other values by str,
    quoted (quotes doubled) where it holds a comma, a quote, CR or LF."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    text = value if value.__class__ is str else str(value)
    return '"' + text.replace('"', '""') + '"' if _QUOTED.search(text) else text


_QUOTED = re.compile(r'[,"\r\n]')
_PLAIN_DTYPES = {"Int64": ("int64", str), "Float64": ("float64", repr), "boolean": ("bool", str)}


def _csv_fields(column: pd.Series) -> list[str]:
    """A column's cells as CSV fields (NA empty), text through `csv_cell`."""
    missing = column.isna().to_numpy()
    if missing.all():  # a column no row fills (a tier that did not run)
        return [""] * len(column)
    if isinstance(column.dtype, pd.CategoricalDtype):  # each category once, not each row
        shown = np.array([csv_field(csv_cell(c)) for c in column.cat.categories] + [""], dtype=object)
        return shown[column.cat.codes.to_numpy()].tolist()  # code -1 (NA) -> the last, ""
    if str(column.dtype) in _PLAIN_DTYPES:  # numbers stay numbers: each distinct value made text once
        plain, text = _PLAIN_DTYPES[str(column.dtype)]
        numbers = column.to_numpy(dtype=plain, na_value=0)
        if plain == "float64" and np.signbit(numbers[numbers == 0]).any():  # -0.0: factorize takes it for 0.0
            fields = list(map(text, numbers.tolist()))
            for i in np.flatnonzero(missing).tolist():
                fields[i] = ""
            return fields
        codes, uniques = pd.factorize(column)  # NA: code -1
        shown = np.array(list(map(text, uniques.to_numpy(dtype=plain).tolist())) + [""], dtype=object)
        return shown[codes].tolist()
    values = column.to_numpy(dtype=object, na_value=None).tolist()
    if not (pd.api.types.is_numeric_dtype(column.dtype) or pd.api.types.is_bool_dtype(column.dtype)):
        values = csv_cells(values)
    return list(map(csv_field, values))


# ---------------------------------------------------------------- markdown


def md(text) -> str:
    """Text from a host, made inert in Markdown (tables, emphasis, links, HTML) with CommonMark's
    backslash escapes, never HTML entities: `<=` stays `<=`, `<b>` becomes `\\<b>`, `&amp;` `\\&amp;`."""
    text = "" if text is None else str(text)
    for ch in "\\`*_[]|#!":
        text = text.replace(ch, "\\" + ch)
    text = _MD_TAG_OPEN.sub(r"\\<", text)  # a tag, comment or autolink could start here
    text = _MD_ENTITY.sub(r"\\&", text)  # an entity reference could start here
    return text.replace("\r", " ").replace("\n", " ")


_MD_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
_MD_ENTITY = re.compile(r"&(?=[A-Za-z#])")


def mdcode(text) -> str:
    """Text from a host as a Markdown code span: shown literally, safe inside a table cell."""
    text = ("" if text is None else str(text)).replace("\n", " ").replace("|", "\\|")
    fence = "`" * (1 + max((len(m) for m in _BACKTICKS.findall(text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


_BACKTICKS = re.compile(r"`+")


def render_markdown(summary: dict, folded: list | None = None) -> str:
    """summary.md: the verdict, classes against the reference, hosts kept out, findings; for a ticket.
    `folded`: `findings.fold(summary["findings"])` when the caller has it already."""
    lines = [f"# sweep report: {plural(summary['hosts_total'], 'host')}", "",
             f"**{md(summary['verdict'])}**: {md(summary['verdict_detail'])}", "",
             f"Exit code {summary['exit_code']}: {md(summary['exit_meaning'])}", ""]
    lines += _markdown_states(summary)
    classes = summary["classes"]
    if classes:
        ref = summary["reference_class"]
        lines += ["## Comparability classes", "",
                  f"Reference: class {ref['id']} ({md(ref['chosen_by'])}), {plural(ref['size'], 'host')}: "
                  f"{mdcode(ref['folded'])}",
                  "", "Reference keys: " + "; ".join(f"{md(summary['key_labels'][k])} **{md(v)}**"
                                                     for k, v in ref["keys"].items()), ""]
        if len(classes) > 1:
            lines += ["| Class | Hosts | Differs from the reference | What it does to a benchmark |",
                      "|---|---|---|---|"]
        for c in classes[1:]:
            differs = "<br>".join(f"{md(d['label'])}: **{md(d['value'])}** (reference {md(d['reference'])})"
                                  for d in c["differs"])
            impacts = "<br>".join(md(d["impact"]) for d in c["differs"])
            lines.append(f"| {c['id']} | {mdcode(c['folded'])} ({c['size']}) | {differs} | {impacts} |")
        lines.append("")
    if summary["held_out"]:
        lines += ["## Held out of the pool for health", "", "| Host | Why |", "|---|---|"]
        lines += [f"| {mdcode(h['host'])} | {'<br>'.join(md(r) for r in h['reasons'])} |"
                  for h in summary["held_out"][:ROWS_MAX]]
        lines.append("")
    if summary["excluded"]:
        lines += ["## Cannot run a benchmark", "", "| Host | Contract | Why | Fix |", "|---|---|---|---|"]
        lines += [f"| {mdcode(e['host'])} | {md(e['contract'])} | {md(e['message'])} | {md(e['fix'])} |"
                  for e in summary["excluded"][:ROWS_MAX]]
        lines.append("")
    if summary["unreachable"]:
        lines += ["## Unreachable", "", "| Hosts | Failure | Message |", "|---|---|---|"]
        lines += [f"| {mdcode(u['hosts'])} | {md(u['failure_class'])} | {md(u['message'])} |"
                  for u in fold_failures(summary["unreachable"])[:ROWS_MAX]]
        lines.append("")
    lines += _markdown_xid(summary.get("xid"))
    health = fold(summary["findings"]) if folded is None else folded  # one row per finding the hosts share
    if health:
        lines += ["## Health findings", "", "| Severity | Hosts | Finding | Detail | Values | Fix |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {e['severity']} | {mdcode(e['folded'])} ({e['count']}) | {md(e['title'])} | {md(e['detail'])} | "
                  f"{md(e['spread'])} | {md(e['fix'])} |" for e in health[:ROWS_MAX]]
        lines.append("")
    if summary.get("benchmark"):
        lines += markdown_bench(summary["benchmark"], md, mdcode)
    lines += _markdown_speed(summary.get("speed"))
    audit = summary.get("audit")
    if audit:
        lines += _markdown_audit(audit)
    lines += _markdown_lists(summary)
    cut = [name for name, items in (("cannot-run hosts", summary["excluded"]), ("unreachable hosts",
           summary["unreachable"]), ("health findings", health)) if len(items) > ROWS_MAX]
    if cut:
        lines += [f"Lists cut at {ROWS_MAX} rows ({', '.join(cut)}): summary.json has them all.", ""]
    return "\n".join(lines)


def _markdown_states(summary: dict) -> list[str]:
    """The verdict's sets (summary.json host_sets) and notes: what is not measured or not read, with its fix."""
    sets = summary["host_sets"]
    lines = ["## Hosts by verdict", ""]
    lines += [f"- {said} ({sets[key]['size']}): {mdcode(sets[key]['folded'] or ', '.join(sets[key]['hosts']))}"
              for key, said in SETS_SAID if sets[key]["size"]]
    lines += [f"- **{n['said']}**: {md(n['text'])}" for n in summary["verdict_model"]["notes"]]
    return lines + [""]


def _markdown_speed(speed: dict | None) -> list[str]:
    """The speed tier's headline and judgments (sweep.analysis.speed.speed_section), or nothing."""
    if not speed:
        return []
    lines = ["## Speed", ""] + [f"- {md(line)}" for line in speed["headline"]]
    return lines + [f"- {j['severity']}: {md(j['message'])}" for j in speed["judgments"][:ROWS_MAX]] + [""]


def list_files(summary: dict) -> list[dict]:
    """The report's lists and commands (sweep.report.lists), one entry each: files, what they hold, the
    commands that use them (each on its own). summary.md and report.html show them; sweep runs none."""
    sets, drains = summary["host_sets"], summary["drain"]
    pool, held, drain = (sets[k]["size"] for k in ("pool", "held_out", "drain"))
    counts = f"{plural(pool, 'host')} in the pool, {plural(held, 'host')} held out"
    return [
        {"files": ["pool.txt", "held_out.txt"], "what": f"one host per line ({counts})",
         "commands": ["sweep run INVENTORY --limit @pool.txt", "ansible -i INVENTORY --limit @held_out.txt all"]},
        {"files": ["pool.nodeset", "held_out.nodeset"], "what": "the same sets as folded node sets",
         "commands": ['srun --nodelist="$(cat pool.nodeset)"', 'sbatch --exclude="$(cat held_out.nodeset)"',
                      'clush -w "$(cat pool.nodeset)"']},
        {"files": ["drain.sh", "resume.sh"],
         "what": f"Slurm: drain the {plural(drain, 'host')} held out or broken ({plural(len(drains), 'reason')}), "
                 "leaving a node drained for another reason as it is; resume the pool's nodes that sweep drained "
                 "(-n: print, run nothing)", "commands": ["sh drain.sh", "sh resume.sh"]},
        {"files": ["kubectl.sh"], "what": "Kubernetes: cordon and taint the same hosts; untaint and uncordon the "
                                          "pool's hosts sweep tainted (untested against a cluster)",
         "commands": ["sh kubectl.sh"]},
    ]


def _markdown_lists(summary: dict) -> list[str]:
    lines = ["## Lists and commands", "", "Beside this file; read a script before you run it: sweep runs none.", ""]
    lines += [f"- {', '.join(mdcode(f) for f in item['files'])}: {md(item['what'])}: "
              f"{', '.join(mdcode(c) for c in item['commands'])}"
              for item in list_files(summary)]
    return lines + [""]


def _markdown_xid(section: dict | None) -> list[str]:
    """The hosts grouped by the repair their Xid / SXid events need, then one row per host and event."""
    if not section or not section["actions"]:
        return []
    lines = ["## Xid and SXid: the repair NVIDIA prescribes", ""]
    lines += [f"- **{md(a['label'])}**: {mdcode(a['folded'])} ({plural(a['count'], 'host')}): {md(a['fix'])}"
              for a in section["actions"]]
    lines += ["", "| Host | Action | Event | Device | Count, first and last time |", "|---|---|---|---|---|"]
    lines += [f"| {mdcode(h['host'])} | {md(e['label'])} | {md(event_name(e))}: {md(e['meaning'])} | "
              f"{mdcode(e['bus_id'])} | {md(when(e))} |" for h in section["hosts"][:ROWS_MAX] for e in h["events"]]
    return lines + [""]


def _markdown_audit(audit: dict) -> list[str]:
    """The audit: what it was judged against, then one row per host off its expectations or baseline."""
    lines = ["## Audit", ""]
    expectations, baseline = audit["expectations"], audit["baseline"]
    if expectations:
        lines += [f"Expectations {mdcode(expectations['file'])}: {plural(expectations['hosts_judged'], 'host')} judged.", ""]
    if baseline:
        missing = baseline["no_baseline"]
        lines += [f"Baseline {mdcode(baseline['dir'])}: {plural(len(baseline['compared']), 'host')} compared"
                  + (f", no baseline for {mdcode(fold_hosts(missing))}" if missing else "") + ".", ""]
    if audit["headline"]:
        lines += [f"- **{md(line)}**" for line in audit["headline"]] + [""]
    hosts = audit_hosts(audit)
    if hosts:
        lines += ["| Host | Off expectations | Drift from the baseline |", "|---|---|---|"]
        lines += [f"| {mdcode(h['host'])} | {'<br>'.join(md(m) for m in h['violations'])} | "
                  f"{'<br>'.join(md(m) for m in h['drift'])} |" for h in hosts[:ROWS_MAX]]
        lines.append("")
        if len(hosts) > ROWS_MAX:
            lines += [f"{len(hosts) - ROWS_MAX} more hosts in summary.json.", ""]
    else:
        lines += ["No host is off its expectations or baseline.", ""]
    return lines


def fold_failures(unreachable) -> list[dict]:
    """The unreachable hosts with the same kind of failure as one row (`analysis.names.fold_failures`), their
    names folded as ClusterShell's clubak -b folds identical output (``gpu[07-20]``). Rows in the order each
    failure first appears: hosts, size, failure_class, message, attempts."""
    attempts = {u["host"]: u.get("attempts") for u in unreachable}
    rows = names_fold_failures((u["host"], u["failure_class"], u.get("message")) for u in unreachable)
    return [{"hosts": fold_hosts(r["hosts"]), "size": len(r["hosts"]), "failure_class": r["failure_class"],
             "message": r["message"], "attempts": _same({attempts[h] for h in r["hosts"]})} for r in rows]


def _same(values: set):
    return next(iter(values)) if len(values) == 1 else None


def audit_hosts(audit: dict) -> list[dict]:
    """One entry per host with an expectation finding or drift (natural host order): the messages, host name cut."""
    hosts: dict = {}
    for key, items in (("violations", (audit["expectations"] or {}).get("findings", [])),
                       ("drift", (audit["baseline"] or {}).get("drift", []))):
        for item in items:
            entry = hosts.setdefault(item["host"], {"host": item["host"], "violations": [], "drift": []})
            message = item["message"]
            entry[key].append(message[len(item["host"]) + 2:] if message.startswith(item["host"] + ": ") else message)
    return sorted(hosts.values(), key=lambda h: host_key(h["host"]))


# ---------------------------------------------------------------- html


def render_html(fleet: Fleet, findings: Findings, summary: dict, folded: list | None = None) -> str:
    """report.html as a string (`folded`: as for `render_markdown`)."""
    return _env.get_template("report.html.j2").render(**html_context(fleet, findings, summary, folded))


def html_context(fleet: Fleet, findings: Findings, summary: dict, folded: list | None = None) -> dict:
    """What the template shows, with every list bounded (big fleets: pointers to the CSV / JSON)."""
    classes = summary["classes"]
    ref = summary["reference_class"]
    matrix = [{"key": k, "label": label,
               "cells": [{"value": c["keys"][k], "differs": c["keys"][k] != ref["keys"][k]}
                         for c in classes[:MATRIX_CLASSES_MAX]]}
              for k, label in table.COMPARED.items()] if classes else []
    finding_hosts = by_host(summary["findings"])
    folded = fold(summary["findings"]) if folded is None else folded
    audit = summary.get("audit")
    audited = audit_hosts(audit) if audit else []
    base = (audit or {}).get("baseline") or {}
    unreachable = fold_failures(summary["unreachable"])
    hosts = host_details(fleet, findings, finding_hosts)
    broken = summary["host_sets"]["broken"]["hosts"]
    notes = summary["verdict_model"]["notes"]
    watch = [{"title": "speed", "detail": n["text"], "folded": ""}  # the speed figures to watch: the verdict's words
             for n in notes if n["said"] == "to watch"] + watch_line(folded, summary["pool"]["hosts"])
    rows = keepout_rows(summary)
    return {
        "s": summary, "classes": classes, "ref": ref, "matrix": matrix,
        "bench": summary.get("benchmark"), "audit": audit, "audit_hosts": audited[:ROWS_MAX], "audit_more": max(0, len(audited) - ROWS_MAX),
        "audit_no_baseline": fold_hosts(base.get("no_baseline", ())),
        "audit_absent": fold_hosts(base.get("absent", ())),
        "matrix_classes": classes[:MATRIX_CLASSES_MAX], "matrix_more": max(0, len(classes) - MATRIX_CLASSES_MAX),
        "held_out": held_out_rows(summary), "held_out_more": max(0, len(summary["held_out"]) - HELD_OUT_SHOWN),
        "broken_rows": rows["broken"][:HELD_OUT_SHOWN], "broken_rows_more": max(0, len(rows["broken"]) - HELD_OUT_SHOWN),
        "class_rows": rows["classes"], "notes": [n for n in notes if n["said"] != "to watch"],
        "held_out_folded": fold_hosts(h["host"] for h in summary["held_out"]),
        "keepout": bool(len(classes) > 1 or summary["excluded"] or summary["unreachable"] or summary["held_out"]
                        or rows["broken"]),
        "tiles": tiles(summary), "watch": watch[:WATCH_SHOWN], "watch_more": max(0, len(watch) - WATCH_SHOWN),
        "folded_findings": folded[:ROWS_MAX], "folded_more": max(0, len(folded) - ROWS_MAX), "variants_max": VARIANTS_MAX,
        "broken_hosts": fold_hosts(broken), "broken_count": len(broken),
        "anchors": {b["host"]: b["anchor"] for b in hosts["blocks"]}, "unreachable": unreachable[:ROWS_MAX],
        "unreachable_more": sum(u["size"] for u in unreachable[ROWS_MAX:]),
        "unreachable_folded": fold_hosts(u["host"] for u in summary["unreachable"]),
        "excluded_folded": fold_hosts(e["host"] for e in summary["excluded"]),
        "excluded_by": Counter(e["contract"] for e in summary["excluded"]).most_common(),
        "unreachable_by": Counter(u["failure_class"] for u in summary["unreachable"]).most_common(),
        "tone": _tone(summary["exit_code"]), "chart": chart(fleet, findings),
        "hosts": hosts, "sources": summary.get("sources", []),
        "list_files": list_files(summary),
        "xid": _xid_box(summary.get("xid")),
        "speed": summary.get("speed"), "speed_chart": speed_chart(summary.get("speed")),
    }


XID_HOSTS_SHOWN = 12  # hosts named with their events under the top box's repair lines


def _xid_box(section: dict | None) -> dict:
    """The top box's repair lines: per action its hosts, then the first hosts' events in words."""
    if not section:
        return {"actions": [], "hosts": [], "more": 0}
    hosts = [{"host": h["host"], "label": h["label"], "action": h["action"],
              "events": [f"{event_name(e)} on {e['bus_id']}: {e['meaning']}, {when(e)}" for e in h["events"][:4]]
              + ([f"and {len(h['events']) - 4} more"] if len(h["events"]) > 4 else [])}
             for h in section["hosts"][:XID_HOSTS_SHOWN]]
    return {"actions": section["actions"], "hosts": hosts, "more": max(0, len(section["hosts"]) - XID_HOSTS_SHOWN)}


SPEED_BARS_MAX = 128  # GPU bars per figure (the slowest first); summary.json and fleet.csv hold every GPU
SPEED_COLOURS = {"ok": "#14866d", "warning": "#d97706", "broken": "#c2362b"}


def speed_chart(speed: dict | None) -> list[dict]:
    """Per figure with a reference: one bar per GPU, its fraction of the reference (0-125% drawn)."""
    from sweep.analysis.speed import rate
    from sweep.analysis.speed_reference import FIGURES, LABELS, UNITS

    if not speed:
        return []
    out = []
    for figure in FIGURES:
        bars = []
        for g in speed["gpus"]:
            j = next((j for j in g["judgments"] if j["figure"] == figure and j["against"] == "reference"), None)
            if j is not None:
                bars.append({"label": f"{g['host']} GPU {g['gpu']}", "fraction": j["fraction"],
                             "width": min(j["fraction"], 1.25) / 1.25, "colour": SPEED_COLOURS[j["severity"]],
                             "text": f"{rate(j['value'], UNITS[figure])} · {j['fraction']:.0%}",
                             "title": j.get("reference_source", "")})
        if bars:
            bars.sort(key=lambda b: (b["fraction"], b["label"]))
            ref = next(r for r in speed["references"] if r["figure"] == figure and r["value"] is not None)
            out.append({"figure": figure, "label": LABELS[figure], "bars": bars[:SPEED_BARS_MAX],
                        "more": max(0, len(bars) - SPEED_BARS_MAX), "height": 30 + 20 * len(bars[:SPEED_BARS_MAX]),
                        "reference": f"{ref['model']} {rate(ref['value'], UNITS[figure])} ({ref['source']})"})
    return out


def _tone(exit_code: int) -> str:
    return {exitcodes.OK: "good", exitcodes.BROKEN: "warn", exitcodes.OFF: "warn"}.get(exit_code, "bad")


def chart(fleet: Fleet, findings: Findings) -> dict:
    """Bars of enforced power limit against the maximum, and SM clock under load against the maximum.

    One bar per host up to CHART_HOSTS_MAX hosts, else one per comparability class (its lowest
    limit, the median loaded host's clock, and how many of its hosts have a HW slowdown). An SM bar
    is drawn only for a probe taken under --load: an idle GPU's clock says nothing about its speed
    (an idle card at 345 MHz would look slower than a throttled one at 1035 MHz), so a host probed
    idle gets "idle" and no bar.
    """
    per_host = _chart_per_host(fleet, findings)
    by_class = len(per_host) > CHART_HOSTS_MAX
    if by_class:
        rows = per_host[per_host["klass"].notna()].groupby("klass", sort=True).agg(
            power=("power", "min"), power_top=("power_top", "max"), default=("default", "max"),
            power_max=("power_max", "max"), sm=("sm_load", "median"), sm_read=("sm", "median"),
            sm_max=("sm_max", "max"), slow_n=("slow", "sum"), n=("power", "size"))
        rows["slow"] = False  # the median clock is not a slowed one: a note counts the slowed hosts
        rows["label"] = [f"class {c} ({plural(n, 'host')})" for c, n in zip(rows.index, rows["n"])]
        rows["klass"] = rows.index
    else:
        rows = per_host.sort_index().rename(columns={"sm": "sm_read", "sm_load": "sm"})
        rows["label"] = [str(h) for h in rows.index]
        rows["slow_n"] = rows["slow"].astype(int)
    # a fleet whose every power or clock value is unknown (null) still gets its chart, of empty bars
    power_scale = (_f(pd.concat([rows["power_max"], rows["power_top"]]).max()) or 1.0) if len(rows) else 1.0
    sm_scale = (_f(rows["sm_max"].max()) or 1.0) if len(rows) else 1.0
    bars = []
    for r in rows.itertuples():  # one per bar drawn: at most CHART_HOSTS_MAX hosts, or the classes
        power, top, default, top_limit = _f(r.power), _f(r.power_top), _f(r.default), _f(r.power_max)
        bars.append({
            "label": r.label, "class": r.klass if isinstance(r.klass, str) else None,
            "power": power, "power_top": top, "power_max": top_limit, "default": default,
            "power_w": _pct(power, power_scale), "power_top_w": _pct(top, power_scale),
            "power_max_w": _pct(top_limit, power_scale), "default_x": _pct(default, power_scale),
            "capped": power is not None and default is not None and power < default,
            "sm": _f(r.sm), "sm_read": _f(r.sm_read), "sm_max": _f(r.sm_max), "sm_w": _pct(_f(r.sm), sm_scale),
            "sm_max_w": _pct(_f(r.sm_max), sm_scale), "loaded": _f(r.sm) is not None, "slow": _flag(r.slow),
            "note": (f"{int(r.slow_n)} with HW slowdown" if by_class else "HW slowdown") if _f(r.slow_n) else "",
        })
    return {"by_class": by_class, "bars": bars, "height": 44 + 22 * len(bars),
            "loaded": sum(b["loaded"] for b in bars)}


def _chart_per_host(fleet: Fleet, findings: Findings) -> pd.DataFrame:
    """Per host, over its selected GPUs: lowest and highest enforced limit, SM clock read at probe time
    (the slowed GPU's when a HW slowdown is active), the lowest median SM clock under --load, slowed, class."""
    g = fleet.gpus[fleet.gpus["selected"].fillna(False).to_numpy()]
    slowed = g[["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"]].fillna(False).any(axis=1)
    g = g.assign(slowed=slowed, sm_slowed=g["sm_mhz"].where(slowed))
    per_host = g.groupby("host", observed=True).agg(
        power=("power_enforced_w", "min"), power_top=("power_enforced_w", "max"),
        default=("power_default_w", "max"), power_max=("power_max_w", "max"), sm=("sm_mhz", "min"),
        sm_slowed=("sm_slowed", "min"), sm_max=("sm_max_mhz", "max"), sm_load=("sm_load_mhz", "min"),
        slow=("slowed", "any"))
    per_host["sm"] = per_host["sm_slowed"].where(per_host["slow"], per_host["sm"])
    klass = findings.host_keys["comparability_class"]
    per_host["klass"] = klass.reindex(per_host.index.astype(str)).to_numpy()
    return per_host


def _f(value):
    """A float, or None for what is unknown (None, NA, NaN, infinity)."""
    if value is None or pd.isna(value):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _flag(value) -> bool:
    return False if value is None or pd.isna(value) else bool(value)


def _pct(value, scale):
    return 0.0 if value is None or not scale else round(100.0 * value / scale, 2)


def host_details(fleet: Fleet, findings: Findings, finding_hosts=()) -> dict:
    """Per-host blocks with the contract chain (and the host's findings, `findings.by_host`): hosts with
    a problem first, at most DETAIL_HOSTS_MAX; each with an anchor the folded findings link to."""
    hosts = fleet.hosts
    rank = np.full(len(hosts), 3)
    rank[hosts["verdict"].astype("string").eq("warning").fillna(False).to_numpy(dtype=bool)] = 2
    rank[hosts["lowest_broken"].notna().to_numpy()] = 1
    rank[(hosts["status"] != "ok").to_numpy()] = 0
    order = np.lexsort((hosts["host"].to_numpy(dtype=object), rank))[:DETAIL_HOSTS_MAX]
    chosen = rows_at(hosts, order)
    klass = findings.host_keys["comparability_class"].to_numpy(dtype=object)
    picked = np.isin(fleet.contracts["host"].cat.codes.to_numpy(), order)
    chain = {}
    for c in rows_at(fleet.contracts, np.flatnonzero(picked)):
        chain.setdefault(c["host"], []).append(
            {"name": c["contract"], "title": c["title"], "status": c["status"], "message": c["message"],
             "fix": c["fix"], "consequence_of": c["consequence_of"]})
    said = {h["host"]: h["findings"] for h in finding_hosts}
    blocks = []
    for position, r in zip(order.tolist(), chosen):
        failed = r["status"] != "ok"
        blocks.append({
            "host": r["host"], "status": r["status"], "class": klass[position] if pd.notna(klass[position]) else None,
            "verdict": "unreachable" if failed else r["verdict"] or "unknown",
            "summary": f"{r['failure_class']}: {r['failure_message'] or ''}" if failed else r["summary"],
            "groups": r["groups"], "contracts": chain.get(r["host"], []), "provenance": r["provenance"],
            "findings": said.get(r["host"], []), "anchor": f"host-{position}",
        })
    return {"blocks": blocks, "more": max(0, len(hosts) - len(blocks)), "total": len(hosts)}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
