"""The report's top box and the terminal's line of sets: views of the verdict (summary.json's host_sets,
verdict_model), deciding nothing: the rows of the other classes, the watch line, the sets in one line
(the tiles and the causes are the verdict's glance: `sweep.report.glance`).
"""
from __future__ import annotations

from sweep.analysis.names import abbreviate, fold_hosts, host_key

SETS_SAID = (("pool", "in the pool"), ("held_out", "held out of the pool"), ("broken", "broken"),
             ("drain", "to drain"), ("other_classes", "in other classes"), ("cannot_run", "cannot run"),
             ("unreachable", "unreachable"))


def states_line(summary: dict) -> str:
    """The verdict's sets in one line, for the terminal: 'pool 6: gpu[01-02]; broken 2: gpu[03,06]; ...'."""
    sets = summary["host_sets"]
    return "hosts: " + "; ".join(f"{said} {sets[key]['size']}: {sets[key]['folded'] or ', '.join(sets[key]['hosts'])}"
                                 for key, said in SETS_SAID if sets[key]["size"])


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
