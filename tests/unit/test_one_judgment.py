"""One judgment (issue 48): for the `sweep demo --speed` fleet and generated fleets, the library
(`sweep.assess`), summary.json, the terminal, the HTML, the lists, drain.sh, hosts.csv and the
Prometheus export give the same pool, held-out and broken sets, the same exit code and the same one
cause per host."""
import csv
import html
import json
import re
import shlex
from pathlib import Path

from ClusterShell.NodeSet import NodeSet
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

import fleet_variants as fv
import sweep
from sweep.cli import main
from test_verdict import HEALTHY, OTHERS, SPEED_DEMO, health_of

LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def hosts_of(text: str) -> set[str]:
    return set(NodeSet(text)) if text else set()


def series(text: str, name: str) -> list[tuple[dict, str]]:
    """(labels, value) of each sample of metric `name` in a textfile."""
    out = []
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, value = line[len(name) + 1:].rsplit("} ", 1)
            out.append((dict(LABEL.findall(labels)), value))
    return out


def drained_body(reason: str) -> str:
    assert reason.startswith("sweep: "), reason
    return reason[len("sweep: "):]


def check_one_judgment(run: Path, report: Path, code: int, terminal: str) -> None:
    """Every view of `run` (reported into `report`, exit `code`, printing `terminal`) says what
    sweep.assess says."""
    judged = sweep.assess(sweep.load_fleet([run]))
    sets = {"pool": set(judged.pool), "held_out": set(judged.held_out),
            "broken": set(judged.broken)}
    summary = json.loads((report / "summary.json").read_text())

    # the sets and the exit code: library, summary.json, the command, the lists, the HTML tiles
    assert code == judged.exit_code == summary["exit_code"]
    for key, hosts in sets.items():
        assert set(summary["host_sets"][key]["hosts"]) == hosts, key
        assert set((report / f"{key}.txt").read_text().split()) == hosts, key
        assert hosts_of((report / f"{key}.nodeset").read_text().strip()) == hosts, key
    assert set(summary["pool"]["hosts"]) == sets["pool"]
    assert {h["host"] for h in summary["held_out"]} == sets["held_out"]
    page = (report / "report.html").read_text()
    # the tiles count each host once, in its verdict state
    for state in ("pool", "held_out", "busy", "broken", "cannot_run", "unreachable"):
        tile = re.search(rf'data-state="{state}" id="[\w-]+" href="#[\w-]+"><b>(\d+)</b>', page)
        assert tile.group(1) == str(len(judged.verdict.hosts_in(state))), state

    # one cause per host: the library's, and summary.json's (folded) the same
    causes = {h: judged.cause(h) for h in judged.verdict.states if judged.cause(h) is not None}
    written = {h: c for c in summary["verdict_model"]["causes"] for h in hosts_of(c["folded"])}
    assert {h: c["cause"] for h, c in written.items()} == {h: e.cause for h, e in causes.items()}
    kept_out = sets["held_out"] | sets["broken"]
    assert kept_out <= set(causes), "a host kept out has no cause"
    for item in summary["held_out"]:  # the held-out reason is the cause
        assert (item["cause"], item["fix"]) == (causes[item["host"]].cause,
                                                causes[item["host"]].fix)

    # hosts.csv: each host's cause and its words
    with open(report / "hosts.csv", newline="") as fh:
        rows = {row["host"]: row for row in csv.DictReader(fh)}
    for host, e in causes.items():
        assert rows[host]["cause_text"] == e.cause and rows[host]["cause"] == written[host]["key"], host
    assert not [h for h, row in rows.items() if row["cause_text"] and h not in causes]

    # drain.sh: every host kept out for a cause its owner drains (sweep.analysis.owners) is drained
    # for its cause (its fix, or the figure, or the Xid repair); no other host is
    from sweep.analysis.owners import drain_hosts

    drained = {}
    for line in (report / "drain.sh").read_text().splitlines():
        words = shlex.split(line, comments=True)
        if len(words) >= 4 and words[0] == "drain":  # drain SET REASON NODE...
            assert hosts_of(words[1]) == set(words[3:]), line
            for host in words[3:]:
                drained[host] = drained_body(words[2])
    assert set(drained) == set(drain_hosts(judged.verdict)) == set(summary["host_sets"]["drain"]["hosts"])
    assert set(drained) <= kept_out
    for host, body in drained.items():
        e, key = causes[host], written[host]["key"]
        assert body in (f"{key}: {e.fix or e.cause}", e.cause) or e.cause.startswith(body), (host,
                                                                                             body, e)

    # the terminal's glance says each kept-out host's cause once (its words cut at the glance's
    # width; past the causes shown, `--details` says the rest), and no other finding of the fault
    more = "more cause" in terminal
    for host in kept_out:
        e = causes[host]
        said = [line for line in terminal.splitlines() if e.cause[:40] in line]
        assert len(said) == 1 or (more and not said), (host, e.cause, terminal)
        assert not said or host in hosts_of(said[0].split()[0]), (host, said[0])

    # the HTML's top box: each row of causes names its hosts, their state and their cause (one
    # row per cause shared by hosts: `alike` rows say their first host's words and values differ)
    box = page[page.index('id="verdict"'):page.index("</section>")]
    rows = re.findall(r'<li class="cause [\w-]+" data-hosts="([^"]*)" data-state="(\w+)">.*?'
                      r'<span class="why">(.*?)</span>(.*?)</li>', box, re.S)
    shown = {}
    for folded, state, why, rest in rows:
        hosts = hosts_of(html.unescape(folded))
        assert all(judged.verdict.states[h] == state for h in hosts), (folded, state)
        texts = {causes[h].cause for h in hosts}
        assert html.unescape(why) in texts and (len(texts) == 1 or "values differ" in rest), folded
        shown.update(dict.fromkeys(hosts, state))
    for state in ("held_out", "broken", "cannot_run"):  # every host kept out is in the row of its cause
        assert {h for h, s in shown.items() if s == state} == set(judged.verdict.hosts_in(state)), state

    # the Prometheus export: the same states and the same cause per host
    from sweep.export.prometheus import metrics_text

    text = metrics_text(run)
    states = {labels["host"]: labels["state"] for labels, value in series(text,
                                                                          "sweep_host_state") if value == "1"}
    assert states == judged.verdict.states
    labelled = {labels["host"]: labels["cause"] for labels, _ in series(text,
                                                                        "sweep_host_cause_info")}
    assert labelled == {h: written[h]["key"] for h in causes}
    check_one_headline(run, report, terminal)


