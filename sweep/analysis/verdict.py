"""The one verdict of a fleet: every judgment of every host is an entry, one rule makes each host's
state, one rule makes the exit code; every view (tiles, top box, summary.json / .md, terminal,
hosts.csv, the lists and scripts, the Prometheus export) reads this and decides nothing itself.

An `Entry` is one judgment that is not plain ok, of one host, with its severity

    watch    a warning: the host stays in the pool (a warm HBM, a class outlier, an audit finding)
    unknown  not read or not measured: a contract that could not be read, a tier the operator asked
             for (--speed, --load, --wrap) that failed, was refused, partial or skipped for a reason
             other than "not applicable", a figure rejected as no measurement, an unreachable host
    broken   a broken contract or health finding, a speed figure below 75% of its reference, an
             Xid or SXid event that needs more than the application restarted

(ok judgments are counted by the sections they come from, not listed), its cause, its fix and its
source. Sources: "health" (`Findings.health`, the contracts judged by the agent and the GPU
facts), "contract" (a contract whose status is unknown), "speed" (`speed_section` judgments,
outliers, rejected figures), "tier" (a tier asked for and not measured), "xid" (`xid_section`),
"audit" (an expectations violation or baseline drift), "reach" (the host did not answer).

A host's state, the first that applies (`STATES`):

    unreachable   no health.json
    cannot_run    its lowest broken contract stops any benchmark (driver, fabric, device mask,
                  framework); not a device mask or framework the probe read in a login session (ssh
                  / ansible engines): that judges the probe's environment, not the host, which is
                  judged on what NVML read (an entry of finding "probe_env", severity watch:
                  `sweep.analysis.compare.probe_env_only`)
    broken        an entry of severity broken
    held_out      of the reference class, but an entry holds it out (a foreign process, an
                  incomplete probe)
    busy          of the reference class, held out only because it runs a Slurm job (its processes
                  are a running job's: `sweep.analysis.owners`): out of the pool, no fault, no exit
                  code of its own
    other_class   runnable and healthy, in another comparability class
    pool          everything else: the reference class, no broken entry, nothing holding it out

One cause per host (`Verdict.cause`, chosen once by `cause_rank`): the entry that explains the host
best, with its fix. The held-out reason, the terminal's and the report's findings, the top box, the
drain reasons, hosts.csv and the Prometheus label all say it; an entry carries its host beside its
text (`Entry.host`), never inside it.

The exit code (`Verdict.exit_code`; sweep/exitcodes.py, the README's table), the first that applies:
1 a host unreachable, or a tier asked for by --speed or --load not measured on a host (the run is
incomplete: the verdict covers only what was measured); 6 / 7 a --wrap benchmark failed / refused on
a host (`bench_section`); 3 a host in another class; 4 a host broken, cannot run or held out;
5 an audit finding; 0 otherwise. An `unknown` contract does not change the code: it is no evidence
of a fault, and every one is counted and named with its fix (`Verdict.notes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property
from operator import attrgetter

import numpy as np

from probe_agent.chain import BY_NAME as CONTRACT_BY_NAME, CONTRACTS
from probe_agent.xid import ACTION
from sweep import exitcodes
from sweep.analysis.compare import HELD_OUT_BY, Findings
from sweep.analysis.fleet import Fleet, rows_at
from sweep.analysis.names import by_rank, fold_hosts, natural_ranks
from sweep.analysis.speed_reference import LABELS, UNITS
from sweep.text import plural

SEVERITIES = ("ok", "watch", "unknown", "broken")
STATES = ("pool", "held_out", "broken", "other_class", "cannot_run", "unreachable", "busy")
NOT_APPLICABLE = ("one GPU selected",)
# speed tier statuses that measured not all it was asked  # a skipped figure that cannot exist on
# the host: no measurement missing
NOT_MEASURED = ("partial", "refused", "failed", "invalid")
# a tier of these not measured makes the run incomplete (exit 1)
TIERS_INCOMPLETE = ("speed", "load")
SPEED_FIX = {
    "pcie": "check the GPU's PCIe link (lspci -vv: generation and width; reseat the card or riser) "
    "and the host's "
    "IOMMU / ACS settings, then measure again with sweep run --speed",
    "other": "look at the card (power cap, clocks and slowdown during the tier: the report's Speed "
    "section), measure "
    "again with sweep run --speed, and have it replaced if it stays slow",
}


@dataclass(frozen=True)
class Entry:
    """One judgment of one host that is not plain ok."""

    host: str
    severity: str  # watch, unknown, broken
    source: str  # health, contract, speed, tier, xid, audit, reach
    about: str  # the contract, finding kind, figure or tier it is about
    cause: str
    fix: str | None = None
    # keeps a host of the reference class out of the pool without being broken
    holds_out: bool = False
    tier: str | None = None  # a tier asked for and not measured: speed, load, wrap
    off_audit: bool = False  # off its expectations or drifted from its baseline (exit 5)
    # the health finding's kind ("lowest_broken", "hw_slowdown", ...), for "health"
    finding: str | None = None
    contract: str | None = None  # the contract it is about, where it is one

    def to_dict(self) -> dict:
        # flat: asdict's deep copy cost 16 s at 100,000 hosts; the fields read in one C call
        return dict(zip(_JSON_KEYS, _FIELDS(self)))


# summary.json's key of each field (sweep.summary/2 is published: a renamed field keeps its key)
JSON_KEY = {"about": "what", "off_audit": "off"}
ENTRY_KEYS = tuple((JSON_KEY.get(f.name, f.name), f.name) for f in fields(Entry))
_JSON_KEYS = tuple(key for key, _ in ENTRY_KEYS)
_FIELDS = attrgetter(*(name for _, name in ENTRY_KEYS))


@dataclass(frozen=True)
class Verdict:
    """The states of a fleet's hosts and the entries they come from; every list and code is read
    here."""

    states: dict  # host -> state, in the fleet's order
    entries: tuple[Entry, ...]
    reference_hosts: frozenset = field(default_factory=frozenset)
    bench_code: int | None = None  # bench_section's 6 / 7 of a --wrap run, else None
    # host -> its entries, broken first (`of`)
    by_host: dict = field(default_factory=dict, repr=False)
    # host -> the entry that explains it (`cause`)
    causes: dict = field(default_factory=dict, repr=False)

    def cause(self, host: str) -> Entry | None:
        """The one entry that explains `host` best, with its fix (`cause_rank`): what every view
        says of the host (held-out reason, terminal, top box, findings, drain reason, hosts.csv,
        Prometheus)."""
        return self.causes.get(host)

    def hosts_in(self, *states: str) -> list[str]:
        return by_rank((h for h, s in self.states.items() if s in states), self._ranks)

    @cached_property
    def _ranks(self) -> dict:  # a report sorts the same hosts again and again: ranked once
        return natural_ranks(self.states)

    @property
    def pool(self) -> list[str]:
        return self.hosts_in("pool")

    @property
    def held_out(self) -> list[str]:
        """Hosts of the reference class kept out of the pool, for their health or broken."""
        return [h for h in self.hosts_in("held_out", "broken") if h in self.reference_hosts]

    @property
    def broken(self) -> list[str]:
        """Every answering host with a broken entry (those that cannot run a benchmark included)."""
        return self.hosts_in("broken", "cannot_run")

    @property
    def drain_candidates(self) -> list[str]:
        """Held out or broken: the hosts `sweep.analysis.owners.drain_hosts` picks the drain set
        from."""
        return by_rank(set(self.held_out) | set(self.broken), self._ranks)

    def of(self, host: str) -> list[Entry]:
        """A host's entries, broken first."""
        return self.by_host.get(host, [])

    @property
    def not_measured(self) -> list[Entry]:
        return [e for e in self.entries if e.tier is not None]

    @property
    def unknown(self) -> list[Entry]:
        """Contracts not read and figures rejected (the tiers not measured and unreachable hosts
        apart)."""
        return [
            e
            for e in self.entries
            if e.severity == "unknown" and e.tier is None and e.source != "reach"
        ]

    @property
    def exit_code(self) -> int:
        states = set(self.states.values())
        if "unreachable" in states or any(e.tier in TIERS_INCOMPLETE for e in self.entries):
            return exitcodes.INCOMPLETE
        if self.bench_code in (exitcodes.BENCH_FAILED, exitcodes.REFUSED):
            return self.bench_code
        if "other_class" in states:
            return exitcodes.NOT_COMPARABLE
        if states & {"broken", "cannot_run", "held_out"}:
            return exitcodes.BROKEN
        if any(e.off_audit for e in self.entries):
            return exitcodes.OFF
        return exitcodes.OK

    @property
    def exit_meaning(self) -> str:
        code = self.exit_code
        if code == exitcodes.INCOMPLETE and "unreachable" not in self.states.values():
            return (
                "a figure asked for was not measured on some host: the verdict covers only "
                "what was measured"
            )
        return exitcodes.MEANING[code]

    def note_items(self) -> list[dict]:
        """What every view says beside the headline: each tier asked for and not measured, each
        contract or figure not read, each speed figure to watch (a warning), with its hosts and fix:
        [{"said": kind, "hosts", "text"}], kind "not measured" | "not read" | "to watch" (under the
        key "said": summary.json's notes are published, sweep.summary/2). Made once a verdict (a
        10,000-host fleet of old agents has 40,000 entries to group), each caller given its copy."""
        return [dict(note, hosts=list(note["hosts"])) for note in self._note_items]

    @cached_property
    def _note_items(self) -> list[dict]:
        out = []
        watch = [
            e
            for e in self.entries
            if e.severity == "watch"
            and e.source == "speed"
            # a broken host is said as broken
            and self.states.get(e.host) not in ("broken", "cannot_run")
        ]
        for kind, entries, key in (
            ("not measured", self.not_measured, lambda e: e.tier),
            ("not read", self.unknown, lambda e: (e.source, e.about)),
            ("to watch", watch, lambda e: e.about),
        ):
            for group in _grouped(entries, key):
                hosts = by_rank({e.host for e in group}, self._ranks)
                out.append({"said": kind, "hosts": hosts, "text": _note(kind, hosts, group[0])})
        return out

    def notes(self) -> list[str]:
        return [n["text"] for n in self.note_items()]

    def to_dict(self) -> dict:
        counts = {s: 0 for s in STATES}
        for state in self.states.values():
            counts[state] += 1
        return {
            "states": dict(self.states),
            "counts": counts,
            "exit_code": self.exit_code,
            "exit_meaning": self.exit_meaning,
            "notes": self.note_items(),
            "not_measured": [e.to_dict() for e in self.not_measured],
            # each host's one cause (`cause`), as every view says it
            "causes": [dict(e.to_dict(), key=cause_key(e)) for e in self.causes.values()],
            # a contract not read is in `notes`, once per contract with its hosts (on a fleet of old
            # agents it is every host: 4 entries each would be most of the file)
            "entries": [e.to_dict() for e in self.entries if e.source != "contract"],
        }


