"""The whole judgment of a fleet in one call: `assess(fleet, baseline, expectations, references)`.

    import sweep

    fleet = sweep.load_fleet(["reports/2026-05-01T1200Z-dc1"])
    judged = sweep.assess(fleet)             # Assessment: classes, sections, the verdict
    judged.pool, judged.held_out, judged.broken, judged.exit_code
    judged.cause("gpu03")                    # the one entry that explains a host, with its fix
    judged.headline()                        # the one headline: terminal, report, summary.json

The comparability classes and health findings (`sweep.analysis.compare`), the speed, bench and Xid
sections, the audit against expectations and a baseline, and the one verdict over all of them
(`sweep.analysis.verdict.make_verdict`). `build_report`, the Prometheus export, `sweep audit` and
the library read this; nothing else assembles the steps. The pool, the hosts held out and the
sentence are the verdict's: a host is said of once, by its cause.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from sweep.analysis.bench import bench_section
from sweep.analysis.compare import Findings, compare
from sweep.analysis.fleet import Fleet, records_of
from sweep.analysis.names import abbreviate, fold_hosts
from sweep.analysis.speed import speed_section
from sweep.analysis.verdict import Entry, Verdict, make_verdict
from sweep.analysis.xid import xid_section
from sweep.text import plural

HELD_OUT_SAID = 4  # hosts held out named, with their cause, in the sentence
# the states whose hosts the sentence names with causes
NAMED_WITH_CAUSE = ("held_out", "busy", "broken")
# the states a host kept out of the pool is counted in, in the sentence's order, with their words
KEPT_OUT_WORDS = (
    ("held_out", "held out for health"),
    ("busy", "busy with a Slurm job"),
    ("broken", "broken"),
    ("cannot_run", "cannot run a benchmark"),
    ("unreachable", "unreachable"),
)


@dataclass(frozen=True)
class Assessment:
    """Everything judged of one fleet; every view reads it and decides nothing."""

    fleet: Fleet
    # classes (reference first), hosts that cannot run or did not answer, health findings
    findings: Findings
    verdict: Verdict  # each host's state, its entries and its cause; the exit code
    speed: dict | None = None  # sweep.analysis.speed.speed_section
    bench: dict | None = None  # sweep.analysis.bench.bench_section (a --wrap run)
    xid: dict | None = None  # sweep.analysis.xid.xid_section
    # sweep.audit.baseline.audit_section (with expectations or a baseline)
    audit: dict | None = None
    # drain for the node's configuration too (--drain-config, or the expectations' `drain:
    # [config]`)
    drain_config: bool = False

    @property
    def pool(self) -> list[str]:
        return self.verdict.pool

    @property
    def held_out(self) -> list[str]:
        return self.verdict.held_out

    @property
    def broken(self) -> list[str]:
        return self.verdict.broken

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    def cause(self, host: str) -> Entry | None:
        return self.verdict.cause(host)

    def held_out_items(self) -> list[dict]:
        """The hosts held out of the pool, each with its cause: [{host, what, source, cause, fix,
        severity}]."""
        out = []
        for host in self.verdict.held_out:
            e = self.verdict.cause(host)
            out.append(
                {
                    "host": host,
                    "what": e.about if e else None,
                    "source": e.source if e else None,
                    "cause": e.cause if e else "held out",
                    "fix": e.fix if e else None,
                    "severity": "broken" if e is not None and e.severity == "broken" else "warning",
                }
            )
        return out

    def sentence(self, brief: bool = False, causes: bool = True) -> tuple[str, str]:
        """(the answer in a few words, the sentence that backs it); `brief`: the sentence without
        the hosts kept out and why (the view lists them under it); `causes`: False counts the hosts
        kept out in each state without naming them (each view names them under the headline, each
        with its cause, once)."""
        ref, total, pool = self.findings.reference, self.findings.hosts_total, self.pool
        kept, counts = total - len(pool), Counter(self.verdict.states.values())
        tail = self._kept_out(counts, causes)
        if brief and kept:
            are = "is" if kept == 1 else "are"
            tail = f"; {plural(kept, 'host')} {are} kept out for the reasons listed below"
        if ref is None:
            none = (
                "the one host did not reach" if total == 1 else f"none of the {total} hosts reached"
            )
            return "No host can run a benchmark", f"{none} a runnable state{tail}."
        if not pool:
            held_text = (
                "the one comparable host of class {} is held out"
                if ref.size == 1
                else f"the {ref.size} comparable hosts of class {{}} are all held out"
            )
            return "No healthy pool", f"{held_text.format(ref.id)} for health{tail}."
        folded = abbreviate(fold_hosts(pool))
        hosts = plural(total, "host")
        if self.findings.comparable:
            whole = "all " if len(pool) == total else ""
            ready = (
                f"the one host ({folded}) can run a benchmark"
                if total == 1
                else f"{whole}{len(pool)} of {hosts} ({folded}) can be benchmarked together"
            )
            return "One pool" if not tail else "One pool, hosts kept out", f"{ready}{tail}."
        answer = f"Not one pool: {len(self.findings.classes)} comparability classes"
        if brief:
            return answer, f"the pool is {folded} ({len(pool)} of {hosts}){tail}."
        others = self.findings.classes[1:]
        count = counts["other_class"]  # their broken hosts are said as broken
        keys = list(dict.fromkeys(d.label for c in others for d in c.differs))
        classes = plural(len(others), "other class", "other classes")
        differ = "differs" if (count or len(others)) == 1 else "differ"
        which = f"{plural(count, 'host')} in {classes}" if count else classes  # else: all broken
        return (
            answer,
            f"the pool is {folded} ({len(pool)} of {hosts}); {which} {differ} in "
            f"{', '.join(keys)}{tail}.",
        )

    def _kept_out(self, counts: Counter, causes: bool) -> str:
        """ "; " and the hosts kept out of the pool, each counted once, in its state, as the views
        count it (`sweep.report.glance`); with `causes`, the first few of a state named with their
        cause; "" when none is kept out."""
        tail = []
        for state, words in KEPT_OUT_WORDS:
            if counts[state] and causes and state in NAMED_WITH_CAUSE:
                hosts = self.verdict.hosts_in(state)
                said = "; ".join(
                    f"{h}: {(self.cause(h) or _HELD).cause}" for h in hosts[:HELD_OUT_SAID]
                )
                more = (
                    f"; and {len(hosts) - HELD_OUT_SAID} more" if len(hosts) > HELD_OUT_SAID else ""
                )
                tail.append(f"{len(hosts)} {words} ({said}{more})")
            elif counts[state]:
                tail.append(f"{counts[state]} {words}")
        return ("; " + "; ".join(tail)) if tail else ""

    def headline(self) -> str:
        """The verdict in one sentence: the pool named, the hosts kept out counted in their states
        (each view names them under it, each with its cause, once): the first line of the
        terminal, the answer of the report's top box, summary.json's "headline";
        `sweep.report.glance` reads it."""
        answer, detail = self.sentence(causes=False)
        return f"{answer}: {detail}"

    def to_dict(self) -> dict:
        """The comparison and the verdict's sentence, pool and hosts held out, as summary.json has
        them."""
        answer, detail = self.sentence()
        return {
            **self.findings.to_dict(),
            "headline": self.headline(),
            "verdict": answer,
            "verdict_detail": _capital(detail),
            "verdict_brief": _capital(self.sentence(brief=True)[1]),
            "pool": {
                "hosts": list(self.pool),
                "folded": fold_hosts(self.pool),
                "size": len(self.pool),
            },
            "held_out": self.held_out_items(),
        }


_HELD = Entry("", "watch", "health", "held_out", "held out")


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def assess(
    fleet: Fleet,
    baseline: str | Path | None = None,
    expectations: str | Path | None = None,
    references: str | Path | dict | None = None,
    reference: str | None = None,
    audited=None,
    drain_config: bool = False,
) -> Assessment:
    """Judge `fleet`: its classes and findings, the speed / bench / Xid sections, the audit against
    `expectations` (a file) and `baseline` (a `sweep baseline set` folder), and the one verdict.

    `references`: the known-good hosts whose speed figures the speed tier is judged against (a
    baseline folder, or `read_baseline`'s answer; default: `baseline`'s). `reference` names the host
    or group whose class is the reference. `audited`: what the audit reads when it is not the
    fleet's own records (`sweep audit` gives the run folder, whose manifest lists hosts that have no
    record yet). Raises a SweepError for bad input (an unknown reference, a bad expectations file);
    a failed host is data. `drain_config`: the hosts out of the pool for their configuration (a
    power cap, ECC mode...: `sweep.analysis.owners`) are drained too, as the expectations' `drain:
    [config]` asks. The audit reads the records the fleet was loaded with: load it with
    `load_fleet(paths, keep_health=True)` to audit it."""
    findings = compare(fleet, reference=reference)
    audit = None
    if expectations is not None:  # read once: its `drain:` here, its rules in the audit
        from sweep.audit.expect import load_expectations

        expectations = load_expectations(_path(expectations))
        drain_config = drain_config or "config" in expectations.drain
    if expectations is not None or baseline is not None:
        from sweep.audit.baseline import audit_section

        records = records_of(fleet) if audited is None else audited
        audit = audit_section(records, expectations, _path(baseline))
    references = baseline if references is None else references
    speed = speed_section(fleet, findings, _read_references(references))
    bench = bench_section(fleet, findings)
    xid = xid_section(fleet)
    verdict = make_verdict(fleet, findings, speed, bench, xid, audit)
    return Assessment(fleet, findings, verdict, speed, bench, xid, audit, drain_config)


def _path(value):
    return None if value is None else Path(value)


def _read_references(references) -> dict | None:
    if references is None or isinstance(references, dict):
        return references
    from sweep.audit.baseline import read_baseline

    return read_baseline(Path(references))
