"""What each host's Xid and SXid events ask of the operator: the repair NVIDIA prescribes, per host.

`xid_action(record)` is the one answer other consumers call (the report's top box, summary.md, the
terminal, the scheduler's drain reasons): the most severe action a host's events need
(`probe_agent.xid.ACTIONS`: hardware inspection, reboot, reset the GPU, check the application, ...)
and a one-line reason naming the event, or None when nothing needs doing.

`xid_section(fleet)` groups the fleet's hosts by that action, each host with its events (code,
device, count, first and last time) told apart from the previous sweep of the same host: the run
folder beside this one (under the same reports/ folder) that started before it and holds a record
of the host. Events since boot that were already there at the previous sweep are not new; a boot
id that changed means the host rebooted in between, and an event seen again after it recurs.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from probe_agent.xid import ACTION, ACTIONS, RANK
from sweep.analysis.names import fold_hosts, host_key
from sweep.store import HOSTS, MANIFEST, earlier_runs, normalize_health, previous_health
from sweep.text import plural

SHOWN_STATUSES = ("broken", "warning")  # an action of these contract statuses is something to do


class XidVerdict(NamedTuple):
    """What a host's Xid / SXid events need: the action's name and label, and why in one line."""

    action: str
    label: str
    reason: str


def events_of(health: dict | None) -> list[dict]:
    """A health.json's Xid and SXid groups (any schema 1.x, normalised), the most severe action
    first."""
    log = (normalize_health(health) or {}).get("kernel_log") if isinstance(health, dict) else None
    if not isinstance(log, dict):
        return []
    groups = [
        g
        for key in ("xid", "sxid")
        for g in (log.get(key) if isinstance(log.get(key), list) else ())
        if isinstance(g, dict)
        and g.get("action") in ACTION
        and _whole(g.get("code"))
        and _whole(g.get("count"))
    ]
    return sorted(
        groups, key=lambda g: (RANK[g["action"]], str(g.get("bus_id")), g.get("code") or 0)
    )


def _whole(value) -> bool:
    """A count or code as a host may send it: only a JSON integer is one (not a bool, a float, a
    string)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def xid_action(record: dict | None) -> XidVerdict | None:
    """The action a host's Xid / SXid events need, from its run-folder record or its health.json:
    ("reboot", "reboot", "Xid 79 GPU has fallen off the bus (0000:38:00 x3)"); None when none needs
    doing."""
    health = (
        record.get("health") if isinstance(record, dict) and "record_version" in record else record
    )
    needed = [g for g in events_of(health) if ACTION[g["action"]][2] in SHOWN_STATUSES]
    if not needed:
        return None
    worst = needed[0]
    more = len(needed) - 1
    reason = (
        f"{event_name(worst)} {worst.get('meaning') or ''} ({worst.get('bus_id')} "
        f"x{worst.get('count')})"
    )
    return XidVerdict(
        worst["action"],
        ACTION[worst["action"]][1],
        reason + (f" and {plural(more, 'more event')}" if more else ""),
    )


def event_name(group: dict) -> str:
    return f"{'SXid' if group.get('type') == 'sxid' else 'Xid'} {group.get('code')}"


def compare_with_previous(events: list[dict], boot: dict, previous: dict | None) -> list[dict]:
    """Each event with `since_previous` (how many of its count came after the previous sweep; None
    without one) and `recurs` (seen before a reboot too). `previous` is the earlier health.json."""
    if previous is None:
        return [dict(g, since_previous=None, recurs=False) for g in events]
    before_log = previous.get("kernel_log") if isinstance(previous.get("kernel_log"), dict) else {}
    before = {(g.get("type"), g.get("bus_id"), g.get("code")): g for g in events_of(previous)}
    then_boot = before_log.get("boot")
    same, rebooted = _boots(
        boot if isinstance(boot, dict) else {}, then_boot if isinstance(then_boot, dict) else {}
    )
    out = []
    for g in events:
        old = before.get((g.get("type"), g.get("bus_id"), g.get("code")))
        if rebooted:
            new, recurs = g["count"], old is not None
        elif same:
            new, recurs = max(0, g["count"] - (old["count"] if old else 0)), False
        else:
            new, recurs = None, False  # the boot is not known on one side: no telling
        out.append(dict(g, since_previous=new, recurs=recurs))
    return out


