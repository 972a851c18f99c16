"""The health findings as an operator reads them: one entry per host, one finding per contract;
then one entry per finding that many hosts share (`fold`).

`summary.json` keeps every finding as the analysis made it. A host whose lowest broken contract is
`clocks` also has a HW thermal slowdown finding for the same GPU: two sentences for one fact. Here
the findings of one host about one contract become the lowest broken contract's own sentence when it
is among them (the agent folds its GPUs, "GPU 0-7: ..."), else one line per cause with its own fix;
a host's findings are listed together, hosts with a broken finding first.

`fold` turns those into one entry per (contract, severity, title, sentence), the hosts folded as
ClusterShell's ``clubak -b`` folds identical output (``gpu[02-09]``). Sentences that differ only in
their values (a temperature, a count, a PID) fold too: each value with its unit is masked to form
the key, and the entry lists the values it met with their counts (``91 C x3, 92 C x1 (gpu36)``).
"""

from __future__ import annotations

import re

from probe_agent.chain import CONTRACTS
from sweep.analysis.names import abbreviate, fold_hosts, host_key
from sweep.text import plural

SEVERITY_ORDER = {"unreachable": 0, "broken": 1, "warning": 2}
# The contract a finding of the analysis is about, where the finding does not name it (the agent's
# table).
KIND_CONTRACT = {kind: c.name for c in CONTRACTS for kind in c.findings}
CHAIN = {c.name: c for c in CONTRACTS}


def contract_of(finding: dict) -> str:
    return finding.get("contract") or KIND_CONTRACT.get(finding["kind"]) or finding["kind"]


def _merge(items: list[dict]) -> list[dict]:
    """The findings of one host about one contract: the lowest broken contract's alone when present
    (its sentence says the contract's causes), else one per cause, each with its own fix (issue 41:
    never "HW slowdown: ...; HW thermal slowdown: ..." under the first cause's fix)."""
    # "the GPUs differ in persistence mode" says again what the per-GPU finding says
    if len(items) > 1:
        items = [f for f in items if f["kind"] != "mixed_gpus"] or items
    items = sorted(
        items, key=lambda f: (f["kind"] != "lowest_broken", SEVERITY_ORDER[f["severity"]])
    )
    if items[0]["kind"] == "lowest_broken":
        items = items[:1]
    kinds = sorted({f["kind"] for f in items})
    out = []
    for f in items:
        out.append(
            {
                "kind": f["kind"],
                "severity": f["severity"],
                "title": f["title"],
                "contract": contract_of(f),
                "detail": f["detail"],
                "fix": f["fix"],
                "kinds": kinds,
            }
        )
    return out


def causes_of(summary: dict) -> dict[str, dict]:
    """Host -> its one cause (summary.json's verdict_model "causes", `Verdict.cause`)."""
    return {c["host"]: c for c in summary["verdict_model"]["causes"]}


CAUSE_TITLES = {"xid": "Xid repair", "speed": "Speed figure below its reference"}


def _cause_finding(cause: dict, items: list[dict]) -> dict:
    """A host's cause as the findings say it: its own finding's title where it is one, else its
    source's."""
    own = next(
        (f for f in items if f["kind"] == cause["finding"] and cause["source"] == "health"), None
    )
    title = own["title"] if own else CAUSE_TITLES.get(cause["source"], cause["key"])
    return {
        "kind": cause["finding"] or cause["source"],
        "severity": "broken" if cause["severity"] == "broken" else "warning",
        "title": title,
        "contract": cause["key"],
        "detail": cause["cause"],
        "fix": cause["fix"],
        "kinds": [cause["finding"] or cause["source"]],
        "is_cause": True,
    }


def _said_by_cause(cause: dict, f: dict) -> bool:
    """Whether finding `f` says the fault of the host's cause again: the cause's contract (the Xid
    its repair names), or a broken finding one stands on the other in the chain (HW thermal slowdown
    and broken thermal headroom: one fault)."""
    mine, theirs = cause["key"], contract_of(f)
    if theirs == mine:
        return True
    related = (theirs in CHAIN and mine in CHAIN[theirs].consequence_of) or (
        mine in CHAIN and theirs in CHAIN[mine].consequence_of
    )
    return f["severity"] == "broken" and related


def by_host(findings: list[dict], causes: dict[str, dict] | None = None) -> list[dict]:
    """[{host, severity, findings: [...]}] for the reachable hosts with a finding: broken hosts
    first, then in natural host order; within a host, broken findings first. `causes` (`causes_of`):
    a host kept out for a broken or holding-out cause has that cause said once, in its words, and no
    finding that says the same fault again."""
    causes = causes or {}
    hosts: dict[str, dict[str, list[dict]]] = {}
    for f in findings:
        if f["kind"] != "unreachable":
            hosts.setdefault(f["host"], {}).setdefault(contract_of(f), []).append(f)
    for host, cause in causes.items():
        if cause["severity"] == "broken" or cause["holds_out"]:
            hosts.setdefault(host, {})
    out = []
    for host, contracts in hosts.items():
        cause = causes.get(host)
        merged = [f for items in contracts.values() for f in _merge(items)]
        if cause is not None and (cause["severity"] == "broken" or cause["holds_out"]):
            mine = [f for items in contracts.values() for f in items]
            merged = [_cause_finding(cause, mine)] + [
                f for f in merged if not _said_by_cause(cause, f)
            ]
        elif not merged:
            continue
        merged = sorted(
            merged,
            key=lambda f: (
                SEVERITY_ORDER[f["severity"]],
                not f.get("is_cause"),
                f["kind"] != "lowest_broken",
            ),
        )
        out.append({"host": host, "severity": merged[0]["severity"], "findings": merged})
    return sorted(out, key=lambda h: (SEVERITY_ORDER[h["severity"]], host_key(h["host"])))


