"""The exit codes and their words in one place (issue 48): sweep/exitcodes.py's table is the
README's table and every command's --help section; `sweep report --help` lists the --wrap codes 6
and 7 too."""
import re
from pathlib import Path

import pytest

from sweep import exitcodes
from sweep.cli.reference import help_text

ROOT = Path(__file__).resolve().parents[2]


def markdown_table() -> str:
    """The README's table of exit codes (sweep/exitcodes.py's TABLE), and the precedence line
    under it."""
    rows = [f"| {code} | {readme} |" for code, (_, readme) in sorted(exitcodes.TABLE.items())]
    order = ", ".join(str(code) for code in exitcodes.PRECEDENCE)
    return "\n".join(["| code | meaning |", "|---|---|", *rows, "",
                      f"Precedence when several apply: {order}"])


def test_the_readme_table_is_the_exitcodes_table():
    readme = (ROOT / "README.md").read_text()
    assert markdown_table() in readme, (
        "README.md's exit-code table differs from sweep/exitcodes.py: paste this under README's "
        "'### Exit codes':\n" + markdown_table())


@pytest.mark.parametrize("command", sorted(exitcodes.COMMANDS))
def test_every_commands_help_lists_its_codes_from_the_table(command):
    text = help_text(command.split())
    assert "Exit codes:" in text, f"sweep {command} --help has no exit codes"
    section = text[text.index("Exit codes:"):]
    listed = [int(code) for code in re.findall(r"^  (\d+) ", section, re.M)]
    assert listed == list(exitcodes.COMMANDS[command])
    for code, meaning in exitcodes.help_rows(command):
        assert " ".join(meaning.split()[:4]) in " ".join(section.split()), (command, code)


def test_sweep_report_help_lists_the_wrap_codes():
    section = help_text(["report"]).split("Exit codes:", 1)[1]
    for code in (exitcodes.BENCH_FAILED, exitcodes.REFUSED):
        assert re.search(rf"^  {code} ", section, re.M), f"sweep report --help omits {code}"


def test_every_code_a_verdict_gives_is_in_the_table_and_in_its_precedence():
    assert set(exitcodes.PRECEDENCE) == set(exitcodes.TABLE) == set(exitcodes.MEANING)
    assert set(exitcodes.COMMANDS["report"]) | {exitcodes.INTERRUPTED} == set(exitcodes.COMMANDS["run"])


def test_a_run_and_its_report_exit_with_the_code_the_table_puts_first():
    assert exitcodes.first((exitcodes.OK, exitcodes.INCOMPLETE)) == exitcodes.INCOMPLETE
    assert exitcodes.first((exitcodes.NOT_COMPARABLE, exitcodes.INCOMPLETE)) == exitcodes.INCOMPLETE
    assert exitcodes.first((exitcodes.BROKEN, exitcodes.OK)) == exitcodes.BROKEN
    assert exitcodes.first((exitcodes.OFF, exitcodes.INTERRUPTED)) == exitcodes.INTERRUPTED
