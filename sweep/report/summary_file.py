"""summary.json as it is written: every list that has one entry per host is folded (schema
sweep.summary/2).

Hosts that share a finding, a failure, a verdict entry or a state are one entry there, as the report
folds them: the entry's own fields, then `folded` (the hosts as one node set, as `nodeset -e` and
Slurm read it back), `not_folded` (names no node set can hold, listed as they are) and `count`. The
fleet's host list is written once, in `host_sets` (issue 41: 100,000 hosts listed, 2 with a record,
wrote 104 MB). The report itself is rendered from the unfolded summary
(`sweep.report.summary.summary_dict`), so nothing is re-read.

    findings               [{kind, severity, title, detail, fix, contract, folded, not_folded,
                           count}]
    unreachable            [{failure_class, message, attempts, folded, not_folded, count}]
    verdict_model.entries  [{severity, source, what, cause, fix, ..., folded, not_folded, count}]
    verdict_model.causes   each host's one cause, the same way (with `key`: its contract, figure or
                           tier)
    verdict_model.states   {state: {folded, not_folded, count}}
"""

from __future__ import annotations

from sweep.analysis.names import fold_nodeset

SCHEMA = "sweep.summary/2"
FINDING_PER_HOST = ("host", "message")  # a finding's message is "host: detail"


def fold_rows(rows, per_host=("host",)) -> list[dict]:
    """Rows that are alike but for their `per_host` fields as one row, in the order each first
    appears."""
    groups: dict = {}
    for row in rows:
        key = tuple(v for k, v in row.items() if k not in per_host)
        try:
            names = groups.get(key)
        except TypeError:  # a list or a dict among the values: by its text
            key = repr(key)
            names = groups.get(key)
        if names is None:
            names = groups[key] = ({k: v for k, v in row.items() if k not in per_host}, [])
        names[1].append(row["host"])
    return [dict(kept, **hosts_of(names)) for kept, names in groups.values()]


def hosts_of(names: list) -> dict:
    """{folded, not_folded, count} of a list of host names."""
    folded, odd = fold_nodeset(names)
    return {"folded": folded, "not_folded": list(odd), "count": len(names)}


def folded_summary(summary: dict) -> dict:
    """The summary as summary.json holds it: its per-host lists folded (see the module's
    docstring)."""
    out = dict(
        summary,
        schema=SCHEMA,
        findings=fold_rows(summary.get("findings") or (), FINDING_PER_HOST),
        unreachable=fold_rows(summary.get("unreachable") or ()),
    )
    model = summary.get("verdict_model")
    if model:
        by_state: dict[str, list] = {}
        for host, state in model["states"].items():
            by_state.setdefault(state, []).append(host)
        out["verdict_model"] = dict(
            model,
            entries=fold_rows(model["entries"]),
            causes=fold_rows(model["causes"]),
            states={state: hosts_of(names) for state, names in by_state.items()},
        )
    return out
