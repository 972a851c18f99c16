"""The speed tier (issue 25): its arithmetic, its time budget, its refusal, its replay and its record.

The figures' arithmetic and the budget are tested on made-up timings (the parent turns a child's raw
timings into figures); the refusal, --force and the replay go through the agent on real H200
captures (tests/fixtures/h200/speed/, sweep/demo/captures/); every record is held to the schema.
"""
import copy
import json
import math
from pathlib import Path

import jsonschema
import pytest

from probe_agent import HEALTH_SCHEMA_VERSION
from probe_agent.main import main as agent_main
from probe_agent.speed import cuda
from probe_agent.speed.figures import assemble, figure
from probe_agent.speed.tier import bound_for, foreign_use, plan_budgets

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "probe_agent" / "schema" / "health-1.schema.json").read_text())
SPEED = ROOT / "tests" / "fixtures" / "h200" / "speed"
CAPTURES = ROOT / "sweep" / "demo" / "captures"


def agent(capsys, *argv):
    code = agent_main(list(argv))
    out = capsys.readouterr().out
    assert code == 0
    health = json.loads(out)
    jsonschema.validate(health, SCHEMA)
    return health


def test_a_figure_is_the_best_repetition_and_its_spread_and_drops_what_is_not_a_time():
    fig = figure("hbm", 4e9, [2e-3, 1e-3, 0.0, -1.0, float("nan"), float("inf"), "1"], 2 << 30)
    assert fig["value"] == 4e12 and fig["unit"] == "B/s" and fig["method"] == "cuMemcpyDtoD"
    assert fig["repetitions"] == 2 and fig["spread"] == 0.5 and sorted(fig["samples"]) == [2e12, 4e12]
    assert fig["bytes"] == 2 << 30
    gemm = figure("bf16_gemm", 1.1e13, [0.014], 3 * 8192 * 8192 * 2, flops=1.1e13)
    assert gemm["unit"] == "FLOP/s" and math.isclose(gemm["value"], 1.1e13 / 0.014, rel_tol=1e-5)
    assert gemm["flops"] == 1.1e13 and gemm["spread"] == 0.0


@pytest.mark.parametrize("work, times", [(4e9, []), (4e9, [0.0, -2.0]), (float("nan"), [1e-3]), (0, [1e-3]),
                                         (4e9, "fast"), (-1, [1e-3])])
def test_no_valid_repetition_is_skipped_never_a_number(work, times):
    assert figure("hbm", work, times, 4) == {"skipped": "no valid repetition"}


def test_repetitions_are_budgeted_by_time_with_a_floor_and_a_ceiling():
    now = [0.0]

    def clock():
        return now[0]

    def rep(cost):
        def run():
            now[0] += cost
            return cost
        return run

    assert len(cuda.repeat(rep(0.4), 1.0, clock=clock)) == 3  # the floor, though the budget ran out
    now[0] = 0.0
    assert len(cuda.repeat(rep(0.01), 1.0, clock=clock)) == cuda.MAX_REPS  # the ceiling
    now[0] = 0.0
    assert len(cuda.repeat(rep(0.3), 1.0, clock=clock, min_reps=1)) == 4  # until past the budget
    assert len(cuda.repeat(rep(0.001), 10.0, clock=clock, stop_at=0.0)) == 1  # the tier's end passed
    assert cuda.scale(0.001) == 20 and cuda.scale(1.0) == 1 and cuda.scale(0.0) == 64


def test_the_bound_grows_from_15_s_on_one_gpu_to_20_s_on_eight_and_the_budgets_fit_it():
    assert [bound_for(n) for n in (0, 1, 8, 16)] == [15.0, 15.0, 20.0, 20.0]
    for n in (1, 2, 8):
        b = plan_budgets(n)
        pairs = n * (n - 1)
        driver = b["hbm"] + b["fp32"] + 2 * n * b["pcie"] + pairs * b["p2p"]
        assert driver + b["gemm"] + b["allreduce"] < bound_for(n) / 2  # room for start, import and minimums
    assert plan_budgets(1)["p2p"] == 0.0


