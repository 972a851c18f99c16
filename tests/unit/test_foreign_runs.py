"""Issue 36: a run folder this user's sweep did not write is data, never instructions.

A colleague's folder is made here as a sweep makes it (RunFolder, new_manifest, the options as
`resolve` keeps them) under the colleague's HOME, so signed with the colleague's key; then resumed
under the operator's HOME. The program it names is a real script that leaves a mark when it runs.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import fleet_variants as fv
from sweep.collect.options import AgentOptions, HostSelection
from sweep.collect.resume import ManifestNotTrusted, OPTIONS, resolve
from sweep.collect.run import run_sweep
from sweep.collect.wrap import WrapSpec
from sweep.collect.engines.base import EngineError
from sweep.errors import ReadBackWarning, SweepError
from sweep.inventory.command_line import command_line_vars
from sweep.store import RunFolder, new_manifest
from sweep.trust import signed

ROOT = Path(__file__).resolve().parents[2]


def _options(**changes) -> dict:
    asked = {name: option.default for name, option in OPTIONS.items()}
    asked.update(changes)
    return resolve(asked, None, None).kept


def _folder(tmp_path: Path, monkeypatch, home: str, **changes) -> Path:
    """An interrupted run of two inline hosts, h01 recorded, its manifest written under HOME=`home`."""
    monkeypatch.setenv("HOME", str(tmp_path / home))
    folder = RunFolder.create(tmp_path / f"run-{home}")
    manifest = new_manifest("h01,h02,", {"hosts": [{"name": "h01"}, {"name": "h02"}]}, ["h01", "h02"],
                            _options(**changes))
    manifest["state"] = "interrupted"
    folder.write_manifest(manifest)
    folder.write_record(fv.record("h01", fv.h200(1, "h01")))
    folder.close()
    return folder.path


@pytest.fixture
def script(tmp_path):
    """A program that leaves a mark when run, and fails."""
    mark = tmp_path / "it-ran"
    path = tmp_path / "evil.sh"
    path.write_text(f"#!/bin/sh\ntouch {mark}\nexit 3\n")
    path.chmod(0o755)
    return path, mark


def test_a_colleagues_manifest_naming_a_program_is_refused_listing_it_and_runs_nothing(tmp_path, monkeypatch, script):
    path, mark = script
    run = _folder(tmp_path, monkeypatch, "colleague", engine="ansible", engine_settings={"ansible": str(path)},
                  ssh_config=str(tmp_path / "evil_config"), agent_args=["--out", "/tmp/x"],
                  accept_new_host_keys=True, known_hosts=[str(tmp_path / "theirs")],
                  wrap=WrapSpec(("sh", "-c", f"touch {mark}"), (), False, 0.2), transport="openssh", loader="ansible",
                  expect=str(tmp_path / "theirs.yml"))
    monkeypatch.setenv("HOME", str(tmp_path / "operator"))
    with pytest.raises(ManifestNotTrusted) as err:
        run_sweep(None, resume=run)
    assert not mark.exists(), "the manifest's program ran"
    assert err.value.where == str(run / "manifest.json") and err.value.exit_code == 2
    for shown in ('engine = "ansible"', f'"ansible": "{path}"', "ssh_config = ", 'agent_args = ["--out", "/tmp/x"]',
                  "accept_new_host_keys = true", "known_hosts = ", f'touch {mark}', 'transport = "openssh"',
                  'loader = "ansible"', "expect = "):
        assert shown in err.value.message
    assert "--trust-manifest" in err.value.fix


def test_trust_manifest_takes_what_it_names_and_says_so_first(tmp_path, monkeypatch, script):
    path, mark = script
    run = _folder(tmp_path, monkeypatch, "colleague", engine="ansible", engine_settings={"ansible": str(path)})
    monkeypatch.setenv("HOME", str(tmp_path / "operator"))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with pytest.raises(EngineError):
            run_sweep(None, resume=run, trust_manifest=True, agent=AgentOptions(args=()))
    assert mark.exists(), "--trust-manifest took the engine the manifest names"
    assert any(isinstance(w.message, ReadBackWarning) and f'"ansible": "{path}"' in str(w.message) for w in said)


def test_options_given_again_on_the_command_line_are_taken_from_it(tmp_path, monkeypatch, script):
    path, mark = script
    run = _folder(tmp_path, monkeypatch, "colleague", engine="ansible", engine_settings={"ansible": str(path)},
                  inventory_vars=command_line_vars(extra=['{"ansible_ssh_common_args": "-o ProxyCommand=touch /tmp/x"}']))
    monkeypatch.setenv("HOME", str(tmp_path / "operator"))
    with pytest.raises(ManifestNotTrusted) as err:  # the engine given again: the -e layer is still the manifest's
        run_sweep(None, resume=run, engine="ssh", given={"engine"})
    assert "inventory_vars = " in err.value.message and "ProxyCommand" in err.value.message
    assert 'engine = "ansible"' not in err.value.message and not mark.exists()


def test_the_users_own_manifest_is_resumed_with_its_options(tmp_path, monkeypatch):
    run = _folder(tmp_path, monkeypatch, "operator", known_hosts=[str(tmp_path / "mine")], accept_new_host_keys=True)
    assert signed(json.loads((run / "manifest.json").read_text()))
    edited = json.loads((run / "manifest.json").read_text())
    assert signed(edited)
    edited["options"]["accept_new_host_keys"] = False
    assert not signed(edited), "an edit breaks the signature"


def test_a_manifest_edited_after_the_sweep_is_foreign(tmp_path, monkeypatch, script):
    path, mark = script
    run = _folder(tmp_path, monkeypatch, "operator")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["options"].update(engine="ansible", engine_settings={"ansible": str(path)})
    (run / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ManifestNotTrusted):
        run_sweep(None, resume=run)
    assert not mark.exists()


def test_extra_vars_keep_their_names_but_no_value_unless_sweep_reads_them(tmp_path, monkeypatch):
    layers = command_line_vars(extra=["api_key=K1", "credential=K2", "vault_pw=K3", "ansible_user=ops",
                                      "ansible_password=K4", "sweep_connect_timeout=5"])
    run = _folder(tmp_path, monkeypatch, "operator", inventory_vars=layers)
    text = (run / "manifest.json").read_text()
    for secret in ("K1", "K2", "K3", "K4"):
        assert secret not in text
    kept = json.loads(text)["options"]["inventory_vars"]
    assert set(kept["over"]) == {"ansible_user", "sweep_connect_timeout"}
    # the names alone (a resume says to give them again); api_key, credential, vault_pw are secrets (issue 53)
    assert kept["dropped"] == ["ansible_password", "api_key", "credential", "vault_pw"]


def test_the_cli_refuses_a_foreign_resume_in_one_line_and_exit_2(tmp_path, monkeypatch, script):
    path, mark = script
    run = _folder(tmp_path, monkeypatch, "colleague", engine="ansible", engine_settings={"ansible": str(path)})
    env = dict(os.environ, HOME=str(tmp_path / "operator"), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "sweep.cli", "run", "--resume", str(run)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr and not mark.exists()
    assert done.stderr.startswith(f"sweep: error: {run / 'manifest.json'}: was not written by this user's sweep")


def test_the_inventory_a_foreign_manifest_names_is_not_read_unless_given_again(tmp_path, monkeypatch, script):
    path, mark = script
    inventory = tmp_path / "theirs.yml"
    inventory.write_text(f"all:\n  hosts:\n    h01:\n    h02:\n  vars:\n"
                         f"    ansible_ssh_common_args: '-o ProxyCommand=\"touch {mark}\"'\n")
    monkeypatch.setenv("HOME", str(tmp_path / "colleague"))
    folder = RunFolder.create(tmp_path / "run")
    manifest = new_manifest(inventory, {"hosts": []}, ["h01", "h02"], _options())
    manifest["state"] = "interrupted"
    folder.write_manifest(manifest)
    folder.close()
    monkeypatch.setenv("HOME", str(tmp_path / "operator"))
    with pytest.raises(ManifestNotTrusted) as err:
        run_sweep(None, resume=folder.path)
    assert f'inventory = "{inventory}"' in err.value.message and not mark.exists()
