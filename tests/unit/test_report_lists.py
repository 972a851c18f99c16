"""The report's lists and commands (issue 26, section 1): the host files, the node sets, drain.sh,
resume.sh and kubectl.sh, and the sets and reasons in summary.json.

The owners of each format judge them: ansible-core's `ansible --list-hosts` reads the ``--limit
@FILE`` files, ClusterShell's NodeSet and `nodeset -e` and Slurm's own hostlist parser (`scontrol
show hostnames`) read the node sets, `sh -n` / `bash -n` and a run against recording fakes of
scontrol and kubectl read the scripts. The drain on a real one-node Slurm is in
tests/integration/test_report_drain_slurm.py.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import shlex
import subprocess
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet
from hypothesis import HealthCheck, example, given, settings, strategies as st

import fleet_variants as fv
import scheduler_fakes as fakes
from helpers import require
from sweep.analysis.names import NODE_NAME, fold_nodeset
from sweep.report.build import build_report
from sweep.report.lists import word

NAMES = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=12, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
HOSTILE = "`touch PWNED2`$(touch PWNED) 'q' \"dq\"\n; touch PWNED3 \\ !x"

# names as fleets write them (gpu01, rack2-n07, gpu01.dc1, 1), and names of any characters at all
_shaped = st.builds(lambda prefix, n, width, suffix: f"{prefix}{n:0{width}d}{suffix}",
                    st.sampled_from(["gpu", "rack2-n", "h", "n.", "", "a_b"]),
                    st.one_of(st.integers(0, 130), st.integers(0, 130), st.integers(10**8, 10**11)),
                    st.integers(1, 4), st.sampled_from(["", "", ".dc1", "-ib", "x"]))
_any = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=10)
host_names = st.lists(st.one_of(_shaped, _shaped, _any), min_size=1, max_size=40, unique=True)


def _node_names(names):
    return [n for n in names if NODE_NAME.match(n)]


@NAMES
@given(names=host_names)
@example(names=["gpu01", "gpu02", "gpu1", "gpu10", "gpu01.dc1", "gpu02.dc1", "r1n1", "r1n2", "r2n1", "7", "8"])
def test_a_folded_node_set_reads_back_in_clustershell_as_exactly_its_names(names):
    folded, odd = fold_nodeset(names)
    assert list(odd) == [n for n in names if not NODE_NAME.match(n)]
    back = list(NodeSet(folded)) if folded else []
    assert sorted(back) == sorted(_node_names(names))  # the same names, none twice, none added


@pytest.fixture(scope="module")
def slurm_conf(tmp_path_factory):
    """A slurm.conf that lets `scontrol show hostnames` run (it parses, it asks no daemon)."""
    require(shutil.which("scontrol") is not None, "Slurm's scontrol (apt-get install -y slurm-client)")
    conf = tmp_path_factory.mktemp("slurm") / "slurm.conf"
    node = socket.gethostname()
    conf.write_text(f"ClusterName=t\nSlurmctldHost={node}(127.0.0.1)\nAuthType=auth/none\nCredType=cred/none\n"
                    f"NodeName={node} CPUs=1\nPartitionName=p Nodes=ALL\n")
    return str(conf)


def _slurm_hostnames(conf: str, folded: str) -> list[str]:
    done = subprocess.run(["scontrol", "show", "hostnames", folded], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, SLURM_CONF=conf))
    assert done.returncode == 0 and not done.stderr, (folded, done.stderr)
    return done.stdout.splitlines()


@SLOW
@given(names=st.lists(st.one_of(_shaped, _any), min_size=1, max_size=60, unique=True))
@example(names=["gpu01.dc1", "gpu02.dc1", "gpu03.dc1"])  # ClusterShell folds it gpu[01-03].dc1, which Slurm refuses
@example(names=[f"n{i}" for i in range(70000)])          # more than one Slurm range may hold
def test_a_folded_node_set_reads_back_in_slurm_as_exactly_its_names(slurm_conf, names):
    folded, _ = fold_nodeset(names)
    if folded:
        assert sorted(_slurm_hostnames(slurm_conf, folded)) == sorted(_node_names(names))


@pytest.fixture(scope="module")
def must_show(tmp_path_factory):
    run = tmp_path_factory.mktemp("lists") / "run"
    fv.write_run(run, fv.must_show_fleet())
    return build_report([run], run / "report")


def test_the_reports_node_sets_are_its_sets_for_clustershell_and_slurm(must_show, slurm_conf):
    out, sets = must_show.out_dir, must_show.summary["host_sets"]
    held = [h["host"] for h in must_show.summary["held_out"]]
    assert sets["pool"]["hosts"] == must_show.summary["pool"]["hosts"] and sets["held_out"]["hosts"] == held
    for name in ("pool", "held_out"):
        text = (out / f"{name}.nodeset").read_text()
        assert text == sets[name]["folded"] + "\n" and text.count("\n") == 1
        assert sorted(NodeSet(text.strip())) == sorted(sets[name]["hosts"])
        expanded = subprocess.run(["nodeset", "-e", text.strip()], capture_output=True, text=True,
                                  timeout=60)  # ClusterShell's command line, as clush -w reads it
        assert expanded.returncode == 0 and sorted(expanded.stdout.split()) == sorted(sets[name]["hosts"])
        assert sorted(_slurm_hostnames(slurm_conf, text.strip())) == sorted(sets[name]["hosts"])
    assert (out / "held_out.nodeset").read_text() == "gpu[14,16]\n"


def test_summary_json_carries_the_sets_and_the_drain_reasons(must_show):
    summary = json.loads(must_show.files["summary"].read_text())
    sets = summary["host_sets"]
    assert set(sets) == {"hosts", "pool", "held_out", "broken", "drain", "busy", "other_classes", "cannot_run",
                         "unreachable"}
    assert sets["broken"]["hosts"] == ["gpu07", "gpu08", "gpu09", "gpu16", "gpu25", "gpu26"]
    # drained: the node's faults only (issue 49); the power caps, the foreign process and the probe's environment
    # are named with their owner and fix
    assert sets["broken"]["folded"] == "gpu[07-09,16,25-26]" and sets["drain"]["folded"] == "gpu16"
    assert [(d["folded"], d["taint"]) for d in summary["drain"]] == [("gpu16", "clocks")]
    assert [(o["host"], o["owner"]) for o in summary["owners"]] == [
        ("gpu07", "config"), ("gpu08", "config"), ("gpu09", "config"), ("gpu14", "process"), ("gpu25", "probe_env"),
        ("gpu26", "probe_env")]


def test_drain_config_drains_the_power_caps_under_one_reason(must_show, tmp_path):
    summary = build_report([must_show.out_dir.parent], tmp_path / "asked", drain_config=True).summary
    assert [(d["folded"], d["taint"]) for d in summary["drain"]] == [("gpu[07-09]", "power"), ("gpu16", "clocks")]
    # the lowest broken contract and its fix; the host's own figures left out, so that gpu07-09 share it
    assert summary["drain"][0]["reason"] == ("sweep: power: restore it with nvidia-smi -pl 700 "
                                             "(or record the intended cap in the expectations file)")


def test_summary_md_and_the_html_name_each_file_with_its_command(must_show):
    markdown = must_show.files["markdown"].read_text()
    html = must_show.files["html"].read_text()
    for name, command in (("pool.txt", "--limit @pool.txt"), ("pool.nodeset", 'srun --nodelist="$(cat pool.nodeset)"'),
                          ("drain.sh", "sh drain.sh"), ("kubectl.sh", "sh kubectl.sh")):
        line = next(line for line in markdown.splitlines() if line.startswith(f"- `{name}`"))
        assert command in line
        assert name in html and command.replace('"', "&#34;") in html
    assert "untested against a cluster" in next(line for line in markdown.splitlines() if "`kubectl.sh`" in line)


def test_drain_sh_folds_the_hosts_of_one_reason_into_one_line_and_resume_sh_resumes_only_sweeps_drains(
        must_show, tmp_path):
    asked = build_report([must_show.out_dir.parent], tmp_path / "asked", drain_config=True)  # the caps drained too
    drain = asked.files["drain"].read_text().splitlines()
    assert drain[0] == "#!/bin/sh" and len([line for line in drain if line.startswith("drain ")]) == 2
    bin_dir, log = fakes.install(tmp_path / "bin"), tmp_path / "argv.jsonl"
    assert fakes.run(asked.files["drain"], bin_dir, log).returncode == 0  # every node idle
    [first, *others] = fakes.updates(log)
    assert first == ["update", "NodeName=gpu[07-09]", "State=DRAIN", "Reason=sweep: power: restore it with "
                     "nvidia-smi -pl 700 (or record the intended cap in the expectations file)"]
    assert [argv[1] for argv in others] == ["NodeName=gpu16"]
    # a later sweep: gpu01 (drained by sweep) and gpu02 (by hand) are in the pool, gpu07 still broken
    state = tmp_path / "slurm.json"
    state.write_text(json.dumps({"gpu01": ["IDLE+DRAIN", "sweep: power: restore it"],
                                 "gpu02": ["IDLE+DRAIN+NOT_RESPONDING", "disk replace"], "gpu03": ["IDLE", None],
                                 "gpu07": ["MIXED+DRAIN", "sweep: power: restore it"]}))
    done = fakes.run(asked.files["resume"], bin_dir, log, SLURM_NODES=str(state))
    assert fakes.updates(log)[len(others) + 1:] == [["update", "NodeName=gpu01", "State=RESUME"]]
    assert done.returncode == 0 and done.stdout == "resumed gpu01\n"
    script = asked.files["resume"]
    assert done.stderr.splitlines() == [
        f"{script}: gpu02 left alone: IDLE+DRAIN+NOT_RESPONDING by someone else, Reason=disk replace",
        f"{script}: gpu07 left alone: still held out or broken in this report, MIXED+DRAIN, Reason=sweep: power: restore it"]


# --- hostile names and messages -------------------------------------------------------------------


def _run_script(script: Path, shell: str, tmp_path: Path, **env: str) -> Path:
    """Run `script` against the recording fakes (by default every node idle, no Kubernetes node); its argv log."""
    bin_dir, work = fakes.install(tmp_path / "bin"), tmp_path / f"cwd-{shell}-{script.stem}"
    work.mkdir()
    log = tmp_path / f"argv-{shell}-{script.stem}.jsonl"
    checked = subprocess.run([shell, "-n", str(script)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    done = fakes.run(script, bin_dir, log, shell=shell, cwd=work, **env)
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert list(work.iterdir()) == []  # nothing but the commands ran: no PWNED file
    return log


def _hostile_fleet(tmp_path: Path):
    capped = fv.power_cap(fv.h200(2, "gpu01"), 250.0)
    for contract in capped["contracts"]:
        if contract["name"] == "power":
            contract["fix"] = HOSTILE
    records = [fv.record("gpu01", capped),  # a class of its own, broken
               fv.record("gpu02", fv.foreign_process(fv.h200(2, "gpu02"), name=HOSTILE, gpu=0)),  # held out
               fv.record("gpu$(touch PWNED4)", fv.hw_thermal(fv.h200(2, "x"), gpu=0)),  # held out, broken
               fv.record("gpu`touch PWNED5`\nx", fv.hw_thermal(fv.h200(2, "y"), gpu=1)),
               fv.record("gpu03", fv.h200(2, "gpu03")), fv.record("gpu04", fv.h200(2, "gpu04"))]
    fv.write_run(tmp_path / "run", records)
    with pytest.warns(Warning, match="left out"):  # --drain-config: gpu01's power cap drained, its hostile fix the reason
        return build_report([tmp_path / "run"], tmp_path / "out", drain_config=True)


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_hostile_names_and_messages_reach_scontrol_and_kubectl_as_arguments_only(tmp_path, shell):
    result = _hostile_fleet(tmp_path)
    reasons = [d["reason"] for d in result.summary["drain"]]
    assert reasons[0].startswith("sweep: power: `touch PWNED2`$(touch PWNED) 'q' \"dq\"")  # one line, kept as text
    assert all(r.isprintable() and r.isascii() for r in reasons)
    log = _run_script(result.files["drain"], shell, tmp_path)
    # gpu02's process of no job is named, not drained (issue 49)
    assert fakes.updates(log) == [["update", "NodeName=gpu01", "State=DRAIN", f"Reason={reasons[0]}"]]
    asked = [["show", "node", "-o", n] for n in ("gpu03", "gpu04", "gpu01")]
    reads = [argv for argv in fakes.ran(log, "scontrol") if argv[0] != "update"]
    assert reads == [["ping"], *asked[2:]]  # one node per query, by the report's own names
    assert fakes.ran(_run_script(result.files["resume"], shell, tmp_path), "scontrol") == [["ping"], *asked]
    kube = tmp_path / f"nodes-{shell}.json"
    kube.write_text(json.dumps({"items": [fakes.node(n) for n in ("gpu01", "gpu02", "gpu03", "gpu04")]}))
    def held(n, taint):
        return [["annotate", "node", n, "sweep/cordoned=true", "--overwrite"], ["cordon", n],
                ["taint", "nodes", n, f"sweep/broken={taint}:NoSchedule", "--overwrite"]]
    assert fakes.ran(_run_script(result.files["kubectl"], shell, tmp_path, KUBE_NODES=str(kube)), "kubectl") == [
        ["get", "nodes", "-o", "json"], *held("gpu01", "power")]
    drain = result.files["drain"].read_text()
    # the names no node set can hold are named in a comment, escaped onto its one line
    assert "# left out (not a Slurm node name): 'gpu$(touch PWNED4)'" in drain
    assert "# left out (not a Slurm node name): 'gpu`touch PWNED5`\\nx'" in drain
    assert result.summary["host_sets"]["broken"]["not_folded"] == ["gpu$(touch PWNED4)", "gpu`touch PWNED5`\nx"]


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"],
                                                     exclude_characters="\x00"), min_size=1), min_size=1,
                      max_size=30))
def test_a_quoted_word_is_one_argument_whatever_it_holds(tmp_path_factory, texts):
    work = tmp_path_factory.mktemp("word")
    script = work / "words.sh"
    script.write_text("".join(f"printf '%s\\0' {word(t)}\n" for t in texts), encoding="utf-8")
    for shell in ("sh", "bash"):
        done = subprocess.run([shell, str(script)], cwd=work, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.decode("utf-8").split("\0")[:-1] == texts
    assert sorted(p.name for p in work.iterdir()) == ["words.sh"]


# --- --limit @FILE, read by sweep run and by ansible ---------------------------------------------


def _ansible(tmp_path: Path, inventory: Path, limit: str) -> list[str]:
    config = tmp_path / "ansible.cfg"
    config.write_text("")
    done = subprocess.run(["ansible", "-i", str(inventory), "--limit", limit, "all", "--list-hosts"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, ANSIBLE_CONFIG=str(config), ANSIBLE_HOME=str(tmp_path / ".ansible"),
                                   ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_NOCOLOR="1"))
    assert done.returncode == 0, done.stderr
    return sorted(line.strip() for line in done.stdout.splitlines()[1:])


_inventory_name = st.from_regex(r"[a-z][a-z0-9_.-]{0,6}[0-9]{0,3}", fullmatch=True)


@settings(SLOW, max_examples=6, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # capsys: read out
@given(names=st.lists(_inventory_name, min_size=2, max_size=25, unique=True), data=st.data())
def test_the_reports_host_files_select_the_same_hosts_in_sweep_and_in_ansible(tmp_path_factory, capsys, names, data):
    require(shutil.which("ansible") is not None, "ansible-core (pip install ansible-core) is the oracle here")
    from sweep.cli import main

    tmp_path = tmp_path_factory.mktemp("limit")
    chosen = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names) - 1, unique=True))
    records = [fv.record(n, fv.hw_thermal(fv.h200(1, n), gpu=0) if n in chosen else fv.h200(1, n)) for n in names]
    fv.write_run(tmp_path / "run", records)
    summary = build_report([tmp_path / "run"], tmp_path / "run" / "report").summary
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n" + "".join(f"    {json.dumps(n)}:\n" for n in names))
    held = [h["host"] for h in summary["held_out"]]
    assert sorted(held) == sorted(chosen)
    for name, hosts in (("held_out.txt", held), ("pool.txt", summary["pool"]["hosts"])):
        limit = f"@{tmp_path / 'run' / 'report' / name}"
        capsys.readouterr()
        code = main(["run", str(inventory), "--limit", limit, "--list-hosts"])
        ours = sorted(line.strip() for line in capsys.readouterr().out.splitlines()[1:])
        assert code == 0 and ours == _ansible(tmp_path, inventory, limit) == sorted(hosts)


def test_a_host_met_in_two_run_folders_is_one_node_in_the_node_sets_and_scripts(tmp_path):
    for run, gpu02 in (("a", fv.h200(2, "gpu02")), ("b", fv.hw_thermal(fv.h200(2, "gpu02"), gpu=1))):
        fv.write_run(tmp_path / run, [fv.record("gpu01", fv.h200(2, "gpu01")), fv.record("gpu02", gpu02)])
    result = build_report([tmp_path / "a", tmp_path / "b"], tmp_path / "out")  # the CLI warns of the doubling
    sets = result.summary["host_sets"]
    assert sets["held_out"]["hosts"] == ["gpu02#2"] and sets["held_out"]["folded"] == "gpu02"
    assert sets["pool"]["folded"] == "gpu[01-02]" and not sets["pool"]["not_folded"]
    assert "\ndrain gpu02 \"sweep: clocks: check fans, airflow and inlet temperature; the GPU is too hot for its clocks\" gpu02\n" \
        in result.files["drain"].read_text()
    assert "\nhold gpu02 clocks\n" in result.files["kubectl"].read_text()
    assert "\nresume gpu01 gpu01\nkeep gpu02 gpu02\n" in result.files["resume"].read_text()  # the pool's gpu02 is gpu02#2 too


def test_xid_hosts_are_drained_for_the_repair_nvidia_prescribes_one_line_per_repair_and_event(tmp_path):
    """Two hosts whose GPUs fell off the bus (on different buses) share one drain line whose reason is
    the repair (reboot) and the event, and their taint names the code; an application Xid is not drained."""
    records = [fv.record("gpu03", fv.xid(fv.h200(2, "gpu03"), bus="0000:19:00.0")),
               fv.record("gpu09", fv.xid(fv.h200(2, "gpu09"), bus="0000:3b:00.0")),
               fv.record("gpu11", fv.xid(fv.h200(2, "gpu11"), code=13, said="Graphics Exception")),
               fv.record("gpu12", fv.h200(2, "gpu12"))]
    fv.write_run(tmp_path / "run", records)
    result = build_report([tmp_path / "run"], tmp_path / "out")
    xid_lines = [d for d in result.summary["drain"] if d["taint"].startswith("xid")]
    assert [(d["folded"], d["taint"]) for d in xid_lines] == [("gpu[03,09]", "xid79")]
    assert xid_lines[0]["reason"] == "sweep: reboot: Xid 79 GPU has fallen off the bus"
    drain = result.files["drain"].read_text()
    assert '\ndrain "gpu[03,09]" "sweep: reboot: Xid 79 GPU has fallen off the bus" gpu03 gpu09\n' in drain
    assert "gpu11" not in drain and "\nhold gpu03 xid79\nhold gpu09 xid79\n" in result.files["kubectl"].read_text()


def test_dry_runs_without_a_scheduler_print_what_the_report_asks_each_line_marked_and_exit_0(must_show, tmp_path):
    """No controller answers (scontrol ping fails) and no API server (kubectl refused): `-n` prints the
    commands from the report alone, each marked "state not read", and runs nothing; without -n nothing is done."""
    bin_dir, log = fakes.install(tmp_path / "bin"), tmp_path / "argv.jsonl"
    groups = must_show.summary["drain"]
    done = fakes.run(must_show.files["drain"], bin_dir, log, "-n", SLURM_DOWN="1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(groups) and all(line.startswith("would run: scontrol update ") and
                                             line.endswith("  # state not read") for line in lines)
    assert [shlex.split(line[len("would run:"):])[2] for line in lines] == [f"NodeName={g['folded']}" for g in groups]
    assert fakes.updates(log) == []
    refused = fakes.run(must_show.files["drain"], bin_dir, log, SLURM_DOWN="1")
    assert refused.returncode == 1 and refused.stdout == "" and "nothing done" in refused.stderr
    assert fakes.updates(log) == []
    kube = fakes.run(must_show.files["kubectl"], bin_dir, log, "-n", KUBE_DOWN="1")
    assert kube.returncode == 0, kube.stderr
    hosts = [h for g in groups for h in g["hosts"]]
    assert len(kube.stdout.splitlines()) == 3 * len(hosts)  # annotate, cordon, taint per host to hold
    assert all(line.endswith("# state not read") for line in kube.stdout.splitlines())
    assert [argv for argv in fakes.ran(log, "kubectl")] == [["get", "nodes", "-o", "json"]]
