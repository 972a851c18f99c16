"""summary.json (the machine-readable verdict), and the views of it both summary.md and report.html
show: the unreachable hosts folded by failure, the audit's hosts, the report's lists and commands.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from sweep import __version__
from sweep.analysis.actions import drain_groups, host_sets
from sweep.analysis.owners import held_back
from sweep.judgment import Assessment
from sweep.analysis.names import fold_failures as names_fold_failures
from sweep.analysis.names import fold_hosts, host_key
from sweep.report.summary_file import folded_summary
from sweep.store import write_bytes_atomic
from sweep.strictjson import finite_indented
from sweep.text import plural

# the summary as rendered; summary.json is sweep.summary/2 (folded)
SUMMARY_SCHEMA = "sweep.summary/1"

ROWS_MAX = 200  # rows per findings kind / unreachable table


def summary_dict(judged: Assessment, sources=()) -> dict:
    """The machine-readable verdict written to summary.json: the assessment (`sweep.assess`) as
    data; its sets, causes, reasons and code are the verdict's. "owners": each host out of the pool
    and not drained, with the owner of its cause (`sweep.analysis.owners`), the cause, its fix and
    what to do."""
    verdict, drain_config = judged.verdict, judged.drain_config
    out = {
        "schema": SUMMARY_SCHEMA,
        "generated_at": _now(),
        "sweep_version": __version__,
        "sources": list(sources),
    }
    out.update(judged.to_dict())
    out["host_sets"] = host_sets(verdict, judged.findings, drain_config)
    xid_hosts = {h["host"]: h for h in (judged.xid or {}).get("hosts", [])}
    out["drain"] = drain_groups(verdict, xid_hosts, drain_config)
    out["drain_config"] = drain_config
    out["owners"] = held_back(verdict, drain_config)
    # every host's state, its cause and the entries they come from
    out["verdict_model"] = verdict.to_dict()
    out["xid"] = judged.xid
    out["audit"] = judged.audit
    out["benchmark"] = judged.bench
    # sweep.analysis.speed.speed_section: the speed tier's figures and judgments, or None
    out["speed"] = judged.speed
    out["exit_code"] = verdict.exit_code
    out["exit_meaning"] = verdict.exit_meaning
    return out


def write_summary_json(summary: dict, path: Path) -> Path:
    """summary.json, strict JSON (a value that is not a finite number is written as null), its
    per-host lists folded (`sweep.report.summary_file`)."""
    # per-host lists folded (issue 41)
    write_bytes_atomic(path, finite_indented(folded_summary(summary)))
    return path


def list_files(summary: dict) -> list[dict]:
    """The report's lists and commands (sweep.report.lists), one entry each: files, what they hold,
    the commands that use them (each on its own). summary.md and report.html show them; sweep runs
    none."""
    sets, drains = summary["host_sets"], summary["drain"]
    pool, held, drain = (sets[k]["size"] for k in ("pool", "held_out", "drain"))
    counts = f"{plural(pool, 'host')} in the pool, {plural(held, 'host')} held out"
    return [
        {
            "files": ["pool.txt", "held_out.txt"],
            "what": f"one host per line ({counts})",
            "commands": [
                "sweep run INVENTORY --limit @pool.txt",
                "ansible -i INVENTORY --limit @held_out.txt all",
            ],
        },
        {
            "files": ["pool.nodeset", "held_out.nodeset"],
            "what": "the same sets as folded node sets",
            "commands": [
                'srun --nodelist="$(cat pool.nodeset)"',
                'sbatch --exclude="$(cat held_out.nodeset)"',
                'clush -w "$(cat pool.nodeset)"',
            ],
        },
        {
            "files": ["drain.sh", "resume.sh"],
            "what": f"Slurm: drain the {plural(drain, 'host')} held out or broken "
            f"({plural(len(drains), 'reason')}), "
            "leaving a node drained for another reason as it is; resume the pool's nodes "
            "that sweep drained "
            "(-n: print, run nothing)",
            "commands": ["sh drain.sh", "sh resume.sh"],
        },
        {
            "files": ["kubectl.sh"],
            "what": "Kubernetes: cordon and taint the same hosts; untaint and uncordon the "
            "pool's hosts sweep tainted (untested against a cluster)",
            "commands": ["sh kubectl.sh"],
        },
    ]


def fold_failures(unreachable) -> list[dict]:
    """The unreachable hosts with the same kind of failure as one row
    (`analysis.names.fold_failures`), their names folded as ClusterShell's clubak -b folds identical
    output (``gpu[07-20]``). Rows in the order each failure first appears: hosts, size,
    failure_class, message, attempts."""
    attempts = {u["host"]: u.get("attempts") for u in unreachable}
    rows = names_fold_failures(
        (u["host"], u["failure_class"], u.get("message")) for u in unreachable
    )
    return [
        {
            "hosts": fold_hosts(r["hosts"]),
            "size": len(r["hosts"]),
            "failure_class": r["failure_class"],
            "message": r["message"],
            "attempts": _same({attempts[h] for h in r["hosts"]}),
        }
        for r in rows
    ]


def _same(values: set):
    return next(iter(values)) if len(values) == 1 else None


def audit_hosts(audit: dict) -> list[dict]:
    """One entry per host with an expectation finding or drift (natural host order): their details
    (the host beside them)."""
    hosts: dict = {}
    for key, items in (
        ("violations", (audit["expectations"] or {}).get("findings", [])),
        ("drift", (audit["baseline"] or {}).get("drift", [])),
    ):
        for item in items:
            entry = hosts.setdefault(
                item["host"], {"host": item["host"], "violations": [], "drift": []}
            )
            entry[key].append(item["detail"])
    return sorted(hosts.values(), key=lambda h: host_key(h["host"]))


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