# The contract a health finding is about, where the finding does not name it (the agent's table).
KIND_CONTRACT = {kind: c.name for c in CONTRACTS for kind in c.findings}
CHAIN = {c.name: n for n, c in enumerate(CONTRACTS)}


def contract_of(e: Entry) -> str | None:
    return e.contract or KIND_CONTRACT.get(e.finding or "")


def cause_key(e: Entry) -> str:
    """A cause as a short name (a label value, a column): its contract, else its finding, figure or
    tier ("thermal", "xid", "speed", "processes", "unreachable")."""
    if e.source == "speed":
        return "speed"
    return contract_of(e) or e.tier or e.finding or e.about


def cause_rank(e: Entry, lowest: str | None = None) -> tuple:
    """The order a host's entries explain it in, best first: a broken entry about the lowest fault
    of the chain (a contract standing on the host's lowest broken one, `lowest`, is that fault: HW
    thermal slowdown under broken thermal headroom), there the Xid repair, then the finding that
    says it precisely, then the lowest broken contract's own sentence; a broken entry about no
    contract (a speed figure last); an entry that holds the host out; its unreachability; the
    probe's login environment (a broken mask or framework that did not stop the host:
    `sweep.analysis.compare.probe_env_only`); what was not read or measured; a warning."""
    if e.severity == "broken":
        contract = contract_of(e)
        if contract and lowest and lowest in CONTRACT_BY_NAME[contract].consequence_of:
            contract = lowest
        return (
            0,
            CHAIN.get(contract, len(CHAIN)) if contract else len(CHAIN) + (e.source == "speed"),
            e.source != "xid",
            e.finding == "lowest_broken",
        )
    return (
        1
        if e.holds_out
        else 2
        if e.source == "reach"
        else 3
        if e.finding == "probe_env"
        else 4
        if e.severity == "unknown"
        else 5,
    )


