"""Generated hostile health.json documents through the real record path: no host takes the others down.

Each example is one host's stdout, built from a real H200 health.json with generated changes:
nesting around and far beyond Python's recursion limit, every JSON number form (overflow, NaN,
Infinity, huge integers, subnormals, negative zero), null in every numeric field, hostile text
(formula prefixes, control characters, bidi overrides, lone surrogates, markup) in every string
field. It goes through what a sweep does with a host's output (strict parse, depth bound, schema
check, the record written by the run's own writer) and what `sweep report` does with the run
folder (load, compare, render report.html, hosts.csv, fleet.csv, summary.json) beside a healthy
host. Every example must end as one record per host and a rendered report, in strict JSON; no
exception may escape.

Example counts are kept modest (see SETTINGS) so that the suite stays fast on two cores.
"""
from __future__ import annotations

import copy
import csv
import functools
import json
import math
import re
import time
from pathlib import Path

import pytest

from hypothesis import HealthCheck, example, given, settings, strategies as st

from sweep.collect.engines.base import outcome_of_output
from sweep.schema import health_problem
from sweep.errors import ExpectationsWarning
from sweep.collect.run import keep_record
from sweep.failures import FAILURE_CLASSES
from sweep.inventory.model import Host
from sweep.report.build import build_report
from sweep.store import RunFolder
from sweep.strictjson import MAX_DEPTH

from helpers import read_records

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "h200"
BASES = {name: json.loads((FIXTURES / f"{name}.health.json").read_text())
         for name in ("idle", "fault", "load", "foreign")}
RECORD_PATH = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
REPORT_PATH = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e999999", "-1e999999", "1E400", "-2.5e+309"]
HUGE_INTS = ["123456789012345678901234567890", "-9223372036854775809", "9" * 5000]
FINITE = ["0", "-0", "-0.0", "0e0", "1e2", "1E+2", "-12", "4.9e-324", "1e-400", "1.7976931348623157e308",
          "9223372036854775807", "-9223372036854775808", "700.0", "3.14159"]
NUMBER_FORMS = st.sampled_from(["null", *NON_FINITE, *HUGE_INTS, *FINITE]) | \
    st.floats(allow_nan=False, allow_infinity=False).map(repr) | st.integers().map(str)
# formula prefixes, controls, bidi overrides, markup, a JSON escape of a lone surrogate
HOSTILE_TEXT = st.one_of(
    st.sampled_from(["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(1)", "\t=1", "\r=1", "-12", "=",
                     "a\x00b", "\x1b[31mred\x1b[0m", "\u202eevil\u202c", "\u2066x\u2069", "<script>alert(1)</script>",
                     "", " ", "\ud800", "\udfff\ud800", "\u0085\u2028", "{{ x }}", "%s%n", "x" * 5000]),
    st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from("=+-@\t\r\x00\u202a\u202e\u2067"), max_size=40),
)
DEPTHS = st.sampled_from([MAX_DEPTH - 7, MAX_DEPTH - 6, MAX_DEPTH, MAX_DEPTH + 1, 900, 990, 999, 1000, 1001, 1100,
                          5000, 100_000]) | st.integers(1, 1500)


def leaves(node, path=()):
    """(path, value) of every scalar in a document."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, path + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from leaves(value, path + (index,))
    else:
        yield path, node


def nullable(doc) -> list[tuple]:
    """The numeric fields of `doc` that the published schema lets be null (each tried alone)."""
    found = []
    for path, value in leaves(doc):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            trial = copy.deepcopy(doc)
            put(trial, path, None)
            if health_problem(trial) is None:
                found.append(path)
    return found


def section(path) -> tuple:
    """The object a field sits in, GPUs and list items alike: ('gpus', 'power') for every GPU's power."""
    return tuple(p for p in path[:-1] if not isinstance(p, int))


def put(doc, path, value):
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def dotted(path) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


@functools.cache
def nullable_of(base: str) -> tuple:
    """`nullable` of a base document, worked out when a test first draws from it, not when the module is
    collected (5 s of CPU that every pytest-xdist worker would pay, though one runs these tests)."""
    return tuple(nullable(BASES[base]))


