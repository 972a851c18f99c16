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


def _foreign(tmp_path: Path, monkeypatch, inventory="h01,h02,", snapshot=("h01", "h02"), **changes) -> Path:
    """An interrupted run of two hosts, h01 recorded, written by a colleague (another HOME: another key);
    the test goes on as the operator. `snapshot`: the hosts its inventory snapshot holds."""
    monkeypatch.setenv("HOME", str(tmp_path / "colleague"))
    folder = RunFolder.create(tmp_path / "run")
    manifest = new_manifest(inventory, {"hosts": [{"name": h} for h in snapshot]}, ["h01", "h02"],
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


def test_with_trust_manifest_the_proxycommand_runs_only_after_it_was_shown_whole(tmp_path, monkeypatch):
    """The attack run to its end: the resume goes on and the ProxyCommand runs, but only after the line
    that shows it whole was written (loopback addresses where nothing listens; no nc here: the proxy fails)."""
    from sweep.collect.options import SSHSettings

    mark = tmp_path / "PWNED"
    names = ["127.219.0.251", "127.219.0.252"]
    monkeypatch.setenv("HOME", str(tmp_path / "colleague"))
    folder = RunFolder.create(tmp_path / "run")
    manifest = new_manifest(",".join(names) + ",", {"hosts": [{"name": n} for n in names]}, names, _options(
        inventory_vars=command_line_vars(extra=[json.dumps({"ansible_ssh_common_args": _proxy_args(mark)})])))
    manifest["state"] = "interrupted"
    folder.write_manifest(manifest)
    folder.write_record(fv.record(names[0], fv.h200(1, names[0])))
    folder.close()
    monkeypatch.setenv("HOME", str(tmp_path / "operator"))
    said = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, *args, **kwargs: said.append((str(message), mark.exists()))
        result = run_sweep(None, resume=folder.path, trust_manifest=True,
                           ssh=SSHSettings(connect_timeout=5, host_deadline=20))
    assert mark.exists(), "--trust-manifest took the ProxyCommand"
    shown = [(text, ran) for text, ran in said if f"ProxyCommand='touch {mark}; nc %h %p'" in text]
    assert shown and not shown[0][1], f"the ProxyCommand ran before it was shown whole: {said}"
    assert result.by_class and "ok" not in result.by_class


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


# --- 2. one secret rule, at any depth, for every writer of the run folder and stdout -------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402


SECRET_WORDS = ("pass", "password", "secret", "token", "credential", "api_key", "apikey", "private_key", "pw")
_label = st.text("abcdefghijklmnopqrstuvwxyz0123456789_", min_size=0, max_size=8)
_secret_name = st.builds(lambda a, w, b, upper: f"{a}_{w.upper() if upper else w}_{b}".strip("_") or w,
                         _label, st.sampled_from(SECRET_WORDS), _label, st.booleans())
_plain_name = st.sampled_from(("host", "port", "db", "region", "ansible_user", "sweep_connect_timeout", "groups",
                               "ansible_ssh_private_key_file", "key_file", "known_hosts", "retries", "nested"))


def _tree(leaf):
    """JSON-like values nesting mappings (secret or plain names) and lists to any depth, the secrets' leaves
    all S3CRET."""
    return st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(_plain_name, inner, max_size=3),
        st.dictionaries(_secret_name, st.just("S3CRET"), min_size=1, max_size=2).flatmap(
            lambda secrets: st.dictionaries(_plain_name, inner, max_size=2).map(lambda plain: {**plain, **secrets}))),
        max_leaves=20)


@given(_tree(st.one_of(st.integers(0, 9), st.sampled_from(["ops", "10.0.0.1", None]))))
@settings(max_examples=300, deadline=None)
def test_no_value_under_a_secrets_name_survives_at_any_depth(value):
    from sweep.inventory.command_line import without_secrets

    kept = json.dumps(without_secrets(value))
    assert "S3CRET" not in kept
    assert without_secrets(without_secrets(value)) == without_secrets(value)


@given(_secret_name)
def test_every_generated_secret_name_is_a_secret_and_key_files_are_not(name):
    from sweep.inventory.command_line import is_secret

    assert is_secret(name)
    assert not is_secret("ansible_ssh_private_key_file") and not is_secret("ansible_private_key_file")


