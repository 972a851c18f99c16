"""``sweep report``: load records, compare, write the report folder, decide the exit code.

`build_report(paths, out_dir, reference=None, expect=None, baseline=None)` writes into `out_dir`::

    report.html    the report, one self-contained file (no script, no URL)
    summary.json   the machine-readable verdict (schema sweep.summary/1); with an expectations file
                   or a baseline folder, "audit" holds `sweep.audit.baseline.audit_section` (else
                   null); "xid" the hosts grouped by the repair their Xid / SXid events need
                   (`sweep.analysis.xid.xid_section`)
    summary.md     the verdict as Markdown, for a ticket
    hosts.csv      one row per host: facts, comparability key values, class
    fleet.csv      one row per GPU
    pool.txt       the pool (summary.json "pool"), one host per line: ``--limit @pool.txt``, as an
                   Ansible retry file is read (sweep run and ansible alike)
    held_out.txt   the hosts of the reference class held out of the pool (summary.json "held_out"),
                   the same way
    broken.txt     every answering host with a broken entry (a contract, a speed figure, an Xid
                   repair)
    pool.nodeset, held_out.nodeset, broken.nodeset, drain.sh, resume.sh, kubectl.sh
                   the same sets as folded node sets, and the commands that would drain the hosts
                   held out or broken (`sweep.report.lists`; never run by sweep); summary.json
                   "host_sets" (pool, held_out, broken, drain: hosts, folded, not_folded, size) and
                   "drain" (one entry per reason: hosts, folded, not_folded, reason, taint) carry
                   them for pipelines

The exit code is the verdict's (`sweep.analysis.verdict`: one rule over the hosts' states; the
README's table): 2 bad input (a SweepError, before any file is written), 1 a host unreachable or a
tier asked for (--speed/--load) not measured, 6 / 7 a --wrap benchmark failed / refused, 3 more than
one comparability class, 4 a host broken, unable to run or held out, 5 off its expectations or
baseline, 0 otherwise; an unknown contract is named, and changes no code.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from sweep.analysis.compare import Findings
from sweep.analysis.fleet import Fleet, load_fleet, usable_cpus
from sweep.analysis.speed import headline_lines
from sweep.analysis.verdict import Verdict
from sweep.errors import RunFolderError
from sweep.folders import SHARED, make_dirs
from sweep.gcpolicy import fewer_collections
from sweep.judgment import Assessment, assess
from sweep.report.bench import bench_lines
from sweep.report.csv_files import write_fleet_csv, write_hosts_csv
from sweep.report.files import write_limit_file, write_text
from sweep.report.findings import causes_of, fold, terminal_lines
from sweep.report.lists import FILES as LIST_FILES
from sweep.report.lists import write_lists
from sweep.report.markdown import render_markdown
from sweep.report.page import render_html
from sweep.report.summary import summary_dict, write_summary_json
from sweep.report.topbox import next_commands, owner_lines, states_line
from sweep.store import refuse_links


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
    # the health findings folded across hosts, one line each, for the terminal
    findings_lines: tuple = ()
    verdict: Verdict | None = None  # the one verdict every file and the exit code were made from
    # what was asked for and not measured, what was not read: each with its hosts and fix
    notes: tuple = ()
    # the hosts out of the pool and not drained, with whose cause it is; the next commands
    next_lines: tuple = ()
    # the whole judgment (`sweep.assess`) the files were written from
    assessment: Assessment | None = None


def audited(expect: Path | None, baseline: Path | None) -> bool:
    """Whether the report audits its hosts: the audit judges the health.json the frames were made
    from, which load_fleet then keeps."""
    return expect is not None or baseline is not None


@fewer_collections()  # a report of 30,000 hosts made 1,563 young and 11 full collections
def build_report(
    paths,
    out_dir,
    reference: str | None = None,
    expect: Path | None = None,
    baseline: Path | None = None,
    drain_config: bool = False,
    fleet: Fleet | None = None,
) -> ReportResult:
    """Read `paths` (run folders, host records, health.json or provenance files), compare, write the
    report folder.

    `reference` names a host or an inventory group whose class is the reference (default: the
    largest class). `expect` (an expectations file) and `baseline` (a `sweep baseline set`
    folder) add an audit of the same hosts (docs/audits.md). `drain_config`: drain.sh drains the
    hosts out of the pool for their configuration too (a power cap, ECC mode...:
    `sweep.analysis.owners`). Raises a SweepError for bad input; a failed host is data, never an
    error. `fleet`: `paths` as `load_fleet(paths, keep_health=audited(expect, baseline))` read them
    (`sweep run` reads its run once, for the history index too).
    """
    if fleet is None:
        fleet = load_fleet(paths, keep_health=audited(expect, baseline))
    # bad input stops here, before any file
    judged = assess(fleet, baseline, expect, reference=reference, drain_config=drain_config)
    verdict = judged.verdict  # the one verdict: every view below reads it
    summary = summary_dict(judged, fleet.sources)
    # the findings folded across hosts, each host's cause once
    folded = fold(summary["findings"], causes_of(summary))
    out = Path(out_dir)
    files = _report_files(out)
    refuse_links(
        out.parent,
        [out.name, *(f"{out.name}/{path.name}" for path in files.values())],
        fix="remove the link, or write the report elsewhere with --out",
    )
    _write_files(out, files, fleet, judged, summary, folded)
    headline = _terminal_headline(judged)
    next_lines = (
        *owner_lines(summary),
        *(f"next: {c['command']}: {c['what']}" for c in next_commands(summary)),
    )
    return ReportResult(
        out,
        files,
        verdict.exit_code,
        headline,
        summary,
        judged.findings,
        fleet,
        tuple(terminal_lines(folded)),
        verdict,
        (*verdict.notes(), states_line(summary)),
        next_lines,
        judged,
    )


def _report_files(out: Path) -> dict:
    """The report folder's files, by the key ReportResult.files names them with."""
    return {
        "html": out / "report.html",
        "summary": out / "summary.json",
        "markdown": out / "summary.md",
        "hosts_csv": out / "hosts.csv",
        "fleet_csv": out / "fleet.csv",
        "pool": out / "pool.txt",
        "held_out": out / "held_out.txt",
        "broken": out / "broken.txt",
        **{key: out / name for key, name in LIST_FILES.items()},
    }