@st.composite
def hostile_output(draw):
    """(stdout bytes, what was done): a real health.json with generated hostile parts, as raw JSON text."""
    base = draw(st.sampled_from(sorted(BASES)))
    doc = copy.deepcopy(BASES[base])
    raw: dict[str, str] = {}  # placeholder -> raw JSON text put in its place

    def token(text: str) -> str:
        mark = f"@@RAW{len(raw)}@@"
        raw[mark] = text
        return mark

    numeric = [(p, v) for p, v in leaves(doc) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    strings = [(p, v) for p, v in leaves(doc) if isinstance(v, str)]
    done = {"numbers": {}, "depth": None}
    mode = draw(st.sampled_from(["every", "sections", "some"]))
    if mode != "some":  # null (or what reads as null) in every numeric field the schema lets be null,
        form = draw(st.sampled_from(["null", "NaN", "1e999999", "-Infinity"]))  # or in whole sections
        sections = {section(p) for p in nullable_of(base)}
        chosen = sections if mode == "every" else set(draw(st.lists(st.sampled_from(sorted(sections)), min_size=1,
                                                                    max_size=3)))
        nulled = [p for p in nullable_of(base) if section(p) in chosen]
        for path in nulled:
            put(doc, path, token(form))
            done["numbers"][dotted(path)] = form
        numeric = [(p, v) for p, v in numeric if p not in nulled]
    for path, _ in draw(st.lists(st.sampled_from(numeric), max_size=12)) if numeric else ():
        form = draw(NUMBER_FORMS)
        put(doc, path, token(form))
        done["numbers"][dotted(path)] = form
    for path, _ in draw(st.lists(st.sampled_from(strings), max_size=12)):
        text = draw(HOSTILE_TEXT)
        put(doc, path, token(json.dumps(text, ensure_ascii=True)))  # "\ud800" stays a lone-surrogate escape
    if draw(st.booleans()):
        depth = draw(DEPTHS)
        contract = draw(st.integers(0, len(doc["contracts"]) - 1))
        doc["contracts"][contract]["evidence"]["nested"] = token("[" * depth + "]" * depth)
        done["depth"] = depth + 3  # the document, contracts, the contract, evidence hold the list
    text = json.dumps(doc, ensure_ascii=False)
    for mark, value in reversed(raw.items()):  # @@RAW1@@ before @@RAW10@@ would not do
        text = text.replace(f'"{mark}"', value)
    return text.encode("utf-8", "surrogatepass"), done


def host(name: str) -> Host:
    return Host(name=name, address=f"{name}.dc1", port=22, user="ops", key_file=None, python="python3",
                ssh_common_args=None, proxy_jump=None, groups=("rack_a",), vars={}, settings={})


def strict(text: str):
    """json.loads that refuses NaN and Infinity, as any RFC 8259 reader does."""
    def refuse(name):
        raise ValueError(f"non-standard JSON token {name}")
    return json.loads(text, parse_constant=refuse)


def sweep_one(folder: RunFolder, name: str, out: bytes, exit_status: int = 0) -> dict:
    """What a sweep does with one host's stdout: judge it, keep its record."""
    outcome = outcome_of_output(host(name), time.time(), out, exit_status, "")
    kept = keep_record(folder, outcome)
    record = read_records(folder.path)[name]
    assert record["status"] == kept.status
    return record


def new_run(tmp: Path) -> RunFolder:
    folder = RunFolder.create(tmp)
    folder.write_manifest({"format": "sweep-run", "record_version": 1, "state": "complete",
                           "hosts": ["hostile", "healthy"], "sessions": []})
    return folder


def unknown_number(form: str) -> bool:
    """Whether the JSON number `form` has no exact 64-bit value: not a finite double, or an integer
    outside int64 (the record then says so and holds null)."""
    if form == "null":
        return False
    if form in ("NaN", "Infinity", "-Infinity"):
        return True
    if re.fullmatch(r"-?[0-9]+", form):
        return len(form) > 4000 or not -2 ** 63 <= int(form) < 2 ** 63
    return not math.isfinite(float(form))


def check_record(record: dict, done: dict) -> None:
    assert record["status"] in ("ok", "failed")
    if record["status"] == "failed":
        assert record["failure"]["class"] in FAILURE_CLASSES
        assert record["failure"]["message"].startswith("hostile: ")
    if done["depth"] is not None and done["depth"] > MAX_DEPTH:
        assert record["status"] == "failed" and record["failure"]["class"] == "agent_error"
        assert "nests" in record["failure"]["message"] and record["exit_status"] == 0
    if record["status"] == "ok":
        unknown = {u["path"]: u["text"] for u in record["unknown_numbers"]}
        for path, form in done["numbers"].items():
            assert (path in unknown) == unknown_number(form), (path, form)
        assert all(not isinstance(v, float) or math.isfinite(v) for _, v in leaves(record["health"]))


@RECORD_PATH
@given(hostile_output())
def test_every_hostile_output_ends_as_one_strict_record(tmp_path_factory, case):
    out, done = case
    folder = new_run(tmp_path_factory.mktemp("run"))
    record = sweep_one(folder, "hostile", out)
    check_record(record, done)
    on_disk = read_records(folder.path)
    assert list(on_disk) == ["hostile"]
    strict((folder.hosts_dir / "hostile.json").read_text(encoding="utf-8"))


@REPORT_PATH
@given(hostile_output(), st.sampled_from([*sorted(BASES), "twin"]))
def test_a_hostile_host_never_stops_the_report_for_the_others(tmp_path_factory, case, neighbour):
    """Beside a healthy host, or beside its twin (then every host of the fleet holds the same values)."""
    out, done = case
    folder = new_run(tmp_path_factory.mktemp("run"))
    check_record(sweep_one(folder, "hostile", out), done)
    healthy = out if neighbour == "twin" else json.dumps(BASES[neighbour]).encode()
    sweep_one(folder, "healthy", healthy)
    result = build_report([folder.path], folder.path / "report")
    assert set(read_records(folder.path)) == {"hostile", "healthy"}
    summary = strict((folder.path / "report" / "summary.json").read_text(encoding="utf-8"))
    assert summary["hosts_total"] == 2
    html = (folder.path / "report" / "report.html").read_text(encoding="utf-8")
    assert "healthy" in html and "\u202e" not in html and "\u2066" not in html
    with open(folder.path / "report" / "hosts.csv", newline="", encoding="utf-8") as fh:
        rows = {row["host"]: row for row in csv.DictReader(fh)}
    assert set(rows) == {"hostile", "healthy"}
    assert rows["healthy"]["status"] == ("ok" if neighbour != "twin" else rows["hostile"]["status"])
    for name in ("hosts.csv", "fleet.csv"):
        for cells in csv.reader(open(folder.path / "report" / name, newline="", encoding="utf-8")):
            for cell in cells:
                assert not cell[:1] in ("=", "+", "@", "\t", "\r") and "\x00" not in cell
                assert not cell.startswith("-") or _number(cell), cell
    assert result.exit_code in (0, 1, 3, 4)


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


# --- every JSON type in every field the controller reads (issue 23, item 4) -----------------------
#
# The free-form parts (load, contract evidence) and the provenance of a wrapped run get generated
# values of every JSON type, alone or as whole sections. Each host's output goes through arrival
# (the schema and the controller's own check), then every fleet-wide command runs on the run
# folder beside a healthy host: report (with --expect), export prometheus, history, audit, diff.
# A value the controller cannot read is refused at arrival (bad_output); none may crash a command.

from sweep.collect.engines.base import Outcome  # noqa: E402
from sweep.collect.outcome import read_agent_output  # noqa: E402
from sweep.failures import HostFailure  # noqa: E402
from sweep.collect.wrap import WrapSpec  # noqa: E402
from sweep.cli import main as sweep_main  # noqa: E402
from sweep.export.prometheus import metrics_text  # noqa: E402
from sweep.history import build_history  # noqa: E402

EXPECT = Path(__file__).resolve().parents[2] / "inventories" / "expectations.example.yml"
PROVENANCE = json.loads((FIXTURES / "matmul.provenance.json").read_text())
PROVENANCE["output"] = {"tail": '{"metric": "tflops", "value": 660, "unit": "TFLOP/s"}\n', "bytes": 54,
                        "truncated": False, "tail_limit_bytes": 65536}
# the hostile host's benchmark figure is far below its two healthy peers': an outlier, so the report
# reads its whole envelope for the evidence
OUTLIER = copy.deepcopy(PROVENANCE)
OUTLIER["output"]["tail"] = '{"metric": "tflops", "value": 300, "unit": "TFLOP/s"}\n'
COMMANDS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                             HealthCheck.function_scoped_fixture])
ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["", "abc", "=1", "\u202e", "0", "1e999"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ["gpu", "index", "pid", "name", "from_s", "sm_mhz_median", "what", "x"]), inner, max_size=3),
    max_leaves=6)


