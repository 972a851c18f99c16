"""The health findings as an operator reads them: one entry per host, one finding per contract.

`summary.json` keeps every finding as the analysis made it. A host whose lowest broken contract is
`clocks` also has a HW slowdown finding and a HW thermal slowdown finding for the same GPU: three
sentences for one fact. Here the findings of one host about one contract become one (the lowest
broken contract's own sentence when it is among them: the agent folds its GPUs, "GPU 0-7: ..."),
and a host's findings are listed together, hosts with a broken finding first.
"""
from __future__ import annotations

from probe_agent.chain import CONTRACTS
from sweep.analysis.names import fold_hosts, host_key

SEVERITY_ORDER = {"unreachable": 0, "broken": 1, "warning": 2}
# The contract a finding of the analysis is about, where the finding does not name it (the agent's table).
KIND_CONTRACT = {kind: c.name for c in CONTRACTS for kind in c.findings}


def contract_of(finding: dict) -> str:
    return finding.get("contract") or KIND_CONTRACT.get(finding["kind"]) or finding["kind"]


def _merge(items: list[dict]) -> dict:
    """One finding from several of one host about one contract: the lowest broken contract's when present."""
    if len(items) > 1:  # "the GPUs differ in persistence mode" says again what the per-GPU finding says
        items = [f for f in items if f["kind"] != "mixed_gpus"] or items
    items = sorted(items, key=lambda f: (f["kind"] != "lowest_broken", SEVERITY_ORDER[f["severity"]]))
    first = items[0]
    if first["kind"] == "lowest_broken" or len(items) == 1:
        detail = first["detail"]
        prefix = f"{contract_of(first)}: "  # the title names the contract already
        detail = detail[len(prefix):] if first["kind"] == "lowest_broken" and detail.startswith(prefix) else detail
    else:
        detail = "; ".join(f"{f['title']}: {f['detail']}" for f in items)
    return {"kind": first["kind"], "severity": first["severity"], "title": first["title"],
            "contract": contract_of(first), "detail": detail, "fix": first["fix"],
            "kinds": sorted({f["kind"] for f in items})}


def by_host(findings: list[dict]) -> list[dict]:
    """[{host, severity, findings: [...]}] for the reachable hosts with a finding: broken hosts first,
    then in natural host order; within a host, broken findings first."""
    hosts: dict[str, dict[str, list[dict]]] = {}
    for f in findings:
        if f["kind"] != "unreachable":
            hosts.setdefault(f["host"], {}).setdefault(contract_of(f), []).append(f)
    out = []
    for host, contracts in hosts.items():
        merged = sorted((_merge(items) for items in contracts.values()),
                        key=lambda f: (SEVERITY_ORDER[f["severity"]], f["kind"] != "lowest_broken"))
        out.append({"host": host, "severity": merged[0]["severity"], "findings": merged})
    return sorted(out, key=lambda h: (SEVERITY_ORDER[h["severity"]], host_key(h["host"])))


def by_title(entries: list[dict]) -> list[dict]:
    """[{title, severity, count, folded}]: which hosts have each kind of finding, for the section's summary."""
    titles: dict[str, dict] = {}
    for entry in entries:
        for f in entry["findings"]:
            t = titles.setdefault(f["title"], {"title": f["title"], "severity": f["severity"], "hosts": []})
            t["hosts"].append(entry["host"])
    return [dict(t, count=len(t["hosts"]), folded=fold_hosts(t["hosts"]))
            for t in sorted(titles.values(), key=lambda t: (SEVERITY_ORDER[t["severity"]], -len(t["hosts"])))]
