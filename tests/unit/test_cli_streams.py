"""Output a script can use: results on stdout, diagnostics on stderr, nothing cut when piped; one exit
code, one name and one GPU folding for a change whether `sweep diff` compares probes or runs; one
option name per idea (older spellings hidden but working); counts with their noun, never "(s)"."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

import fleet_variants as fv
from sweep.cli import app, main
from sweep.text import plural

ROOT = Path(__file__).resolve().parents[2]
LONG = "gpu-" + "x" * 150  # a host name far wider than any terminal


@pytest.fixture
def runs(tmp_path):
    """Two runs of the same three hosts; in the second, gpu02's eight GPUs are capped at 500 W."""
    names = ("gpu01", "gpu02", LONG)
    run_a = fv.write_run(tmp_path / "run-a", [fv.record(n, fv.h200(8, n)) for n in names])
    later = {n: fv.h200(8, n) for n in names}
    fv.power_cap(later["gpu02"], 500.0)
    run_b = fv.write_run(tmp_path / "run-b", [fv.record(n, h) for n, h in later.items()])
    return run_a, run_b


def split(capsys):
    captured = capsys.readouterr()
    return captured.out.splitlines(), captured.err


def test_each_command_prints_its_results_on_stdout_and_its_diagnostics_on_stderr(runs, tmp_path, capsys):
    run_a, run_b = runs
    assert main(["report", str(run_a), "-o", str(tmp_path / "rep")]) == 0
    out, err = split(capsys)
    assert out[-1] == f"report: {(tmp_path / 'rep' / 'report.html').resolve()}" and out[0].startswith("One pool")
    nexts = [line for line in out if line.startswith("next: ")]  # the commands that act next, before the details
    assert nexts and out[-2 - len(nexts):-2] == nexts
    out = [line for line in out if line not in nexts]
    assert out[1].startswith("  pool 3  ")  # the verdict's sets and notes: results, on stdout
    assert out[-2] == f"details: sweep report {run_a.resolve()} --details"
    assert all(" not read on " in line for line in out[2:-2])
    assert err == ""
    expect = tmp_path / "expect.yml"
    expect.write_text("version: 1\ndefaults:\n  gpu_count: 4\n")
    assert main(["audit", str(run_a), "--expect", str(expect)]) == 5
    out, err = split(capsys)
    assert any("8 GPUs visible to the driver; expected 4" in line for line in out) and err == ""
    assert main(["baseline", "set", str(run_a), "-o", str(tmp_path / "bl")]) == 0
    out, err = split(capsys)
    assert "3 added, 0 updated, 0 kept" in " ".join(out) and err == ""
    assert main(["baseline", "check", str(run_b), "--baseline", str(tmp_path / "bl")]) == 5
    out, err = split(capsys)
    assert any(line.startswith("gpu02: power") for line in out) and err == ""
    assert main(["diff", str(run_a), str(run_b)]) == 5
    out, err = split(capsys)
    assert any("power.enforced_limit_w" in line for line in out) and err == ""


def test_a_report_of_two_runs_of_the_same_hosts_warns_that_it_doubles_them(runs, tmp_path, capsys):
    run_a, run_b = runs
    main(["report", str(run_a), str(run_b), "--out", str(tmp_path / "both")])
    out, err = split(capsys)
    warning = [line for line in err.splitlines() if line.startswith("sweep: warning: ")]
    assert len(warning) == 1, err
    assert "3 hosts" in warning[0] and "(gpu01, gpu01#2)" in warning[0]
    assert warning[0].endswith(f"use sweep diff {run_a} {run_b}")
    assert out[-1] == f"report: {(tmp_path / 'both' / 'report.html').resolve()}"
    other = fv.write_run(tmp_path / "run-c", [fv.record("gpu09", fv.h200(8, "gpu09"))])
    main(["report", str(run_a), str(other), "--out", str(tmp_path / "apart")])  # shards of one fleet: no warning
    assert "warning" not in split(capsys)[1]