def read_paths(doc, prefixes) -> list[tuple]:
    """Every path (leaf or container) under the given top-level sections of `doc`."""
    found = []

    def walk(node, path):
        found.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + (k,))
        elif isinstance(node, list):
            for i, v in enumerate(node[:1]):  # the first item stands for the others (fewer paths, more hits)
                walk(v, path + (i,))
    for prefix in prefixes:
        node = doc
        for key in prefix:
            node = node[key]
        walk(node, prefix)
    return found


LOAD_PATHS = read_paths(BASES["load"], [("load",), *[("contracts", i, "evidence") for i in range(len(
    BASES["load"]["contracts"]))]])
WRAP_PATHS = read_paths(PROVENANCE, [("command",), ("verdict",), ("intervals",), ("samples",), ("sampler",),
                                     ("output",)]) if "intervals" in PROVENANCE else \
    read_paths(PROVENANCE, [("command",), ("verdict",), ("samples",), ("sampler",), ("output",)])


@st.composite
def hostile_sections(draw, base, paths):
    doc = copy.deepcopy(base)
    for path in draw(st.lists(st.sampled_from(paths), min_size=1, max_size=4)):
        try:
            put(doc, path, draw(ANY_JSON))
        except (KeyError, IndexError, TypeError):  # an earlier change replaced what held this path
            pass
    if "intervals" not in base and draw(st.booleans()):
        doc["intervals"] = [{"gpu": 0, "what": "hw_slowdown", "from_s": draw(ANY_JSON), "to_s": draw(ANY_JSON),
                             "samples": 1}]
    return doc


