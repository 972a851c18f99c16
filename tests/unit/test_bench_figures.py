"""`sweep run --wrap`'s figures: read from output a host sends (hostile until validated), and bad input."""
import copy
import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from sweep.cli import main
from sweep.collect.wrap import (FIGURES_MAX, Metric, WrapSpec, budget, provenance_problem,
                                read_figures, split_record)
from sweep.errors import ConfigError

TFLOPS = Metric.parse(r"tflops=TFLOP/s: ([0-9.eE+-]+)")


def figures_from_output(tail: str, metrics: tuple[Metric, ...]) -> dict:
    """name -> {value, unit, source}: each --metric's last match, then the JSON lines the command
    printed (sweep.collect.wrap.read_figures' figures)."""
    return read_figures(tail, metrics)[0]


def test_regex_and_json_lines_give_the_last_figure_with_its_unit():
    tail = ("warmup TFLOP/s: 12\n"
            '{"metric": "tflops", "value": 600.5, "unit": "TFLOP/s"}\n'
            "TFLOP/s: 664.35\n"
            '{"metric": "img_s", "value": 1200, "unit": "images/s"}\n')
    got = figures_from_output(tail, (TFLOPS, Metric.parse(r"lat=latency ([0-9.]+) (ms)")))
    assert got == {"tflops": {"value": 664.35, "unit": None, "source": "--metric"},
                   "img_s": {"value": 1200.0, "unit": "images/s", "source": "json line"}}


@pytest.mark.parametrize("line", [
    '{"metric": "tflops", "value": NaN}', '{"metric": "tflops", "value": Infinity}', '{"metric": "tflops", "value": true}',
    '{"metric": "tflops", "value": "1e999"}', '{"metric": "tflops", "value": [1]}', '{"metric": "t flops", "value": 1}',
    '{"metric": "tflops"}', '["metric", 1]', '{"metric": "tflops", "value": "12 TFLOP"}',
    '{"metric": "tflops", "value": 1' + " " * 5000 + "}",
])
def test_hostile_json_lines_give_no_figure(line):
    assert figures_from_output(line + "\n", ()) == {}


def test_a_unit_with_terminal_escapes_is_shown_as_text():
    got = figures_from_output('{"metric": "x", "value": 1, "unit": "\\u001b[31mred"}', ())
    assert got["x"]["unit"] == "\\x1b[31mred"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400) | st.lists(st.sampled_from([
    '{"metric": "tflops", "value": ', "TFLOP/s: ", "1e308", "-0", "nan", "inf", "9" * 50, "}", "\n", '"', "\x1b[2J",
    '{"metric": "tflops", "value": 1.5}', "\u2028", "\x00"]), max_size=30).map("".join))
def test_any_output_gives_only_finite_numbers_under_printable_names(tail):
    for name, fig in figures_from_output(tail, (TFLOPS,)).items():
        assert isinstance(fig["value"], float) and math.isfinite(fig["value"])
        assert name.isprintable() and " " not in name
        assert fig["unit"] is None or fig["unit"].isprintable()


@pytest.mark.parametrize("text,message", [
    ("tflops", "is not NAME=REGEX"),
    ("t flops=([0-9]+)", "is not NAME=REGEX"),
    ("tflops=TFLOP/s: [0-9.]+", "has no group"),
    ("tflops=TFLOP/s: ([0-9.]+", "does not compile"),
])
def test_bad_metrics_are_bad_input(text, message):
    with pytest.raises(ConfigError, match=message):
        Metric.parse(text)


def test_the_host_deadline_must_leave_time_for_the_command():
    assert budget(900) == (30.0, 795.0)
    assert budget(120) == (12.0, 90.0)
    with pytest.raises(ConfigError, match="leaves no time for the command"):
        budget(6)
    args = WrapSpec(("python3", "b.py", "--size", "8192"), force=True).agent_args(120)
    assert args[-5:] == ["--force", "--", "python3", "b.py", "--size", "8192"][-5:]
    assert ["--command-timeout", "90"] == args[args.index("--command-timeout"):][:2]


