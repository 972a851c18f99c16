"""The report's top box and the terminal's line of sets: views of the verdict (summary.json's
host_sets, verdict_model), deciding nothing: the rows of the other classes, the watch line, the sets
in one line (the tiles and the causes are the verdict's glance: `sweep.report.glance`).
"""

from __future__ import annotations

import os
import shlex

from probe_agent.chain import BY_NAME as CONTRACT_BY_NAME
from sweep.analysis.names import abbreviate, fold_hosts, host_key
from sweep.report.findings import shape_of
from sweep.text import plural


SETS_SAID = (
    ("pool", "in the pool"),
    ("held_out", "held out of the pool"),
    ("busy", "busy (running a job)"),
    ("broken", "broken"),
    ("drain", "to drain"),
    ("other_classes", "in other classes"),
    ("cannot_run", "cannot run"),
    ("unreachable", "unreachable"),
)


def states_line(summary: dict) -> str:
    """The verdict's sets in one line, for the terminal: 'pool 6: gpu[01-02]; broken 2: gpu[03,06];
    ...'."""
    sets = summary["host_sets"]
    return "hosts: " + "; ".join(
        f"{said} {sets[key]['size']}: {sets[key]['folded'] or ', '.join(sets[key]['hosts'])}"
        for key, said in SETS_SAID
        if sets.get(key, {}).get("size")
    )


def keepout_rows(summary: dict) -> dict:
    """The top box's rows besides the hosts held out, each host named once: the other classes (a
    class whose every host is broken is marked broken, with its first host's cause and fix), then
    the broken hosts outside the reference class that no class row, cannot-run row or held-out row
    names, each with its cause and fix (`Verdict.cause`)."""
    model = summary["verdict_model"]
    states, causes = model["states"], {c["host"]: c for c in model["causes"]}
    classes, named, held = [], set(), set(summary["host_sets"]["held_out"]["hosts"])
    for c in summary["classes"][1:]:
        others = [h for h in c["hosts"] if states.get(h) == "other_class"]
        broken = not others and bool(c["hosts"])
        shown = c["hosts"] if broken else others
        if not shown:
            continue
        named.update(shown)
        first = causes.get(shown[0], {}) if broken else {}
        classes.append(
            dict(
                c,
                shown=fold_hosts(shown),
                shown_size=len(shown),
                broken=broken,
                cause=first.get("cause"),
                fix=first.get("fix"),
            )
        )
    rows = [
        {"host": h, "cause": causes[h]["cause"], "fix": causes[h]["fix"]}
        for h in summary["host_sets"]["broken"]["hosts"]
        if states.get(h) == "broken" and h not in named and h not in held and h in causes
    ]
    return {"classes": classes, "broken": rows}


def watch_line(summary: dict) -> list[dict]:
    """The verdict's warnings on hosts of the pool (a GPU a few degrees from its slowdown threshold,
    an audit finding), one line per what they say, with its hosts; the speed figures to watch are
    the verdict's notes."""
    states = summary["verdict_model"]["states"]
    groups: dict = {}
    for e in summary["verdict_model"]["entries"]:
        if e["severity"] == "watch" and e["source"] != "speed" and states.get(e["host"]) == "pool":
            shape = shape_of(e["cause"])[0]
            groups.setdefault((e["source"], e["what"], shape), []).append(e)
    out = []
    for items in groups.values():
        hosts = sorted({e["host"] for e in items}, key=host_key)
        detail = (
            items[0]["cause"]
            if len({e["cause"] for e in items}) == 1
            else items[0]["cause"] + " (values differ)"
        )
        title = (
            CONTRACT_BY_NAME[items[0]["what"]].title
            if items[0]["what"] in CONTRACT_BY_NAME
            else items[0]["what"]
        )
        out.append({"title": title, "detail": detail, "folded": abbreviate(fold_hosts(hosts), 80)})
    return out


def owner_rows(summary: dict) -> list[dict]:
    """The hosts out of the pool that drain.sh leaves alone, each with whose cause it is
    (summary.json's "owners": busy with a job, the node's configuration, the probe's environment, a
    process of no job), the cause, its fix and what to do: {"host", "owner", "label", "cause",
    "fix", "action"}."""
    return list(summary.get("owners") or ())


def owner_lines(summary: dict) -> list[str]:
    """`owner_rows` in words for the terminal and summary.md: one line per owner and action, its
    hosts folded. The cause itself is said once, in the findings lines (`Verdict.cause`), not again
    here."""
    groups: dict = {}
    for r in owner_rows(summary):
        groups.setdefault((r["label"], r["action"]), []).append(r["host"])
    return [
        f"not drained, {label}: {plural(len(hosts), 'host')} {fold_hosts(hosts)}: {action}"
        for (label, action), hosts in groups.items()
    ]


def next_commands(summary: dict) -> list[dict]:
    """What acts on this verdict, in the order an operator runs it: preview and run the drain,
    benchmark the pool, probe the busy hosts again, resume what sweep drained: [{"command",
    "what"}]."""
    sets = summary["host_sets"]
    sources = summary.get("sources") or []
    # the run folder reported, where there is one
    run = shlex.quote(os.path.abspath(sources[0])) if len(sources) == 1 else "RUN_DIR"
    out = []
    if summary["drain"]:
        out.append(
            {
                "command": "sh drain.sh -n",
                "what": f"preview draining {plural(sets['drain']['size'], 'host')} "
                f"({sets['drain']['folded']}), then sh drain.sh",
            }
        )
    if sets["pool"]["size"]:
        out += _pool_commands(sets["pool"])
    return out + _sweep_again_commands(sets, run)


def _pool_commands(pool: dict) -> list[dict]:
    """Benchmark the pool (its folded list, or pool.nodeset where that is long), and preview
    resuming the nodes of the pool that sweep drained."""
    nodes = (
        pool["folded"] if pool["folded"] and len(pool["folded"]) <= 80 else '"$(cat pool.nodeset)"'
    )
    return [
        {
            "command": f"srun --nodelist={nodes} ...",
            "what": f"benchmark the pool ({plural(pool['size'], 'host')}; pool.nodeset)",
        },
        {
            "command": "sh resume.sh -n",
            "what": "preview resuming the pool's nodes that sweep drained",
        },
    ]


def _sweep_again_commands(sets: dict, run: str) -> list[dict]:
    """Sweep again the hosts that were busy (once their jobs end), broken (after the repairs) and
    unreachable."""
    out = []
    if sets.get("busy", {}).get("size"):
        out.append(
            {
                "command": f"sweep run --resume {run} --retry-failed busy",
                "what": f"probe again the {plural(sets['busy']['size'], 'host')} running a job "
                f"({sets['busy']['folded']}) once the jobs end",
            }
        )
    if sets["broken"]["size"]:
        broken = plural(sets["broken"]["size"], "broken host")
        out.append(
            {
                "command": "sweep run INVENTORY --limit @report/broken.txt",
                "what": f"after the repairs, sweep the {broken} again",
            }
        )
    if sets["unreachable"]["size"]:
        unreachable = plural(sets["unreachable"]["size"], "unreachable host")
        out.append(
            {
                "command": f"sweep run --resume {run} --retry-failed",
                "what": f"reach the {unreachable} and sweep them again",
            }
        )
    return out
