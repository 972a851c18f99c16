"""Bad input for the CLI, each with the one line it must print on stderr (exit 2).

Shared by tests/unit/test_bad_input.py and bench/bench_faults.py. `build_cases(folder)` writes the
files into `folder` and returns the cases; nothing here connects anywhere: every input is refused
before a host is contacted.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEALTH = ROOT / "tests" / "fixtures" / "h200" / "idle.health.json"
EXPECTATIONS = ROOT / "tests" / "fixtures" / "expectations"


@dataclass(frozen=True)
class Case:
    """One bad input: the CLI arguments, extra environment, and the exact stderr line."""

    name: str
    argv: list
    line: str
    env: dict = field(default_factory=dict)


def _run_folder(path: Path, *, record_version: int = 1, inventory: Path | None = None) -> Path:
    health = json.loads(HEALTH.read_text())
    (path / "hosts").mkdir(parents=True)
    manifest = {"format": "sweep-run", "record_version": record_version, "sweep_version": "9.0.0",
                "inventory": {"path": str(inventory or path / "inventory.yml"), "snapshot": {"hosts": []}},
                "options": {}, "started_at": "2026-11-29T18:00:00.000Z", "ended_at": "2026-11-29T18:00:05.000Z",
                "state": "complete", "hosts": ["gpu01"], "sessions": []}
    (path / "manifest.json").write_text(json.dumps(manifest))
    record = {"record_version": record_version, "host": "gpu01", "address": "127.0.0.1", "port": None,
              "status": "ok", "failure": None, "attempts": 1, "started_at": "2026-11-29T18:00:00.000Z",
              "ended_at": "2026-11-29T18:00:01.000Z", "duration_s": 1.0, "exit_status": 0, "stderr": "",
              "health": health}
    (path / "hosts" / "gpu01.json").write_text(json.dumps(record))
    return path


def build_cases(folder: Path) -> list[Case]:
    """Write every bad input under `folder`; return the cases in a fixed order."""
    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    good = d / "good.yml"
    good.write_text("all:\n  children:\n    rack_a:\n      hosts:\n        gpu01:\n          ansible_host: 127.0.0.1\n")
    (d / "broken.yml").write_text("all:\n  hosts:\n    gpu01:\n      ansible_host: [127.0.0.1\n")
    (d / "broken.ini").write_text("[gpus]\ngpu01 ansible_host=127.0.0.1\n[gpus:children\n")
    (d / "empty.yml").write_text("")
    (d / "nokey.yml").write_text(
        "all:\n  hosts:\n    gpu01:\n      ansible_host: 127.0.0.1\n"
        f"      ansible_ssh_private_key_file: {d / 'keys' / 'missing_ed25519'}\n")
    cases = [
        Case("malformed YAML inventory", ["run", str(d / "broken.yml")],
             f"sweep: error: {d / 'broken.yml'}:4: not valid YAML: while parsing a flow sequence: did not find "
             "expected ',' or ']'; fix the YAML there (indentation, a missing ':' or an unclosed quote)"),
        Case("malformed INI inventory", ["run", str(d / "broken.ini")],
             f"sweep: error: {d / 'broken.ini'}:3: invalid section header '[gpus:children'; write [group], "
             "[group:children] or [group:vars], with no spaces inside"),
        Case("--limit matching nothing", ["run", str(good), "--limit", "rack_z"],
             f"sweep: error: --limit 'rack_z' matches no host in {good}; use a host name, a glob, or one of the "
             "groups rack_a"),
        Case("empty inventory", ["run", str(d / "empty.yml")],
             f"sweep: error: {d / 'empty.yml'}: no host is defined in this inventory; add hosts under a group: a "
             "'hosts:' mapping in YAML, a line under [group] in INI"),
        Case("missing key file", ["run", str(d / "nokey.yml")],
             f"sweep: error: {d / 'nokey.yml'}:5: gpu01: private key file {d / 'keys' / 'missing_ed25519'} does not "
             "exist; fix ansible_ssh_private_key_file in the inventory, or create the key (ssh-keygen) and install it"),
    ]
    if shutil.which("ssh-keygen"):
        key = d / "keys" / "encrypted_ed25519"
        key.parent.mkdir(exist_ok=True)
        if not key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "a passphrase", "-f", str(key)], check=True)
        (d / "enckey.yml").write_text(
            f"all:\n  hosts:\n    gpu01:\n      ansible_host: 127.0.0.1\n      ansible_ssh_private_key_file: {key}\n")
        cases.append(Case("encrypted key, no passphrase", ["run", str(d / "enckey.yml")],
                          f"sweep: error: {d / 'enckey.yml'}:5: gpu01: private key file {key} is encrypted and no "
                          "passphrase was given; set SWEEP_KEY_PASSPHRASE, or load the key into ssh-agent"))
        cases.append(Case("wrong key passphrase", ["run", str(d / "enckey.yml")],
                          f"sweep: error: {d / 'enckey.yml'}:5: gpu01: private key file {key} cannot be decrypted "
                          "with the passphrase in SWEEP_KEY_PASSPHRASE (wrong passphrase?); set "
                          "SWEEP_KEY_PASSPHRASE to the key's passphrase", env={"SWEEP_KEY_PASSPHRASE": "not it"}))
    home = d / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    (d / "clean-home").mkdir(exist_ok=True)
    (home / ".ssh" / "config").write_text("Host *\n  User ops\nMatch host 127.0.0.2\n  ProxyCommand nc %h %p\n"
                                          "  Ciphers aes128-ctr,bogus-cipher\n")
    (d / "sshargs.yml").write_text("all:\n  hosts:\n    gpu01:\n      ansible_host: 127.0.0.1\n"
                                   "      ansible_ssh_extra_args: -o Ciphers=aes128-ctr\n")
    (d / "sshconfig.yml").write_text("all:\n  hosts:\n    gpu02:\n      ansible_host: 127.0.0.2\n")
    (d / "sshflag.yml").write_text("all:\n  hosts:\n    gpu03:\n      ansible_host: 127.0.0.3\n"
                                   "      ansible_ssh_common_args: -W other:22\n")
    fix = ("drop it for these hosts, or sweep without --transport paramiko (the host then goes through OpenSSH's ssh); "
           "docs/ssh.md lists what sweep's own transport honours")
    cases += [
        Case("ssh option only OpenSSH does, under --transport paramiko",
             ["run", str(d / "sshargs.yml"), "--transport", "paramiko"],
             f"sweep: error: {d / 'sshargs.yml'}:5: gpu01: ansible_ssh_extra_args -o Ciphers aes128-ctr asks for "
             f"choosing ciphers, which sweep's own transport does not do; {fix}", env={"HOME": str(d / "clean-home")}),
        Case("ssh_config line ssh refuses the whole file for", ["run", str(d / "sshconfig.yml")],
             f"sweep: error: {home / '.ssh' / 'config'}:5: gpu02: ssh_config Ciphers 'bogus-cipher' is not a cipher "
             "OpenSSH 9.2 knows (OpenSSH refuses the whole file); fix that line: ssh refuses the file as it is",
             env={"HOME": str(home)}),
        Case("ssh flag that is no setting", ["run", str(d / "sshflag.yml"), "--transport", "openssh"],
             f"sweep: error: {d / 'sshflag.yml'}:5: gpu03: ansible_ssh_common_args holds -W (stdio forwarding), "
             "which sweep does not pass on: it sets up the session itself; remove it (an ssh_config file goes in "
             "~/.ssh/config)", env={"HOME": str(home)}),
    ]
    run = _run_folder(d / "run", inventory=good)
    cases.append(Case("invalid expectations file",
                      ["audit", str(run), "--expect", str(EXPECTATIONS / "bad-syntax.yml")],
                      f"sweep: error: {EXPECTATIONS / 'bad-syntax.yml'}:4: not valid YAML: did not find expected ',' or "
                      "']' (while parsing a flow sequence that starts on line 3); fix the YAML "
                      "there (indentation, a missing ':' or an unclosed quote)"))
    newer = json.loads(HEALTH.read_text())
    newer["schema_version"] = "2.0"
    (d / "newer.health.json").write_text(json.dumps(newer))
    cases += [
        Case("health.json of a newer schema (report)", ["report", str(d / "newer.health.json"), "--out", str(d / "r")],
             f"sweep: error: {d / 'newer.health.json'}: health.json of schema version 2.0 (kind 'sweep.health'); "
             "this sweep reads 1.x; upgrade sweep to read it"),
        Case("health.json of a newer schema (diff)", ["diff", str(d / "newer.health.json"), str(HEALTH)],
             f"sweep: error: {d / 'newer.health.json'}: health.json schema version 2.0 is not supported by this "
             "sweep (it reads 1.x); upgrade sweep to read newer probes"),
    ]
    other = _run_folder(d / "run-v2", record_version=2, inventory=good)
    cases += [
        Case("run folder of another version (--resume)", ["run", "--resume", str(other)],
             f"sweep: error: {other}: was written with record version 2; this sweep reads version 1; resume it "
             "with the sweep version that started it, or start a new run without --resume"),
        Case("run folder of another version (report)", ["report", str(other), "--out", str(d / "r2")],
             f"sweep: error: {other / 'hosts' / 'gpu01.json'}: has record version 2; this sweep reads version 1; "
             "report it with the sweep version that wrote it"),
    ]
    return cases