def arrive(folder: RunFolder, name: str, doc: dict, wrap: WrapSpec | None) -> dict:
    """One host's output through arrival and the run's record writer, as `sweep run` does."""
    out = json.dumps(doc).encode()
    # a session as long as the fixture's command ran (the controller holds wall_s to the session's length)
    outcome = Outcome(host=host(name), status="ok", attempts=1, started_at=time.time() - 60, ended_at=time.time(),
                      exit_status=0, stderr="")
    try:
        outcome.health, outcome.unknown_numbers = read_agent_output(host(name), out, 0, "", wrapped=wrap is not None)
    except HostFailure as failure:
        outcome.status, outcome.failure_class, outcome.message = "failed", failure.failure_class, failure.message
    keep_record(folder, outcome, wrap)
    return read_records(folder.path)[name]


def every_command(tmp: Path, runs: list[Path], hosts: int = 2) -> None:
    """report --expect, export prometheus, history, audit and diff on the run folders: none may crash."""
    last = runs[-1]
    with pytest.warns(ExpectationsWarning, match="so its rules judge nothing"):  # the example's groups: not here
        result = build_report([last], last / "report", expect=EXPECT)
    strict((last / "report" / "summary.json").read_text(encoding="utf-8"))
    assert result.summary["hosts_total"] == hosts
    metrics_text(last)
    build_history(runs, tmp / "history")
    assert sweep_main(["audit", str(last), "--expect", str(EXPECT)]) in (0, 1, 4, 5)
    assert sweep_main(["diff", str(runs[0]), str(last)]) in (0, 1, 3, 4, 5)
    assert sweep_main(["diff", str(runs[0]), str(last), "--json"]) in (0, 1, 3, 4, 5)


def two_runs(tmp: Path, hostile_doc: dict, wrap: WrapSpec | None, healthy: dict,
             peers: int = 1) -> tuple[list[Path], dict]:
    """Two runs of a hostile host and `peers` healthy ones; the hostile output is in the second run."""
    runs, record = [], None
    names = ["healthy"] + [f"healthy{i}" for i in range(2, peers + 1)]
    for day, doc in enumerate((healthy, hostile_doc)):
        folder = RunFolder.create(tmp / f"2026112{day}T000000Z-run")
        manifest = {"format": "sweep-run", "record_version": 1, "state": "complete",
                    "started_at": f"2026-11-2{day}T00:00:00Z", "hosts": ["hostile", *names], "sessions": []}
        if wrap is not None:
            manifest["options"] = {"wrap": wrap.to_dict()}
        folder.write_manifest(manifest)
        record = arrive(folder, "hostile", doc, wrap)
        for name in names:
            arrive(folder, name, healthy, wrap)
        runs.append(folder.path)
    return runs, record


def _edited(base: dict, path: tuple, value) -> dict:
    doc = copy.deepcopy(base)
    put(doc, path, value)
    return doc