def test_assembly_maps_uuids_to_nvml_indices_builds_the_pair_matrix_and_says_what_is_missing():
    uuids = {"GPU-a": 0, "GPU-b": 1}
    events = [
        {"event": "figure", "uuid": "GPU-b", "key": "hbm", "work": 8e9, "bytes": 4 << 30, "times": [2e-3]},
        {"event": "figure", "uuid": "GPU-a", "key": "hbm", "work": 8e9, "bytes": 4 << 30, "times": [2e-3, 4e-3]},
        {"event": "figure", "uuid": "GPU-a", "key": "fp32", "work": 1e12, "flops": 1e12, "bytes": 4, "times": [0.02]},
        {"event": "error", "uuid": "GPU-a", "key": "pcie", "error": "CUDA driver error 2 in cuMemAllocHost_v2"},
        {"event": "pair", "src": "GPU-b", "dst": "GPU-a", "work": 1e9, "bytes": 1 << 28, "times": [2.5e-3]},
        {"event": "pair", "src": "GPU-a", "dst": "GPU-b", "skipped": "no peer access"},
        {"event": "figure", "uuid": "GPU-zz", "key": "hbm", "work": 1e30, "times": [1e-9]},  # not a GPU of the host
        {"event": "allreduce", "uuids": ["GPU-a", "GPU-b"], "work": 2e9, "bytes": 1 << 28, "times": [0.01, 0.02]},
        "not an event",
    ]
    out = assemble(events, uuids, [0, 1], None, "stopped at the tier's bound")
    g0, g1 = out["gpus"]
    assert (g0["index"], g0["uuid"], g1["uuid"]) == (0, "GPU-a", "GPU-b")
    assert g0["figures"]["hbm"]["value"] == 4e12 and g0["figures"]["hbm"]["spread"] == 0.5
    assert g0["figures"]["pcie_h2d"] == {"skipped": "failed: CUDA driver error 2 in cuMemAllocHost_v2"}
    assert g1["figures"]["fp32"] == {"skipped": "stopped at the tier's bound"}
    assert g0["figures"]["bf16_gemm"] == {"skipped": "not measured within the tier's bound"}
    assert [(p["src"], p["dst"]) for p in out["p2p"]] == [(0, 1), (1, 0)]
    assert out["p2p"][0] == {"src": 0, "dst": 1, "skipped": "no peer access"} and out["p2p"][1]["value"] == 4e11
    assert out["allreduce"]["gpus"] == [0, 1] and out["allreduce"]["value"] == 2e11
    assert out["status"] == "partial" and out["reason"].startswith("GPU 0 pcie_h2d: failed")


def test_one_gpu_without_torch_skips_gemm_and_allreduce_with_the_reason():
    events = [{"event": "figure", "uuid": "GPU-a", "key": k, "work": 1e9, "bytes": 1, "times": [1e-3]}
              for k in ("hbm", "pcie_h2d", "pcie_d2h", "fp32")]
    out = assemble(events, {"GPU-a": 0}, [0], "no CUDA torch in this host's python (python3)", None)
    assert out["status"] == "measured" and out["reason"] is None
    assert out["gpus"][0]["figures"]["bf16_gemm"] == {"skipped": "no CUDA torch in this host's python (python3)"}
    assert out["allreduce"] == {"skipped": "one GPU selected"} and out["p2p"] == []


def test_refusal_names_every_other_process_on_a_selected_gpu_only():
    facts = {"gpus": [{"index": 0, "processes": [{"pid": 4242, "name": "python3", "used_memory_bytes": 11 << 30}]},
                      {"index": 1, "processes": [{"pid": 77, "name": "other"}]},
                      {"index": 2, "processes": [{"pid": 9}]}]}
    assert foreign_use(facts, [0, 2], own_pids=(9,)) == \
        "GPU 0 is used by pid 4242 (python3, 11.0 GiB); --force to measure anyway"
    assert foreign_use(facts, [2], own_pids=(9,)) is None


def test_the_default_probe_emits_speed_null(capsys):
    health = agent(capsys, "--replay", str(CAPTURES / "h200-idle.json"))
    assert health["schema_version"] == HEALTH_SCHEMA_VERSION and "speed" in health and health["speed"] is None


def test_a_busy_gpu_is_refused_from_the_replayed_capture(capsys):
    health = agent(capsys, "--replay", str(SPEED / "busy.json"), "--speed")
    s = health["speed"]
    assert s["status"] == "refused" and s["gpus"] == [] and s["forced"] is False
    assert s["reason"] == "GPU 0 is used by pid 826 (python3, 11.5 GiB); --force to measure anyway"


