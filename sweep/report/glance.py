"""The first glance at a fleet's verdict, for the terminal and the report's first screen: the
headline (`sweep.judgment.Assessment.headline`: worded there, not here), each host counted once
in its state (a node set and a count per state), the causes folded across hosts with their fix,
what to run next. A view of the verdict: it decides nothing.

Every view here takes a host's state and cause from `state_and_cause` alone: the verdict's state,
and the verdict's one cause of the host (`Verdict.cause`); whose cause it is, from
`sweep.analysis.owners`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sweep.analysis.names import abbreviate, fold_hosts, host_key
from sweep.analysis.owners import OWNERS, owner_of
from sweep.analysis.verdict import Entry, Verdict
from sweep.text import plural

# the states in the order a reader meets them, each with the word the views use
STATE_WORDS = (
    ("pool", "pool"),
    ("other_class", "other class"),
    ("held_out", "held out"),
    ("busy", "busy"),
    ("broken", "broken"),
    ("cannot_run", "cannot run"),
    ("unreachable", "unreachable"),
)
KEPT_OUT = (
    "held_out",
    "busy",
    "broken",
    "cannot_run",
    "unreachable",
)  # states whose hosts have a cause to fix
# the causes, the gravest first
CAUSE_ORDER = ("cannot_run", "broken", "held_out", "unreachable", "busy")
CAUSES_SHOWN = 6  # cause lines in the terminal; the rest behind `sweep report RUN --details`
CAUSE_CHARS = 90  # a cause or fix longer than this is cut in the glance (the details keep it whole)
SETS_CHARS = (
    100  # a node set longer than this is cut at a comma (the lists in the report keep it whole)
)


def state_and_cause(verdict: Verdict, host: str) -> tuple[str, Entry | None]:
    """The host's state and the entry that explains it (None for the pool and the other classes):
    the one place the views below read them."""
    state = verdict.states[host]
    return state, (verdict.cause(host) if state in KEPT_OUT else None)


@dataclass(frozen=True)
class Cause:
    """Hosts kept out for the same reason: their state, what it is about, the text and fix."""

    state: str
    about: str  # the contract, finding kind, figure or tier (`Entry.about`)
    hosts: tuple[str, ...]
    text: str  # the first host's cause; `alike`: the others' differ in their values only
    fix: str | None
    alike: bool
    owner: str = "node"  # whose cause it is (`sweep.analysis.owners`)


@dataclass(frozen=True)
class Glance:
    headline: str
    states: tuple[
        tuple[str, str, tuple[str, ...]], ...
    ]  # (state, word, hosts) of each state with hosts
    causes: tuple[Cause, ...]
    differ: tuple[str, ...]  # the labels of the keys the other classes differ in
    classes: int
    total: int


def glance(verdict: Verdict, classes: list[dict], headline: str) -> Glance:
    """The glance of a verdict; `classes` are summary.json's classes (the reference first),
    `headline` its headline (`sweep.judgment.Assessment.headline`: the one wording, not made
    here)."""
    by_state: dict[str, list[str]] = {s: [] for s, _ in STATE_WORDS}
    groups: dict[tuple, list] = {}
    for host in verdict.states:
        state, entry = state_and_cause(verdict, host)
        by_state[state].append(host)
        if state in KEPT_OUT and entry is not None:
            key = (state, entry.about, entry.fix, owner_of(entry))
            groups.setdefault(key, []).append((host, entry.cause))
    causes = [
        Cause(
            state,
            about,
            tuple(h for h, _ in items),
            items[0][1],
            fix,
            len({c for _, c in items}) > 1,
            owner,
        )
        for (state, about, fix, owner), items in groups.items()
    ]
    causes.sort(key=lambda c: (CAUSE_ORDER.index(c.state), -len(c.hosts)))
    differ = []
    for c in classes[1:]:
        for d in c.get("differs") or ():
            if d["label"] not in differ:
                differ.append(d["label"])
    states = tuple(
        (s, word, tuple(sorted(by_state[s], key=host_key)))
        for s, word in STATE_WORDS
        if by_state[s]
    )
    return Glance(
        headline,
        states,
        tuple(causes),
        tuple(differ),
        len(classes),
        len(verdict.states),
    )


def terminal_lines(g: Glance, shown: int = CAUSES_SHOWN) -> list[str]:
    """The glance in a few short lines: the headline, one line per state, one line per cause with
    its fix (the first `shown`; the caller names the command that prints the rest)."""
    width = max(len(word) for _, word, _ in g.states) if g.states else 0
    count = max(len(str(len(hosts))) for _, _, hosts in g.states) if g.states else 0
    lines = [g.headline]
    for state, word, hosts in g.states:
        line = (
            f"  {word:<{width}} {len(hosts):>{count}}  {abbreviate(fold_hosts(hosts), SETS_CHARS)}"
        )
        if state == "other_class" and g.differ:
            others = plural(g.classes - 1, "other class", "other classes")
            line += f"  ({others}, differing in {', '.join(g.differ)})"
        lines.append(line)
    if g.causes:
        lines.append("causes, each with its fix:")
    for c in g.causes[:shown]:
        lines.append("  " + cause_text(c))
    if len(g.causes) > shown:
        lines.append(f"  ... and {plural(len(g.causes) - shown, 'more cause')}: see the details")
    return lines


def cause_text(c: Cause, chars: int = CAUSE_CHARS) -> str:
    """'gpu[11-13] (3 broken): power: GPU 0-7: enforced power limit 250 W ...; fix: ...', the cause
    and the fix each cut to about `chars` characters."""
    alike = " (values differ by host)" if c.alike else ""
    fix = f"; fix: {_cut(c.fix, chars)}" if c.fix else ""
    return (
        f"{abbreviate(fold_hosts(c.hosts), 60)} ({len(c.hosts)} {c.state.replace('_', ' ')}): "
        f"{_cut(c.text, chars)}{alike}{fix}"
    )


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1].rstrip(" ,;:") + "…"


TILE_OF = {  # state -> (the tile's id, where it links to): the ids the top box always had
    "pool": ("pool-size", "pool"),
    "other_class": ("tile-other-classes", "other-classes"),
    "held_out": ("tile-held-out", "held-out"),
    "busy": ("tile-busy", "held-out"),
    "broken": ("tile-broken", "held-out"),
    "cannot_run": ("tile-cannot-run", "held-out"),
    "unreachable": ("tile-unreachable", "held-out"),
}


def tiles(g: Glance) -> list[dict]:
    """The top box's tiles: the hosts, then one per state, each host counted once (they add up)."""
    counts = {state: len(hosts) for state, _, hosts in g.states}
    out = [
        {"id": "tile-hosts", "hosts": g.total, "label": "hosts", "target": "hosts", "state": None}
    ]
    for state, word in STATE_WORDS:
        if state == "other_class":
            word = "in " + plural(g.classes - 1, "other class", "other classes")
        elif state == "pool":
            word = "in the pool"
        elif state == "held_out":
            word = "held out for health"
        tile_id, target = TILE_OF[state]
        out.append(
            {
                "id": tile_id,
                "hosts": counts.get(state, 0),
                "label": word,
                "target": target,
                "state": state,
            }
        )
    return out