@COMMANDS
@given(hostile_sections(BASES["load"], LOAD_PATHS))
@example(_edited(BASES["load"], ("load", "summary"), [{"gpu": 0, "sm_mhz_median": "abc"}]))  # issue 23's case
@example(_edited(BASES["load"], ("load", "summary", 0, "gpu"), [0]))
def test_any_value_in_load_or_evidence_never_crashes_a_fleet_command(tmp_path_factory, doc):
    tmp = tmp_path_factory.mktemp("load")
    runs, record = two_runs(tmp, doc, None, BASES["load"])
    assert record["status"] == "ok" or record["failure"]["class"] == "bad_output"
    every_command(tmp, runs)


@COMMANDS
@given(hostile_sections(OUTLIER, WRAP_PATHS))
@example(dict(_edited(OUTLIER, ("verdict", "hw_slowdown"), True),
              intervals=[{"gpu": 0, "what": "hw_slowdown", "from_s": None, "to_s": None, "samples": 1}]))
def test_any_value_in_a_provenance_never_crashes_a_fleet_command(tmp_path_factory, doc):
    tmp = tmp_path_factory.mktemp("wrap")
    runs, record = two_runs(tmp, doc, WrapSpec(tuple(PROVENANCE["command"]["argv"])), PROVENANCE, peers=2)
    assert record["status"] == "ok" or record["failure"]["class"] == "bad_output"
    every_command(tmp, runs, hosts=3)


def test_a_load_summary_the_controller_cannot_read_is_bad_output_at_arrival(tmp_path):
    doc = copy.deepcopy(BASES["load"])
    doc["load"]["summary"] = [{"gpu": 0, "sm_mhz_median": "abc"}]
    runs, record = two_runs(tmp_path, doc, None, BASES["load"])
    assert record["status"] == "failed" and record["failure"]["class"] == "bad_output"
    assert "load.summary[0].sm_mhz_median: expected number or null, got string" in record["failure"]["message"]
    every_command(tmp_path, runs)


def test_a_provenance_interval_without_times_does_not_stop_the_report(tmp_path):
    doc = copy.deepcopy(PROVENANCE)
    doc["intervals"] = [{"gpu": 0, "what": "hw_slowdown", "from_s": None, "to_s": None, "samples": 1}]
    doc["verdict"]["hw_slowdown"] = True
    doc["output"] = dict(doc["output"], tail='{"metric": "tflops", "value": 300, "unit": "TFLOP/s"}\n')
    runs, record = two_runs(tmp_path, doc, WrapSpec(tuple(PROVENANCE["command"]["argv"])), PROVENANCE, peers=3)
    assert record["status"] == "ok"
    every_command(tmp_path, runs, hosts=4)
    bench = json.loads((runs[-1] / "report" / "summary.json").read_text())["benchmark"]
    assert [o["host"] for o in bench["outliers"]] == ["hostile"]
    assert "HW slowdown (its counters grew) (GPU 0 hw_slowdown ?-? s)" in bench["outliers"][0]["evidence"]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "cycle", 2**70])
def test_a_record_whose_own_fields_json_cannot_hold_becomes_bad_output_not_null_or_a_hang(tmp_path, bad):
    """sweep's own fields of a record (a duration, the unknown numbers, a wrap's figures) pass no
    parser: a NaN or infinity in them (orjson would write null), a cycle, an integer past 64 bits
    become the host's bad_output record, naming the fault; the sweep goes on."""
    folder = new_run(tmp_path / "run")
    outcome = outcome_of_output(host("gpu01"), time.time(), json.dumps(BASES[sorted(BASES)[0]]).encode(), 0, "")
    assert outcome.status == "ok"
    if bad == "cycle":
        loop: list = []
        loop.append(loop)
        outcome.unknown_numbers = [loop]
    elif isinstance(bad, float):
        outcome.unknown_numbers = [{"path": "gpus[0].power_w", "text": "1e999", "value": bad}]
    else:
        outcome.unknown_numbers = [bad]
    kept = keep_record(folder, outcome)
    assert kept.status == "failed" and kept.failure_class == "bad_output"
    assert "its record cannot be written as JSON" in kept.message
    if isinstance(bad, float):
        assert "ValueError: Out of range float values are not JSON compliant" in kept.message
    record = strict((folder.hosts_dir / "gpu01.json").read_text())
    assert record["status"] == "failed" and record["health"] is None