@pytest.mark.parametrize("argv,message", [
    (["--wrap"], "--wrap needs a command after --"),
    (["extra"], "unexpected argument after the inventory: extra"),
    (["--metric", "x=([0-9]+)"], "--metric and --force belong to --wrap"),
    (["--wrap", "--metric", "x", "--", "true"], "is not NAME=REGEX"),
    (["--wrap", "--engine", "ansible", "--", "true"], "--wrap runs over sweep's own SSH transport only"),
    (["--wrap", "--host-deadline", "5", "--", "true"], "leaves no time for the command"),
])
def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys, argv, message):
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    gpu01:\n      ansible_host: 127.0.0.1\n")
    assert main(["run", str(inv), "--out", str(tmp_path / "run"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and not (tmp_path / "run").exists()


def test_a_probe_is_not_a_provenance_and_a_provenance_needs_its_output(tmp_path):
    assert provenance_problem({"kind": "sweep.health"}) == "not a sweep.provenance document"
    doc = json.loads((__import__("pathlib").Path(__file__).parents[1] / "fixtures" / "h200" /
                      "matmul.provenance.json").read_text())
    assert provenance_problem(doc) == "no output section (an agent without --emit)"
    doc["output"] = {"tail": "x", "bytes": 1, "truncated": False, "tail_limit_bytes": 10}
    assert provenance_problem(doc) is None
    doc["command"]["exit_code"] = "0; rm -rf /"
    assert provenance_problem(doc).startswith("command/exit_code:")


# --- no host chooses the fleet's figure (issue 23, items 2 and 10) ---------------------------------

PROVENANCE = json.loads((Path(__file__).parents[1] / "fixtures" / "h200" / "matmul.provenance.json").read_text())
SENT = tuple(PROVENANCE["command"]["argv"])  # the command the controller sent, as the fixture's host ran it


def wrapped_run(tmp_path, outputs: dict, metrics=(), output_tail=65536, options=None, folder="run", edit=None) -> dict:
    """A `sweep run --wrap` folder: each host's record made by the controller's own split_record from
    the fixture's provenance with `outputs[host]` as its output; returns summary.json's benchmark.
    `options`: the manifest's `options.wrap` where not the spec's own; `edit(host, doc)`: a host's
    provenance edited before the controller splits it."""
    run = write_wrapped(tmp_path / folder, outputs, metrics, output_tail, options, edit)
    return report_of([run], tmp_path / f"{folder}-report")


def write_wrapped(folder, outputs: dict, metrics=(), output_tail=65536, options=None, edit=None):
    from fleet_variants import record, write_run

    spec = WrapSpec(SENT, tuple(Metric.parse(m) for m in metrics), output_tail=output_tail)
    records = []
    for name, tail in outputs.items():
        doc = copy.deepcopy(PROVENANCE)
        doc["output"] = {"tail": tail, "bytes": len(tail.encode()), "truncated": False, "tail_limit_bytes": 65536}
        if edit:
            edit(name, doc)
        health, wrap = split_record(doc, spec)
        health["host"]["hostname"] = name
        records.append(dict(record(name, health), wrap=wrap))
    return write_run(folder, records, {"format": "sweep-run", "record_version": 1, "state": "complete",
                                       "hosts": list(outputs),
                                       "options": {"wrap": spec.to_dict() if options is None else options}})


def report_of(runs, out) -> dict:
    from sweep.report.build import build_report

    build_report(list(runs), out)
    return json.loads((out / "summary.json").read_text())["benchmark"]


def line(name, value, unit="TFLOP/s"):
    return json.dumps({"metric": name, "value": value, "unit": unit}) + "\n"


HONEST = {f"gpu0{i}": line("tflops", 660.0 + i) for i in range(1, 5)}


def test_one_host_printing_another_figure_name_does_not_choose_the_quoted_figure(tmp_path):
    b = wrapped_run(tmp_path, dict(HONEST, gpu05=line("a_fake", 99999)))
    assert (b["metric"], b["unit"]) == ("tflops", "TFLOP/s")
    assert b["quote"]["metric"] == "tflops" and b["quote"]["value"] == 662.5 and b["quote"]["n"] == 4
    assert {n["host"]: n["status"] for n in b["not_run"]} == {"gpu05": "no_figure"}
    assert "printed no tflops figure (it printed a_fake)" in b["not_run"][0]["why"]
    assert b["metric_chosen_by"] == "printed by 4 of the 5 hosts that ran the benchmark"


def test_the_first_host_does_not_choose_either(tmp_path):
    b = wrapped_run(tmp_path, dict({"gpu00": line("a_fake", 99999) + line("tflops", 1.0)}, **HONEST))
    assert b["metric"] == "tflops" and b["quote"]["value"] == 662.0
    assert [o["host"] for o in b["outliers"]] == ["gpu00"]  # its own tflops is only an outlier


def test_a_name_only_some_hosts_print_is_never_quoted(tmp_path):
    b = wrapped_run(tmp_path, {"gpu01": line("x", 1), "gpu02": line("x", 1), "gpu03": line("y", 1),
                               "gpu04": line("y", 1)})
    assert b["metric"] is None and b["quote"]["value"] is None
    assert "no figure name is printed by more than half of the 4 hosts" in b["quote"]["why"]
    assert "--metric NAME=REGEX" in b["quote"]["why"]
    assert {n["status"] for n in b["not_run"]} == {"no_figure"} and len(b["not_run"]) == 4
    assert b["exit_code"] == 6  # the benchmark gave no figure the fleet agrees on


def test_the_operators_metric_is_read_first_and_never_from_a_json_line(tmp_path):
    outputs = {f"gpu0{i}": f"TFLOP/s: {660 + i}\n" for i in range(1, 5)}
    outputs["gpu01"] += line("tflops", 99999)  # a JSON line under the operator's name: ignored
    outputs["gpu05"] = line("tflops", 99999) + line("zzz", 1)  # no match of the operator's regex
    b = wrapped_run(tmp_path, outputs, metrics=[r"tflops=TFLOP/s: ([0-9.]+)"])
    assert b["metric"] == "tflops" and b["metric_chosen_by"] == "--metric"
    assert b["quote"]["value"] == 662.5 and b["quote"]["n"] == 4
    assert {n["host"]: n["status"] for n in b["not_run"]} == {"gpu05": "no_figure"}
    assert figures_from_output(outputs["gpu01"], (TFLOPS,))["tflops"] == {
        "value": 661.0, "unit": None, "source": "--metric"}


def test_the_unit_is_the_majoritys_and_a_host_in_another_unit_has_no_figure(tmp_path):
    b = wrapped_run(tmp_path, dict(HONEST, gpu05=line("tflops", 660000.0, "GFLOP/s")))
    assert b["unit"] == "TFLOP/s" and b["quote"]["value"] == 662.5
    assert b["not_run"] == [{"host": "gpu05", "status": "no_figure", "class": "A",
                             "why": "its tflops is in GFLOP/s, not the fleet's TFLOP/s"}]


def test_the_largest_doubles_are_outliers_not_an_infinite_spread(tmp_path, capsys):
    b = wrapped_run(tmp_path, dict(HONEST, gpu05=line("tflops", 1.7e308), gpu06=line("tflops", -1.7e308)))
    ref = b["classes"][0]
    assert (ref["n"], ref["min"], ref["max"], ref["median"]) == (4, 661.0, 664.0, 662.5)
    assert math.isfinite(ref["spread_pct"]) and ref["spread_pct"] < 1
    assert {o["host"] for o in b["outliers"]} == {"gpu05", "gpu06"}
    assert "is not a measurement" in b["outliers"][0]["evidence"][0]
    assert b["quote"]["value"] == 662.5 and sorted(b["quote"]["outliers"]) == ["gpu05", "gpu06"]


def test_ten_thousand_metric_lines_are_bounded_and_said_to_be_cut():
    spec = WrapSpec(SENT, output_tail=1 << 20)
    doc = copy.deepcopy(PROVENANCE)
    tail = "".join(line(f"m{i}", i) for i in range(10_000))  # ~480 KB: all of it within the tail
    doc["output"] = {"tail": tail, "bytes": len(tail), "truncated": False, "tail_limit_bytes": 65536}
    _, wrap = split_record(doc, spec)
    assert len(wrap["figures"]) == FIGURES_MAX
    assert wrap["figures_dropped"]["names"] == 10_000 - FIGURES_MAX
    assert list(wrap["figures"])[:2] == ["m0", "m1"] and "m9999" not in wrap["figures"]


def test_the_controller_holds_the_output_tail_to_output_tail_whatever_the_host_sends():
    doc = copy.deepcopy(PROVENANCE)
    tail = "é" * 2_000_000 + "\nTFLOP/s: 12\n"  # 4 MB, as a modified agent may send
    doc["output"] = {"tail": tail, "bytes": 10, "truncated": False, "tail_limit_bytes": 1000}
    _, wrap = split_record(doc, WrapSpec(SENT, (TFLOPS,), output_tail=1000))
    out = wrap["provenance"]["output"]
    assert len(out["tail"].encode()) <= 1000 and out["tail"].endswith("TFLOP/s: 12\n")
    assert out["truncated"] is True and out["bytes"] >= len(tail.encode()) and out["tail_limit_bytes"] == 1000
    assert wrap["figures"]["tflops"]["value"] == 12.0


def test_a_report_of_many_listed_hosts_without_a_record_reads_each_file_once(tmp_path, monkeypatch):
    """An interrupted wrapped run: 60 hosts listed, 2 records. Each record is read once (by the
    fleet's load, which keeps its `wrap` section), the manifest twice (the hosts it lists, then the
    operator's --metric), whatever the number of hosts: never once per host (a read per listed
    host would count 58 more; the 3,000 hosts of bench/bench_report.py are for its time, not for
    this count)."""
    import builtins
    import io
    from collections import Counter

    import importlib.util

    from sweep.report.build import build_report

    spec = importlib.util.spec_from_file_location("bench_report", Path(__file__).parents[2] / "bench" / "bench_report.py")
    bench_report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_report)
    write_interrupted = bench_report.write_interrupted

    run = tmp_path / "run"
    write_interrupted(run, 60, 2, 2)
    reads = Counter()  # every file opened for reading (Path.read_bytes and read_text open through io.open)
    real_open = builtins.open

    def opened(file, mode="r", *a, **k):
        if isinstance(file, (str, Path)) and "r" in mode:
            reads[str(Path(file).resolve())] += 1
        return real_open(file, mode, *a, **k)
    real_os_open = os.open

    def os_opened(file, flags, *a, **k):  # the store's bounded reader opens files with os.open (O_NOFOLLOW)
        if isinstance(file, (str, Path)) and not flags & (os.O_DIRECTORY | os.O_WRONLY | os.O_RDWR):
            reads[str(Path(file).resolve())] += 1
        return real_os_open(file, flags, *a, **k)
    monkeypatch.setattr(builtins, "open", opened)
    monkeypatch.setattr(io, "open", opened)
    monkeypatch.setattr(os, "open", os_opened)
    result = build_report([run], tmp_path / "report")
    assert result.summary["benchmark"]["quote"]["n"] == 2 and result.summary["hosts_total"] == 60
    inside = {p: n for p, n in reads.items() if p.startswith(str(run.resolve()))}
    records = {p: n for p, n in inside.items() if "/hosts/" in p}
    assert len(records) == 2 and set(records.values()) == {1}, inside
    assert inside[str((run / "manifest.json").resolve())] <= 2, inside


# --- a forged provenance is a finding, never the quoted figure (issue 37, item 7) ---------------------

def _forged(edit) -> dict:
    doc = copy.deepcopy(PROVENANCE)
    doc["output"] = {"tail": line("tflops", 999999), "bytes": 40, "truncated": False, "tail_limit_bytes": 65536}
    edit(doc)
    assert provenance_problem(doc) is None  # valid against the published schema: only the controller can tell
    return doc


@pytest.mark.parametrize("edit, said", [
    (lambda d: d["command"].update(argv=["rm", "-rf", "/"]), 'command.argv ["rm", "-rf", "/"] is not the command sent'),
    (lambda d: d["agent"].update(version="9.9.9"), "agent.version '9.9.9' is not the agent sent"),
    (lambda d: d["sampler"].update(interval_s=5.0), "sampler.interval_s 5.0 is not the --interval sent (0.2)"),
    (lambda d: d["command"].update(wall_s=3600.0), "command.wall_s 3600 s is longer than the whole SSH session"),
    (lambda d: d["after"]["host"].update(hostname="gpu99"), "the probes name two hosts: 'vm' before, 'gpu99' after"),
])
def test_a_provenance_that_contradicts_the_controller_is_failed_and_its_figure_dropped(edit, said):
    _, wrap = split_record(_forged(edit), WrapSpec(SENT), session_s=60.0)
    assert wrap["status"] == "failed" and wrap["figures"] == {}
    assert said in wrap["why"] and any(said in m for m in wrap["mismatches"])


def test_the_honest_provenance_keeps_its_figure():
    _, wrap = split_record(_forged(lambda d: None), WrapSpec(SENT), session_s=60.0)
    assert wrap["status"] == "ok" and "mismatches" not in wrap and wrap["figures"]["tflops"]["value"] == 999999


def test_a_forged_host_is_never_the_fleets_quoted_figure(tmp_path):
    """The issue's host: valid provenance, argv rm -rf /, another hostname, 999999 TFLOP/s."""
    from fleet_variants import record, write_run
    from sweep.report.build import build_report

    spec = WrapSpec(SENT)
    records = []
    for name, tail in dict(HONEST, gpu05=None).items():
        if tail is None:
            doc = _forged(lambda d: (d["command"].update(argv=["rm", "-rf", "/"]),
                                     d["after"]["host"].update(hostname="gpu01")))
        else:
            doc = copy.deepcopy(PROVENANCE)
            doc["output"] = {"tail": tail, "bytes": len(tail), "truncated": False, "tail_limit_bytes": 65536}
        health, wrap = split_record(doc, spec, session_s=60.0)
        health["host"]["hostname"] = name
        records.append(dict(record(name, health), wrap=wrap))
    manifest = {"format": "sweep-run", "record_version": 1, "state": "complete",
                "hosts": [r["host"] for r in records], "options": {"wrap": spec.to_dict()}}
    run = write_run(tmp_path / "run", records, manifest)
    build_report([run], run / "report")
    summary = (run / "report" / "summary.json").read_text()
    bench = json.loads(summary)["benchmark"]
    assert "999999" not in summary and bench["quote"]["value"] == 662.5 and bench["quote"]["n"] == 4
    assert bench["outliers"] == [] and [n["host"] for n in bench["not_run"]] == ["gpu05"]
    assert "command.argv" in bench["not_run"][0]["why"]


# --- the command and the figure names the operator gave, read from the manifest (issue 39) -----------

def test_the_command_shown_is_the_one_sent_never_a_hosts_claim(tmp_path):
    """The first host's provenance names another argv: summary.json's command is still the manifest's."""
    def claim(host, doc):
        if host == "gpu00":
            doc["command"]["argv"] = ["rm", "-rf", "/"]
    b = wrapped_run(tmp_path, dict({"gpu00": line("tflops", 660.0)}, **HONEST), edit=claim)
    assert b["command"] == list(SENT)


@pytest.mark.parametrize("command", ["absent", None, "python3 bench.py", [], ["python3", 7]])
def test_without_a_usable_command_in_the_manifest_the_command_is_the_records(tmp_path, command):
    """An older manifest (no command, or not a list of strings): the command the hosts ran, from their
    records."""
    options = {k: v for k, v in WrapSpec(SENT).to_dict().items() if k != "command"}
    if command != "absent":
        options["command"] = command
    b = wrapped_run(tmp_path, HONEST, options=options)
    assert b["command"] == list(SENT) and b["quote"]["value"] == 662.5


def test_without_a_command_in_the_manifest_a_forged_hosts_argv_is_never_the_one_shown(tmp_path):
    def claim(host, doc):
        if host == "gpu00":
            doc["command"]["argv"] = ["rm", "-rf", "/"]
    options = {k: v for k, v in WrapSpec(SENT).to_dict().items() if k != "command"}
    b = wrapped_run(tmp_path, dict({"gpu00": line("tflops", 660.0)}, **HONEST), options=options, edit=claim)
    assert b["command"] == list(SENT) and [n["host"] for n in b["not_run"]] == ["gpu00"]


def test_the_first_run_folders_command_is_the_one_shown(tmp_path):
    first = write_wrapped(tmp_path / "a", {"gpu01": line("tflops", 660.0), "gpu02": line("tflops", 661.0)},
                          options=dict(WrapSpec(SENT).to_dict(), command=["bench", "--first"]))
    second = write_wrapped(tmp_path / "b", {"gpu03": line("tflops", 662.0), "gpu04": line("tflops", 663.0)},
                           options=dict(WrapSpec(SENT).to_dict(), command=["bench", "--second"]))
    assert report_of([first, second], tmp_path / "r")["command"] == ["bench", "--first"]


@pytest.mark.parametrize("metrics", [None, "tflops=x", [7, "t flops=TFLOP/s: ([0-9.]+)", "=([0-9.]+)"]])
def test_metrics_in_the_manifest_that_are_no_names_leave_the_majoritys_figure(tmp_path, metrics):
    b = wrapped_run(tmp_path, HONEST, options=dict(WrapSpec(SENT).to_dict(), metrics=metrics))
    assert (b["metric"], b["metric_chosen_by"]) == ("tflops", "printed by 4 of the 4 hosts that ran the benchmark")


def test_a_bad_name_before_a_good_one_in_the_manifest_is_passed_over(tmp_path):
    outputs = {f"gpu0{i}": f"TFLOP/s: {660 + i}\n" for i in range(1, 5)}
    metrics = ["t flops=x", r"tflops=TFLOP/s: ([0-9.]+)", r"tflops=other ([0-9.]+)"]
    b = wrapped_run(tmp_path, outputs, metrics=[r"tflops=TFLOP/s: ([0-9.]+)"],
                    options=dict(WrapSpec(SENT).to_dict(), metrics=metrics))
    assert (b["metric"], b["metric_chosen_by"], b["quote"]["value"]) == ("tflops", "--metric", 662.5)


def test_a_report_over_a_metric_run_and_a_json_line_run_takes_the_operators_figure_only(tmp_path):
    """One run folder with --metric (two hosts, the regex gives no unit), one without (three hosts
    printing a JSON line of that name in TFLOP/s): the report over both quotes the operator's figure in
    the operator's unit (none), and the JSON-line hosts have no figure, said so."""
    ran = write_wrapped(tmp_path / "a", {"gpu01": "TFLOP/s: 660\n", "gpu02": "TFLOP/s: 662\n"},
                        metrics=[r"tflops=TFLOP/s: ([0-9.]+)"])
    lines = write_wrapped(tmp_path / "b", {f"gpu0{i}": line("tflops", 99999.0) for i in range(3, 6)})
    b = report_of([ran, lines], tmp_path / "r")
    assert (b["metric"], b["metric_chosen_by"], b["unit"]) == ("tflops", "--metric", None)
    assert (b["quote"]["value"], b["quote"]["n"]) == (661.0, 2)
    assert [(n["host"], n["status"]) for n in b["not_run"]] == [(f"gpu0{i}", "no_figure") for i in range(3, 6)]
    assert b["not_run"][0]["why"] == "its tflops is from a JSON line, not the operator's --metric"


# --- classes, never pooled, and the benchmark's own exit code (issue 39) ------------------------------

def _driver(version, hosts):
    """A provenance edit: the hosts `hosts` probe driver `version` before and after (another class)."""
    def edit(host, doc):
        if host in hosts:
            for probe in ("before", "after"):
                doc[probe]["driver"]["version"] = version
    return edit


def test_two_classes_keep_each_its_own_outlier_and_are_never_pooled(tmp_path):
    outputs = {f"gpu0{i}": line("tflops", 660.0 + i) for i in range(1, 5)}
    outputs.update(gpu05=line("tflops", 500.0), gpu06=line("tflops", 700.0), gpu07=line("tflops", 701.0),
                   gpu08=line("tflops", 702.0), gpu09=line("tflops", 560.0))
    b = wrapped_run(tmp_path, outputs, edit=_driver("580.95.05", {"gpu06", "gpu07", "gpu08", "gpu09"}))
    assert [(c["id"], c["n"], c["median"], c["reference"]) for c in b["classes"]] == [
        ("A", 5, 662.0, True), ("B", 4, 700.5, False)]
    assert [(o["host"], o["class"]) for o in b["outliers"]] == [("gpu05", "A"), ("gpu09", "B")]
    assert b["hosts_with_figure"] == 9 and b["hosts_wrapped"] == 9
    assert b["not_pooled"] == ("figures from 2 comparability classes are not pooled into one number: class B "
                               "differs in Driver (580.95.05 vs 580.159.04). A median across them would mix "
                               "machines that are not the same machine.")
    assert (b["exit_code"], b["exit_meaning"]) == (
        3, "the figures come from more than one comparability class: no pooled number")
    assert (b["quote"]["class"], b["quote"]["value"], b["quote"]["outliers"]) == ("A", 662.0, ["gpu05"])


def _command_edit(**by_host):
    def edit(host, doc):
        doc["command"].update(by_host.get(host, {}))
    return edit


@pytest.mark.parametrize("hosts,code", [
    ({}, 0),
    ({"gpu04": {"refused": "broken contract power"}}, 7),
    ({"gpu04": {"exit_code": 3}}, 6),
    ({"gpu04": {"timed_out": True, "timeout_s": 90.0}}, 6),
    ({"gpu04": {"refused": "broken contract power"}, "gpu03": {"exit_code": 3}}, 6),  # a failure outranks a refusal
])
def test_the_benchmarks_exit_code_a_failure_before_a_refusal_before_one_class(tmp_path, hosts, code):
    from sweep import exitcodes

    b = wrapped_run(tmp_path, HONEST, edit=_command_edit(**hosts))
    assert (b["exit_code"], b["exit_meaning"]) == (code, exitcodes.MEANING[code])
    status = {"refused": "refused", "exit_code": "failed", "timed_out": "timed_out"}
    assert sorted((n["host"], n["status"]) for n in b["not_run"]) == sorted(
        (h, status[next(iter(edit))]) for h, edit in hosts.items())
    # a host whose benchmark did not end well printed its figure all the same: it is in no median
    assert b["hosts_with_figure"] == b["quote"]["n"] == 4 - len(hosts)


def test_a_host_printing_nothing_is_a_failed_benchmark(tmp_path):
    many = "".join(line(f"m{i}", 1.0) for i in range(7))
    b = wrapped_run(tmp_path, dict(HONEST, gpu05="step 100 loss 2.31\n", gpu06=many))
    assert [(n["host"], n["status"], n["why"]) for n in b["not_run"]] == [
        ("gpu05", "no_figure", "the command printed no figure: give --metric NAME=REGEX, or print a JSON line "
                               '{"metric": NAME, "value": NUMBER}'),
        ("gpu06", "no_figure", "printed no tflops figure (it printed m0, m1, m2, m3, m4)")]  # five names at most
    assert b["exit_code"] == 6


def test_the_fleets_unit_is_the_one_most_hosts_give_that_figure_in_not_that_of_other_names(tmp_path):
    others = line("lat", 1.0, "ms") + line("img", 2.0, "images/s") + line("tok", 3.0, "tokens/s")
    b = wrapped_run(tmp_path, {h: out + others for h, out in HONEST.items()})
    assert (b["metric"], b["unit"], b["quote"]["value"]) == ("tflops", "TFLOP/s", 662.5)


def test_the_operators_unit_is_the_one_its_regex_captures(tmp_path):
    outputs = {f"gpu0{i}": f"throughput: {300 + i} samples/s\n" + line("tflops", 660.0) for i in range(1, 5)}
    b = wrapped_run(tmp_path, outputs, metrics=[r"rate=throughput: ([0-9.]+) (samples/s)"])
    assert (b["metric"], b["unit"], b["quote"]["value"]) == ("rate", "samples/s", 302.5)


def test_when_no_figure_name_is_agreed_each_host_says_why_as_the_quote_does(tmp_path):
    b = wrapped_run(tmp_path, {"gpu01": line("x", 1), "gpu02": line("x", 1), "gpu03": line("y", 1),
                               "gpu04": line("y", 1)})
    assert {n["why"] for n in b["not_run"]} == {b["quote"]["why"]} and b["metric"] is None


# --- a class's table, as summary.json lists it (issue 39) --------------------------------------------

def test_a_class_table_lists_its_hosts_lowest_first_each_with_status_deviation_envelope_and_evidence(tmp_path):
    outputs = {"gpu01": line("tflops", 664.0), "gpu02": line("tflops", 500.0), "gpu03": line("tflops", 662.0),
               "gpu04": line("tflops", 661.0), "gpu05": "no figure here\n", "gpu06": line("tflops", 1.7e308)}
    b = wrapped_run(tmp_path, outputs)
    (table,) = b["classes"]
    rows = {r["host"]: r for r in table["hosts"]}
    assert [r["host"] for r in table["hosts"]] == ["gpu02", "gpu04", "gpu03", "gpu01", "gpu06", "gpu05"]
    assert (table["n"], table["median"], table["min"], table["max"]) == (4, 661.5, 500.0, 664.0)
    assert table["spread_pct"] == round(100 * 164.0 / 661.5, 2) == 24.79
    assert [(h, rows[h]["deviation_pct"]) for h in ("gpu02", "gpu04", "gpu01")] == [
        ("gpu02", round(100 * (500.0 - 661.5) / 661.5, 2)), ("gpu04", -0.08), ("gpu01", 0.38)]
    assert rows["gpu02"]["deviation_pct"] == -24.41
    assert rows["gpu06"]["deviation_pct"] is None and rows["gpu06"]["outlier"]  # no deviation of a non-measurement
    assert {h: rows[h]["status"] for h in rows} == dict.fromkeys(["gpu01", "gpu02", "gpu03", "gpu04", "gpu06"], "ok") | {
        "gpu05": "no_figure"}
    assert rows["gpu04"]["envelope"] == PROVENANCE["verdict"]["summary"]
    assert rows["gpu04"]["evidence"] == [] and rows["gpu05"]["evidence"] == []
    assert rows["gpu02"]["evidence"] == [
        "nothing in the envelope explains it (power cap, clocks, processes and both probes match its class): "
        "look at the benchmark or its inputs"]


def test_two_figures_have_a_spread_and_no_outlier(tmp_path):
    b = wrapped_run(tmp_path, {"gpu01": line("tflops", 600.0), "gpu02": line("tflops", 660.0)})
    (table,) = b["classes"]
    assert (table["n"], table["median"], table["spread_pct"]) == (2, 630.0, round(100 * 60 / 630, 2))
    assert b["outliers"] == []


def test_an_outliers_class_is_the_hosts_with_a_figure_not_those_without(tmp_path):
    """The SW power cap an outlier is judged against is its class's hosts that gave a figure: two
    hosts without one, capped in half their samples, do not move its class's 10%."""
    def cap(host, doc):
        doc["verdict"]["sw_power_cap_fraction"] = {"gpu01": 0.35, "gpu04": 0.5, "gpu05": 0.5}.get(host, 0.1)
    outputs = {"gpu01": line("tflops", 500.0), "gpu02": line("tflops", 660.0), "gpu03": line("tflops", 661.0),
               "gpu04": "nothing\n", "gpu05": "nothing\n"}
    b = wrapped_run(tmp_path, outputs, edit=cap)
    assert [o["host"] for o in b["outliers"]] == ["gpu01"]
    assert b["outliers"][0]["evidence"] == ["SW power cap in 35% of samples (its class: 10%)"]


def test_the_quote_names_its_records_and_how_its_figure_was_chosen(tmp_path):
    b = wrapped_run(tmp_path, HONEST)
    q = b["quote"]
    assert q["metric_chosen_by"] == b["metric_chosen_by"] == "printed by 4 of the 4 hosts that ran the benchmark"
    assert [Path(r).name for r in q["records"]] == [f"{h}.json" for h in q["hosts"]] and len(q["records"]) == 4
    assert all(Path(r).is_file() for r in q["records"])


def test_a_reference_class_without_a_figure_quotes_nothing_and_says_why(tmp_path):
    outputs = {"gpu01": "nothing\n", "gpu02": "nothing\n", "gpu03": "nothing\n",
               "gpu04": line("tflops", 660.0), "gpu05": line("tflops", 661.0)}
    b = wrapped_run(tmp_path, outputs, metrics=[r"tflops=TFLOP/s: ([0-9.]+)"],
                    edit=_driver("580.95.05", {"gpu04", "gpu05"}))
    assert [(c["id"], c["n"], c["reference"]) for c in b["classes"]] == [("A", 0, True), ("B", 0, False)]
    assert b["quote"] == {"value": None, "why": "no host of the reference class ran the benchmark to a figure"}


def test_three_classes_each_say_what_keeps_them_apart(tmp_path):
    outputs = {f"gpu0{i}": line("tflops", 660.0 + i) for i in range(1, 8)}
    edits = [_driver("580.95.05", {"gpu04", "gpu05"}), _driver("575.57.08", {"gpu06", "gpu07"})]
    b = wrapped_run(tmp_path, outputs, edit=lambda h, d: [e(h, d) for e in edits])
    assert b["not_pooled"] == (
        "figures from 3 comparability classes are not pooled into one number: class B differs in Driver "
        "(580.95.05 vs 580.159.04); class C differs in Driver (575.57.08 vs 580.159.04). A median across them "
        "would mix machines that are not the same machine.")


def test_a_fleet_where_no_host_can_run_a_benchmark_quotes_nothing_and_says_so(tmp_path):
    def blocked(host, doc):  # the probe before found the driver broken: the agent refused the command
        doc["before"]["lowest_broken"] = "driver"
        doc["command"]["refused"] = "broken contract driver"
    b = wrapped_run(tmp_path, HONEST, metrics=[r"tflops=TFLOP/s: ([0-9.]+)"], edit=blocked)
    assert b["classes"] == [] and b["quote"] == {"value": None, "why": "no host can run a benchmark"}
    assert {n["status"] for n in b["not_run"]} == {"refused"} and b["exit_code"] == 7


def test_a_host_whose_operator_figure_is_in_another_unit_is_told_its_unit(tmp_path):
    outputs = {f"gpu0{i}": f"throughput: {300 + i} samples/s\n" for i in range(1, 5)}
    outputs["gpu05"] = "throughput: 9000 images/s\n"
    b = wrapped_run(tmp_path, outputs, metrics=[r"rate=throughput: ([0-9.]+) (\S+)"])
    assert (b["metric"], b["unit"], b["quote"]["value"]) == ("rate", "samples/s", 302.5)
    assert b["not_run"] == [{"host": "gpu05", "status": "no_figure", "class": "A",
                             "why": "its rate is in images/s, not the fleet's samples/s"}]


def test_without_a_command_in_the_manifest_records_that_name_none_are_passed_over(tmp_path):
    """Hand-edited records (the store reads them all the same): a provenance that is no object, a command
    that is no object, an empty argv; the first record naming a command names the fleet's."""
    options = {k: v for k, v in WrapSpec(SENT).to_dict().items() if k != "command"}
    run = write_wrapped(tmp_path / "run", dict({"gpu00": line("tflops", 1.0), "gpu01": line("tflops", 2.0),
                                                "gpu02": line("tflops", 3.0)}, **HONEST), options=options)
    for host, edit in (("gpu00", lambda w: w.update(provenance="junk", figures="junk")),
                       ("gpu01", lambda w: (w["provenance"].update(command="junk"), w.update(figures={"tflops": 5}))),
                       ("gpu02", lambda w: w["provenance"]["command"].update(argv=[]))):
        path = run / "hosts" / f"{host}.json"
        rec = json.loads(path.read_text())
        edit(rec["wrap"])
        path.write_text(json.dumps(rec))
    b = report_of([run], tmp_path / "r")
    assert b["command"] == list(SENT)
    assert [(n["host"], n["why"]) for n in b["not_run"]] == [("gpu00", "printed no tflops figure"),
                                                             ("gpu01", "printed no tflops figure")]


def test_a_folder_without_a_manifest_before_a_metric_run_leaves_the_operators_metric_read(tmp_path):
    bare = write_wrapped(tmp_path / "a", {"gpu01": "TFLOP/s: 660\n", "gpu02": "TFLOP/s: 661\n"})
    (bare / "manifest.json").unlink()  # records only: nothing the operator asked is known of it
    ran = write_wrapped(tmp_path / "b", {"gpu03": "TFLOP/s: 662\n", "gpu04": "TFLOP/s: 663\n"},
                        metrics=[r"tflops=TFLOP/s: ([0-9.]+)"])
    b = report_of([bare, ran], tmp_path / "r")
    assert (b["metric"], b["metric_chosen_by"], b["quote"]["value"]) == ("tflops", "--metric", 662.5)


def test_one_figure_has_no_spread(tmp_path):
    b = wrapped_run(tmp_path, {"gpu01": line("tflops", 660.0), "gpu02": "nothing\n"})
    (table,) = b["classes"]
    assert (table["n"], table["median"], table["spread_pct"]) == (1, 660.0, None)


def test_an_operators_regex_may_hold_an_equals_sign(tmp_path):
    outputs = {f"gpu0{i}": f"TFLOP/s={660 + i}\n" for i in range(1, 5)}
    b = wrapped_run(tmp_path, outputs, metrics=[r"tflops=TFLOP/s=([0-9.]+)"])
    assert (b["metric"], b["metric_chosen_by"], b["quote"]["value"]) == ("tflops", "--metric", 662.5)
    assert (b["metrics"], b["metrics_not_listed"]) == (["tflops"], 0)


def test_when_no_host_printed_a_figure_the_quote_says_so(tmp_path):
    b = wrapped_run(tmp_path, {"gpu01": "loss 2.3\n", "gpu02": "loss 2.2\n", "gpu03": "loss 2.1\n"})
    assert b["metric"] is None and b["quote"] == {"value": None, "why": "no host printed a figure"}


def test_a_unit_no_more_than_half_of_the_hosts_give_is_not_the_fleets(tmp_path):
    two_two = {"gpu01": line("tflops", 660.0), "gpu02": line("tflops", 661.0),
               "gpu03": line("tflops", 662.0, "TFLOPS"), "gpu04": line("tflops", 663.0, "TFLOPS")}
    assert wrapped_run(tmp_path, two_two, folder="a")["unit"] is None
    # two units, two hosts each: no figure is compared (a median of 660 TFLOP/s and 662000 GFLOP/s was quoted)
    mixed = dict(two_two, gpu03=line("tflops", 662000.0, "GFLOP/s"), gpu04=line("tflops", 663000.0, "GFLOP/s"))
    b = wrapped_run(tmp_path, mixed, folder="m")
    assert (b["unit"], b["quote"]["value"], b["hosts_with_figure"], b["exit_code"]) == (None, None, 0, 6)
    assert {(n["status"], n["why"]) for n in b["not_run"]} == {(
        "no_figure", "the hosts give tflops in no one unit (none by more than half of them): no tflops figure is "
        "compared")} and len(b["not_run"]) == 4
    three_one = dict(two_two, gpu04=line("tflops", 663.0))
    b = wrapped_run(tmp_path, three_one, folder="b")
    assert b["unit"] == "TFLOP/s" and [n["host"] for n in b["not_run"]] == ["gpu03"]


def test_a_class_that_differs_in_two_keys_names_both(tmp_path):
    def older(host, doc):
        if host in ("gpu04", "gpu05"):
            for probe in ("before", "after"):
                doc[probe]["driver"].update(version="580.95.05", cuda_driver_version="12.9")
    b = wrapped_run(tmp_path, {f"gpu0{i}": line("tflops", 660.0 + i) for i in range(1, 6)}, edit=older)
    assert "class B differs in Driver (580.95.05 vs 580.159.04), CUDA (driver) (CUDA 12.9 vs CUDA 13.0). " in (
        b["not_pooled"])