def _cause(items: list[Entry]) -> Entry:
    lowest = next((e.contract for e in items if e.finding == "lowest_broken"), None)
    return min(items, key=lambda e: cause_rank(e, lowest))


def _grouped(entries, key) -> list[list[Entry]]:
    groups: dict = {}
    for e in entries:
        groups.setdefault(key(e), []).append(e)
    return list(groups.values())


def _note(kind: str, hosts: list[str], first: Entry) -> str:
    """'speed not measured on 1 host (gpu05; gpu05: failed: ...): fix' / 'xid not read on 2 hosts
    (gpu[07-08]; ...): fix'."""
    name = first.tier or LABELS.get(first.about) or first.about
    return (
        f"{name} {kind} on {plural(len(hosts), 'host')} ({fold_hosts(hosts)}; {first.host}: "
        f"{first.cause})" + (f": {first.fix}" if first.fix else "")
    )


def make_verdict(
    fleet: Fleet,
    findings: Findings,
    speed: dict | None = None,
    bench: dict | None = None,
    xid: dict | None = None,
    audit: dict | None = None,
) -> Verdict:
    """Every judgment of the fleet as entries, and each host's state from them."""
    entries = [
        *_health_entries(findings, xid),
        *_unknown_contracts(fleet),
        *_speed_entries(speed),
        *_tier_entries(fleet, speed, bench),
        *_xid_entries(xid),
        *_audit_entries(audit),
    ]
    reference = frozenset(findings.reference.hosts) if findings.reference else frozenset()
    # compare's one cannot-run rule (BLOCKING), not a second
    excluded = {e["host"] for e in findings.excluded}
    broken = {e.host for e in entries if e.severity == "broken"}
    holds = {e.host for e in entries if e.holds_out}
    states = {}
    for host, status in zip(fleet.hosts["host"].astype(str), fleet.hosts["status"].astype(object)):
        if status != "ok":
            states[host] = "unreachable"
        elif host in excluded:
            states[host] = "cannot_run"
        elif host in broken:
            states[host] = "broken"
        elif host in reference:
            states[host] = "held_out" if host in holds else "pool"
        else:
            states[host] = "other_class"
    # held out only by the processes of a running job: busy, not a fault
    for host in _busy_only(entries):
        if states.get(host) == "held_out":
            states[host] = "busy"
    code = bench["exit_code"] if bench else None
    rank = {s: n for n, s in enumerate(reversed(SEVERITIES))}
    by_host: dict = {}
    for e in sorted(entries, key=lambda e: rank[e.severity]):  # stable: each source's order kept
        by_host.setdefault(e.host, []).append(e)
    causes = {host: _cause(items) for host, items in by_host.items()}
    return Verdict(states, tuple(entries), reference, code, by_host, causes)


