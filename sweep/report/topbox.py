"""The report's top box and the terminal's line of sets: views of the verdict (summary.json's host_sets,
verdict_model), deciding nothing: the tiles (each the size of one host set), the rows of the hosts kept out
(each host named once: held out, broken, a class, cannot run, unreachable), the watch line.
"""
from __future__ import annotations

from sweep.analysis.names import abbreviate, fold_hosts, host_key
from sweep.text import plural

HELD_OUT_SHOWN = 12       # hosts held out for health named in the top box (the rest: Health findings)


SETS_SAID = (("pool", "in the pool"), ("held_out", "held out of the pool"), ("busy", "busy (running a job)"),
             ("broken", "broken"),
             ("drain", "to drain"), ("other_classes", "in other classes"), ("cannot_run", "cannot run"),
             ("unreachable", "unreachable"))


def states_line(summary: dict) -> str:
    """The verdict's sets in one line, for the terminal: 'pool 6: gpu[01-02]; broken 2: gpu[03,06]; ...'."""
    sets = summary["host_sets"]
    return "hosts: " + "; ".join(f"{said} {sets[key]['size']}: {sets[key]['folded'] or ', '.join(sets[key]['hosts'])}"
                                 for key, said in SETS_SAID if sets.get(key, {}).get("size"))


def tiles(summary: dict) -> list[dict]:
    """The top box's tiles: each counts the hosts of one of summary.json's host sets and links to where they are listed."""
    sets = summary["host_sets"]
    ref = summary["reference_class"]
    return [{"id": id_, "hosts": sets[key]["size"], "label": label, "target": target, "set": key}
            for id_, key, label, target in (
        ("tile-hosts", "hosts", "hosts", "hosts"),
        ("pool-size", "pool", f"in the pool (class {ref['id']}, healthy)" if ref else "in the pool",
         "pool" if ref else "classes"),
        ("tile-held-out", "held_out", "held out for health", "held-out"),
        ("tile-other-classes", "other_classes", "in " + plural(max(len(summary["classes"]) - 1, 0), "other class",
                                                               "other classes"),
         "other-classes" if sets["other_classes"]["size"] else "classes"),
        ("tile-cannot-run", "cannot_run", "cannot run", "cannot-run"),
        ("tile-unreachable", "unreachable", "unreachable", "unreachable"),
        ("tile-broken", "broken", "broken", "broken-hosts" if sets["broken"]["size"] else "health"))]


def keepout_rows(summary: dict) -> dict:
    """The top box's rows besides the hosts held out, each host named once: the other classes (a class whose
    every host is broken is marked broken, with its fix), then the broken hosts outside the reference class
    that no class row, cannot-run row or held-out row names, each with its cause and fix."""
    model = summary["verdict_model"]
    states, entries = model["states"], {}
    for e in model["entries"]:
        if e["severity"] == "broken":
            entries.setdefault(e["host"], []).append(e)
    classes, named, held = [], set(), set(summary["host_sets"]["held_out"]["hosts"])
    for c in summary["classes"][1:]:
        others = [h for h in c["hosts"] if states.get(h) == "other_class"]
        broken = not others and bool(c["hosts"])
        shown = c["hosts"] if broken else others
        if not shown:
            continue
        named.update(shown)
        first = (entries.get(shown[0]) or [{}])[0] if broken else {}
        classes.append(dict(c, shown=fold_hosts(shown), shown_size=len(shown), broken=broken,
                            cause=first.get("cause"), fix=first.get("fix")))
    rows = [{"host": h, "cause": entries[h][0]["cause"], "fix": entries[h][0]["fix"]}
            for h in summary["host_sets"]["broken"]["hosts"]
            if states.get(h) == "broken" and h not in named and h not in held and h in entries]
    return {"classes": classes, "broken": rows}


def watch_line(folded: list[dict], pool) -> list[dict]:
    """Warnings on hosts of the pool (a GPU a few degrees from its slowdown threshold): who and what."""
    members = set(pool)
    out = []
    for e in folded:
        if e["severity"] != "warning":
            continue
        hit = [v for v in e["variants"] if members.intersection(v["hosts"])]
        if hit:
            hosts = sorted((h for v in hit for h in v["hosts"] if h in members), key=host_key)
            detail = hit[0]["detail"] if len(hit) == 1 else e["detail"] + " (values differ)"
            out.append({"title": e["title"], "detail": detail, "folded": abbreviate(fold_hosts(hosts), 80)})
    return out


def held_out_rows(summary: dict) -> list[dict]:
    """The first HELD_OUT_SHOWN hosts held out of the pool, each with the severity of its worst reason
    and, when broken, the fix of its first broken entry."""
    broken = set(summary["host_sets"]["broken"]["hosts"])
    fixes = {}
    for e in summary["verdict_model"]["entries"]:
        if e["severity"] == "broken" and e["fix"]:
            fixes.setdefault(e["host"], e["fix"])
    return [dict(h, severity="broken" if h["host"] in broken else "warning",
                 fix=fixes.get(h["host"]) if h["host"] in broken else None)
            for h in summary["held_out"][:HELD_OUT_SHOWN]]


def owner_rows(summary: dict) -> list[dict]:
    """The hosts out of the pool that drain.sh leaves alone, each with whose cause it is (summary.json's
    "owners": busy with a job, the node's configuration, the probe's environment, a process of no job), the
    cause, its fix and what to do: {"host", "owner", "label", "cause", "fix", "action"}."""
    return list(summary.get("owners") or ())


def owner_lines(summary: dict) -> list[str]:
    """`owner_rows` in words, one line each, for the terminal and summary.md."""
    return [f"not drained: {r['host']}: {r['label']}: {r['cause']}" + (f"; fix: {r['fix']}" if r["fix"] else "")
            + f"; {r['action']}" for r in owner_rows(summary)]


def next_commands(summary: dict) -> list[dict]:
    """What acts on this verdict, in the order an operator runs it: preview and run the drain, benchmark the pool,
    probe the busy hosts again, resume what sweep drained: [{"command", "what"}]."""
    sets = summary["host_sets"]
    out = []
    if summary["drain"]:
        out.append({"command": "sh drain.sh -n", "what": f"preview draining {plural(sets['drain']['size'], 'host')} "
                                                         f"({sets['drain']['folded']}), then sh drain.sh"})
    if sets["pool"]["size"]:
        pool = sets["pool"]["folded"] if sets["pool"]["folded"] and len(sets["pool"]["folded"]) <= 80 else '"$(cat pool.nodeset)"'
        out.append({"command": f"srun --nodelist={pool} ...",
                    "what": f"benchmark the pool ({plural(sets['pool']['size'], 'host')}; pool.nodeset)"})
        out.append({"command": "sh resume.sh -n", "what": "preview resuming the pool's nodes that sweep drained"})
    if sets.get("busy", {}).get("size"):
        out.append({"command": "sweep run --resume RUN_DIR --retry-failed busy",
                    "what": f"probe again the {plural(sets['busy']['size'], 'host')} running a job "
                            f"({sets['busy']['folded']}) once the jobs end"})
    return out
