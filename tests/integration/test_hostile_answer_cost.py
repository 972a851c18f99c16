"""Hosts that answer megabytes of numbers over real sshds cost the controller no Python call per number.

A host's answer is hostile until validated: 3 MiB of ``[0,0,...]`` is 1.5 million numbers, and
3 MiB of ``[NaN,NaN,...]`` (which orjson refuses) 750,000 non-standard tokens. sweep reads them
at C speed or refuses them by size (`sweep.strictjson`), so each such host ends as a failed record
of its own class within its deadline, and the healthy hosts beside them are swept as usual. The
strict parser's per-number hooks are counted during the sweep: in a parse bounded by the size
and shape limits they are never called once per number (before issue 52 they were, 20-34 s of
controller CPU for one 15 MiB answer; bench/bench_hostile_answer.py --sshd measures sixteen).
Counted in calls, not seconds. One more host answers a health.json with a NaN, which only the
strict parser reads: its calls must be counted, so a sweep that judged answers where the count
cannot see (a process that does not share it) fails the test instead of passing it unseen.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import re
from pathlib import Path

import pytest

from sweep import strictjson
from sweep.collect.run import run_sweep
from sweep.demo.loopback import FleetHost, LocalFleet

from helpers import read_records

pytestmark = pytest.mark.integration
HOST_DEADLINE = 60.0  # generous: the test counts calls, the deadline only has to hold on a loaded machine
ANSWER_BYTES = 3 * 2**20
ANSWERS = {"zeros": b"0,", "nans": b"NaN,"}  # one orjson reads, one it refuses (the strict parser's)
IDLE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "idle.health.json").read_text())


def printer(path: Path) -> str:
    """A fake interpreter: read the agent from stdin, print `path`, exit 0."""
    return f"cat >/dev/null\ncat '{path}'\nexit 0\n"


class _Counter:
    """Calls of the wrapped functions, in shared memory: forked judging processes count too."""

    def __init__(self):
        self.shared = multiprocessing.Value("q", 0)

    @property
    def calls(self) -> int:
        return self.shared.value

    def wrap(self, function):
        def counted(*args):
            with self.shared.get_lock():
                self.shared.value += 1
            return function(*args)
        return counted


@pytest.fixture(scope="module")
def swept(needs_sshd, tmp_path_factory):
    work = tmp_path_factory.mktemp("hostile-answer")
    hosts = [FleetHost(f"ok{i}", group="healthy") for i in (1, 2)]
    for name, item in ANSWERS.items():
        path = work / f"{name}.out"
        path.write_bytes(b"[" + item * (ANSWER_BYTES // len(item) - 1) + item[:-1] + b"]")
        hosts += [FleetHost(f"{name}{i}", group="numbers", script=printer(path)) for i in (1, 2)]
    nan = work / "nan.out"  # a real health.json with one NaN: the strict parser reads it, ~90 numbers
    nan.write_text(re.sub(r'"draw_w": [-+.0-9eE]+', '"draw_w": NaN', json.dumps(IDLE), count=1))
    hosts.append(FleetHost("one-nan", group="healthy", script=printer(nan)))
    counter = _Counter()
    patch = pytest.MonkeyPatch()
    patch.setattr(strictjson, "_int", counter.wrap(strictjson._int))  # the strict parser's per-number hooks
    patch.setattr(strictjson, "_float", counter.wrap(strictjson._float))
    patch.setattr(strictjson, "_Unknown", type("_Unknown", (strictjson._Unknown,), {
        "__init__": counter.wrap(strictjson._Unknown.__init__)}))
    with LocalFleet(hosts, work / "fleet") as fleet:
        home, os.environ["HOME"] = os.environ.get("HOME"), str(fleet.home)  # hermetic: no ~/.ssh of the tester
        try:
            result = run_sweep(fleet.inventory_path, out=work / "run", forks=6,
                               ssh=fleet.ssh_settings(connect_timeout=10.0, host_deadline=HOST_DEADLINE))
        finally:
            os.environ["HOME"] = home or "/root"
            patch.undo()
    yield {"result": result, "records": read_records(work / "run"), "strict_calls": counter.calls}


def test_no_python_call_per_number_of_a_hosts_answer(swept):
    numbers = sum(ANSWER_BYTES // len(item) for item in ANSWERS.values())
    nan = swept["records"]["one-nan"]
    assert nan["status"] == "ok" and nan["unknown_numbers"] == [{"path": "gpus[0].power.draw_w", "text": "NaN"}]
    assert swept["strict_calls"] >= 1, "the one NaN host's strict parse was not counted: the count sees nothing"
    assert swept["strict_calls"] < 1000, (
        f"{swept['strict_calls']:,} calls of the strict parser's number hooks for {numbers:,} numbers "
        "in four answers: a host's answer costs the controller a Python call per number")


def test_each_number_array_host_fails_in_its_class_within_its_deadline(swept):
    records = swept["records"]
    assert len(records) == 7 and swept["result"].failed == 4
    for name in ("zeros1", "zeros2", "nans1", "nans2"):
        record = records[name]
        assert record["status"] == "failed" and record["failure"]["class"] == "bad_output", record["failure"]
        assert record["exit_status"] == 0 and name in record["failure"]["message"]
        assert record["duration_s"] < HOST_DEADLINE
    assert "not an object" in records["zeros1"]["failure"]["message"]
    for name in ("ok1", "ok2"):
        assert records[name]["status"] == "ok" and records[name]["health"]["gpus"][0]["name"] == "NVIDIA H200"