def _busy_only(entries) -> set:
    """The hosts whose every entry that holds them out is a running job's processes ("busy")."""
    holding: dict = {}
    for e in entries:
        if e.holds_out:
            holding.setdefault(e.host, set()).add(e.finding)
    return {host for host, kinds in holding.items() if kinds == {"busy"}}


# ---------------------------------------------------------------- the entries of each source


def _health_entries(findings: Findings, xid: dict | None) -> list[Entry]:
    """The health findings (contracts as the agent judged them, GPU faults, processes,
    unreachability); the xid contract's finding is left to the Xid entries where a host has them."""
    xid_hosts = {h["host"] for h in (xid or {}).get("hosts", ())}
    out = []
    for f in findings.health:
        if f.kind == "unreachable":
            out.append(Entry(f.host, "unknown", "reach", f.kind, f.detail, f.fix))
        elif not (f.contract == "xid" and f.host in xid_hosts):
            out.append(
                Entry(
                    f.host,
                    "broken" if f.severity == "broken" else "watch",
                    "health",
                    f.contract or f.kind,
                    f.detail,
                    f.fix,
                    holds_out=f.kind in HELD_OUT_BY,
                    finding=f.kind,
                    contract=f.contract,
                )
            )
    return out


def _unknown_contracts(fleet: Fleet) -> list[Entry]:
    """Each contract not read on a host, where no lower broken one explains it. The four columns
    an entry needs, each converted once (a 10,000-host fleet has about 40,000 such rows)."""
    c = fleet.contracts
    hit = (c["status"].astype(object) == "unknown") & c["consequence_of"].isna()
    picked = c.iloc[np.flatnonzero(hit.to_numpy(dtype=bool))]
    host, contract, message, fix = (
        picked[name].to_numpy(dtype=object, na_value=None).tolist()
        for name in ("host", "contract", "message", "fix")
    )
    # each Entry(h, "unknown", "contract", k, m or "not read", f, contract=k), made without the
    # frozen __init__'s call per field: 40,000 entries in half the time
    made = [object.__new__(Entry) for _ in host]
    for entry, h, k, m, f in zip(made, host, map(str, contract), message, fix):
        each = {"host": str(h), "about": k, "cause": m or "not read", "fix": f, "contract": k}
        object.__setattr__(entry, "__dict__", {**_UNREAD, **each})
    return made


