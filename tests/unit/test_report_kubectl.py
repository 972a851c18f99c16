"""kubectl.sh against a recording kubectl that keeps the nodes' state (`scheduler_fakes`), as issue 43
asks of the scheduler scripts: a node cordoned by someone else stays cordoned, a node sweep cordoned
and tainted is untainted and uncordoned by the report that finds it healthy, a node still broken stays
cordoned, and the dry run runs only the read. No Kubernetes cluster runs here."""
from __future__ import annotations

import json
from pathlib import Path

import fleet_variants as fv
import scheduler_fakes as fakes
from sweep.report.build import build_report

SWEEP_TAINT = {"key": "sweep/broken", "value": "xid79", "effect": "NoSchedule"}
HAND_TAINT = {"key": "maintenance", "value": "disk-replace", "effect": "NoExecute"}


def _report(tmp_path: Path, name: str, broken: bool):
    """A report of gpu01 (broken by an Xid 79, or healthy), gpu02 and gpu03 (healthy)."""
    gpu01 = fv.xid(fv.h200(8, "gpu01"), code=79) if broken else fv.h200(8, "gpu01")
    records = [fv.record("gpu01", gpu01), *(fv.record(h, fv.h200(8, h)) for h in ("gpu02", "gpu03"))]
    fv.write_run(tmp_path / f"run-{name}", records)
    return build_report([tmp_path / f"run-{name}"], tmp_path / f"report-{name}").files["kubectl"]


class Cluster:
    """The fake's nodes, and a way to run a script against them."""

    def __init__(self, tmp_path: Path, *nodes: dict):
        self.bin, self.log, self.nodes = fakes.install(tmp_path / "bin"), tmp_path / "argv.jsonl", tmp_path / "nodes.json"
        self.nodes.write_text(json.dumps({"items": list(nodes)}))

    def run(self, script: Path, *args: str):
        done = fakes.run(script, self.bin, self.log, *args, KUBE_NODES=str(self.nodes))
        assert done.returncode == 0, done.stderr
        return done

    def node(self, name: str) -> tuple[bool, list[dict], dict]:
        item = next(n for n in json.loads(self.nodes.read_text())["items"] if n["metadata"]["name"] == name)
        return bool(item["spec"].get("unschedulable")), item["spec"].get("taints", []), item["metadata"]["annotations"]

    def calls(self) -> list[list[str]]:
        calls = fakes.ran(self.log, "kubectl")
        self.log.unlink(missing_ok=True)
        return calls


def test_a_node_sweep_cordoned_is_untainted_and_uncordoned_by_the_report_that_finds_it_healthy(tmp_path):
    cluster = Cluster(tmp_path, *(fakes.node(n) for n in ("gpu01", "gpu02", "gpu03")))
    cluster.run(_report(tmp_path, "broken", broken=True))
    assert cluster.node("gpu01") == (True, [SWEEP_TAINT], {"sweep/cordoned": "true"})
    assert cluster.calls()[1:] == [["annotate", "node", "gpu01", "sweep/cordoned=true", "--overwrite"],
                                   ["cordon", "gpu01"],
                                   ["taint", "nodes", "gpu01", "sweep/broken=xid79:NoSchedule", "--overwrite"]]
    done = cluster.run(_report(tmp_path, "healthy", broken=False))
    assert cluster.node("gpu01") == (False, [], {})
    assert cluster.calls()[1:] == [["taint", "nodes", "gpu01", "sweep/broken:NoSchedule-"], ["uncordon", "gpu01"],
                                   ["annotate", "node", "gpu01", "sweep/cordoned-"]]
    assert done.stderr == ""
    assert [cluster.node(n) for n in ("gpu02", "gpu03")] == [(False, [], {})] * 2  # never touched


def test_a_node_cordoned_by_hand_stays_cordoned_with_its_own_taint(tmp_path):
    cluster = Cluster(tmp_path, fakes.node("gpu01", unschedulable=True, taints=[HAND_TAINT]), fakes.node("gpu02"),
                      fakes.node("gpu03"))
    broken = _report(tmp_path, "broken", broken=True)
    done = cluster.run(broken)
    assert cluster.node("gpu01") == (True, [HAND_TAINT, SWEEP_TAINT], {})  # tainted, the cordon not claimed
    assert done.stderr == f"{broken}: gpu01 was cordoned by someone else: sweep only taints it, and will not uncordon it\n"
    healthy = _report(tmp_path, "healthy", broken=False)
    done = cluster.run(healthy)
    assert cluster.node("gpu01") == (True, [HAND_TAINT], {})  # sweep's taint gone, the hand's cordon and taint kept
    assert cluster.calls()[-1] == ["taint", "nodes", "gpu01", "sweep/broken:NoSchedule-"]
    assert done.stderr == f"{healthy}: gpu01 left cordoned: cordoned by someone else\n"


def test_a_node_still_broken_stays_cordoned_and_the_dry_run_runs_only_the_read(tmp_path):
    cluster = Cluster(tmp_path, *(fakes.node(n) for n in ("gpu01", "gpu02", "gpu03")))
    first = _report(tmp_path, "broken", broken=True)
    done = cluster.run(first, "-n")
    assert cluster.calls() == [["get", "nodes", "-o", "json"]] and cluster.node("gpu01") == (False, [], {})
    assert done.stdout == ("would run: kubectl annotate node gpu01 sweep/cordoned=true --overwrite\n"
                           "would run: kubectl cordon gpu01\n"
                           "would run: kubectl taint nodes gpu01 sweep/broken=xid79:NoSchedule --overwrite\n")
    cluster.run(first)
    again = _report(tmp_path, "again", broken=True)
    cluster.calls()
    cluster.run(again)
    assert cluster.node("gpu01") == (True, [SWEEP_TAINT], {"sweep/cordoned": "true"})
    assert cluster.calls()[1:] == [["taint", "nodes", "gpu01", "sweep/broken=xid79:NoSchedule", "--overwrite"]]


def test_a_node_sweep_tainted_that_this_report_does_not_hold_is_named_and_left_alone(tmp_path):
    other = fakes.node("gpu77", unschedulable=True, taints=[SWEEP_TAINT], annotations={"sweep/cordoned": "true"})
    cluster = Cluster(tmp_path, *(fakes.node(n) for n in ("gpu01", "gpu02", "gpu03")), other)
    healthy = _report(tmp_path, "healthy", broken=False)
    done = cluster.run(healthy)
    assert cluster.calls() == [["get", "nodes", "-o", "json"]]
    assert done.stderr == f"{healthy}: gpu77 left alone: tainted sweep/broken=xid79, not in this report's pool\n"
    broken = _report(tmp_path, "gone", broken=True)
    cluster.nodes.write_text(json.dumps({"items": [fakes.node("gpu02")]}))
    done = cluster.run(broken)
    assert done.stderr == f"{broken}: gpu01 left out: not a node of this cluster (kubectl get nodes)\n"


def test_kubectl_sh_stops_before_any_change_when_the_cluster_cannot_be_read(tmp_path):
    cluster = Cluster(tmp_path, *(fakes.node(n) for n in ("gpu01", "gpu02", "gpu03")))
    script = _report(tmp_path, "broken", broken=True)
    done = fakes.run(script, cluster.bin, cluster.log, KUBE_NODES=str(cluster.nodes), KUBE_DOWN="1")
    assert done.returncode == 1 and cluster.calls() == [["get", "nodes", "-o", "json"]]
    assert done.stderr.splitlines()[-1] == f"{script}: kubectl get nodes -o json failed: nothing done"
    assert "Traceback" not in done.stderr and cluster.node("gpu01") == (False, [], {})
