"""The public API (`import sweep`): the five steps an operator scripts, end to end on recorded hosts."""
import subprocess
import sys
from pathlib import Path

import fleet_variants as fv
import sweep

ROOT = Path(__file__).resolve().parents[2]


def test_import_sweep_is_cheap_and_lists_its_api():
    code = "import sys, sweep; print(sorted(m for m in ('pandas', 'paramiko', 'jinja2') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert {"load_inventory", "run_sweep", "load_fleet", "compare", "build_report"} <= set(dir(sweep))
    for name in sweep.__all__[1:]:
        assert getattr(sweep, name).__doc__, name


def test_inventory_fleet_compare_report(tmp_path):
    inventory = sweep.load_inventory(ROOT / "inventories" / "example.yml")
    assert inventory.hosts and all(isinstance(h, sweep.Host) for h in inventory.hosts)
    fv.write_run(tmp_path / "run", [fv.record(n, fv.h200(2, n)) for n in ("gpu01", "gpu02")])
    fleet = sweep.load_fleet([tmp_path / "run"])
    findings = sweep.compare(fleet)
    assert len(findings.classes) == 1
    report = sweep.build_report([tmp_path / "run"], tmp_path / "report")
    assert report.exit_code == 0 and report.files["html"].is_file()


def test_unknown_name_is_an_attribute_error():
    try:
        sweep.no_such_thing
    except AttributeError as err:
        assert "no_such_thing" in str(err)
    else:
        raise AssertionError("no AttributeError")


def test_run_sweep_takes_its_options_as_a_few_frozen_objects():
    """httpx's Timeout / Limits shape: hosts, ssh and agent objects, not two dozen keywords."""
    import dataclasses
    import inspect

    params = inspect.signature(sweep.run_sweep).parameters
    assert len(params) <= 15, list(params)  # 15: issue 52 added workers beside forks
    assert {"hosts", "ssh", "agent"} <= set(params) and not {"limit", "known_hosts", "agent_args"} & set(params)
    for cls in (sweep.HostSelection, sweep.SSHSettings, sweep.AgentOptions):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    ssh = sweep.SSHSettings(known_hosts="fleet_known_hosts", key_passphrase="secret")
    assert ssh.known_hosts == ("fleet_known_hosts",) and "secret" not in repr(ssh)
    resolved = ssh.resolved()
    assert resolved.known_hosts == ("fleet_known_hosts", "~/.ssh/known_hosts") and resolved.transport == "auto"
    try:
        ssh.host_deadline = 5
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("SSHSettings is not frozen")


def test_a_run_keeps_what_the_objects_said_in_its_manifest(tmp_path):
    """The options objects reach the run: its manifest keeps the limit, the known_hosts and the agent's args."""
    import json

    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01:\n    gpu02:\n")
    result = sweep.run_sweep(inventory, out=tmp_path / "run", engine=_NoHosts(),
                             hosts=sweep.HostSelection(limit="gpu02"),
                             ssh=sweep.SSHSettings(known_hosts=str(tmp_path / "kh"), ssh_config=None, retries=2),
                             agent=sweep.AgentOptions(args=["--deep"]))
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["hosts"] == ["gpu02"]
    options = manifest["options"]
    assert (options["limit"], options["known_hosts"], options["retries"], options["agent_args"]) == (
        "gpu02", [str(tmp_path / "kh")], 2, ["--deep"])


class _NoHosts:
    """An engine that fails every host at once, without a connection: the run's options are what is checked."""

    name = "noop"

    def bind(self, job):
        self.job = job
        return self

    def run(self, hosts):
        from sweep.collect.outcome import Outcome

        for host in hosts:
            yield host, Outcome(host=host, status="failed", failure_class="refused", message=f"{host.name}: no")

    def stop(self):
        pass

    def drain(self, timeout):
        return iter(())


class _CtrlCAfterTheSecondRecord(_NoHosts):
    """Ctrl-C comes the moment the second host's record is on disk (the race a busy machine gave
    test_faults' Ctrl-C test: a record written but not counted, the manifest one host short)."""

    name = "ctrl-c"

    def run(self, hosts):
        from sweep.collect import run as run_module
        from sweep.collect.outcome import Outcome

        written = run_module.keep_record

        def keep_then_interrupt(folder, outcome, wrap=None):
            kept = written(folder, outcome, wrap)
            if outcome.host.name == "gpu02":
                import signal
                signal.raise_signal(signal.SIGINT)  # its handler runs at once, here, in the main thread
            return kept

        run_module.keep_record = keep_then_interrupt
        try:
            for host in hosts:
                yield host, Outcome(host=host, status="failed", failure_class="refused", message=f"{host.name}: no")
        finally:
            run_module.keep_record = written


def test_a_ctrl_c_as_a_record_lands_leaves_the_manifest_counting_it(tmp_path):
    import json

    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n" + "".join(f"    gpu0{i}:\n" for i in range(1, 5)))
    result = sweep.run_sweep(inventory, out=tmp_path / "run", engine=_CtrlCAfterTheSecondRecord())
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    on_disk = sorted(p.stem for p in (result.run_dir / "hosts").glob("*.json"))
    assert manifest["state"] == "interrupted" and on_disk == ["gpu01", "gpu02"]
    assert manifest["counts"] == {"total": 4, "ok": 0, "failed": 2, "pending": 2}
    assert result.pending == 2