@pytest.fixture
def nested_inventory(tmp_path):
    """The attack's inventory: a host at a loopback address where nothing listens, a nested password in
    its group vars and its host vars."""
    inv = tmp_path / "inv"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "host_vars").mkdir()
    (inv / "hosts.yml").write_text("all:\n  hosts:\n    h01:\n      ansible_host: 127.219.0.250\n"
                                   "      ansible_port: 9\n")
    (inv / "group_vars" / "all.yml").write_text("sweep_db:\n  password: S3CRET\n  user: ops\n"
                                                "sweep_vault:\n  - {token: S3CRET}\n")
    (inv / "host_vars" / "h01.yml").write_text("sweep_deep:\n  a:\n    b:\n      c:\n        Api_Key: S3CRET\n")
    return inv / "hosts.yml"


def _sweep_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "sweep.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False, cwd=tmp_path)


SECRET_VARS = ("-e", "sweep_api_token=S3CRET", "-e", '{"sweep_db": {"password": "S3CRET", "user": "ops"}}',
               "-e", "sweep_connect_timeout=2")


def test_extra_vars_and_nested_passwords_never_reach_the_run_folder(tmp_path, nested_inventory):
    done = _sweep_cli(tmp_path, "run", str(nested_inventory), "-o", str(tmp_path / "run"), *SECRET_VARS)
    assert "Traceback" not in done.stderr and (tmp_path / "run" / "manifest.json").is_file()
    assert (tmp_path / "run" / "report").is_dir(), done.stderr
    found = subprocess.run(["grep", "-r", "-l", "S3CRET", str(tmp_path / "run")], capture_output=True, text=True)
    assert found.stdout == "", f"S3CRET written under the run folder: {found.stdout}"
    assert "S3CRET" not in done.stdout + done.stderr
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    settings = manifest["inventory"]["snapshot"]["hosts"][0]["settings"]
    assert settings["db"] == {"user": "ops"} and settings["connect_timeout"] == "2"  # what is no secret stays
    assert manifest["options"]["inventory_vars"]["over"]["sweep_db"][0] == {"user": "ops"}


def test_list_hosts_json_shows_no_secret(tmp_path, nested_inventory):
    done = _sweep_cli(tmp_path, "run", str(nested_inventory), "--list-hosts", "--json", *SECRET_VARS)
    assert done.returncode == 0, done.stderr
    assert "S3CRET" not in done.stdout + done.stderr and json.loads(done.stdout)["hosts"][0]["name"] == "h01"


# --- 3. a foreign run folder is checked before what it names is read ------------------------------------------


def _foreign_naming(tmp_path: Path, monkeypatch, named: Path) -> Path:
    """A colleague's interrupted run whose manifest names `named` as its inventory."""
    return _foreign(tmp_path, monkeypatch, inventory=named, snapshot=())


