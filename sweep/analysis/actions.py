"""What an operator does next with a report: the host sets to hand to a scheduler, and why to drain each host.

Three sets of hosts (`host_sets`): the pool (the hosts that can be benchmarked together), the hosts
held out of the pool for their health (`Findings.held_out`), and the broken hosts (every answering
host with a finding of severity "broken": a broken contract, HW slowdown, a row-remap failure...).
The hosts to drain are the held-out and the broken ones; `drain_reason` is the one place that says
why, from the host's lowest broken contract and its fix (or, for a host held out without one, the
finding that holds it out); hosts with the same reason are drained together (`drain_groups`).

Each set is kept as a list and as one folded node set (`sweep.analysis.names.fold_nodeset`) that
Slurm and ClusterShell read back as exactly that list (a host met again in another run folder,
``gpu01#2``, is its node ``gpu01``: `node_name`); names no node set can hold are listed apart. Nothing here runs a command: `sweep.report.lists` writes them as files for the operator.
"""
from __future__ import annotations

import re

from sweep.analysis.compare import Findings
from sweep.analysis.names import NODE_NAME, fold_nodeset, host_key
from sweep.analysis.xid import event_name
from sweep.text import visible

_AGAIN = re.compile(r"#\d+$")  # the loader's mark of a host met again in another run folder: gpu01#2
REASON_MAX = 200  # characters of a drain reason (Slurm shows it in sinfo -R; a sentence, not a log)
TAINT_KEY = "sweep/broken"


def node_name(host: str) -> str:
    """The name a scheduler knows `host` by: ``gpu01`` for ``gpu01#2`` (the same host in a second run folder)."""
    base = _AGAIN.sub("", host)
    return base if base != host and NODE_NAME.match(base) else host


def _fold(hosts) -> tuple[str, tuple[str, ...]]:
    return fold_nodeset(node_name(h) for h in hosts)


def host_records(findings: Findings, xid_hosts: dict[str, dict] | None = None) -> dict[str, dict]:
    """Host -> {"host", "findings": its findings as dicts, the most severe first, "xid": its entry of
    summary.json's "xid" hosts (the repair its Xid events need) or None} for every host to drain."""
    drain = set(_held_out(findings)) | set(_broken(findings))
    records: dict[str, dict] = {}
    for f in findings.findings:  # sorted: broken before warning
        if f.host in drain:
            records.setdefault(f.host, {"host": f.host, "findings": [], "xid": (xid_hosts or {}).get(f.host)}
                               )["findings"].append(f.to_dict())
    return {h: records[h] for h in sorted(records, key=host_key)}


def _held_out(findings: Findings) -> list[str]:
    return [h["host"] for h in findings.held_out]


def _broken(findings: Findings) -> list[str]:
    return sorted({f.host for f in findings.findings if f.severity == "broken"}, key=host_key)


def _cause(host_record: dict) -> dict:
    """The finding a drain is for: the lowest broken contract, else the first broken finding, else
    the first finding that holds the host out of the pool."""
    items = host_record["findings"]
    return (next((f for f in items if f["kind"] == "lowest_broken"), None)
            or next((f for f in items if f["severity"] == "broken"), None) or items[0])


def drain_reason(host_record: dict) -> str:
    """Why to drain a host, in one line of printable ASCII: ``sweep: xid: Xid 79: drain the host; ...``.

    The contract (or finding) and its fix, without the host's own figures, so that hosts broken the
    same way share one reason and one drain line. `host_record` is an entry of `host_records`.
    """
    cause = _cause(host_record)
    what = cause["contract"] or cause["kind"]
    text = f"sweep: {what}: {cause['fix'] or cause['title']}"
    event = _xid_event(host_record, cause)
    if event is not None:  # the repair NVIDIA prescribes, then the event: "sweep: reboot: Xid 79 GPU has fallen off the bus"
        text = f"sweep: {host_record['xid']['label']}: {event_name(event)} {event.get('meaning') or ''}"
    text = visible(" ".join(text.split()), keep="").encode("ascii", "backslashreplace").decode("ascii")
    return text if len(text) <= REASON_MAX else text[:REASON_MAX - 3].rstrip() + "..."


def taint_value(host_record: dict) -> str:
    """The value of the host's ``sweep/broken`` taint: a Kubernetes label value naming its cause (``xid``)."""
    cause = _cause(host_record)
    event = _xid_event(host_record, cause)
    name = f"{event.get('type') or 'xid'}{event.get('code')}" if event is not None else cause["contract"] or cause["kind"]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(name)).strip("-_.")[:63]
    return slug.strip("-_.") or "broken"


def _xid_event(host_record: dict, cause: dict) -> dict | None:
    """The worst Xid / SXid event of a host drained for its xid contract, or None."""
    xid = host_record.get("xid")
    if cause.get("contract") != "xid" or not xid or not xid.get("events"):
        return None
    return xid["events"][0]


def drain_groups(findings: Findings, xid_hosts: dict[str, dict] | None = None) -> list[dict]:
    """One entry per drain reason, in host order of its first host: hosts, folded, not_folded, reason, taint.
    `xid_hosts`: summary.json's "xid" hosts by name, so that an Xid host's reason is its repair."""
    groups: dict[str, dict] = {}
    for host, record in host_records(findings, xid_hosts).items():
        entry = groups.setdefault(drain_reason(record), {"hosts": [], "taint": taint_value(record)})
        entry["hosts"].append(host)
    out = []
    for reason, entry in groups.items():
        folded, odd = _fold(entry["hosts"])
        out.append({"hosts": entry["hosts"], "folded": folded, "not_folded": list(odd), "reason": reason,
                    "taint": entry["taint"]})
    return out


def host_set(hosts) -> dict:
    """A set of hosts as summary.json carries it: the list, its node set, the names the node set leaves out."""
    hosts = list(hosts)
    folded, odd = _fold(hosts)
    return {"hosts": hosts, "folded": folded, "not_folded": list(odd), "size": len(hosts)}


def host_sets(findings: Findings) -> dict:
    """pool, held_out, broken and drain (held out or broken), each as `host_set`."""
    held, broken = _held_out(findings), _broken(findings)
    return {"pool": host_set(findings.pool), "held_out": host_set(held), "broken": host_set(broken),
            "drain": host_set(sorted(set(held) | set(broken), key=host_key))}
