"""Issue 53, hostile round 4: what ``--trust-manifest`` takes is shown whole, no secret reaches the run
folder, a foreign folder is checked before what it names is read, nothing is written through a link,
the agent's bootstrap is isolated, folders get their mode whatever the umask, numbers are bounded.

Each test uses the attack's own shape where the issue gives one.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import fleet_variants as fv
from sweep.collect.resume import OPTIONS, ManifestNotTrusted, resolve
from sweep.collect.run import run_sweep
from sweep.errors import ReadBackWarning
from sweep.inventory.command_line import command_line_vars
from sweep.store import RunFolder, new_manifest

ROOT = Path(__file__).resolve().parents[2]


def _options(**changes) -> dict:
    asked = {name: option.default for name, option in OPTIONS.items()}
    asked.update(changes)
    return resolve(asked, None, None).kept


def _foreign(tmp_path: Path, monkeypatch, inventory: str = "h01,h02,", **changes) -> Path:
    """An interrupted run of two hosts, h01 recorded, written by a colleague (another HOME: another key);
    the test goes on as the operator."""
    monkeypatch.setenv("HOME", str(tmp_path / "colleague"))
    folder = RunFolder.create(tmp_path / "run")
    manifest = new_manifest(inventory, {"hosts": [{"name": "h01"}, {"name": "h02"}]}, ["h01", "h02"],
                            _options(**changes))
    manifest["state"] = "interrupted"
    folder.write_manifest(manifest)
    folder.write_record(fv.record("h01", fv.h200(1, "h01")))
    folder.close()
    monkeypatch.setenv("HOME", str(tmp_path / "operator"))
    return folder.path


def _proxy_args(mark: Path, pad: int = 9) -> str:
    """The attack's value: nine harmless options, then a ProxyCommand (about 250 characters)."""
    return "-o ServerAliveInterval=30 " * pad + f"-o ProxyCommand='touch {mark}; nc %h %p'"


# --- 1. --trust-manifest shows whole what it takes, or refuses ---------------------------------------------


def test_a_foreign_proxycommand_after_nine_options_is_listed_whole_in_the_refusal(tmp_path, monkeypatch):
    mark = tmp_path / "PWNED"
    value = _proxy_args(mark)
    assert len(value) >= 250
    run = _foreign(tmp_path, monkeypatch,
                   inventory_vars=command_line_vars(extra=[json.dumps({"ansible_ssh_common_args": value})]))
    with pytest.raises(ManifestNotTrusted) as err:
        run_sweep(None, resume=run)
    assert f"ProxyCommand='touch {mark}; nc %h %p'" in err.value.message and not mark.exists()


def test_trust_manifest_names_the_whole_proxycommand_before_it_takes_it(tmp_path, monkeypatch):
    mark = tmp_path / "PWNED"
    run = _foreign(tmp_path, monkeypatch,
                   inventory_vars=command_line_vars(extra=[json.dumps({"ansible_ssh_common_args": _proxy_args(mark)})]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReadBackWarning)  # the first line said stops the resume right there
        with pytest.raises(ReadBackWarning) as said:
            run_sweep(None, resume=run, trust_manifest=True)
    text = str(said.value)
    assert text.count("\n") == 0 and "inventory_vars = " in text
    assert f"ProxyCommand='touch {mark}; nc %h %p'" in text and not mark.exists()


def test_a_value_too_long_to_show_whole_is_refused_even_with_trust_manifest(tmp_path, monkeypatch):
    mark = tmp_path / "PWNED"
    value = _proxy_args(mark, pad=400)  # 10,000 characters
    run = _foreign(tmp_path, monkeypatch,
                   inventory_vars=command_line_vars(extra=[json.dumps({"ansible_ssh_common_args": value})]))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with pytest.raises(ManifestNotTrusted) as err:
            run_sweep(None, resume=run, trust_manifest=True)
    assert "too long to show whole" in err.value.message and "inventory_vars" in err.value.message
    assert "ServerAliveInterval" not in err.value.message  # named, never shortened into a part of itself
    assert not mark.exists() and not [w for w in said if issubclass(w.category, ReadBackWarning)]


def test_control_characters_in_a_taken_value_are_escaped_not_sent_to_the_terminal(tmp_path, monkeypatch):
    run = _foreign(tmp_path, monkeypatch, agent_args=["--out", "/tmp/x\x1b[2K\rclean"])
    with pytest.raises(ManifestNotTrusted) as err:
        run_sweep(None, resume=run)
    assert "\x1b" not in err.value.message and "\r" not in err.value.message and "clean" in err.value.message