def cause_rows(g: Glance, drained=()) -> list[dict]:
    """The causes as the report's first screen lists them: state, node set, count, text and fix,
    whose cause it is, and whether drain.sh drains its hosts (`drained`: summary.json's drain
    set)."""
    drained = set(drained)
    return [
        {
            "state": c.state,
            "word": c.state.replace("_", " "),
            "folded": fold_hosts(c.hosts),
            "count": len(c.hosts),
            "about": c.about,
            "text": c.text,
            "fix": c.fix,
            "alike": c.alike,
            "owner": c.owner,
            "owner_label": OWNERS[c.owner].label,
            "owner_action": OWNERS[c.owner].action,
            # drain.sh leaves its hosts alone for their cause's owner (a job, a policy, the probe's
            # environment, a process): said on the row; an unreachable host is not the node's to
            # drain
            "owned": c.owner != "node" and not drained & set(c.hosts),
        }
        for c in g.causes
    ]


def load_line(gpus: pd.DataFrame, seconds: float | None) -> str | None:
    """What a --load measured, in one line: GPUs and hosts under load, the SM clock (median, lowest
    and where), the power drawn, and the hosts in a HW slowdown or at their SW power cap. None
    without a load.
    """
    loaded = gpus[gpus["sm_load_mhz"].notna().to_numpy(dtype=bool)]
    if loaded.empty:
        return None
    sm = loaded["sm_load_mhz"].astype(float)
    low = loaded.loc[sm.idxmin()]
    hosts = loaded["host"].astype(str)
    said = (
        f"load{f' ({seconds:g} s)' if seconds else ''}: {plural(len(loaded), 'GPU')} on "
        f"{plural(hosts.nunique(), 'host')} measured; SM clock median {sm.median():.0f} MHz, "
        "lowest "
        f"{sm.min():.0f} MHz ({low['host']} GPU {low['index']})"
    )
    power = loaded["load_power_w"].astype(float).dropna()
    if not power.empty:
        said += f"; power median {power.median():.0f} W, highest {power.max():.0f} W"
    for column, what in (
        ("load_hw_slowdown", "HW slowdown"),
        ("load_sw_power_cap", "at the SW power cap"),
    ):
        hit = (
            loaded[loaded[column].astype(float).fillna(0).to_numpy() > 0.5]["host"]
            .astype(str)
            .unique()
        )
        if len(hit) == hosts.nunique():
            said += f"; {what} most of the load on every host"
        elif len(hit):
            named = abbreviate(fold_hosts(sorted(hit, key=host_key)), 60)
            said += f"; {what} most of the load on {named}"
    return said
