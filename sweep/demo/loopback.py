"""A fleet of real OpenSSH servers on loopback, for `sweep demo` and the integration tests.

`LocalFleet` starts one ``sshd -D`` per host, each on its own 127.x.y.z address with its own host
key, serving a replayed GPU capture (``SetEnv SWEEP_REPLAY=... SWEEP_REPLAY_HOSTNAME=...``), and
writes what a controller needs: a client key, a known_hosts file and an Ansible inventory (groups,
children, group vars, host ranges with ``host_vars/`` files: `sweep.demo.fleet_inventory`). Hosts
can also be made faulty (see `KINDS`). Everything is torn down on exit, sshd session processes
included.
``SWEEP_LOOPBACK_RANGE`` (`loopback_range`) keeps fleets of separate owners apart (the test suite
gives each pytest-xdist worker its own).

Needs root (sshd binds port 22 and switches users) and ``/usr/sbin/sshd``. The sshds get
PR_SET_PDEATHSIG, so they die with the thread that started the fleet: start it from the main
thread.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sweep.demo.fleet_inventory import write_inventory
from sweep.demo.proxy import DropProxy
from sweep.errors import ConfigError

if TYPE_CHECKING:
    from sweep.collect.options import SSHSettings

SSHD = os.environ.get("SWEEP_SSHD", "/usr/sbin/sshd")
DEMO_DIR = Path(__file__).with_name("captures")
KINDS = {
    "healthy": "sshd serving a replayed capture",
    "slow": "like healthy, but the agent starts after `delay_s` seconds",
    "flaky": (
        "drops its first `drops` connections before the SSH banner (as sshd's MaxStartups does)"
    ),
    "dead": "nothing listens: connection refused",
    "blackhole": "accepts TCP connections and never sends an SSH banner: timeout",
    "unknown_key": "its host key is not in the fleet's known_hosts",
    "changed_key": "the fleet's known_hosts records another key for it",
    "bad_auth": "does not accept the fleet's client key",
    "no_python": "its python interpreter does not exist",
    "agent_error": "the agent exits 1 with a traceback",
    "bad_output": "prints a banner line instead of health.json",
    "slow_banner": "sends its SSH banner only after `delay_s` seconds",
    "old_python": "its python3 is Python 2.7: it refuses the bootstrap's -I (Unknown option: -I)",
    "huge_output": "its python prints 100 MiB instead of health.json",
    "bad_schema": "prints JSON of schema_version 1.0 that breaks the health.json schema",
    "drop_mid_output": "the connection is cut after the first 64 KiB the host sends, mid-output",
}
DROP_AFTER_BYTES = 64 * 1024  # kind drop_mid_output: server-to-client bytes relayed before the cut
_SCRIPTS = {
    "slow": 'sleep "${SWEEP_DEMO_DELAY:-1}"\nexec python3 "$@"\n',
    "agent_error": (
        'cat >/dev/null\necho "Traceback (most recent call last):" >&2\n'
        'echo "RuntimeError: demo agent failure on $SWEEP_REPLAY_HOSTNAME" >&2\nexit 1\n'
    ),
    "bad_output": 'cat >/dev/null\necho "Welcome to $SWEEP_REPLAY_HOSTNAME! Unauthorized access '
    'prohibited."\n',
    # what python 2.7 answers to `python -I -c CODE` (Modules/main.c: an unknown
    # option, then usage(2))
    "old_python": (
        'case "$1" in -V|--version) echo "Python 2.7.18" >&2; exit 0;; esac\ncat >/dev/null\n'
        'echo "Unknown option: -I" >&2\n'
        'echo "usage: $0 [option] ... [-c cmd | -m mod | file | -] [arg] ..." >&2\n'
        'echo "Try \\`python -h\' for more information." >&2\nexit 2\n'
    ),
    "huge_output": 'cat >/dev/null\nhead -c 104857600 /dev/zero | tr "\\000" "x"\n',
    "bad_schema": (
        'cat >/dev/null\necho \'{"schema_version": "1.0", "kind": "sweep.health", "probe": {}, '
        '"gpus": "eight, all fine"}\'\n'
    ),
    "drop_mid_output": (
        'cat >/dev/null\nprintf \'{"schema_version": "1.0", "kind": "sweep.health", "pad": "\'\n'
        'head -c 1048576 /dev/zero | tr "\\000" "x"\nsleep 60\necho \'"}\'\n'
    ),
}


@dataclass(frozen=True)
class FleetHost:
    """One host of a LocalFleet: its inventory name, kind, leaf group and capture."""

    name: str
    kind: str = "healthy"
    group: str = "gpus"
    capture: str | None = None  # a capture file; default: the fleet's capture; "live": no replay
    delay_s: float = 0.0  # kinds "slow" and "slow_banner"
    drops: int = 1  # kind "flaky"
    # a shell script body run as the host's python (any kind that runs python)
    script: str | None = None
    # sshd_config lines that win over the template, e.g. ("MaxStartups 2:100:2",)
    sshd_options: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()  # more inventory names for this same sshd (same address and key)
    # more variables its sessions get (sshd SetEnv), e.g. SWEEP_KERNEL_LOG
    env: tuple[tuple[str, str], ...] = ()


def loopback_range() -> tuple[int, int]:
    """The second octets A of the 127.A.x.y blocks a LocalFleet may take:
    ``SWEEP_LOOPBACK_RANGE=A-B`` (default 64-249); fleets started with disjoint ranges never
    share an address."""
    text = os.environ.get("SWEEP_LOOPBACK_RANGE", "").strip() or "64-249"
    match = re.fullmatch(r"(\d{1,3})-(\d{1,3})", text)
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)) <= 254:
        raise ConfigError(
            f"SWEEP_LOOPBACK_RANGE={text!r} is not a range of second octets A-B within 1-254",
            fix="set it as e.g. 64-249, or unset it",
        )
    return int(match.group(1)), int(match.group(2))


def default_capture() -> Path:
    """The idle H200 capture shipped with sweep (first of sweep/demo/captures/*.json otherwise)."""
    for name in ("h200-idle.json", "h200-idle-smi.json"):
        if (DEMO_DIR / name).is_file():
            return DEMO_DIR / name
    found = sorted(DEMO_DIR.glob("*.json"))
    if not found:
        raise ConfigError(
            "no capture file in sweep/demo/captures/",
            where=str(DEMO_DIR),
            fix="reinstall sweep, or record one with the agent's --record",
        )
    return found[0]


def _pdeathsig() -> None:  # in the child, before exec: die with the thread that started us
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _keypair() -> tuple[bytes, str]:
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )
    return private, public


def _bindable(address: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError:
            return False
    return True


def _free_port(address: str) -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


class LocalFleet:
    """Real sshds on loopback, one per host; a context manager (`start` / `stop`).

    After `start`: `inventory_path`, `known_hosts_path`, `client_key_path`, `addresses` ({name:
    address}), `port`, and `home` (an empty HOME for a hermetic controller: `controller_env`).
    """

    def __init__(
        self,
        hosts: Sequence[FleetHost],
        workdir: str | Path | None = None,
        *,
        capture: str | Path | None = None,
        port: int | None = None,
        children: Mapping[str, Sequence[str]] | None = None,
        group_vars: Mapping[str, Mapping] | None = None,
        inventory_name: str = "inventory.yml",
        ready_timeout: float = 20.0,
        user: str | None = None,
    ):
        names = [name for h in hosts for name in (h.name, *h.aliases)]
        if len(set(names)) != len(names):
            raise ConfigError("a LocalFleet host name is used twice")
        for host in hosts:
            if host.kind not in KINDS:
                raise ConfigError(
                    f"{host.name}: unknown fleet host kind {host.kind!r}",
                    fix=f"use one of {', '.join(KINDS)}",
                )
        self.hosts = list(hosts)
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else None
        self.capture = Path(capture) if capture else None
        self.requested_port = port
        self.children = dict(children or {})
        self.group_vars = dict(group_vars or {})
        self.inventory_name = inventory_name
        self.ready_timeout = ready_timeout
        self.user = user  # the login user on every host (default: the user running the fleet)
        self.addresses: dict[str, str] = {}
        self.port = 22
        self._procs: dict[str, subprocess.Popen] = {}
        self._sockets: list[socket.socket] = []
        self._proxies: list[DropProxy] = []

    # --- life cycle ---------------------------------------------------------------------------

    def __enter__(self) -> "LocalFleet":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        if not os.path.exists(SSHD):
            raise ConfigError(f"{SSHD} not found", fix="apt-get install -y openssh-server")
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="sweep-fleet-"))
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        wd = self.workdir
        for sub in (
            "keys",
            "sshd",
            "bin",
            "logs",
            "remote-home",
            "home/.ssh",
            "host_vars",
            "group_vars",
        ):
            (wd / sub).mkdir(parents=True, exist_ok=True)
        try:
            os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation directory
        except OSError:
            pass  # not root: sshd says what it misses in its log
        self._allocate()
        private, public = _keypair()
        self.client_key_path = wd / "keys" / "client_ed25519"
        self.client_key_path.write_bytes(private)
        self.client_key_path.chmod(0o600)
        (wd / "keys" / "client_ed25519.pub").write_text(public + "\n")
        (wd / "keys" / "authorized_keys").write_text(public + "\n")
        (wd / "keys" / "no_keys").write_text("")
        for kind, body in _SCRIPTS.items():
            script = wd / "bin" / f"python-{kind}"
            script.write_text("#!/bin/sh\n" + body)
            script.chmod(0o755)
        for host in self.hosts:
            if host.script is not None:
                script = wd / "bin" / f"python-host-{_slug(host.name)}"
                script.write_text("#!/bin/sh\n" + host.script)
                script.chmod(0o755)
        if self.user is not None:  # a login user other than the fleet's owner reads these
            for sub in (wd, wd / "bin", wd / "remote-home", *(p for p in wd.glob("bin/*"))):
                sub.chmod(sub.stat().st_mode | 0o755)
            import pwd

            entry = pwd.getpwnam(self.user)
            os.chown(wd / "remote-home", entry.pw_uid, entry.pw_gid)
        known = []
        for host in self.hosts:
            if host.kind in ("dead", "blackhole"):
                continue
            key_path = wd / "keys" / f"host-{_slug(host.name)}"
            host_private, host_public = _keypair()
            key_path.write_bytes(host_private)
            key_path.chmod(0o600)
            listed = _keypair()[1] if host.kind == "changed_key" else host_public
            if host.kind != "unknown_key":
                name = self._key_name(host)
                known.append(f"{name} {' '.join(listed.split()[:2])}")
        self.known_hosts_path = wd / "known_hosts"
        self.known_hosts_path.write_text("\n".join(known) + "\n")
        self.home = wd / "home"
        self.inventory_path = wd / self.inventory_name
        self._write_inventory()
        self._launch()

    def stop(self) -> None:
        """Stop every sshd and its session processes, close the fake listeners,
        remove a temp workdir."""
        procs, self._procs = list(self._procs.values()), {}
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        descendants = _descendants({p.pid for p in procs})
        for pid in descendants:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for proxy in self._proxies:
            proxy.close()
        self._proxies = []
        for sock in self._sockets:
            sock.close()
        self._sockets = []
        if self._own_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # --- what a controller needs --------------------------------------------------------------

    def controller_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """Environment for a hermetic controller: HOME is the fleet's empty home, no ssh-agent."""
        env = dict(os.environ if base is None else base)
        env["HOME"] = str(self.home)
        env.pop("SSH_AUTH_SOCK", None)
        return env

    def ssh_settings(self, **changes: Any) -> "SSHSettings":
        """run_sweep's `ssh`: trust this fleet's host keys and no user ssh state;
        `changes` on top."""
        from sweep.collect.options import SSHSettings

        trust = {
            "known_hosts": str(self.known_hosts_path),
            "ssh_config": None,
            "allow_agent": False,
            "look_for_keys": False,
        }
        return SSHSettings(**{**trust, **changes})

    # --- internals ----------------------------------------------------------------------------

    def _allocate(self) -> None:
        """127.A.B.C addresses, A random per fleet so that fleets started side by side do not meet;
        A within `loopback_range()`, so that fleets of separate owners (test workers, two demos)
        cannot meet at all."""
        rng = random.Random()
        low, high = loopback_range()
        for _ in range(50):
            first = rng.randint(low, high)
            third = rng.randrange(0, 200)
            addrs = [
                f"127.{first}.{third + i // 250}.{i % 250 + 1}" for i in range(len(self.hosts))
            ]
            port = self.requested_port or 22
            if not all(_bindable(a, port) for a in addrs):
                if self.requested_port:
                    continue
                port = _free_port(addrs[0])
                if not all(_bindable(a, port) for a in addrs):
                    continue
            self.port = port
            self.addresses = {h.name: a for h, a in zip(self.hosts, addrs)}
            return
        raise ConfigError("no free block of loopback addresses for the fleet")

    def _key_name(self, host: FleetHost) -> str:
        address = self.addresses[host.name]
        return address if self.port == 22 else f"[{address}]:{self.port}"

    def _write_inventory(self) -> None:
        write_inventory(
            self.inventory_path,
            self.hosts,
            self._host_vars,
            folder=self.workdir,
            key_path=self.client_key_path,
            port=self.port,
            user=self.user,
            children=self.children,
            group_vars=self.group_vars,
        )

    def _host_vars(self, host: FleetHost) -> dict:
        values: dict = {"ansible_host": self.addresses[host.name]}
        if host.script is not None:
            values["ansible_python_interpreter"] = str(
                self.workdir / "bin" / f"python-host-{_slug(host.name)}"
            )
        elif host.kind == "no_python":
            values["ansible_python_interpreter"] = "/nonexistent/bin/python3"
        elif host.kind in _SCRIPTS:
            values["ansible_python_interpreter"] = str(self.workdir / "bin" / f"python-{host.kind}")
        return values

    def _readable(self, capture: Path) -> Path:
        """The capture as the hosts' login user reads it: where that user is not the fleet's owner,
        a copy in the fleet's folder (a checkout under a 0700 folder, as a clone under /root, is not
        theirs to read)."""
        if self.user is None:
            return capture
        folder = self.workdir / "captures"
        folder.mkdir(exist_ok=True)
        folder.chmod(0o755)
        copy = folder / f"{hashlib.sha256(str(capture).encode()).hexdigest()[:12]}-{capture.name}"
        if not copy.exists():
            shutil.copyfile(capture, copy)
            copy.chmod(0o644)
        return copy

    def _launch(self) -> None:
        wd = self.workdir
        capture = self.capture or default_capture()
        for host in self.hosts:
            address = self.addresses[host.name]
            if host.kind == "dead":
                continue
            if host.kind == "blackhole":  # the kernel completes the handshake; nobody ever answers
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((address, self.port))
                sock.listen(64)
                self._sockets.append(sock)
                continue
            listen = (address, self.port)
            if host.kind in ("flaky", "slow_banner", "drop_mid_output"):
                listen = (address, _free_port(address))
                self._proxies.append(
                    DropProxy(
                        (address, self.port),
                        listen,
                        host.drops if host.kind == "flaky" else 0,
                        delay_s=host.delay_s if host.kind == "slow_banner" else 0.0,
                        cut_after=DROP_AFTER_BYTES if host.kind == "drop_mid_output" else 0,
                    )
                )
            config = self._write_sshd_config(host, listen, self._agent_env(host, capture))
            log = open(wd / "logs" / f"{_slug(host.name)}.log", "wb")
            try:
                # -r: no re-exec per connection: measured here, sshd's CPU per connection (a session
                # running `true`) drops from ~72 to ~48 ms, which is the fleet's side of every sweep
                self._procs[host.name] = subprocess.Popen(
                    [
                        SSHD,
                        "-D",
                        "-e",
                        "-r",
                        "-f",
                        str(config),
                        "-h",
                        str(wd / "keys" / f"host-{_slug(host.name)}"),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    preexec_fn=_pdeathsig,
                )
            finally:
                log.close()
        self._wait_ready()

    def _agent_env(self, host: FleetHost, capture: Path) -> dict[str, str]:
        """The environment sshd sets for the host's sessions: the capture the agent replays (none
        for a live host, which reads this machine's driver), the host name it reports, its delay."""
        env = {
            "HOME": str(self.workdir / "remote-home"),
            "SWEEP_REPLAY": ""
            if host.capture == "live"
            else str(self._readable(Path(host.capture or capture).resolve())),
            "SWEEP_REPLAY_HOSTNAME": host.name,
            "SWEEP_DEMO_DELAY": f"{host.delay_s:g}",
            **dict(host.env),
        }
        # the agent reads this machine's own driver (none: no GPU here)
        if host.capture == "live":
            del env["SWEEP_REPLAY"]
        if not re.fullmatch(r"[ -~]*", host.name) or '"' in host.name:
            # sshd_config cannot carry it: the capture's hostname stays
            del env["SWEEP_REPLAY_HOSTNAME"]
        return env

    def _write_sshd_config(self, host: FleetHost, listen: tuple, env: dict[str, str]) -> Path:
        """The host's sshd_config: the template, its address, its keys, the agent's environment."""
        wd = self.workdir
        keys = wd / "keys" / ("no_keys" if host.kind == "bad_auth" else "authorized_keys")
        config = wd / "sshd" / f"{_slug(host.name)}.conf"
        # the host's own lines before and after the template: sshd keeps the first value of most
        # keywords (LogLevel, TrustedUserCAKeys) and the last of a few (MaxStartups)
        own = "".join(f"{line}\n" for line in host.sshd_options)
        config.write_text(
            own
            + _SSHD_CONFIG.format(
                listen=f"{listen[0]}:{listen[1]}",
                keys=keys,
                setenv=" ".join(f'"{k}={v}"' for k, v in env.items()),
            )
            + own
        )
        return config

    def _wait_ready(self) -> None:

        pending = {name: self.addresses[name] for name in self._procs}
        end = time.monotonic() + self.ready_timeout
        while pending:
            for name, address in list(pending.items()):
                proc = self._procs[name]
                if proc.poll() is not None:
                    log = (self.workdir / "logs" / f"{_slug(name)}.log").read_text(errors="replace")
                    raise ConfigError(
                        f"{name}: sshd on {address}:{self.port} exited ({proc.returncode}): "
                        f"{log.strip()[-500:]}"
                    )
                port = self.port
                for proxy in self._proxies:
                    if proxy.listen[0] == address:
                        port = proxy.backend[1]
                try:
                    socket.create_connection((address, port), timeout=0.5).close()
                    del pending[name]
                except OSError:
                    pass
            if pending:
                if time.monotonic() > end:
                    raise ConfigError(
                        f"sshd did not start within {self.ready_timeout:g} s for "
                        f"{', '.join(sorted(pending)[:5])}"
                    )
                time.sleep(0.02)


_SSHD_CONFIG = """\
ListenAddress {listen}
PidFile none
UsePAM no
AuthorizedKeysFile {keys}
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
MaxStartups 200:30:400
MaxSessions 64
LoginGraceTime 60
UseDNS no
PrintMotd no
PrintLastLog no
AllowTcpForwarding yes
LogLevel ERROR
SetEnv {setenv}
"""


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def _descendants(roots: set[int]) -> list[int]:
    """Process ids below `roots` (sshd session processes and what they run), deepest first."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        parent[int(entry)] = int(fields[1])
    found: list[int] = []
    frontier = set(roots)
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier and pid not in found}
        found.extend(frontier)
    return list(reversed(found))
