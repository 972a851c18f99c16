"""Every command and every option, given a bad value, exits 2 with no traceback anywhere in its output.

The walk is driven by the CLI itself (typer's click command tree): a new option that is not in
`KINDS` fails `test_every_option_is_walked`, so it cannot escape the walk. Each option's kind says
which bad values a user can give it: a word where a number goes, a path that does not exist, a
directory where a file is expected and the reverse, a path nothing can be written under. Nothing
here contacts a host: every bad value must be refused before the first connection (the inventory's
one host is a loopback port nothing listens on, so a value let through shows up as exit 1, not 2).
"""
from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
import typer.main

from sweep.cli import app, main

ROOT = Path(__file__).resolve().parents[2]
HEALTH = ROOT / "tests" / "fixtures" / "h200" / "idle.health.json"
EXPECT = ROOT / "tests" / "fixtures" / "expectations" / "fleet.yml"
CAPTURE = next((ROOT / "sweep").rglob("h200-idle.json"))

# (command path, parameter name) -> kind. Kinds:
#   number: an int or float; in_file / in_dir: must exist, as a file / a folder; in_any: a file or a
#   folder that must exist; out_dir / out_file: created if missing; word: a name sweep must know.
KINDS = {
    ("probe", "out"): "out_dir", ("probe", "interpreter"): "in_file", ("probe", "load"): "number",
    ("probe", "record"): "out_file", ("probe", "replay"): "in_file", ("probe", "deadline"): "number",
    ("bundle", "out"): "out_file", ("bundle", "output"): "out_file",
    ("diff", "before"): "in_any", ("diff", "after"): "in_any", ("diff", "html"): "out_file",
    ("wrap", "interval"): "number", ("wrap", "out"): "out_dir", ("wrap", "replay"): "in_file",
    ("wrap", "deadline"): "number", ("wrap", "command"): "command",
    ("baseline set", "run_dir"): "in_dir", ("baseline set", "out"): "out_dir", ("baseline set", "directory"): "out_dir",
    ("baseline set", "host"): "word",
    ("baseline show", "baseline"): "in_dir", ("baseline show", "directory"): "in_dir", ("baseline show", "host"): "word",
    ("baseline check", "run_dir"): "in_dir", ("baseline check", "baseline"): "in_dir",
    ("baseline check", "directory"): "in_dir", ("run", "inventory_option"): "in_any",
    ("run", "inventory"): "in_any", ("run", "limit"): "word", ("run", "out"): "out_dir",
    ("run", "resume"): "in_dir", ("run", "forks"): "number", ("run", "workers"): "number", ("run", "max_yaml_values"): "number", ("run", "max_range_hosts"): "number", ("run", "known_hosts"): "in_file",
    ("run", "connect_timeout"): "number", ("run", "host_deadline"): "number", ("run", "reference"): "word",
    ("run", "expect"): "in_file", ("run", "baseline"): "in_dir", ("run", "engine"): "word",
    ("run", "partition"): "word", ("run", "nodelist"): "word", ("run", "shard"): "word",
    ("run", "shard_by"): "word", ("run", "command"): "command", ("run", "metric"): "word",
    ("run", "interval"): "number", ("run", "transport"): "word",
    ("run", "max_yaml_values"): "number", ("run", "max_range_hosts"): "number",
    ("report", "inputs"): "in_any", ("report", "out"): "out_dir", ("report", "reference"): "word",
    ("report", "expect"): "in_file", ("report", "baseline"): "in_dir",
    ("audit", "run_dir"): "in_dir", ("audit", "expect"): "in_file", ("audit", "baseline"): "in_dir",
    ("demo", "hosts"): "number", ("demo", "out"): "out_dir",
    ("run", "load"): "number", ("run", "retry_failed"): "word",
    ("run", "user"): "word", ("run", "private_key"): "in_file", ("run", "extra_vars"): "word",
    ("run", "become_user"): "word", ("run", "nodes"): "word", ("run", "load_engine"): "word",
    ("history", "runs"): "in_dir", ("history", "root"): "in_dir", ("history", "since"): "word",
    ("history", "host"): "word", ("history", "out"): "out_dir", ("history", "index"): "out_file",
    ("history", "threshold"): "number", ("history", "floor"): "number",
    ("export prometheus", "run_dir"): "in_dir", ("export prometheus", "out"): "out_file",
    ("export prometheus", "output"): "out_file",
    ("export prometheus", "expect"): "in_file", ("export prometheus", "floor"): "number",
    ("export prometheus", "stale_hours"): "number",
}
# Bad words: a value sweep cannot use, per option.
WORDS = {
    ("run", "limit"): ["rack_z", "~gpu("], ("run", "engine"): ["telnet"], ("run", "shard"): ["3/2", "x"],
    ("run", "shard_by"): ["colour"], ("run", "reference"): ["no-such-host"], ("run", "partition"): ["gpu"],
    ("run", "nodelist"): ["gpu[01-02]"], ("run", "metric"): ["tflops", "t=([0-9]+"], ("run", "transport"): ["telnet"],
    ("run", "retry_failed"): ["bogus", "ok"],
    ("run", "user"): ["ops;reboot"], ("run", "extra_vars"): ["/etc/vars.yml", "a=1 oops", "{not: [closed"],
    ("run", "nodes"): ["gpu[01-", "gpu[1-999999]"], ("run", "load_engine"): ["turbo"],
    ("report", "reference"): ["no-such-host"], ("baseline set", "host"): ["no-such-host"],
    ("baseline show", "host"): ["no-such-host"], ("history", "since"): ["6x", "weeks"],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_folder(path: Path, inventory: Path) -> Path:
    health = json.loads(HEALTH.read_text())
    (path / "hosts").mkdir(parents=True)
    manifest = {"format": "sweep-run", "record_version": 1, "sweep_version": "0.1.0",
                "inventory": {"path": str(inventory), "snapshot": {"hosts": []}}, "options": {},
                "started_at": "2026-11-29T18:00:00.000Z", "ended_at": "2026-11-29T18:00:05.000Z",
                "state": "complete", "hosts": ["gpu01"], "sessions": []}
    (path / "manifest.json").write_text(json.dumps(manifest))
    record = {"record_version": 1, "host": "gpu01", "address": "127.0.0.1", "port": None, "status": "ok",
              "failure": None, "attempts": 1, "started_at": "2026-11-29T18:00:00.000Z",
              "ended_at": "2026-11-29T18:00:01.000Z", "duration_s": 1.0, "exit_status": 0, "stderr": "",
              "health": health}
    (path / "hosts" / "gpu01.json").write_text(json.dumps(record))
    return path


class Place:
    """The files a walk needs: good inputs for the other arguments, and the bad values."""

    def __init__(self, root: Path):
        self.root = root
        self.inventory = root / "inventory.yml"
        self.inventory.write_text(f"all:\n  hosts:\n    gpu01:\n      ansible_host: 127.0.0.1\n"
                                  f"      ansible_port: {_free_port()}\n")
        self.run = _run_folder(root / "run", self.inventory)
        self.file = root / "a-file.txt"
        self.file.write_text("not what sweep wants\n")
        self.folder = root / "a-folder"
        self.folder.mkdir()
        self.missing = root / "no" / "such" / "path"
        self.under_file = self.file / "sub"  # nothing can be created under a regular file
        assert main(["baseline", "set", str(self.run), "--dir", str(root / "bl")]) == 0

    def base(self, command: str) -> list[str]:
        """A valid invocation of `command`: the bad value is then the only thing wrong."""
        return {
            "probe": ["probe", "--replay", str(CAPTURE), "--out", str(self.root / "probe-out")],
            "bundle": ["bundle", "-o", str(self.root / "agent.pyz")],
            "diff": ["diff", str(HEALTH), str(HEALTH)],
            "wrap": ["wrap", "--replay", str(CAPTURE), "--out", str(self.root / "wrap-out")],
            "baseline set": ["baseline", "set", str(self.run), "-o", str(self.root / "bl")],
            "baseline show": ["baseline", "show", "--baseline", str(self.root / "bl")],
            "baseline check": ["baseline", "check", str(self.run), "--baseline", str(self.root / "bl")],
            "run": ["run", str(self.inventory), "--no-report", "--connect-timeout", "1"],
            "report": ["report", str(self.run), "--out", str(self.root / "report-out")],
            "audit": ["audit", str(self.run), "--expect", str(EXPECT)],
            "demo": ["demo", "--out", str(self.root / "demo-out")],
            "history": ["history", "--root", str(self.root), "--out", str(self.root / "history-out")],
            "export prometheus": ["export", "prometheus", str(self.run), "-o", str(self.root / "sweep.prom")],
        }[command]

    def bad_values(self, key: tuple[str, str]) -> list[str]:
        kind = KINDS[key]
        return {
            "number": ["abc"], "in_file": [str(self.missing), str(self.folder)],
            "in_dir": [str(self.missing), str(self.file)], "in_any": [str(self.missing)],
            "out_dir": [str(self.file), str(self.under_file)], "out_file": [str(self.folder), str(self.under_file)],
            "word": WORDS.get(key, []), "command": [],
        }[kind]


def is_argument(param) -> bool:
    return param.param_type_name == "argument"  # typer may carry its own copy of click: no isinstance


def walk():
    """(command path, click parameter) for every parameter of every command."""
    group = typer.main.get_command(app)
    for name, cmd in sorted(group.commands.items()):
        subs = sorted(cmd.commands.items()) if hasattr(cmd, "commands") else [(None, cmd)]
        for sub, leaf in subs:
            path = f"{name} {sub}" if sub else name
            for param in leaf.params:
                if param.name == "help" or getattr(param, "is_flag", False):
                    continue
                yield path, param


def argv_for(place: Place, path: str, param, value: str) -> list[str]:
    argv = place.base(path)
    if is_argument(param):
        positional = [p.name for p in walk_leaf(path) if is_argument(p)]
        fixed = len(path.split())
        argv = list(argv)
        at = fixed + positional.index(param.name)
        if at < len(argv) and not argv[at].startswith("-"):
            argv[at] = value
        else:
            argv.insert(at, value)
        return argv
    tail = ["--", "true"] if path == "wrap" else []  # the wrapped command comes last
    return argv + [param.opts[0], value] + tail


def walk_leaf(path: str):
    cmd = typer.main.get_command(app)
    for part in path.split():
        cmd = cmd.commands[part]
    return cmd.params


CASES = [(path, param.name, i) for path, param in walk() for i in range(3)]


def test_every_option_is_walked():
    unknown = [(path, param.name) for path, param in walk() if (path, param.name) not in KINDS]
    assert unknown == [], f"add these options to KINDS so that the bad-value walk covers them: {unknown}"


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad-values")
    yield Place(root)
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("path,name", sorted({(p, n) for p, n, _ in CASES}))
def test_a_bad_value_exits_2_with_one_line_and_no_traceback(path, name, place, capfd, monkeypatch):
    monkeypatch.setenv("HOME", str(place.root))  # no user ssh config, agent or known_hosts
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.chdir(place.root)
    param = next(p for p in walk_leaf(path) if p.name == name)
    for value in place.bad_values((path, name)):
        argv = argv_for(place, path, param, value)
        code = main(argv)
        out, err = capfd.readouterr()
        shown = f"sweep {' '.join(argv)}\n--- exit {code}; output:\n{out}{err}"
        assert "Traceback" not in out + err, shown
        assert code == 2, shown
        lines = [line for line in err.splitlines() if line.strip()]
        assert lines and lines[-1].lower().startswith(("sweep: error: ", "error: ")), shown
        named = {value, param.name, *getattr(param, "opts", ()), str(param.metavar or "")} - {""}
        assert any(n in lines[-1] for n in named), f"the error line names neither the value nor the option\n{shown}"
        if value.startswith("/"):  # a path: the one sweep line names it
            assert lines[-1].startswith("sweep: error: ") and len(lines) == 1 and value in lines[-1], shown