_UNREAD = vars(Entry("", "unknown", "contract", "", ""))  # but for host, contract, cause, fix


def _speed_entries(speed: dict | None) -> list[Entry]:
    """Each host's broken and warning figures (one entry per host and severity, its worst figure
    first), its class outliers and its rejected figures."""
    if not speed:
        return []
    out, seen = [], {}
    for j in speed["judgments"]:  # worst first
        seen.setdefault((j["host"], j["severity"]), []).append(j)
    for (host, severity), items in seen.items():
        worst = items[0]
        more = len(items) - 1
        cause = figure_text(worst) + (f"; and {plural(more, 'more figure')}" if more else "")
        family = "pcie" if worst["figure"].startswith("pcie_") else "other"
        out.append(
            Entry(
                host,
                "broken" if severity == "broken" else "watch",
                "speed",
                worst["figure"],
                cause,
                SPEED_FIX[family],
            )
        )
    out += [
        Entry(o["host"], "watch", "speed", o["figure"], o["detail"], "; ".join(o["evidence"]))
        for o in speed.get("class_outliers", ())
    ]
    out += [
        Entry(
            r["host"],
            "unknown",
            "speed",
            r["field"],
            r["detail"],
            "probe the host again with this sweep's agent",
        )
        for r in speed.get("rejected", ())
    ]
    out += [
        Entry(
            c["host"],
            "unknown",
            "speed",
            "contended",
            f"figures contended: {c['processes']} appeared during the tier (recorded, not judged)",
            "measure again with sweep run --speed while no other process uses "
            # not judged: not measured (exit 1)
            "the GPUs",
            tier="speed",
        )
        for c in speed.get("contended", ())
    ]
    return out


