"""The docs are checked: every command has help and is in the README; CI runs the README's test command."""
import re
from pathlib import Path

import pytest
import typer.main

from sweep.cli import app, main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def commands():
    group = typer.main.get_command(app)
    return sorted(group.commands)


def first_block():
    return re.search(r"```sh\n(.*?)```", README, re.S).group(1)


@pytest.mark.parametrize("name", commands())
def test_every_command_has_help_and_is_in_the_readme(name, capsys):
    assert main([name, "--help"]) == 0
    out = capsys.readouterr().out
    assert "Usage:" in out and len(out.splitlines()) > 3
    assert f"`sweep {name}" in README, f"sweep {name} is not documented in README.md"


def test_readme_starts_with_the_demo_and_the_test_command():
    lines = [l for l in first_block().splitlines() if l and not l.startswith("#")]
    assert len(lines) == 2
    assert lines[0].endswith("sweep demo")
    assert "pytest" in lines[1]


def test_ci_runs_the_readmes_test_command_verbatim():
    test_command = first_block().splitlines()
    pytest_cmd = [l for l in test_command if "pytest" in l][0].split("&& ")[-1].strip()
    assert pytest_cmd in (ROOT / ".ci" / "run").read_text().splitlines()
