"""Records are validated once, on arrival: the store's own records are read back without the strict walk,
and a record changed since sweep wrote it (or a digest list forged beside it) is read strictly again.

The run folders here are written by the real arrival path (the host's stdout judged, strictly parsed
and checked, then `keep_record`), and read by `load_fleet` / `build_report` as `sweep report` does.
`strictjson._walk` is counted, not timed: the speed itself is bench/bench_report.py's.
"""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

import fleet_variants as fv
from sweep import strictjson
from sweep.analysis.fleet import load_fleet
from sweep.collect.engines.base import outcome_of_output
from sweep.collect.run import keep_record
from sweep.errors import HealthFileError, RunFolderError
from sweep.inventory.model import Host
from sweep.report.build import build_report
from sweep.store import DIGESTS, RunFolder, read_digests
from sweep.strictjson import MAX_DEPTH, dumps, loads, loads_known

NAMES = ["gpu01", "gpu02", "gpu07", "gpu14", "gpu31"]  # healthy, healthy, power cap, foreign process, driver


def host(name: str) -> Host:
    return Host(name=name, address=f"{name}.dc1", port=22, user="ops", key_file=None, python="python3",
                ssh_common_args=None, proxy_jump=None, groups=("rack_a",), vars={}, settings={})


def swept(tmp_path: Path, names=NAMES) -> RunFolder:
    """A run folder as a sweep leaves it: each host's stdout judged on arrival and its record kept."""
    folder = RunFolder.create(tmp_path / "run")
    folder.write_manifest({"format": "sweep-run", "record_version": 1, "state": "complete", "hosts": list(names),
                           "sessions": []})
    for name in names:
        health = fv.must_show_health(name, 4)
        health["host"]["hostname"] = name
        keep_record(folder, outcome_of_output(host(name), time.time(), json.dumps(health).encode(), 0, ""))
    folder.close()
    return folder


@pytest.fixture
def walks(monkeypatch):
    """Every host record read strictly: walked for its depth, or taken by the caller's one check of
    schema and depth (`fits`, sweep.schema_depth) in its place (a manifest is always read strictly:
    not counted)."""
    calls = []
    real, loaded_class = strictjson._walk, strictjson.Loaded

    def counted(loaded, *args):
        result = real(loaded, *args)
        if not (isinstance(loaded.document, dict) and loaded.document.get("format") == "sweep-run"):
            calls.append(loaded)
        return result

    class Fitted(loaded_class):
        def __init__(self, document, *args, fitted=False, **kwargs):
            super().__init__(document, *args, fitted=fitted, **kwargs)
            if fitted:
                calls.append(self)

    monkeypatch.setattr(strictjson, "_walk", counted)
    monkeypatch.setattr(strictjson, "Loaded", Fitted)
    return calls


def frames(fleet):
    return [fleet.hosts, fleet.gpus, fleet.contracts, fleet.processes]


def test_the_stores_own_records_are_read_back_without_the_walk_and_read_the_same(tmp_path, walks):
    folder = swept(tmp_path)
    assert len(walks) == len(NAMES), "each host's output was walked once, on arrival"
    walks.clear()
    fast = build_report([folder.path], tmp_path / "fast")
    assert walks == [], "no record the store wrote is walked again by sweep report"
    (folder.path / DIGESTS).unlink()  # the same bytes, but nothing says sweep wrote them: read strictly
    strict = build_report([folder.path], tmp_path / "strict")
    assert len(walks) == len(NAMES)
    for a, b in zip(frames(fast.fleet), frames(strict.fleet)):
        pd.testing.assert_frame_equal(a, b)
    summaries = [json.loads((tmp_path / out / "summary.json").read_text()) for out in ("fast", "strict")]
    for summary in summaries:
        summary.pop("generated_at")
    assert summaries[0] == summaries[1]


