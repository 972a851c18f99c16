"""Bad input ends with exit 2 and one line on stderr naming the file (and line) or host, and the fix.

Also: a host defined twice (Ansible's semantics, with a warning), terminal output of host text, and
the controller's fast health.json schema check agreeing with jsonschema.
"""
from __future__ import annotations

import copy
import json
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import jsonschema
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bad_input_cases import HEALTH, build_cases  # noqa: E402

from sweep.cli import main  # noqa: E402
from sweep.cli.output import safe  # noqa: E402
from sweep.errors import InventoryWarning  # noqa: E402
from sweep.inventory.model import load_inventory  # noqa: E402
from sweep.schema import HEALTH_SCHEMA, compile_schema, health_problem  # noqa: E402

def _names() -> list:
    folder = tempfile.mkdtemp(prefix="sweep-bad-input-")
    try:
        return [case.name for case in build_cases(Path(folder))]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


NAMES = _names()


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return {case.name: case for case in build_cases(tmp_path_factory.mktemp("bad-input"))}


@pytest.mark.parametrize("name", NAMES)
def test_bad_input_exits_2_with_one_line_naming_the_file_and_the_fix(name, cases, capsys, monkeypatch):
    case = cases[name]
    monkeypatch.delenv("SWEEP_KEY_PASSPHRASE", raising=False)
    for key, value in case.env.items():
        monkeypatch.setenv(key, value)
    assert main(case.argv) == 2
    captured = capsys.readouterr()
    assert captured.err == case.line + "\n"
    assert captured.out == ""


def test_a_host_defined_twice_keeps_ansibles_later_value_and_warns(tmp_path, capsys):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[rack_a]\ngpu01 ansible_host=127.0.0.11\n[rack_b]\ngpu01 ansible_host=127.0.0.12\n"
                         "gpu02 ansible_host=127.0.0.13 ansible_ssh_private_key_file=/nonexistent/k\n")
    warning = (f"{inventory}:4: host 'gpu01' is defined twice with different ansible_host: '127.0.0.12' here, "
               f"'127.0.0.11' at {inventory}:2; as Ansible does, sweep uses the later one; remove one of the "
               "two definitions")
    with pytest.warns(InventoryWarning) as caught:
        hosts = load_inventory(inventory).hosts
    assert [str(w.message) for w in caught] == [warning]
    gpu01 = hosts[0]
    assert (gpu01.name, gpu01.address, gpu01.groups) == ("gpu01", "127.0.0.12", ("rack_a", "rack_b"))
    # the CLI shows the warning as one line, and goes on (here to a missing key: exit 2 before any host)
    assert main(["run", str(inventory)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"sweep: warning: {warning}",
        f"sweep: error: {inventory}:5: gpu02: private key file /nonexistent/k does not exist; fix "
        "ansible_ssh_private_key_file in the inventory, or create the key (ssh-keygen) and install it"]
    same = tmp_path / "same.ini"  # the same values twice: Ansible merges, nothing to say
    same.write_text("[a]\ngpu01 ansible_host=127.0.0.11\n[b]\ngpu01 ansible_host=127.0.0.11\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_inventory(same).hosts[0].groups == ("a", "b")


def test_terminal_text_shows_control_characters_as_escapes():
    assert safe("gpu\x1b[31m\x07\x9b2J\x7f[bold]x[/]") == "gpu\\x1b[31m\\x07\\x9b2J\\x7f\\[bold]x\\[/]"


# --- the controller's schema check ---------------------------------------------------------------


def _mutations(health: dict):
    yield "valid", health
    for path, value in [(("schema_version",), 1), (("kind",), "other"), (("probe",), []),
                        (("gpus",), "eight"), (("gpus", 0, "index"), "0"), (("gpus", 0, "index"), True),
                        (("environment", "PATH"), 7), (("probe", "complete"), "yes"),
                        (("verdict",), "fine"), (("contracts",), None), (("gpus", 0), 3)]:
        broken = copy.deepcopy(health)
        node = broken
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        yield f"{'.'.join(map(str, path))}={value!r}", broken
    for key in ("host", "probe", "gpus", "contracts"):
        broken = copy.deepcopy(health)
        del broken[key]
        yield f"no {key}", broken


@pytest.mark.parametrize("fixture", ["idle", "load", "fault", "idle-deep"])
def test_the_fast_schema_check_agrees_with_jsonschema(fixture):
    schema = json.loads(HEALTH_SCHEMA.read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    health = json.loads((HEALTH.parent / f"{fixture}.health.json").read_text())
    for label, doc in _mutations(health):
        assert (health_problem(doc) is None) == validator.is_valid(doc), (label, health_problem(doc))


def test_the_schema_check_names_where_and_words_what_it_does_not_word_itself_by_the_validator():
    health = json.loads(HEALTH.read_text())
    health["gpus"][0]["index"] = "0"
    assert health_problem(health) == "health.json.gpus[0].index: expected integer, got string"
    # a keyword the published schema does not use today is checked all the same (jsonschema-rs, issue 52)
    assert compile_schema({"anyOf": [{"type": "string"}]})(7, "x") == 'x: 7 is not valid under any of the schemas listed in the \'anyOf\' keyword'