def _write_files(out: Path, files: dict, fleet, judged, summary: dict, folded: list) -> None:
    """Write every file of the report into `out` (`files`: `_report_files(out)`); an OSError is a
    RunFolderError naming the folder."""
    try:
        make_dirs(out, SHARED)
        # fleet.csv (one row per GPU) is the slowest file to write: a forked process writes it
        # while this one renders the rest
        writer = _start(write_fleet_csv, fleet, files["fleet_csv"])
        write_summary_json(summary, files["summary"])
        write_text(files["markdown"], render_markdown(summary, folded))
        write_hosts_csv(fleet, judged.findings, files["hosts_csv"], judged.verdict)
        for key in ("pool", "held_out", "broken"):
            write_limit_file(files[key], summary["host_sets"][key]["hosts"])
        write_lists(out, summary)
        write_text(
            files["html"], render_html(fleet, judged.findings, summary, folded, judged.verdict)
        )
        _finish(writer, write_fleet_csv, fleet, files["fleet_csv"])
    except OSError as err:
        raise RunFolderError(
            f"cannot write the report ({err.strerror or err})",
            where=str(out),
            fix="choose a writable folder for the report",
        ) from None


def _terminal_headline(judged) -> str:
    """The terminal's lines: the verdict's sentence (the hosts kept out are said below it, once
    each: their causes in the findings lines), the audit, the benchmark, the speed tier's classes
    and rejected figures."""
    audit, speed = judged.audit, judged.speed
    return "\n".join(
        [
            judged.headline(),
            *(audit["headline"] if audit else ()),
            *bench_lines(judged.bench),
            *(headline_lines(speed, broken=False) if speed else ()),
        ]
    )


def _start(task, *args):
    """Run task(*args) in a forked process where fork exists (Linux); None: run it later, here."""
    if not sys.platform.startswith("linux") or usable_cpus() < 2 or threading.active_count() > 1:
        return None  # fork is only safe in a single-threaded process
    process = multiprocessing.get_context("fork").Process(target=task, args=args, daemon=True)
    process.start()
    return process


def _finish(process, task, *args):
    """Wait for the forked task; if it failed (or never ran), run it here so that errors surface."""
    if process is not None:
        process.join()
        if process.exitcode == 0:
            return
    task(*args)
