"""What a new user sees of the CLI: --version, help with metavars as users write them, no option
that only says "not yet", copy-paste lines that the terminal's width does not break, plurals."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sweep
from sweep.cli import command, main

ROOT = Path(__file__).resolve().parents[2]


def helps():
    """(command line, its --help text) for the top level and every command."""
    found = [("sweep", [])]
    stack = [([], command())]
    while stack:
        prefix, cmd = stack.pop()
        for name, sub in getattr(cmd, "commands", {}).items():
            found.append((" ".join(["sweep", *prefix, name]), [*prefix, name]))
            stack.append(([*prefix, name], sub))
    return found


@pytest.mark.parametrize("line,argv", helps(), ids=[h[0] for h in helps()])
def test_help_reads_as_users_write_commands(line, argv, capsys):
    assert main([*argv, "--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"Usage: {line} ")
    assert not re.search(r"<[a-z\[\]]+>|\{[a-zA-Z_.]+\}", text), text  # typer's <path>, <list[str]>, {paths}
    assert "not yet" not in text and "(s)" not in text and "(es)" not in text


def test_version(capsys):
    assert main(["--version"]) == 0
    captured = capsys.readouterr()  # the version is the result: stdout, as every tool prints it
    assert captured.out.strip() == f"sweep {sweep.__version__}" and captured.err == ""


def test_run_wrap_is_shown_now_that_it_works(capsys):
    assert main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--wrap" in out and "--metric NAME=REGEX" in out and "[-- COMMAND [ARGS...]]" in out


def test_bundle_prints_its_command_on_one_line_in_a_narrow_terminal(tmp_path):
    env = dict(os.environ, COLUMNS="40", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "sweep.cli", "bundle", "-o", str(tmp_path / "agent.pyz")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()  # the written file is the result: stdout
    assert proc.stderr == "" and len(lines) == 1 and lines[0].endswith(f"run it with: python3 {tmp_path / 'agent.pyz'} --out DIR")


def test_os_errors_that_escape_a_command_are_one_line(tmp_path, capsys, monkeypatch):
    """A folder made read-only after the checks: the path, what failed and the fix, exit 2."""
    from sweep.collect import bundle as bundle_module

    def full(dest):
        raise OSError(28, "No space left on device", str(dest))

    monkeypatch.setattr(bundle_module, "build_bundle", full)
    assert main(["bundle", "-o", str(tmp_path / "agent.pyz")]) == 2
    assert capsys.readouterr().err == (f"sweep: error: {tmp_path / 'agent.pyz'}: No space left on device; free "
                                       "space on that file system, or write elsewhere\n")


def test_audit_folds_hosts_with_the_same_finding_into_one_line(tmp_path, capsys):
    """Ten hosts with one GPU each against an expectation of eight: one line, hosts folded (clubak -b)."""
    sys.path.insert(0, str(ROOT / "tests" / "unit"))
    import fleet_variants as fv

    records = [fv.record(f"h{n:04d}", fv.h200(1, f"h{n:04d}")) for n in range(1, 11)]
    records.append(fv.record("h0011", fv.h200(8, "h0011")))
    fv.write_run(tmp_path / "run", records)
    expect = tmp_path / "expect.yml"
    expect.write_text("version: 1\ndefaults:\n  gpu_count: 8\n")
    assert main(["audit", str(tmp_path / "run"), "--expect", str(expect)]) == 5
    captured = capsys.readouterr()  # the findings are the result: stdout, nothing of them on stderr
    lines = captured.out.splitlines()
    assert "visible to the driver" not in captured.err
    folded = [line for line in lines if "visible to the driver" in line]
    assert len(folded) == 1 and folded[0].startswith("h[0001-0010]: 1 GPU visible to the driver; expected 8 ("), lines
    assert "10 hosts off expectations (gpu_count): h[0001-0010]" in lines


def test_run_ends_with_the_absolute_paths_of_its_run_folder_and_report(tmp_path, monkeypatch, capsys):
    """The default run folder is relative to the current directory: the last lines say where it is."""
    import socket

    with socket.socket() as s:  # a loopback port nothing listens on: the host is refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "fleet.yml").write_text(f"all:\n  hosts:\n    gpu01:\n      ansible_host: 127.0.0.1\n"
                                        f"      ansible_port: {port}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["run", "fleet.yml", "--connect-timeout", "2"]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()  # the results on stdout: the verdict, the report, the run folder
    run = next((tmp_path / "reports").glob("*-fleet"))
    assert lines[-2:] == [f"report: {run.resolve() / 'report' / 'report.html'}", f"run folder: {run.resolve()}"]
    assert "refused" in captured.err  # the summary and its failures are diagnostics: stderr
    assert lines[1:6] == ["  unreachable 1  gpu01", "causes, each with its fix:",  # the verdict's sets and causes
                          lines[3], f"next: sweep run --resume {run.resolve()} --retry-failed: reach the 1 unreachable "
                          "host and sweep them again", f"details: sweep report {run.resolve()} --details"] and len(lines) == 8
    assert lines[3].startswith("  gpu01 (1 unreachable): refused: ") and "; fix: start sshd on the host" in lines[3]
    assert f"report: {run.resolve()}" not in captured.err
    assert main(["run", "--help"]) == 0
    assert "reports/<UTC time>-<inventory name> under the current directory" in " ".join(capsys.readouterr().out.split())