def test_records_sha256_is_what_sha256sum_checks(tmp_path):
    folder = swept(tmp_path)
    done = subprocess.run(["sha256sum", "--check", "--strict", DIGESTS], cwd=folder.path, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(done.stdout.splitlines()) == [f"hosts/{name}.json: OK" for name in NAMES]


def test_a_record_written_again_is_known_by_its_last_digest(tmp_path, walks):
    folder = swept(tmp_path, ["gpu01"])
    reopened = RunFolder.open(folder.path)
    record = json.loads((folder.hosts_dir / "gpu01.json").read_text())
    record["attempts"] = 2
    reopened.write_record(record)
    reopened.close()
    assert len((folder.path / DIGESTS).read_text().splitlines()) == 2
    assert read_digests(folder.path) == {"gpu01.json": hashlib.sha256((folder.hosts_dir / "gpu01.json")
                                                                       .read_bytes()).hexdigest()}
    walks.clear()
    assert load_fleet(folder.path, workers=1).hosts["attempts"].tolist() == [2]
    assert walks == []


def _first(pattern: str, repl: str, text: str) -> str:
    """`pattern` (written with json's ': ') edited once into `text`, whichever separator the record was written with."""
    edited, n = re.subn(pattern.replace('": ', '": ?'), repl, text, count=1)
    assert n == 1, pattern
    return edited


# an edit made to gpu02's record after the sweep wrote it -> what the strict reader makes of it
EDITS = {
    "NaN": (r'"draw_w": [-0-9.eE+]+', '"draw_w": NaN'),
    "-Infinity": (r'"draw_w": [-0-9.eE+]+', '"draw_w": -Infinity'),
    "overflow": (r'"draw_w": [-0-9.eE+]+', '"draw_w": 1e999'),
    "lone surrogate": (r'"name": "NVIDIA H200"', r'"name": "\\ud800"'),
}


def _edit(folder: RunFolder, edit: str, forge: bool) -> None:
    path = folder.hosts_dir / "gpu02.json"
    path.write_text(_first(*EDITS[edit], path.read_text(encoding="utf-8")), encoding="utf-8")
    if forge:  # the digest list rewritten to match: the fast reader's own guards must still hold
        blob = path.read_bytes()
        with open(folder.path / DIGESTS, "a", encoding="utf-8") as fh:
            fh.write(f"{hashlib.sha256(blob).hexdigest()}  hosts/gpu02.json\n")


@pytest.mark.parametrize("forge", [False, True], ids=["edited", "edited, digest forged"])
@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_record_changed_after_it_was_written_reads_as_the_strict_reader_reads_it(tmp_path, walks, edit, forge):
    folder = swept(tmp_path)
    _edit(folder, edit, forge)
    walks.clear()
    fleet = load_fleet(folder.path, workers=1)
    assert len(walks) == 1, "the changed record, and only it, is validated again"
    gpu = fleet.gpus[(fleet.gpus["host"] == "gpu02") & (fleet.gpus["index"] == 0)].iloc[0]
    if edit == "lone surrogate":
        assert gpu["name"] == "\ufffd"
    else:
        assert pd.isna(gpu["power_draw_w"])
    other = fleet.gpus[(fleet.gpus["host"] == "gpu01") & (fleet.gpus["index"] == 0)].iloc[0]
    assert other["name"] == "NVIDIA H200" and not pd.isna(other["power_draw_w"])


@pytest.mark.parametrize("depth, forge", [(MAX_DEPTH + 1, False), (5000, False), (300, True), (5000, True)])
def test_nesting_added_after_the_sweep_is_refused_naming_the_file(tmp_path, depth, forge):
    folder = swept(tmp_path)
    path = folder.hosts_dir / "gpu02.json"
    path.write_text(_first(r'"power": \{', '"power": {"deep": ' + "[" * depth + "]" * depth + ", ",
                           path.read_text(encoding="utf-8")), encoding="utf-8")
    if forge:
        (folder.path / DIGESTS).write_text(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  hosts/gpu02.json\n")
    with pytest.raises(HealthFileError) as err:
        load_fleet(folder.path, workers=1)
    assert err.value.where == str(path) and "nests" in err.value.message


@pytest.mark.parametrize("forge", [False, True], ids=["edited", "edited, digest forged"])
@pytest.mark.parametrize("number", ["9223372036854775808", "18446744073709551616", "1" + "0" * 40])
def test_an_integer_past_int64_is_na_in_its_column_however_the_record_is_read(tmp_path, number, forge):
    """No record sweep writes holds one (the strict read makes it unknown); under a forged digest the fast
    reader reads it as a number, which no exact column type holds: NA either way, and no crash."""
    folder = swept(tmp_path)
    path = folder.hosts_dir / "gpu02.json"
    path.write_text(_first(r'"memory_total_bytes": [0-9]+', f'"memory_total_bytes": {number}',
                           path.read_text(encoding="utf-8")), encoding="utf-8")
    if forge:
        with open(folder.path / DIGESTS, "a", encoding="utf-8") as fh:
            fh.write(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  hosts/gpu02.json\n")
    gpus = load_fleet(folder.path, workers=1).gpus
    memory = gpus.set_index(["host", "index"])["memory_total_bytes"]
    assert pd.isna(memory[("gpu02", 0)]) and memory[("gpu01", 0)] > 2**30


def test_a_link_at_records_sha256_is_never_written_through_nor_trusted(tmp_path, walks):
    folder = swept(tmp_path, ["gpu01"])
    outside = tmp_path / "outside.txt"
    outside.write_text(f"{hashlib.sha256((folder.hosts_dir / 'gpu01.json').read_bytes()).hexdigest()}  "
                       "hosts/gpu01.json\n")
    (folder.path / DIGESTS).unlink()
    (folder.path / DIGESTS).symlink_to(outside)
    reopened = RunFolder.open(folder.path)
    record = json.loads((folder.hosts_dir / "gpu01.json").read_text())
    with pytest.raises(RunFolderError) as err:
        reopened.write_record(record)
    reopened.close()
    assert f"cannot write {DIGESTS}" in err.value.message and "symbolic link" in err.value.message
    assert len(outside.read_text().splitlines()) == 1
    walks.clear()
    assert read_digests(folder.path) == {}
    load_fleet(folder.path, workers=1)
    assert len(walks) == 1


FORMS = ["NaN", "Infinity", "-Infinity", "1e999999", "-2.5e+309", "1E400", '"\\ud800"', '"a\\udfffb"',
         "4.9e-324", "-0.0", "1e-400", "700.0", "9223372036854775807", '"\\u00e9\\n"', '"é"', "null", "true"]


@pytest.mark.parametrize("form", FORMS)
def test_loads_known_reads_every_number_and_string_form_as_loads_does(form, walks):
    text = ('{"gpus": [{"power": {"draw_w": %s}, "name": %s}], "n": [1, [2, {"x": %s}]]}' % (form, form, form)).encode()
    strict = loads(text)
    known = loads_known(text)
    assert known.document == strict.document and known.unknown_numbers == strict.unknown_numbers
    again = dumps(strict.document).encode()  # what the store writes after arrival
    walks.clear()
    assert loads_known(again).document == strict.document and walks == []


def test_resume_and_run_diffs_read_records_as_the_report_does(tmp_path, walks):
    """RunFolder.read_records (resume, run diffs, baselines): the store's records without the walk, an
    edited one strictly (NaN is null there too, never a float NaN a later write would refuse)."""
    folder = swept(tmp_path)
    _edit(folder, "NaN", forge=False)
    walks.clear()
    records = RunFolder(folder.path).read_records()
    assert len(walks) == 1 and sorted(records) == sorted(NAMES)
    assert records["gpu02"]["health"]["gpus"][0]["power"]["draw_w"] is None
    assert isinstance(records["gpu01"]["health"]["gpus"][0]["power"]["draw_w"], float)