# A value of a finding's sentence: a number standing alone (not inside a name, an address or a
# version: gpu07, 0000:38:00, 580.95.05, mlx5_1 and x16 are kept), with its unit when one follows; a
# GPU index (range) or a PID with the word before it.
_VALUE = re.compile(
    r"(?<![\w.:/-])(?:(?:GPUs?|pid) )?\d+(?:\.\d+)?(?:-\d+)?"
    r"(?:\s?(?:C|W|MHz|MiB|GiB|GB/s|Gb/s|%|ms|s)\b)?(?!\w|[.:/-]\w)"
)
VALUES_SHOWN = 6  # distinct values named in one folded entry; the rest are counted


def shape_of(text: str) -> tuple[str, tuple[str, ...]]:
    """(the sentence with each value masked, the values in order): "GPU 4: HBM at 92 C" ->
    ("\\x00: HBM at \\x00", ("GPU 4", "92 C"))."""
    values: list[str] = []

    def mask(match):
        values.append(match.group(0))
        return "\x00"

    return _VALUE.sub(mask, text or ""), tuple(values)


def fold(findings: list[dict], causes: dict[str, dict] | None = None) -> list[dict]:
    """One entry per finding many hosts share: [{contract, severity, title, detail, fix, hosts,
    count, folded, variants: [{detail, values, hosts, folded, count}], spread, cause}], broken
    first, then the hosts' causes (a host kept out is said before a warning of a host in the pool),
    then the most hosts.

    `detail` and `fix` are the most common variant's; `spread` ("91 C x3, 92 C x1 (gpu36)") names
    the values that differ between the variants, with their counts and, past the most common, their
    hosts.
    """
    groups: dict[tuple, dict] = {}
    for entry in by_host(findings, causes):
        for f in entry["findings"]:
            shape, values = shape_of(f["detail"])
            key = (f["contract"], f["severity"], f["title"], shape)
            group = groups.setdefault(
                key,
                {
                    "contract": f["contract"],
                    "severity": f["severity"],
                    "title": f["title"],
                    "variants": {},
                },
            )
            variant = group["variants"].setdefault(
                values, {"detail": f["detail"], "fix": f["fix"], "values": values, "hosts": []}
            )
            variant["hosts"].append(entry["host"])
            group["cause"] = group.get("cause", False) or bool(f.get("is_cause"))
    out = [_folded_entry(g) for g in groups.values()]
    return sorted(
        out,
        key=lambda e: (
            SEVERITY_ORDER[e["severity"]],
            not e["cause"],
            -e["count"],
            host_key(e["hosts"][0]),
        ),
    )


def _folded_entry(group: dict) -> dict:
    variants = sorted(
        group["variants"].values(), key=lambda v: (-len(v["hosts"]), host_key(v["hosts"][0]))
    )
    hosts = sorted((h for v in variants for h in v["hosts"]), key=host_key)
    # folding scattered names costs: only the variants `spread` names
    for n, v in enumerate(variants):
        v.update(
            count=len(v["hosts"]), folded=fold_hosts(v["hosts"]) if 0 < n < VALUES_SHOWN else None
        )
    first = variants[0]
    return {
        "contract": group["contract"],
        "severity": group["severity"],
        "title": group["title"],
        "detail": first["detail"],
        "fix": first["fix"],
        "hosts": hosts,
        "count": len(hosts),
        "folded": fold_hosts(hosts),
        "variants": variants,
        "spread": values_text(variants),
        "cause": group.get("cause", False),
    }


def values_text(variants: list[dict]) -> str:
    """ "91 C x3, 92 C x1 (gpu36)": the values that differ between the variants (most hosts first),
    with how many hosts have each; past the first, which hosts. Empty when every host says the
    same."""
    if len(variants) < 2:
        return ""
    width = len(variants[0]["values"])
    differ = [i for i in range(width) if len({v["values"][i] for v in variants}) > 1]
    parts = []
    for n, v in enumerate(variants[:VALUES_SHOWN]):
        said = ", ".join(v["values"][i] for i in differ)
        said = f"({said})" if len(differ) > 1 else said
        parts.append(f"{said} x{v['count']}" + (f" ({abbreviate(v['folded'], 40)})" if n else ""))
    rest = variants[VALUES_SHOWN:]
    if rest:
        parts.append(
            f"{plural(len(rest), 'more value', 'more values')} on "
            f"{plural(sum(v['count'] for v in rest), 'host')}"
        )
    return ", ".join(parts)


def terminal_lines(folded: list[dict], shown: int = 12) -> list[str]:
    """The folded findings as the terminal shows them under the verdict, one line each (the first
    `shown`)."""
    lines = [
        f"{e['severity']}: {e['title']}: {plural(e['count'], 'host')} "
        f"{abbreviate(e['folded'], 60)}: "
        f"{e['detail']}" + (f" (values: {e['spread']})" if e["spread"] else "")
        for e in folded[:shown]
    ]
    if len(folded) > shown:
        lines.append(
            f"... and {plural(len(folded) - shown, 'more finding', 'more findings')} in summary.md"
        )
    return lines