def _boots(now: dict, then: dict) -> tuple[bool, bool]:
    """(same boot, rebooted in between) by boot id, else by boot time; both False when unknown."""
    for key in ("id", "booted_at"):
        if (
            isinstance(now.get(key), str)
            and isinstance(then.get(key), str)
            and now[key]
            and then[key]
        ):
            return now[key] == then[key], now[key] != then[key]
    return False, False


def xid_section(fleet) -> dict:
    """summary.json's "xid": the hosts grouped by the action their events need, most severe first
    (actions: action, label, fix, hosts, folded), and per host its events against its previous
    sweep."""
    sources = dict(zip(fleet.hosts["host"].astype(str), fleet.hosts["source"].astype(object)))
    runs_of: dict = {}
    hosts = []
    for host, log in fleet.kernel.items():
        verdict = xid_action({"kernel_log": log})
        if verdict is None:
            continue
        run = _run_of(sources.get(host))
        previous = None
        if run is not None:
            if run not in runs_of:
                runs_of[run] = earlier_runs(run)
            previous = previous_health(runs_of[run], host)
        events = compare_with_previous(
            events_of({"kernel_log": log}), log.get("boot") or {}, previous[0] if previous else None
        )
        hosts.append(
            {
                "host": host,
                "action": verdict.action,
                "label": verdict.label,
                "reason": verdict.reason,
                "previous_run": previous[1].name if previous else None,
                "events": [_event(g) for g in events if ACTION[g["action"]][2] in SHOWN_STATUSES],
            }
        )
    hosts.sort(key=lambda h: (RANK[h["action"]], host_key(h["host"])))
    actions = []
    for name, label, _, _, fix in ACTIONS:
        members = [h["host"] for h in hosts if h["action"] == name]
        if members:
            actions.append(
                {
                    "action": name,
                    "label": label,
                    "fix": fix,
                    "hosts": members,
                    "folded": fold_hosts(members),
                    "count": len(members),
                }
            )
    return {"actions": actions, "hosts": hosts}


def _event(g: dict) -> dict:
    keys = (
        "type",
        "code",
        "bus_id",
        "count",
        "action",
        "meaning",
        "first_at",
        "last_at",
        "first_s",
        "last_s",
        "since_previous",
        "recurs",
    )
    return dict({k: g.get(k) for k in keys}, label=ACTION[g["action"]][1])


def _run_of(source) -> Path | None:
    """The run folder of a host record's file (RUN/hosts/NAME.json), or None for a plain
    health.json."""
    if not isinstance(source, str):
        return None
    path = Path(source)
    return (
        path.parent.parent
        if path.parent.name == HOSTS and (path.parent.parent / MANIFEST).is_file()
        else None
    )


def when(event: dict) -> str:
    """'x3, first 2026-11-30T08:00:00Z, last 2026-11-30T09:12:00Z' (times since boot where no wall
    time)."""

    def at(wall, since):
        return wall or (
            f"{since:.0f} s after boot" if isinstance(since, (int, float)) else "not recorded"
        )

    text = f"x{event['count']}, first {at(event['first_at'], event['first_s'])}"
    if event["count"] > 1:
        text += f", last {at(event['last_at'], event['last_s'])}"
    if event["recurs"]:
        text += "; recurs across reboots"
    elif event["since_previous"] is not None:
        text += (
            f"; {event['since_previous']} since the previous sweep"
            if event["since_previous"]
            else "; none since the previous sweep"
        )
    return text
