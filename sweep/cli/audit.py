"""`sweep audit`: judge a run folder against an expectations file and/or a baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from sweep.cli import paths
from sweep.cli.options import json_flag
from sweep.cli.output import print_lines
from sweep.text import json_text


def audit(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="the run folder to judge"),
    expect: Optional[Path] = typer.Option(
        None, "--expect", metavar="FILE", help="expectations file (docs/expectations.md)"
    ),
    baseline: Optional[Path] = typer.Option(
        None, "--baseline", metavar="DIR", help="baseline folder (sweep baseline set)"
    ),
    as_json: bool = json_flag("the audit section"),
):
    """Judge RUN_DIR against an expectations file and/or a baseline: one line per finding, one per
    reason a host of the run was not judged (docs/audits.md)."""
    from sweep.judgment import assess
    from sweep.analysis.fleet import load_fleet
    from sweep.errors import ConfigError
    from sweep.store import load_run

    paths.input_dir(run_dir, "RUN_DIR", "a run folder (sweep run)")
    paths.input_file(expect, "--expect", "an expectations file (docs/expectations.md)")
    paths.input_dir(baseline, "--baseline", "a baseline folder (sweep baseline set)")
    if expect is None and baseline is None:
        raise ConfigError(
            "nothing to audit against", fix="give --expect FILE, --baseline DIR, or both"
        )
    run = load_run(run_dir)
    # the run judged as `sweep report` judges it (`sweep.assess`): its audit section is this
    # command's answer
    section = assess(load_fleet([run_dir], keep_health=True), baseline, expect, audited=run).audit
    if as_json:
        print(json_text(section))
    else:
        print_lines(_audit_lines(section))
    raise typer.Exit(section["exit_code"])


def _audit_lines(section: dict) -> list[str]:
    """`sweep audit`'s text: findings and drift, then the hosts not judged, folded (clubak -b), then
    the headline."""
    from sweep.analysis.names import fold_messages
    from sweep.audit.baseline import audit_off

    lines = []
    for items in (
        (section["expectations"] or {}).get("findings", []),
        (section["baseline"] or {}).get("drift", []),
    ):
        lines += fold_messages((item["host"], item["message"]) for item in items)
    lines += fold_messages(
        (item["host"], f"not judged: {item['reason']}") for item in section["unjudged"]
    )
    if not audit_off(section):
        judged = section["hosts_listed"] - len(section["unjudged"])
        lines.append(
            "no host is off its expectations or baseline"
            if not section["unjudged"]
            else "no host was judged"
            if judged == 0
            else "the one judged host is not off its expectations or baseline"
            if judged == 1
            else f"none of the {judged} judged hosts is off its expectations or baseline"
        )
    return lines + section["headline"]