def with_processes(capture, busy, tmp_path):
    """The capture with the other capture's answers about processes (a busy GPU, derived)."""
    data = json.loads(capture.read_text())
    other = json.loads(busy.read_text())["nvml"]
    data["nvml"].update({k: v for k, v in other.items() if k.endswith(".procs") or k.startswith("process_name.")})
    path = tmp_path / "derived.json"
    path.write_text(json.dumps(data))
    return path


def test_force_measures_beside_another_process_and_is_recorded(capsys, tmp_path):
    derived = with_processes(SPEED / "speed-2.json", SPEED / "busy.json", tmp_path)
    refused = agent(capsys, "--replay", str(derived), "--speed")["speed"]
    assert refused["status"] == "refused" and "pid 826" in refused["reason"]
    forced = agent(capsys, "--replay", str(derived), "--speed", "--force")["speed"]
    recorded = json.loads((SPEED / "speed-2.json").read_text())["speed"]
    assert forced["forced"] is True and forced["status"] == "measured"
    assert forced["gpus"] == recorded["gpus"] and forced["wall_s"] == recorded["wall_s"]
    real = json.loads((SPEED / "forced.health.json").read_text())["speed"]  # as the H200 recorded it
    assert real["forced"] is True and real["status"] == "measured"


def test_a_replayed_h200_capture_emits_its_recorded_figures(capsys):
    health = agent(capsys, "--replay", str(CAPTURES / "h200-speed.json"), "--speed")
    recorded = json.loads((CAPTURES / "h200-speed.json").read_text())["speed"]
    s = health["speed"]
    assert s["status"] == "measured" and s["gpus"] == recorded["gpus"]
    figs = s["gpus"][0]["figures"]
    assert 4.0e12 < figs["hbm"]["value"] < 4.8e12 and figs["hbm"]["method"] == "cuMemcpyDtoD"
    assert s["gpus"][0]["uuid"] == health["gpus"][0]["uuid"]


def test_a_capture_without_speed_figures_says_so(capsys):
    s = agent(capsys, "--replay", str(CAPTURES / "h200-idle.json"), "--speed")["speed"]
    assert s["status"] == "failed" and "holds no speed figures" in s["reason"] and s["gpus"] == []


@pytest.mark.parametrize("path", sorted(SPEED.glob("*.health.json")) + [ROOT / "tests/fixtures/speed/example.health.json"],
                         ids=lambda p: p.name)
def test_every_recorded_record_is_valid_and_its_figures_real(path):
    health = json.loads(path.read_text())
    jsonschema.validate(health, SCHEMA)
    for g in (health["speed"] or {}).get("gpus") or []:
        for key, fig in g["figures"].items():
            assert ("skipped" in fig) != ("value" in fig), (path.name, key)
            if "value" in fig:
                assert fig["value"] > 0 and fig["repetitions"] >= 1 and 0 <= fig["spread"] < 1


def test_the_schema_refuses_a_figure_key_that_is_not_in_the_contract():
    health = json.loads((SPEED / "speed-1.health.json").read_text())
    bad = copy.deepcopy(health)
    bad["speed"]["gpus"][0]["figures"]["hbm_fast"] = {"value": 1.0}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, SCHEMA)
    bad = copy.deepcopy(health)
    bad["speed"]["status"] = "fast"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, SCHEMA)


def test_sweep_run_force_without_wrap_or_speed_is_refused_in_one_line(tmp_path, capsys):
    from sweep.cli import main
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    gpu01:\n      ansible_host: 127.0.0.1\n")
    assert main(["run", str(inv), "--out", str(tmp_path / "run"), "--force"]) == 2
    err = capsys.readouterr().err
    assert "--force also to --speed" in err and "add --wrap -- COMMAND, or --speed" in err
    assert not (tmp_path / "run").exists()


def test_the_controllers_compiled_schema_agrees_and_a_record_without_speed_stays_valid():
    from sweep.schema import compile_schema
    check = compile_schema(SCHEMA)
    health = json.loads((SPEED / "speed-1.health.json").read_text())
    assert check(health) is None
    older = {k: v for k, v in health.items() if k != "speed"}  # a 1.3 agent's record
    assert check(older) is None
    jsonschema.validate(older, SCHEMA)
    bad = copy.deepcopy(health)
    bad["speed"]["gpus"][0]["figures"]["hbm"]["repetitions"] = 0
    assert "repetitions" in check(bad)
