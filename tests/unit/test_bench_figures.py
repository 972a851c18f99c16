"""`sweep run --wrap`'s figures: read from output a host sends (hostile until validated), and bad input."""
import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from sweep.cli import main
from sweep.collect.wrap import Metric, WrapSpec, budget, figures_from_output, provenance_problem
from sweep.errors import ConfigError

TFLOPS = Metric.parse(r"tflops=TFLOP/s: ([0-9.eE+-]+)")


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
