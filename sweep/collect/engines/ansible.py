"""The ansible engine: the agent bundle runs on every host through ``ansible -m script``.

One ad-hoc ``ansible`` run over the hosts of the sweep (``--limit @file``, the run's ``--forks``):
the script module copies agent.pyz to each host and runs it under the host's
``ansible_python_interpreter`` (``python3`` when unset or ``auto*``). sweep's own stdout callback
(``ansible_callbacks/sweep_lines.py``) prints one JSON line per host as it finishes; each becomes
an `Outcome` judged as the SSH engine judges one: health.json, or a failure class of
`sweep.failures.FailureClass` (an unreachable host's class is read from OpenSSH's message).

An inventory cannot undo that setup: every ``ansible_*`` variable ansible-core acts on is declared
in `sweep.collect.engines.ansible_vars` as read by sweep, refused (before any host is contacted,
with its file:line), or trusted with the reason; ssh arguments and ssh_config settings are held to
--transport openssh's rules.

Host keys are verified as the SSH engine verifies them: ``ANSIBLE_HOST_KEY_CHECKING=True``,
``StrictHostKeyChecking=yes`` (``accept-new`` with --accept-new-host-keys) and the run's
known_hosts files as ``UserKnownHostsFile``. These options lead ``ANSIBLE_SSH_ARGS``, so they come
first on ssh's command line and win over the inventory's ``ansible_ssh_common_args`` (ssh keeps the
first value it reads of an option).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sweep.collect.engines.ansible_vars import check_hosts
from sweep.collect.engines.base import ProcessEngine, EngineError, failed, outcome_of_output, tail
from sweep.collect.bundle import ISOLATED, zipapp_of
from sweep.collect.options import FAST_KEX, SSHOptions
from sweep.text import plural

CALLBACKS = Path(__file__).with_name("ansible_callbacks")
# the host's interpreter, as sweep reads it (sweep.inventory.model): "auto*" and unset mean python3
PYTHON = (
    "{{ (ansible_python_interpreter | default('python3')) "
    "if not (ansible_python_interpreter | default('python3')).startswith('auto') else 'python3' }}"
)
_UNREACHABLE = (  # OpenSSH's words -> failure class; the first match wins
    (
        "dns",
        re.compile(
            r"Could not resolve hostname|Name or service not known|"
            r"Temporary failure in name resolution",
            re.I,
        ),
    ),
    (
        "host_key_changed",
        re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for \S+ has changed", re.I),
    ),
    (
        "host_key_unknown",
        re.compile(r"Host key verification failed|No \S+ host key is known", re.I),
    ),
    ("auth", re.compile(r"Permission denied|Too many authentication failures", re.I)),
    ("refused", re.compile(r"Connection refused", re.I)),
    ("timeout", re.compile(r"timed out|No route to host|Network is unreachable|timeout", re.I)),
)


def find_ansible() -> str:
    """The ``ansible`` beside this python (its venv), else the first on PATH."""
    beside = Path(sys.executable).with_name("ansible")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("ansible")
    if found is None:
        raise EngineError(
            "ansible is not installed", fix="pip install ansible-core, or use --engine ssh"
        )
    return found


def ssh_args(options: SSHOptions) -> str:
    """ANSIBLE_SSH_ARGS for a run: host key checks with the run's known_hosts, then ansible's
    defaults."""
    known = " ".join(str(Path(p).expanduser()) for p in options.known_hosts) or "/dev/null"
    strict = "accept-new" if options.accept_new_host_keys else "yes"
    args = [
        "-o",
        f"UserKnownHostsFile={known}",
        "-o",
        f"StrictHostKeyChecking={strict}",
        "-o",
        "BatchMode=yes",
    ]
    if options.ssh_config is None:
        args += ["-F", "none"]
    if not options.allow_agent:
        args += ["-o", "IdentityAgent=none"]
    if not options.look_for_keys:
        args += ["-o", "IdentitiesOnly=yes"]
    if options.fast_kex:
        # OpenSSH 9's default kex costs ~100 ms of client CPU
        args += ["-o", f"KexAlgorithms=^{FAST_KEX}"]
    args += ["-o", "ControlMaster=auto", "-o", "ControlPersist=30s"]
    return " ".join(shlex.quote(a) for a in args)


_FLAG_OF = {
    "ansible_user": "-u",
    "ansible_private_key_file": "--private-key",
    "ansible_become_user": "--become-user",
}


def command_line_args(variables: Any) -> list[str]:
    """sweep's -u, --private-key, --become, --become-user and -e, handed to ansible as the same
    options, so that ansible resolves them against the inventory by its own precedence."""
    if not variables:
        return []
    args: list[str] = []
    for var, (value, _) in variables.under.items():
        args += ["--become"] if var == "ansible_become" else [_FLAG_OF[var], str(value)]
    if variables.over:
        args += [
            "-e",
            json.dumps({key: value for key, (value, _) in variables.over.items()}, default=str),
        ]
    return args


class AnsibleEngine(ProcessEngine):
    """``ansible -m script agent.pyz`` over the sweep's hosts; one JSON line per host back."""

    name = "ansible"
    transport = "openssh"  # ansible runs OpenSSH's ssh
    reads_ssh_config = True
    become_applies = True
    one_inventory = True  # its EngineJob carries one inventory path

    def __init__(self, ansible: str | None = None, extra_args: tuple[str, ...] = ()):
        super().__init__()
        self.ansible = ansible
        self.extra_args = tuple(extra_args)

    def check(self, hosts: Any, options: SSHOptions, inventory_path: Path | None) -> None:
        """Refuse, before any host is contacted, the ansible_* variables that would undo sweep's
        setup (`ansible_vars.VARIABLES`); sweep.collect.run holds the hosts' ssh arguments and
        ssh_config to --transport openssh's rules (ansible runs OpenSSH's ssh)."""
        check_hosts(hosts, inventory_path)

    def command(self, work: Path, names: list[str]) -> tuple[list[str], dict[str, str]]:
        """argv and environment of the ansible run (files under `work`)."""
        job = self.job
        if job.inventory_path is None:
            raise EngineError(
                "the ansible engine needs an inventory", fix="sweep run --engine ansible INVENTORY"
            )
        pyz = work / "agent.pyz"
        pyz.write_bytes(zipapp_of(job.payload))
        pyz.chmod(0o755)
        limit = work / "hosts.txt"
        limit.write_text("\n".join(names) + "\n")
        opts = job.options
        # ansible's ssh connection gives the remote command a pty for stdin that never ends: the
        # agent reads none, but a host's python wrapper (or a login script) that reads it would hang
        cmd = " ".join(shlex.quote(a) for a in (str(pyz), *job.agent_args)) + " </dev/null"
        argv = [
            self.ansible or find_ansible(),
            "all",
            "-i",
            str(job.inventory_path),
            "--limit",
            f"@{limit}",
            "-f",
            str(job.forks),
            "-m",
            "ansible.builtin.script",
            # -I: as the bootstrap
            "-a",
            json.dumps({"cmd": cmd, "executable": f"{PYTHON} {ISOLATED}"}),
            "-T",
            f"{max(1, round(opts.connect_timeout))}",
            "--task-timeout",
            f"{max(1, round(opts.host_deadline))}",
            *command_line_args(job.variables),
            *self.extra_args,
        ]
        env = dict(os.environ)
        env.update(
            {
                "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
                "ANSIBLE_STDOUT_CALLBACK": "sweep_lines",
                "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS),
                "ANSIBLE_HOST_KEY_CHECKING": "True",
                # a tty merges stderr
                "ANSIBLE_SSH_ARGS": ssh_args(opts),
                "ANSIBLE_SSH_USETTY": "False",
                "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
                "ANSIBLE_SSH_CONTROL_PATH_DIR": str(work / "cp"),
                "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_FORCE_COLOR": "0",
                "ANSIBLE_DEPRECATION_WARNINGS": "False",
                "ANSIBLE_SYSTEM_WARNINGS": "False",
                "ANSIBLE_RETRY_FILES_ENABLED": "False",
                # each host's line as it is printed, not when a pipe buffer fills
                "PYTHONUNBUFFERED": "1",
            }
        )
        return argv, env

    def _read(self, hosts: list[Any]) -> None:
        by_name = {host.name: host for host in hosts}
        work = Path(tempfile.mkdtemp(prefix="sweep-ansible-"))
        started = time.time()
        try:
            argv, env = self.command(work, list(by_name))
            proc = self._start(argv, env)
            noise = []
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").strip()
                try:
                    event = json.loads(line) if line.startswith("{") else None
                except ValueError:
                    event = None
                if (
                    not isinstance(event, dict)
                    or event.get("sweep") != 1
                    or event.get("host") not in by_name
                ):
                    noise.append(line)
                    continue
                host = by_name.pop(event["host"])
                self._emit(host, outcome(host, event, started, self.job.options.output_limit))
            code = proc.wait()
            stderr = self._stderr_text()
        finally:
            close_masters(work / "cp")
            shutil.rmtree(work, ignore_errors=True)
        if by_name and not self._stopping.is_set():
            said = tail(stderr, 600).strip() or tail("\n".join(noise), 600).strip() or "nothing"
            missing = sorted(by_name)
            raise EngineError(
                f"ansible exited {code} without a result for {plural(len(missing), 'host')} "
                f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}); it said: {said}",
                fix="run the same inventory with `ansible all -i INVENTORY -m ping` to see why; "
                "the records written so far are kept (sweep run --resume RUN_DIR)",
            )


