"""Every hint and every "run folder:" line names a folder by its absolute path (issue 41): a run made
under the default relative reports/ folder can be resumed, read and reported after a `cd`. And the
summary's words agree in number ("1 of 1 host has no health.json")."""
from __future__ import annotations

import socket

from sweep.cli import main


def _refused_fleet(tmp_path):
    with socket.socket() as s:  # a loopback port nothing listens on: the host is refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "fleet.yml").write_text(f"all:\n  hosts:\n    gpu01:\n      ansible_host: 127.0.0.1\n"
                                        f"      ansible_port: {port}\n")


def test_the_summary_names_the_run_folder_by_its_absolute_path_and_its_words_agree(tmp_path, monkeypatch, capsys):
    _refused_fleet(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["run", "fleet.yml", "--connect-timeout", "2", "--out", "reports/one"]) == 1
    err = capsys.readouterr().err.splitlines()
    run = (tmp_path / "reports" / "one").resolve()
    assert f"run folder: {run}" in err and "run folder: reports/one" not in err
    assert "not fully swept: 1 of 1 host has no health.json" in err


def test_the_hint_to_resume_a_folder_that_holds_a_run_is_absolute(tmp_path, monkeypatch, capsys):
    _refused_fleet(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["run", "fleet.yml", "--connect-timeout", "2", "--out", "reports/one", "--no-report"]) == 1
    capsys.readouterr()
    assert main(["run", "fleet.yml", "--connect-timeout", "2", "--out", "reports/one", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert f"resume it with --resume {(tmp_path / 'reports' / 'one').resolve()}, or choose another --out" in err


def test_a_resumed_runs_summary_names_the_failed_hosts_of_earlier_sessions_its_table_counts(tmp_path):
    """--resume --retry-failed timeout: gpu01 timed out again, gpu02's earlier 'refused' was not retried;
    the table counts both, so the lines say where the second one is."""
    import io
    from dataclasses import replace

    from rich.console import Console

    from sweep.cli.progress import render_summary
    from sweep.collect.run import RunResult

    result = RunResult(run_dir=tmp_path / "run", state="complete", total=3, ok=1, failed=2, pending=0, resumed=2,
                       by_class={"timeout": 1, "refused": 1}, failures=(("gpu01", "timeout", "no answer in 10 s"),),
                       earlier_failed=(("gpu02", "refused"),), retry_classes=("timeout",), retried=("gpu01",))
    out = io.StringIO()
    render_summary(result, Console(file=out, width=200, highlight=False))
    lines = [line.strip() for line in out.getvalue().splitlines()]
    assert "gpu01: timeout: no answer in 10 s" in lines
    run = (tmp_path / "run").resolve()
    assert (f"1 more failed host from an earlier session of this run, not swept again: gpu02 (refused); their "
            f"records are in {run}/hosts/; sweep them again with: sweep run --resume {run} --retry-failed refused") \
        in lines
    assert "not fully swept: 2 of 3 hosts have no health.json" in lines
    out = io.StringIO()  # a RunResult made without the earlier failures (a library caller's) still counts them
    render_summary(replace(result, earlier_failed=()), Console(file=out, width=200, highlight=False))
    assert (f"1 more failed host from an earlier session of this run, not swept again: their records are in "
            f"{run}/hosts/") in [line.strip() for line in out.getvalue().splitlines()]
