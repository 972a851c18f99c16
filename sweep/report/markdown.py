"""summary.md: the verdict, the classes against the reference, the hosts kept out and the findings,
for a ticket; every text a host sent made inert in Markdown (`md`, `mdcode`).
"""

from __future__ import annotations

import re

from sweep.analysis.xid import event_name, when
from sweep.analysis.names import fold_hosts
from sweep.report.bench import markdown_bench
from sweep.report.findings import causes_of, fold
from sweep.report.summary import ROWS_MAX, audit_hosts, fold_failures, list_files
from sweep.report.topbox import SETS_SAID, next_commands, owner_rows
from sweep.text import plural


def md(text) -> str:
    """Text from a host, made inert in Markdown (tables, emphasis, links, HTML) with CommonMark's
    backslash escapes, never HTML entities: `<=` stays `<=`, `<b>` becomes `\\<b>`, `&amp;`
    `\\&amp;`."""
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


def _markdown_owners(summary: dict) -> list[str]:
    """The hosts out of the pool that drain.sh leaves alone, with whose cause it is; then the next
    commands."""
    lines = []
    if owner_rows(summary):
        lines += [
            "## Out of the pool, not drained: whose cause it is",
            "",
            "| Host | Owner | Cause | Fix | What to do |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {mdcode(r['host'])} | {md(r['label'])} | {md(r['cause'])} | "
            f"{md(r['fix'] or '')} | {md(r['action'])} |"
            for r in owner_rows(summary)[:ROWS_MAX]
        ]
        lines.append("")
    if next_commands(summary):
        lines += (
            ["## Next", ""]
            + [f"- {mdcode(c['command'])}: {md(c['what'])}" for c in next_commands(summary)]
            + [""]
        )
    return lines


def _markdown_classes(summary: dict) -> list[str]:
    """The comparability classes against the reference: its keys, then what each other class differs
    in."""
    lines: list[str] = []
    classes = summary["classes"]
    if classes:
        ref = summary["reference_class"]
        lines += [
            "## Comparability classes",
            "",
            f"Reference: class {ref['id']} ({md(ref['chosen_by'])}), "
            f"{plural(ref['size'], 'host')}: "
            f"{mdcode(ref['folded'])}",
            "",
            "Reference keys: "
            + "; ".join(
                f"{md(summary['key_labels'][k])} **{md(v)}**" for k, v in ref["keys"].items()
            ),
            "",
        ]
        if len(classes) > 1:
            lines += [
                "| Class | Hosts | Differs from the reference | What it does to a benchmark |",
                "|---|---|---|---|",
            ]
        for c in classes[1:]:
            differs = "<br>".join(
                f"{md(d['label'])}: **{md(d['value'])}** (reference {md(d['reference'])})"
                for d in c["differs"]
            )
            impacts = "<br>".join(md(d["impact"]) for d in c["differs"])
            lines.append(
                f"| {c['id']} | {mdcode(c['folded'])} ({c['size']}) | {differs} | {impacts} |"
            )
        lines.append("")
    return lines


def render_markdown(summary: dict, folded: list | None = None) -> str:
    """summary.md: the verdict, classes against the reference, hosts kept out, findings; for a
    ticket. `folded`: `findings.fold(summary["findings"])` when the caller has it already."""
    lines = [
        f"# sweep report: {plural(summary['hosts_total'], 'host')}",
        "",
        f"**{md(summary['verdict'])}**: {md(summary['verdict_detail'])}",
        "",
        f"Exit code {summary['exit_code']}: {md(summary['exit_meaning'])}",
        "",
    ]
    lines += _markdown_states(summary)
    lines += _markdown_classes(summary)
    if summary["held_out"]:
        lines += ["## Held out of the pool for health", "", "| Host | Why |", "|---|---|"]
        lines += [
            f"| {mdcode(h['host'])} | {md(h['cause'])} |" for h in summary["held_out"][:ROWS_MAX]
        ]
        lines.append("")
    lines += _markdown_owners(summary)
    lines += _markdown_cannot_run(summary)
    lines += _markdown_xid(summary.get("xid"))
    # one row per finding the hosts share
    health = fold(summary["findings"], causes_of(summary)) if folded is None else folded
    lines += _markdown_findings(health)
    if summary.get("benchmark"):
        lines += markdown_bench(summary["benchmark"], md, mdcode)
    lines += _markdown_speed(summary.get("speed"))
    audit = summary.get("audit")
    if audit:
        lines += _markdown_audit(audit)
    lines += _markdown_lists(summary)
    cut = [
        name
        for name, items in (
            ("cannot-run hosts", summary["excluded"]),
            ("unreachable hosts", summary["unreachable"]),
            ("health findings", health),
        )
        if len(items) > ROWS_MAX
    ]
    if cut:
        lines += [
            f"Lists cut at {ROWS_MAX} rows ({', '.join(cut)}): summary.json has them all.",
            "",
        ]
    return "\n".join(lines)


