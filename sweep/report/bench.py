"""The benchmark section of a `sweep run --wrap` report: the terminal lines and summary.md's part.

report.html shows the same section (templates/report.html.j2, `bench`); sweep.analysis.bench
builds it.
"""

from __future__ import annotations

from sweep.text import plural

ROWS_MAX = 200


def _fig(value, unit=None) -> str:
    if value is None:
        return "-"
    text = f"{value:.6g}"
    return f"{text} {unit}" if unit else text


def _dev(o: dict) -> str:
    return "-" if o.get("deviation_pct") is None else f"{o['deviation_pct']:+g}%"


def quote_line(bench: dict) -> str:
    q = bench["quote"]
    if q.get("value") is None:
        return f"benchmark: no figure to quote: {q['why']}"
    spread = f", spread {q['spread_pct']:g}%" if q.get("spread_pct") is not None else ""
    return (
        f"benchmark: quote {q['metric']} = {_fig(q['value'], bench['unit'])}: the median of "
        f"class {q['class']} "
        f"(reference, {plural(q['n'], 'host')}{spread})"
    )


def bench_lines(bench: dict | None) -> list[str]:
    """The benchmark's verdict for the terminal: the figure to quote, outliers, what did not run."""
    if not bench:
        return []
    lines = [quote_line(bench)]
    if bench["not_pooled"]:
        lines.append("benchmark: " + bench["not_pooled"])
    for o in bench["outliers"][:10]:
        lines.append(
            f"benchmark: outlier {o['host']} (class {o['class']}): "
            f"{_fig(o['value'], bench['unit'])}, "
            + (f"{_dev(o)} from its class's median: " if o.get("deviation_pct") is not None else "")
            + "; ".join(o["evidence"])
        )
    for n in bench["not_run"][:10]:
        lines.append(f"benchmark: {n['host']}: {n['status']}: {n['why']}")
    more = len(bench["not_run"]) - 10
    if more > 0:
        lines.append(
            f"benchmark: {plural(more, 'more host', 'more hosts')} without a figure (summary.json)"
        )
    return lines


def markdown_bench(bench: dict, md, mdcode) -> list[str]:
    """summary.md's benchmark section (`md`, `mdcode`: sweep.report.markdown's escaping of text and
    of code)."""
    unit = bench["unit"]
    lines = [
        "## Benchmark, by comparability class",
        "",
        f"Command: {mdcode(' '.join(bench['command'] or []))}; figure: "
        f"**{md(bench['metric'] or 'none')}**",
        "",
        f"**{md(quote_line(bench)[len('benchmark: ') :])}**",
        "",
    ]
    if bench["not_pooled"]:
        lines += [md(bench["not_pooled"]), ""]
    lines += [
        "| Class | Hosts with a figure | Median | Min | Max | Spread |",
        "|---|---|---|---|---|---|",
    ]
    for c in bench["classes"]:
        ref = " (reference)" if c["reference"] else ""
        spread = f"{c['spread_pct']:g}%" if c["spread_pct"] is not None else "-"
        lines.append(
            f"| {c['id']}{ref} | {c['n']} of {c['size']} | {_fig(c['median'], unit)} | "
            f"{_fig(c['min'])} | "
            f"{_fig(c['max'])} | {spread} |"
        )
    lines.append("")
    if bench["outliers"]:
        lines += [
            "| Outlier | Class | Figure | From the class median | Envelope evidence |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {mdcode(o['host'])} | {o['class']} | {_fig(o['value'], unit)} | {_dev(o)} | "
            f"{'<br>'.join(md(e) for e in o['evidence'])} |"
            for o in bench["outliers"][:ROWS_MAX]
        ]
        lines.append("")
    if bench["not_run"]:
        lines += ["| Host | Benchmark | Why |", "|---|---|---|"]
        lines += [
            f"| {mdcode(n['host'])} | {n['status']} | {md(n['why'])} |"
            for n in bench["not_run"][:ROWS_MAX]
        ]
        lines.append("")
    return lines