def check_one_headline(run: Path, report: Path, terminal: str) -> str:
    """The terminal's first line, the HTML top box's answer, summary.json's headline and the
    library's `headline()` are one sentence (the glance said it in other words before issue 48)."""
    said = sweep.assess(sweep.load_fleet([run])).headline()
    summary = json.loads((report / "summary.json").read_text())
    page = (report / "report.html").read_text()
    answer = re.search(r'<div class="answer"[^>]*>(.*?)</div>', page, re.S)
    assert summary["headline"] == said
    assert terminal.splitlines()[0] == said, terminal
    assert html.unescape(answer.group(1)).strip() == said, answer.group(1)
    return said


def report_fleet(variants: list[str], tmp: Path, capsys) -> None:
    names = [f"gpu{n:02d}" for n in range(1, len(variants) + 1)]
    records = [fv.record(n, None, ("refused", "connection refused on port 22")) if v == "unreachable"
               else fv.record(n, health_of(v, n)) for n, v in zip(names, variants)]
    run = fv.write_run(tmp / "run", records)
    capsys.readouterr()
    code = main(["report", str(run), "--out", str(tmp / "report")])
    check_one_judgment(run, tmp / "report", code, capsys.readouterr().out)


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@example(extra=SPEED_DEMO)
# three rules chose three causes before issue 48
@example(extra=["hw_thermal", "xid_79", "foreign_process"])
@example(extra=["power_cap", "empty_mask", "unreachable", "speed_broken"])
@given(extra=st.lists(st.sampled_from(OTHERS), min_size=1, max_size=4))
def test_every_view_gives_the_libraries_sets_exit_code_and_one_cause_per_host(extra,
                                                                              tmp_path_factory,
                                                                              capsys):
    report_fleet(list(HEALTHY) + extra, tmp_path_factory.mktemp("judgment"), capsys)


def test_the_demo_speed_fleet_is_judged_once(tmp_path, capsys):
    """`sweep demo --speed`: the library's sets and causes are the report's (the library said 8 of
    12 before)."""
    assert main(["demo", "--speed", "--out", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    code = main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report")])
    check_one_judgment(tmp_path / "run", tmp_path / "report", code, capsys.readouterr().out)
    judged = sweep.assess(sweep.load_fleet([tmp_path / "run"]))
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "details"), "--details"]) == code
    said = check_one_headline(tmp_path / "run", tmp_path / "details", capsys.readouterr().out)
    assert said == judged.headline()
    assert judged.pool == ["gpu01", "gpu02", "gpu04", "gpu05", "gpu07", "gpu08"]
    assert judged.held_out == judged.broken == ["gpu03", "gpu06"]
    assert judged.headline().startswith("Not one pool: 2 comparability classes: the pool is "
                                        "gpu[01-02,04-05,07-08] (6 of 12 hosts)")


@pytest.mark.parametrize("variants", [
    HEALTHY,  # one pool
    (*HEALTHY, "foreign_process", "hw_thermal"),  # one class, hosts held out and broken
    (*HEALTHY, *SPEED_DEMO),  # two classes, two hosts held out for their speed figures
    (*HEALTHY, "power_cap", "empty_mask", "unreachable"),  # another class, one cannot run, one unreachable
    ("healthy",),  # the one host
], ids=["one-pool", "held-out", "speed-demo", "kept-out", "one-host"])
def test_the_terminal_the_page_summary_json_and_the_library_say_one_headline(variants, tmp_path, capsys):
    names = [f"gpu{n:02d}" for n in range(1, len(variants) + 1)]
    records = [fv.record(n, None, ("refused", "connection refused on port 22")) if v == "unreachable"
               else fv.record(n, health_of(v, n)) for n, v in zip(names, variants)]
    run = fv.write_run(tmp_path / "run", records)
    capsys.readouterr()
    main(["report", str(run), "--out", str(tmp_path / "report")])
    check_one_headline(run, tmp_path / "report", capsys.readouterr().out)