def test_list_hosts_of_a_foreign_resume_refuses_before_reading_the_inventory_it_names(tmp_path, monkeypatch):
    private = tmp_path / "private"
    private.write_text("secretuser:HUNTER2HASH:19000:0:99999:7:::\n")
    run = _foreign_naming(tmp_path, monkeypatch, private)
    env = dict(os.environ, HOME=str(tmp_path / "operator"), PYTHONPATH=str(ROOT))
    for extra in ([], ["--json"]):
        done = subprocess.run([sys.executable, "-m", "sweep.cli", "run", "--resume", str(run), "--list-hosts", *extra],
                              env=env, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 2 and "HUNTER2HASH" not in done.stdout + done.stderr, done.stderr
        assert done.stderr.startswith(f"sweep: error: {run / 'manifest.json'}: was not written by this user's sweep")
        assert f'inventory = "{private}"' in done.stderr


def test_list_hosts_of_a_foreign_resume_reads_the_inventory_given_again_or_trusted(tmp_path, monkeypatch):
    inventory = tmp_path / "mine.yml"
    inventory.write_text("all:\n  hosts:\n    h01:\n    h02:\n")
    run = _foreign_naming(tmp_path, monkeypatch, inventory)
    env = dict(os.environ, HOME=str(tmp_path / "operator"), PYTHONPATH=str(ROOT))
    for args in ([str(inventory)], ["--trust-manifest"]):
        done = subprocess.run([sys.executable, "-m", "sweep.cli", "run", *args, "--resume", str(run), "--list-hosts"],
                              env=env, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0 and done.stdout.split() == ["hosts", "(1):", "h02"], done.stderr
    assert "--trust-manifest takes" in done.stderr and f'inventory = "{inventory}"' in done.stderr


@pytest.mark.parametrize("command", [["report", "{run}", "-o", "{tmp}/out"],
                                     ["audit", "{run}", "--expect", "{tmp}/expect.yml"],
                                     ["diff", "{run}", "{run}"], ["export", "prometheus", "{run}"],
                                     ["history", "{tmp}/root", "-o", "{tmp}/hist"]])
def test_commands_reading_a_foreign_run_folder_never_open_what_its_manifest_names(tmp_path, monkeypatch, command):
    """report, audit, diff, export and history read the folder's own files (each checked, docs/security.md),
    never a path its manifest names: here a FIFO that would hang the command if it were opened."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "expect.yml").write_text("defaults:\n  ecc: true\n")
    monkeypatch.setenv("HOME", str(tmp_path / "colleague"))
    folder = RunFolder.create(tmp_path / "root" / "run")
    manifest = new_manifest(fifo, {"hosts": []}, ["h01"], _options(
        ssh_config=str(fifo), known_hosts=[str(fifo)], expect=str(fifo), baseline=str(fifo),
        inventory_vars=command_line_vars(private_key=str(fifo))))
    manifest["state"] = "complete"
    folder.write_manifest(manifest)
    folder.write_record(fv.record("h01", fv.h200(1, "h01")))
    folder.close()
    env = dict(os.environ, HOME=str(tmp_path / "operator"), PYTHONPATH=str(ROOT))
    argv = [word.format(run=folder.path, tmp=tmp_path) for word in command]
    done = subprocess.run([sys.executable, "-m", "sweep.cli", *argv], env=env, capture_output=True, text=True,
                          timeout=240, check=False)
    assert done.returncode in (0, 1, 5) and "Traceback" not in done.stderr, done.stderr


# --- 5. the agent's bootstrap runs isolated, as its children do -----------------------------------------------

IDLE = ROOT / "sweep" / "demo" / "captures" / "h200-idle.json"


def test_the_bootstrap_loads_nothing_of_the_login_session(tmp_path):
    """A login session's PYTHONPATH with a sitecustomize, a user site-packages and a zipfile.py in the login
    folder: none of them loads into the agent (each would leave a mark)."""
    import shlex

    from sweep.collect.bundle import bundle_bytes, remote_command

    marks = tmp_path / "marks"
    marks.mkdir()
    evil = tmp_path / "pythonpath"
    evil.mkdir()
    (evil / "sitecustomize.py").write_text(f"open({str(marks / 'sitecustomize')!r}, 'w').close()\n")
    home = tmp_path / "home"
    site = home / ".local" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True)
    (site / "usercustomize.py").write_text(f"open({str(marks / 'usercustomize')!r}, 'w').close()\n")
    login = tmp_path / "login"
    login.mkdir()
    (login / "zipfile.py").write_text(f"open({str(marks / 'zipfile')!r}, 'w').close()\n"
                                      "import sys; del sys.modules['zipfile']\n"
                                      "sys.path = [p for p in sys.path if p not in ('', '.')]\n"
                                      "import zipfile as _z; sys.modules['zipfile'] = _z\n")
    payload = bundle_bytes()
    cmd = remote_command(sys.executable, len(payload), ["--replay", str(IDLE)])
    env = dict(os.environ, PYTHONPATH=str(evil), HOME=str(home), PYTHONUSERBASE=str(home / ".local"))
    env.pop("PYTHONNOUSERSITE", None)
    proc = subprocess.run(["sh", "-c", cmd], input=payload, capture_output=True, cwd=login, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(proc.stdout)["gpus"][0]["name"] == "NVIDIA H200"
    loaded = sorted(p.name for p in marks.iterdir())
    assert loaded == [], f"the login session's python code loaded into the agent: {loaded}"
    become = shlex.split(remote_command("python3", 10, [], lifetime=30.0, become_user="root"))
    assert [become[n + 1] for n, word in enumerate(become) if word == "python3"] == ["-I", "-I"]


# --- 6. folders made with their mode, parents included, whatever the umask -------------------------------------


def test_under_umask_000_the_run_keys_folder_and_its_parents_are_made_private(tmp_path):
    """The attack: HOME without ~/.local; making ~/.local/state/sweep left ~/.local and ~/.local/state 0777."""
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    code = ("import os, sys; os.umask(0); from sweep.trust import run_key, key_path; "
            "sys.exit(0 if run_key() is not None else 3)")
    env = {k: v for k, v in os.environ.items() if k != "XDG_STATE_HOME"}
    done = subprocess.run([sys.executable, "-c", code], env={**env, "HOME": str(home), "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    modes = {str(p.relative_to(home)): oct(p.stat().st_mode & 0o777) for p in
             (home / ".local", home / ".local" / "state", home / ".local" / "state" / "sweep")}
    assert modes == {".local": "0o700", ".local/state": "0o700", ".local/state/sweep": "0o700"}
    assert oct((home / ".local" / "state" / "sweep" / "run.key").stat().st_mode & 0o777) == "0o600"
