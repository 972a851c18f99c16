"""``sweep report``: load records, compare, write the report folder, decide the exit code.

`build_report(paths, out_dir, reference=None)` writes into `out_dir`::

    report.html    the report, one self-contained file (no script, no URL)
    summary.json   the machine-readable verdict (schema sweep.summary/1)
    summary.md     the verdict as Markdown, for a ticket
    hosts.csv      one row per host: facts, comparability key values, class
    fleet.csv      one row per GPU

Exit codes, in order of precedence (the first that applies wins):

    2  bad input: no record found, unreadable or unknown files, a --reference that names no
       host or group (raised as a SweepError; the CLI turns it into the message and the code)
    1  some hosts are unreachable: the sweep is incomplete, so the classes and findings
       describe only the hosts that answered
    3  the hosts that can run a benchmark fall into more than one comparability class:
       the fleet cannot be benchmarked as one pool
    4  every host answered and they form one class, but some host has a broken contract
       (a health finding of severity "broken": HW slowdown, a power cap below default, a
       row-remap failure, an empty device mask...); warnings do not change the code
    0  every host reachable, no broken contract, all in one comparability class
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sweep.compare import Findings, compare
from sweep.errors import RunFolderError
from sweep.fleet import Fleet, load_fleet
from sweep.render import render_html, render_markdown, summary_dict, write_csvs, write_summary_json

EXIT_OK = 0
EXIT_UNREACHABLE = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_COMPARABLE = 3
EXIT_BROKEN = 4
EXIT_MEANING = {
    EXIT_OK: "every host reachable, no broken contract, all in one comparability class",
    EXIT_UNREACHABLE: "some hosts are unreachable: the verdict covers only the hosts that answered",
    EXIT_NOT_COMPARABLE: "the hosts fall into more than one comparability class: not one pool",
    EXIT_BROKEN: "one comparability class, but some host has a broken contract",
}


@dataclass(frozen=True)
class ReportResult:
    """What build_report wrote and decided."""

    out_dir: Path
    files: dict
    exit_code: int
    headline: str
    summary: dict
    findings: Findings
    fleet: Fleet


def exit_code(findings: Findings) -> int:
    """The report's exit code (precedence 1 > 3 > 4 > 0; see the module docstring)."""
    if findings.unreachable:
        return EXIT_UNREACHABLE
    if len(findings.classes) > 1:
        return EXIT_NOT_COMPARABLE
    if any(f.severity == "broken" for f in findings.findings):
        return EXIT_BROKEN
    return EXIT_OK


def build_report(paths, out_dir, reference: str | None = None) -> ReportResult:
    """Read `paths` (run folders, host records, health.json files), compare, write the report folder.

    `reference` names a host or an inventory group whose class is the reference (default: the
    largest class). Raises a SweepError for bad input; a failed host is data, never an error.
    """
    fleet = load_fleet(paths)
    findings = compare(fleet, reference=reference)
    code = exit_code(findings)
    summary = summary_dict(findings, code, EXIT_MEANING[code], fleet.sources)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        files = {"html": out / "report.html", "summary": out / "summary.json", "markdown": out / "summary.md",
                 "hosts_csv": out / "hosts.csv", "fleet_csv": out / "fleet.csv"}
        write_summary_json(summary, files["summary"])
        files["markdown"].write_text(render_markdown(summary), encoding="utf-8")
        write_csvs(fleet, findings, files["hosts_csv"], files["fleet_csv"])
        files["html"].write_text(render_html(fleet, findings, summary), encoding="utf-8")
    except OSError as err:
        raise RunFolderError(f"cannot write the report ({err.strerror or err})", where=str(out),
                             fix="choose a writable folder for the report") from None
    return ReportResult(out, files, code, findings.headline(), summary, findings, fleet)
