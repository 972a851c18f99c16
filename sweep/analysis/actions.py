"""What an operator does next with a report: the host sets to hand to a scheduler, and why to drain
each host.

The sets of hosts (`host_sets`) are the verdict's (`sweep.analysis.verdict.Verdict`): the pool (the
hosts that can be benchmarked together), the hosts of the reference class held out of the pool (for
their health or broken), the broken hosts (every answering host with a broken entry: a broken
contract, HW slowdown, a row-remap failure, a speed figure below 75% of its reference, an Xid that
needs a repair...), and the others each tile counts. The hosts to drain are the held-out and the
broken ones; `drain_reason` says why from the verdict's cause of the host (`Verdict.cause`, the one
cause every view says) and its fix (a broken speed figure is the reason itself, ``sweep: GPU 5 HBM
2993 GB/s, 70% of the H200 reference``; an Xid, the repair and the event); hosts with the same
reason are drained together (`drain_groups`: the interface to the script renderers of
`sweep.report.lists`, a list of {hosts, folded, not_folded, reason, taint}).

Each set is kept as a list and as one folded node set (`sweep.analysis.names.fold_nodeset`) that
Slurm and ClusterShell read back as exactly that list (a host met again in another run folder,
``gpu01#2``, is its node ``gpu01``: `node_name`); names no node set can hold are listed apart.
Nothing here runs a command: `sweep.report.lists` writes them as files for the operator.
"""

from __future__ import annotations

import re

from sweep.analysis.compare import Findings
from sweep.analysis.owners import drain_entries, drain_hosts
from sweep.analysis.verdict import Entry, Verdict, cause_key
from sweep.analysis.names import NODE_NAME, fold_nodeset, host_key
from sweep.analysis.xid import event_name
from sweep.text import visible

# the loader's mark of a host met again in another run folder: gpu01#2
_AGAIN = re.compile(r"#\d+$")
REASON_MAX = 200  # characters of a drain reason (Slurm shows it in sinfo -R; a sentence, not a log)
TAINT_KEY = "sweep/broken"


def node_name(host: str) -> str:
    """The name a scheduler knows `host` by: ``gpu01`` for ``gpu01#2`` (the same host in a second
    run folder)."""
    base = _AGAIN.sub("", host)
    return base if base != host and NODE_NAME.match(base) else host


def _fold(hosts) -> tuple[str, tuple[str, ...]]:
    return fold_nodeset(node_name(h) for h in hosts)


def host_records(
    verdict: Verdict, xid_hosts: dict[str, dict] | None = None, drain_config: bool = False
) -> dict[str, dict]:
    """Host -> {"host", "cause": the verdict's cause of the host (`Verdict.cause`), "xid": its entry
    of summary.json's "xid" hosts (the repair its Xid events need) or None} for every host to drain
    (`sweep.analysis.owners.drain_hosts`: a cause whose owner drains). Where the verdict's cause is
    one its owner does not drain (a power cap beside a dead GPU), the most severe cause that
    drains."""
    records = {}
    for host in drain_hosts(verdict, drain_config):
        cause, drains = verdict.cause(host), drain_entries(verdict, host, drain_config)
        records[host] = {
            "host": host,
            "cause": cause if cause in drains else drains[0],
            "xid": (xid_hosts or {}).get(host),
        }
    return records


def drain_reason(host_record: dict) -> str:
    """Why to drain a host, in one line of printable ASCII: ``sweep: xid: Xid 79: drain the host;
    ...``.

    The contract (or finding) and its fix, without the host's own figures, so that hosts broken the
    same way share one reason and one drain line. `host_record` is an entry of `host_records`.
    """
    cause = host_record["cause"]
    text = f"sweep: {cause_key(cause)}: {cause.fix or cause.cause}"
    # the figure is the reason: "sweep: GPU 5 HBM 2993 GB/s, 70% of the H200 reference"
    if cause.source == "speed":
        text = f"sweep: {cause.cause}"
    event = _xid_event(host_record, cause)
    # the repair NVIDIA prescribes, then the event: "sweep: reboot: Xid 79 GPU has fallen off the
    # bus"
    if event is not None:
        text = (
            f"sweep: {host_record['xid']['label']}: {event_name(event)} "
            f"{event.get('meaning') or ''}"
        )
    text = (
        visible(" ".join(text.split()), keep="").encode("ascii", "backslashreplace").decode("ascii")
    )
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 3].rstrip() + "..."


def taint_value(host_record: dict) -> str:
    """The value of the host's ``sweep/broken`` taint: a Kubernetes label value naming its cause
    (``xid``)."""
    cause = host_record["cause"]
    event = _xid_event(host_record, cause)
    name = (
        f"{event.get('type') or 'xid'}{event.get('code')}"
        if event is not None
        else cause_key(cause)
    )
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(name)).strip("-_.")[:63]
    return slug.strip("-_.") or "broken"


def _xid_event(host_record: dict, cause: Entry) -> dict | None:
    """The worst Xid / SXid event of a host drained for its xid contract, or None."""
    xid = host_record.get("xid")
    if cause.contract != "xid" or not xid or not xid.get("events"):
        return None
    return xid["events"][0]


def drain_groups(
    verdict: Verdict, xid_hosts: dict[str, dict] | None = None, drain_config: bool = False
) -> list[dict]:
    """One entry per drain reason, in host order of its first host: hosts, folded, not_folded,
    reason, taint. `xid_hosts`: summary.json's "xid" hosts by name, so that an Xid host's reason is
    its repair; `drain_config`: drain for the node's configuration too (a power cap, ECC mode...:
    `sweep.analysis.owners`)."""
    groups: dict[str, dict] = {}
    for host, record in host_records(verdict, xid_hosts, drain_config).items():
        entry = groups.setdefault(drain_reason(record), {"hosts": [], "taint": taint_value(record)})
        entry["hosts"].append(host)
    out = []
    for reason, entry in groups.items():
        folded, odd = _fold(entry["hosts"])
        out.append(
            {
                "hosts": entry["hosts"],
                "folded": folded,
                "not_folded": list(odd),
                "reason": reason,
                "taint": entry["taint"],
            }
        )
    return out


def host_set(hosts) -> dict:
    """A set of hosts as summary.json carries it: the list, its node set, the names the node set
    leaves out."""
    hosts = list(hosts)
    folded, odd = _fold(hosts)
    return {"hosts": hosts, "folded": folded, "not_folded": list(odd), "size": len(hosts)}


def host_sets(verdict: Verdict, findings: Findings, drain_config: bool = False) -> dict:
    """Every set a view names, each as `host_set`: hosts (all), pool, held_out, broken, drain (held
    out or broken for a cause its owner drains: `sweep.analysis.owners`), busy (running a job),
    other_classes, cannot_run and unreachable; each tile of the report is one of these."""
    others = [h for c in findings.classes[1:] for h in c.hosts]
    return {
        "hosts": host_set(sorted(verdict.states, key=host_key)),
        "pool": host_set(verdict.pool),
        "held_out": host_set(verdict.held_out),
        "broken": host_set(verdict.broken),
        "drain": host_set(drain_hosts(verdict, drain_config)),
        "busy": host_set(verdict.hosts_in("busy")),
        "other_classes": host_set(sorted(others, key=host_key)),
        "cannot_run": host_set(verdict.hosts_in("cannot_run")),
        "unreachable": host_set(verdict.hosts_in("unreachable")),
    }
