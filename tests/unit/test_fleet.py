"""Loading run folders, host records and health.json files into the fleet frames (real pandas)."""
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import fleet_variants as fv
from sweep.errors import HealthFileError, RunFolderError
from sweep.analysis.fleet import load_fleet

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "health"


@pytest.fixture(scope="module")
def must_show(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    fv.write_run(run, fv.must_show_fleet())
    return load_fleet([run])


def test_run_folder_gives_one_row_per_host_and_per_gpu(must_show):
    hosts, gpus = must_show.hosts, must_show.gpus
    assert len(hosts) == 44
    assert hosts["host"].tolist() == [f"gpu{i:02d}" for i in range(1, 45)]
    assert len(gpus) == 41 * 8  # the 3 unreachable hosts have no GPU rows
    assert len(must_show.contracts) == 41 * 14  # schema 1.2: fourteen contracts
    assert gpus.groupby("host", observed=True).size().eq(8).all()


def test_frames_have_typed_columns(must_show):
    h, g = must_show.hosts.dtypes, must_show.gpus.dtypes
    assert str(h["host"]) == "string"
    for column in ("status", "failure_class", "driver", "cuda_driver", "torch", "cuda_runtime", "gpu_model",
                   "worst_link", "lowest_broken", "verdict", "mask_state"):
        assert isinstance(h[column], pd.CategoricalDtype), column
    assert str(h["gpus_selected"]) == "Int64" and str(h["attempts"]) == "Int64"
    assert str(h["confidential_compute"]) == "boolean" and str(h["duration_s"]) == "Float64"
    for column in ("host", "name", "compute_mode", "mig_layout", "reasons_active"):
        assert isinstance(g[column], pd.CategoricalDtype), column
    for column in ("power_enforced_w", "power_default_w", "power_max_w"):
        assert str(g[column]) == "Float64", column
    for column in ("index", "memory_total_bytes", "sm_mhz", "sm_max_mhz", "processes", "app_sm_mhz"):
        assert str(g[column]) == "Int64", column
    for column in ("selected", "ecc_current", "ecc_pending", "mig_current", "persistence_mode", "hw_thermal_slowdown"):
        assert str(g[column]) == "boolean", column
    assert str(g["uuid"]) == "string"


def test_facts_of_the_variants_are_read(must_show):
    hosts = must_show.hosts.set_index("host")
    gpus = must_show.gpus
    assert hosts.loc["gpu31", "driver"] == "590.44.01" and hosts.loc["gpu31", "cuda_driver"] == "13.1"
    assert hosts.loc["gpu25", "mask_state"] == "empty" and hosts.loc["gpu25", "gpus_selected"] == 0
    assert hosts.loc["gpu25", "lowest_broken"] == "device_mask"
    assert hosts.loc["gpu26", "torch"] == "2.11.0+cpu" and pd.isna(hosts.loc["gpu26", "cuda_runtime"])
    assert hosts.loc["gpu01", "worst_link"] == "NV18" and hosts.loc["gpu01", "gpu_model"] == "NVIDIA H200"
    capped = gpus[(gpus["host"] == "gpu09")].set_index("index")["power_enforced_w"]
    assert capped[3] == 250.0 and capped[0] == 700.0
    assert not gpus[gpus["host"] == "gpu05"]["ecc_current"].any()
    assert gpus[gpus["host"] == "gpu16"].set_index("index").loc[5, "hw_thermal_slowdown"]
    assert gpus[gpus["host"] == "gpu21"]["mig_layout"].eq("3g.71gb+3g.71gb").all()
    procs = must_show.processes
    assert procs[["host", "gpu", "pid", "name"]].astype(str).values.tolist() == [["gpu14", "2", "4242", "python3"]]


def test_failed_host_is_a_row_with_its_failure_class(must_show):
    hosts = must_show.hosts.set_index("host")
    assert hosts.loc["gpu42", "status"] == "failed"
    assert hosts.loc["gpu42", "failure_class"] == "refused"
    assert hosts.loc["gpu43", "failure_class"] == "timeout"
    assert hosts.loc["gpu42", "failure_message"] == "connection refused on port 22"
    assert hosts.loc["gpu42", "attempts"] == 3
    assert pd.isna(hosts.loc["gpu42", "driver"])


def test_selected_gpus_follow_the_mask(tmp_path):
    health = fv.mask(fv.h200(8, "gpu01"), "0,1")
    path = tmp_path / "gpu01.json"
    path.write_text(json.dumps(health))
    fleet = load_fleet([path])
    assert fleet.hosts["gpus_selected"].tolist() == [2]
    assert fleet.gpus["selected"].tolist() == [True, True] + [False] * 6


def test_plain_health_files_are_named_by_hostname_else_by_file_stem(tmp_path):
    fleet = load_fleet([FIXTURES])  # all three report hostname "vm": a duplicate, so the stems name them
    assert fleet.hosts["host"].tolist() == ["h200-fault-smi", "h200-idle-smi", "h200-load-smi"]
    assert fleet.hosts["hostname"].tolist() == ["vm", "vm", "vm"]
    one = load_fleet([FIXTURES / "h200-idle-smi.json"])
    assert one.hosts["host"].tolist() == ["vm"]
    nameless = fv.base("idle")
    nameless["host"]["hostname"] = None
    (tmp_path / "rack7-slot3.json").write_text(json.dumps(nameless))
    assert load_fleet([tmp_path / "rack7-slot3.json"]).hosts["host"].tolist() == ["rack7-slot3"]


def test_record_files_and_health_files_mix(tmp_path):
    record = fv.record("gpu07", fv.h200(2, "gpu07"))
    (tmp_path / "gpu07.json").write_text(json.dumps(record))
    shutil.copy(FIXTURES / "h200-load-smi.json", tmp_path / "load.json")
    fleet = load_fleet([tmp_path / "gpu07.json", tmp_path / "load.json"])
    assert fleet.hosts["host"].tolist() == ["gpu07", "vm"]
    assert fleet.gpus["host"].tolist() == ["gpu07", "gpu07", "vm"]


def test_the_same_host_twice_is_kept_twice(tmp_path):
    for run in ("a", "b"):
        fv.write_run(tmp_path / run, [fv.record("gpu01", fv.h200(1, "gpu01"))])
    fleet = load_fleet([tmp_path / "a", tmp_path / "b"])
    assert fleet.hosts["host"].tolist() == ["gpu01", "gpu01#2"]


def test_groups_come_from_the_record_or_the_manifest(tmp_path):
    records = [fv.record("gpu01", fv.h200(1, "gpu01"), groups=["rack1", "all"]),
               fv.record("gpu02", fv.h200(1, "gpu02"))]
    manifest = {"format": "sweep-run", "record_version": 1, "state": "complete", "hosts": ["gpu01", "gpu02"],
                "inventory": {"path": "fleet.yml", "snapshot": {
                    "hosts": [{"name": "gpu02", "groups": ["rack2", "h200"]}], "groups": {}}}}
    fv.write_run(tmp_path, records, manifest)
    assert load_fleet([tmp_path]).hosts["groups"].astype(str).tolist() == ["rack1", "rack2,h200"]


def test_hosts_the_manifest_lists_without_a_record_are_not_probed(tmp_path):
    manifest = {"format": "sweep-run", "record_version": 1, "state": "interrupted",
                "hosts": ["gpu01", "gpu02", "gpu03"],
                "inventory": {"snapshot": {"hosts": [{"name": "gpu03", "groups": ["rack9"]}]}}}
    fv.write_run(tmp_path, [fv.record("gpu01", fv.h200(1, "gpu01"))], manifest)
    hosts = load_fleet([tmp_path]).hosts
    assert hosts["host"].tolist() == ["gpu01", "gpu02", "gpu03"]
    assert hosts["status"].tolist() == ["ok", "failed", "failed"]
    assert hosts["failure_class"].tolist()[1:] == ["not_probed", "not_probed"]
    assert hosts["groups"].astype(str).tolist()[2] == "rack9"
    assert hosts["failure_message"].tolist()[1] == (
        "listed in the run's manifest but without a record: the sweep stopped before this host")


def test_parallel_load_gives_the_same_frames(tmp_path):
    fv.write_run(tmp_path, fv.must_show_fleet())
    serial, parallel = load_fleet([tmp_path], workers=1), load_fleet([tmp_path], workers=3)
    for name in ("hosts", "gpus", "contracts", "processes"):
        a, b = getattr(serial, name), getattr(parallel, name)
        pd.testing.assert_frame_equal(a.astype(object), b.astype(object), check_dtype=False)
        assert a.dtypes.map(str).tolist() == b.dtypes.map(str).tolist()


def test_values_of_the_wrong_type_are_refused_before_any_reader_meets_them(tmp_path):
    """Issue 36: a health.json is checked against the published schema before code reads it: a plain file
    of the wrong shape is refused naming the file and the field; the same in a run folder's record makes
    that host bad_output (naming the file), and the other hosts are read."""
    health = fv.h200(2, "gpu01")
    health["gpus"][0]["power"]["enforced_limit_w"] = "lots"
    (tmp_path / "gpu01.json").write_text(json.dumps(health))
    with pytest.raises(HealthFileError) as err:
        load_fleet([tmp_path / "gpu01.json"])
    assert err.value.where == str(tmp_path / "gpu01.json")
    assert "health.json.gpus[0].power.enforced_limit_w: expected number or null, got string" in err.value.message
    run = fv.write_run(tmp_path / "run", [fv.record("gpu01", health), fv.record("gpu02", fv.h200(2, "gpu02"))])
    hosts = load_fleet([run]).hosts.set_index("host")
    assert hosts.loc["gpu01", "failure_class"] == "bad_output" and hosts.loc["gpu02", "status"] == "ok"
    assert str(run / "hosts" / "gpu01.json") in hosts.loc["gpu01", "failure_message"]
    assert "record.health.gpus[0].power.enforced_limit_w" in hosts.loc["gpu01", "failure_message"]


def test_ok_record_without_health_counts_as_bad_output(tmp_path):
    record = fv.record("gpu01", None)
    fv.write_run(tmp_path, [record])
    hosts = load_fleet([tmp_path]).hosts
    assert hosts[["status", "failure_class"]].astype(str).values.tolist() == [["failed", "bad_output"]]


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
    ('{"kind": "something else"}', "is neither a sweep host record, a health.json (kind sweep.health) nor a "
                                   "provenance file (kind sweep.provenance)"),
    ('{"kind": "sweep.provenance", "schema_version": "2.0"}', "provenance file of schema version 2.0; this sweep "
                                                             "reads 1.x"),
    ('{"kind": "sweep.provenance", "schema_version": "1.0"}', "provenance file without its probe before the command"),
    ('{"record_version": 2, "host": "gpu01"}', "has record version 2; this sweep reads version 1"),
    ('{"kind": "sweep.health", "schema_version": "2.0"}',
     "health.json of schema version 2.0 (kind 'sweep.health'); this sweep reads 1.x"),
])
def test_bad_files_are_health_file_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(HealthFileError) as err:
        load_fleet([path])
    assert err.value.message == message
    assert err.value.where == str(path)


def test_missing_path_and_empty_folder(tmp_path):
    with pytest.raises(HealthFileError) as err:
        load_fleet([tmp_path / "nope"])
    assert str(err.value) == (f"{tmp_path / 'nope'}: no such file or folder; "
                              "pass a run folder, a host-record file or a health.json file")
    with pytest.raises(HealthFileError) as err:
        load_fleet([tmp_path])
    assert err.value.message == "no host record or health.json found"
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(RunFolderError) as err:
        load_fleet([tmp_path])
    assert err.value.message == "run folder without a hosts/ folder"


def test_error_in_a_worker_reaches_the_caller_whole(tmp_path):
    fv.write_run(tmp_path, [fv.record(f"gpu{i:02d}", fv.h200(1, f"gpu{i:02d}")) for i in range(6)])
    (tmp_path / "hosts" / "gpu03.json").write_text("[]")
    with pytest.raises(HealthFileError) as err:
        load_fleet([tmp_path], workers=2)
    assert err.value.where == str(tmp_path / "hosts" / "gpu03.json")
    assert err.value.fix == "pass a run folder, host-record files, health.json or provenance.json files"