def figure_text(j: dict) -> str:
    """'GPU 5 HBM 2993 GB/s, 70% of the H200 reference' / '... 57% of what its PCIe gen5 x16 link
    carries'."""
    from sweep.analysis.speed import rate

    what = f"GPU {j['gpu']} {LABELS[j['figure']]} {rate(j['value'], UNITS[j['figure']])}"
    if j["against"] == "link":
        return f"{what}, {j['fraction']:.0%} of what its PCIe {j['link']} link carries"
    return f"{what}, {j['fraction']:.0%} of the {j['reference_model']} reference"


def _tier_entries(fleet: Fleet, speed: dict | None, bench: dict | None) -> list[Entry]:
    """A tier the operator asked for that did not measure on a host: the speed tier not measured (or
    figures skipped for a reason other than not applicable), the load that failed, the --wrap
    benchmark not run."""
    out = []
    skipped: dict = {}
    for item in (speed or {}).get("skipped", ()):
        if item["reason"] not in NOT_APPLICABLE:
            skipped.setdefault(item["host"], item)
    for host, status in (speed or {}).get("status", {}).items():
        if status not in NOT_MEASURED and host not in skipped:
            continue
        reason, item = (speed.get("reasons") or {}).get(host), skipped.get(host)
        if item is not None and (status not in NOT_MEASURED or not reason):
            gpu = "" if item["gpu"] is None else f"GPU {item['gpu']} "
            reason = f"{gpu}{item['figure']} skipped: {item['reason']}"
        out.append(
            Entry(
                host,
                "unknown",
                "tier",
                "speed",
                f"{status}: {reason or 'no reason given'}",
                _tier_fix(status),
                tier="speed",
            )
        )
    hosts = fleet.hosts
    problems = hosts["load_problem"].notna().to_numpy(dtype=bool)
    for r in rows_at(hosts[["host", "load_problem"]], [i for i, p in enumerate(problems) if p]):
        out.append(
            Entry(
                r["host"],
                "unknown",
                "tier",
                "load",
                r["load_problem"],
                "read the load's error in the host record, fix it, and sweep run --load again",
                tier="load",
            )
        )
    for n in (bench or {}).get("not_run", ()):
        out.append(
            Entry(
                n["host"],
                "unknown",
                "tier",
                "wrap",
                f"{n['status']}: {n['why']}",
                "read the host record's wrap section (exit code, output), fix it, and run again",
                tier="wrap",
            )
        )
    return out


def _tier_fix(status: str) -> str:
    if status == "refused":
        return (
            "fix what the reason names, then sweep run --speed again (--force measures over "
            "other processes)"
        )
    return "read the host record's speed section (its reason), fix it, and sweep run --speed again"


def _xid_entries(xid: dict | None) -> list[Entry]:
    out = []
    for h in (xid or {}).get("hosts", ()):
        _, label, status, _, fix = ACTION[h["action"]]
        out.append(
            Entry(
                h["host"],
                "broken" if status == "broken" else "watch",
                "xid",
                h["action"],
                f"{label}: {h['reason']}",
                fix,
                contract="xid",
            )
        )
    return out


def _audit_entries(audit: dict | None) -> list[Entry]:
    if not audit:
        return []
    items = [
        *((audit.get("expectations") or {}).get("findings") or ()),
        *((audit.get("baseline") or {}).get("drift") or ()),
    ]
    return [
        Entry(
            i["host"],
            "watch",
            "audit",
            i.get("rule") or i.get("kind") or "audit",
            i["detail"],
            i.get("fix"),
            off_audit=True,
        )
        for i in items
    ]