def close_masters(control_dir: Path) -> None:
    """End the ssh ControlPersist masters of this run: they detach from ansible (setsid) and would
    hold a connection to every host for ControlPersist's 30 s after the sweep."""
    prefix = f"ssh: {control_dir}/".encode()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if fh.read().startswith(prefix):
                    os.kill(int(entry), signal.SIGTERM)
        except (OSError, ValueError):
            continue


def outcome(host: Any, event: dict, started: float, output_limit: int = SSHOptions.output_limit):
    """The Outcome of one host from its sweep_lines event."""
    began = event.get("started") or started
    kind, msg = event.get("event"), (event.get("msg") or "").strip()
    stderr = event.get("stderr") or ""
    if kind == "unreachable":
        return failed(host, began, *unreachable(host.name, msg), stderr=msg[-4096:])
    rc = event.get("rc")
    if kind == "failed" and rc is None:
        # "Timed out after N second(s).", not a variable called *_timeout
        if re.search(r"\btimed out\b", msg, re.I):
            return failed(
                host,
                began,
                "timeout",
                (
                    f"{host.name}: no answer within the host deadline ({msg}); check the host, or "
                    "raise --host-deadline"
                ),
                stderr=stderr,
            )
        return failed(
            host,
            began,
            "agent_error",
            f"{host.name}: ansible could not run the agent: {msg[:300]}; "
            "the record's stderr holds the rest",
            stderr=stderr or msg,
        )
    if len(event.get("stdout") or "") > output_limit:
        return failed(
            host,
            began,
            "output_too_large",
            (
                f"{host.name}: the agent wrote more than {output_limit // (1024 * 1024)} MiB on "
                "stdout; the output was dropped; check what the host's python3 runs at start "
                "(sitecustomize, PYTHONSTARTUP)"
            ),
            exit_status=event.get("rc"),
            stderr=stderr[-4096:],
        )
    if kind == "skipped":
        return failed(
            host,
            began,
            "agent_error",
            f"{host.name}: ansible skipped the host ({msg or 'no reason'})",
        )
    return outcome_of_output(
        host, began, (event.get("stdout") or "").encode("utf-8", "surrogateescape"), rc, stderr
    )


