"""`sweep run --list-hosts` checks every option a real run checks (issue 41): an option a run refuses
(exit 2, one line with the fix) is refused the same way, with the same words, when only listing."""
from __future__ import annotations

import pytest

from sweep.cli import main


@pytest.mark.parametrize("bad", [["--forks", "0"], ["--connect-timeout", "-5"], ["--transport", "telnet"],
                                 ["--host-deadline", "0"], ["--retry-failed"]])
def test_list_hosts_refuses_what_a_run_refuses_with_the_same_words(bad, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ran = main(["run", "gpu01,gpu02,", *bad])
    said = capsys.readouterr()
    listed = main(["run", "gpu01,gpu02,", "--list-hosts", *bad])
    shown = capsys.readouterr()
    assert ran == listed == 2
    assert shown.err == said.err and shown.err.startswith("sweep: error: ") and shown.err.count("\n") == 1
    assert shown.out == ""  # no host listed
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())


def test_list_hosts_with_good_options_still_lists(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "gpu01,gpu02,", "--list-hosts", "--forks", "4", "--connect-timeout", "5"]) == 0
    assert capsys.readouterr().out == "  hosts (2):\n    gpu01\n    gpu02\n"