def _markdown_cannot_run(summary: dict) -> list[str]:
    """The hosts that cannot run a benchmark (their lowest broken contract) and the unreachable
    ones, each a table cut at ROWS_MAX rows."""
    lines = []
    if summary["excluded"]:
        lines += [
            "## Cannot run a benchmark",
            "",
            "| Host | Contract | Why | Fix |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {mdcode(e['host'])} | {md(e['contract'])} | {md(e['message'])} | {md(e['fix'])} |"
            for e in summary["excluded"][:ROWS_MAX]
        ]
        lines.append("")
    if summary["unreachable"]:
        lines += ["## Unreachable", "", "| Hosts | Failure | Message |", "|---|---|---|"]
        lines += [
            f"| {mdcode(u['hosts'])} | {md(u['failure_class'])} | {md(u['message'])} |"
            for u in fold_failures(summary["unreachable"])[:ROWS_MAX]
        ]
        lines.append("")
    return lines


def _markdown_findings(health: list) -> list[str]:
    """One row per finding the hosts share (`findings.fold`), cut at ROWS_MAX rows."""
    lines = []
    if health:
        lines += [
            "## Health findings",
            "",
            "| Severity | Hosts | Finding | Detail | Values | Fix |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {e['severity']} | {mdcode(e['folded'])} ({e['count']}) | {md(e['title'])} | "
            f"{md(e['detail'])} | {md(e['spread'])} | {md(e['fix'])} |"
            for e in health[:ROWS_MAX]
        ]
        lines.append("")
    return lines


def _markdown_states(summary: dict) -> list[str]:
    """The verdict's sets (summary.json host_sets) and notes: what is not measured or not read, with
    its fix."""
    sets = summary["host_sets"]
    lines = ["## Hosts by verdict", ""]
    lines += [
        f"- {said} ({sets[key]['size']}): "
        f"{mdcode(sets[key]['folded'] or ', '.join(sets[key]['hosts']))}"
        for key, said in SETS_SAID
        if sets[key]["size"]
    ]
    lines += [f"- **{n['said']}**: {md(n['text'])}" for n in summary["verdict_model"]["notes"]]
    return lines + [""]


def _markdown_speed(speed: dict | None) -> list[str]:
    """The speed tier's headline and judgments (sweep.analysis.speed.speed_section), or nothing."""
    if not speed:
        return []
    lines = ["## Speed", ""] + [f"- {md(line)}" for line in speed["headline"]]
    return (
        lines
        + [f"- {j['severity']}: {md(j['message'])}" for j in speed["judgments"][:ROWS_MAX]]
        + [""]
    )


def _markdown_lists(summary: dict) -> list[str]:
    lines = [
        "## Lists and commands",
        "",
        "Beside this file; read a script before you run it: sweep runs none.",
        "",
    ]
    lines += [
        f"- {', '.join(mdcode(f) for f in item['files'])}: {md(item['what'])}: "
        f"{', '.join(mdcode(c) for c in item['commands'])}"
        for item in list_files(summary)
    ]
    return lines + [""]


def _markdown_xid(section: dict | None) -> list[str]:
    """The hosts grouped by the repair their Xid / SXid events need, then one row per host and
    event."""
    if not section or not section["actions"]:
        return []
    lines = ["## Xid and SXid: the repair NVIDIA prescribes", ""]
    lines += [
        f"- **{md(a['label'])}**: {mdcode(a['folded'])} ({plural(a['count'], 'host')}): "
        f"{md(a['fix'])}"
        for a in section["actions"]
    ]
    lines += [
        "",
        "| Host | Action | Event | Device | Count, first and last time |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {mdcode(h['host'])} | {md(e['label'])} | {md(event_name(e))}: {md(e['meaning'])} | "
        f"{mdcode(e['bus_id'])} | {md(when(e))} |"
        for h in section["hosts"][:ROWS_MAX]
        for e in h["events"]
    ]
    return lines + [""]


def _markdown_audit(audit: dict) -> list[str]:
    """The audit: what it was judged against, then one row per host off its expectations or
    baseline."""
    lines = ["## Audit", ""]
    expectations, baseline = audit["expectations"], audit["baseline"]
    if expectations:
        lines += [
            f"Expectations {mdcode(expectations['file'])}: "
            f"{plural(expectations['hosts_judged'], 'host')} judged.",
            "",
        ]
    if baseline:
        missing = baseline["no_baseline"]
        lines += [
            f"Baseline {mdcode(baseline['dir'])}: "
            f"{plural(len(baseline['compared']), 'host')} compared"
            + (f", no baseline for {mdcode(fold_hosts(missing))}" if missing else "")
            + ".",
            "",
        ]
    if audit["headline"]:
        lines += [f"- **{md(line)}**" for line in audit["headline"]] + [""]
    hosts = audit_hosts(audit)
    if hosts:
        lines += ["| Host | Off expectations | Drift from the baseline |", "|---|---|---|"]
        lines += [
            f"| {mdcode(h['host'])} | {'<br>'.join(md(m) for m in h['violations'])} | "
            f"{'<br>'.join(md(m) for m in h['drift'])} |"
            for h in hosts[:ROWS_MAX]
        ]
        lines.append("")
        if len(hosts) > ROWS_MAX:
            lines += [f"{len(hosts) - ROWS_MAX} more hosts in summary.json.", ""]
    else:
        lines += ["No host is off its expectations or baseline.", ""]
    return lines