def unreachable(name: str, msg: str) -> tuple[str, str]:
    """(failure class, message) of a host ansible could not reach, from OpenSSH's words in `msg`."""
    said = _last_words(msg)
    if not said:  # ssh exited 255 and said nothing: the session was cut, not refused
        return "agent_error", (
            f"{name}: the SSH session broke without a word from ssh (cut while the agent "
            "ran?); sweep the host again"
        )
    for cls, pattern in _UNREACHABLE:
        if pattern.search(msg):
            break
    else:
        cls = "refused"
    fixes = {
        "dns": "fix the name or set ansible_host to its address in the inventory",
        "host_key_changed": (
            "HOST KEY CHANGED: someone may be intercepting the connection (man-in-the-middle), "
            "or the host was reinstalled; if the change is expected, remove the old key with "
            "ssh-keygen -R HOST -f KNOWN_HOSTS"
        ),
        "host_key_unknown": (
            "its host key is not in the known_hosts files of the run; check it and add it "
            "(ssh-keyscan -H HOST >> ~/.ssh/known_hosts), or sweep with --accept-new-host-keys"
        ),
        "auth": (
            "check ansible_user and ansible_ssh_private_key_file, and that the key is in the "
            "host's authorized_keys (ssh-copy-id)"
        ),
        "refused": "check the host is up and sshd listens on the port (ansible_port)",
        "timeout": "check the host is up and reachable, or raise --connect-timeout",
    }
    return cls, f"{name}: ansible could not reach the host ({said}); {fixes[cls]}"


def _last_words(msg: str) -> str:
    """The line of ssh's message that says what happened (not the warning banner around it)."""
    text = re.sub(r"Task failed:\s*|Failed to connect to the host via ssh:\s*", "", msg)
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("@")]
    for line in lines:
        if re.search(
            r"refused|timed out|denied|verification failed|has changed|resolve|unreachable|"
            r"No route|closed",
            line,
            re.I,
        ):
            return line[:300]
    return lines[-1][:300] if lines else ""