def test_piped_output_keeps_long_values_whole(runs, tmp_path):
    """`sweep baseline show | cat` at COLUMNS=80 printed the driver as `580.…` and cut host names."""
    run_a, run_b = runs
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="80")
    base = [sys.executable, "-m", "sweep.cli"]
    subprocess.run(base + ["baseline", "set", str(run_a), "--dir", str(tmp_path / "bl")], env=env, check=True,
                   capture_output=True)  # --dir: the older spelling, so that this test runs on a37b4bd too
    proc = subprocess.run(base + ["baseline", "show", "--dir", str(tmp_path / "bl")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    long_rows = [line for line in proc.stdout.splitlines() if LONG in line]
    assert len(long_rows) == 1 and "580.159.04" in long_rows[0] and "…" not in proc.stdout, proc.stdout
    proc = subprocess.run(base + ["diff", str(run_a), str(run_b)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 5 and proc.stderr == "", proc.stderr
    assert f"{run_a} -> {run_b}: hosts: 1 changed; changes: power (1)" in proc.stdout.splitlines(), proc.stdout


def test_a_change_exits_named_and_folded_alike_between_two_probes_and_two_runs(runs, capsys):
    run_a, run_b = runs
    assert main(["diff", str(run_a), str(run_b), "--json"]) == 5
    run_changes = [c for c in json.loads(capsys.readouterr().out)["changes"] if c["field"] == "power.enforced_limit_w"]
    assert [(c["host"], c["kind"], c["gpus"]) for c in run_changes] == [("gpu02", "power", list(range(8)))]
    probes = [str(run / "hosts" / "gpu02.json") for run in runs]
    assert main(["diff", *probes, "--json"]) == 5  # 0 on a37b4bd: the same change, another exit code
    folded = [c for c in json.loads(capsys.readouterr().out)["folded"] if c["field"] == "power.enforced_limit_w"]
    assert [(c["kind"], c["gpus"]) for c in folded] == [("power", list(range(8)))]
    assert main(["diff", *probes]) == 5
    rows = [line for line in capsys.readouterr().out.splitlines() if "power.enforced_limit_w" in line]
    assert len(rows) == 1 and "│ power " in rows[0] and "0-7" in rows[0]
    # only readings moved (a clock, a temperature): no change of the machine, exit 0 both ways
    same = [str(run_a / "hosts" / "gpu01.json")] * 2
    assert main(["diff", *same]) == 0


def test_old_option_spellings_still_work_hidden_from_help(runs, tmp_path, capsys):
    run_a, _ = runs
    assert main(["bundle", "--output", str(tmp_path / "old.pyz")]) == 0 and (tmp_path / "old.pyz").is_file()
    assert main(["baseline", "set", str(run_a), "--dir", str(tmp_path / "old-bl")]) == 0
    assert "3 added" in capsys.readouterr().out
    assert main(["baseline", "check", str(run_a), "--dir", str(tmp_path / "old-bl")]) == 0
    assert main(["export", "prometheus", str(run_a), "--output", str(tmp_path / "old.prom")]) == 0
    assert (tmp_path / "old.prom").read_text().startswith("#")
    capsys.readouterr()
    for argv, old in ((["bundle"], "--output"), (["baseline", "set"], "--dir"), (["baseline", "show"], "--dir"),
                      (["export", "prometheus"], "--output")):
        assert main(argv + ["--help"]) == 0
        shown = capsys.readouterr().out
        assert old not in shown and "--out" in shown or argv[1:] == ["show"], shown


def test_every_command_that_writes_takes_o_and_out():
    group = typer.main.get_command(app)
    writers = {"probe", "bundle", "wrap", "run", "report", "demo", "history", "baseline set", "export prometheus"}
    found = {}
    for name, cmd in group.commands.items():
        for sub, leaf in (sorted(cmd.commands.items()) if hasattr(cmd, "commands") else [(None, cmd)]):
            path = f"{name} {sub}" if sub else name
            for param in leaf.params:
                if "--out" in getattr(param, "opts", ()):
                    found[path] = set(param.opts)
    assert set(found) == writers and all(opts == {"-o", "--out"} for opts in found.values()), found


def test_run_takes_the_inventory_as_i_as_ansible_does(tmp_path, capsys):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    rack_a:\n      hosts:\n        gpu[01:03]:\n")
    assert main(["run", str(inventory), "--limit", "rack_a:!gpu02", "--list-hosts"]) == 0
    positional = capsys.readouterr().out
    assert main(["run", "-i", str(inventory), "--limit", "rack_a:!gpu02", "--list-hosts"]) == 0
    assert capsys.readouterr().out == positional == "  hosts (2):\n    gpu01\n    gpu03\n"
    assert main(["run", "--inventory", str(tmp_path / "missing.yml"), "--list-hosts"]) == 2
    assert "missing.yml" in capsys.readouterr().err


def test_plural_counts_with_their_noun():
    assert [plural(n, "host") for n in (0, 1, 2)] == ["0 hosts", "1 host", "2 hosts"]
    assert plural(1, "class", "classes") == "1 class" and plural(3, "class", "classes") == "3 classes"


def test_a_single_host_fleet_reads_in_the_singular(tmp_path, capsys):
    run = fv.write_run(tmp_path / "one", [fv.record("gpu01", fv.h200(8, "gpu01"))])
    assert main(["report", str(run)]) == 0
    out, err = split(capsys)
    text = "\n".join(out) + err
    assert "One pool: the one host (gpu01) can run a benchmark." in text.splitlines(), text
    text += (run / "report" / "summary.md").read_text() + (run / "report" / "report.html").read_text()
    assert "(s)" not in text and not re.search(r"(?<![\d.,])1 hosts", text)
