"""A real OpenSSH fleet on loopback, shared by the integration tests of one session.

Hermetic: every test gets an empty HOME and no ssh-agent, so no test reads the developer's
~/.ssh (config, keys, known_hosts); the fleet's own known_hosts is passed explicitly.
"""
from __future__ import annotations

import os
import shutil
from types import SimpleNamespace

import pytest

from sweep.demo.loopback import SSHD, FleetHost, LocalFleet

from helpers import CHROMIUM, require

HEALTHY = 50
FAULTY = {  # name -> kind: the five down or faulty hosts of the Must-show
    "gpu-dead": "dead",
    "gpu-hung": "blackhole",
    "gpu-new": "unknown_key",
    "gpu-rebuilt": "changed_key",
    "gpu-nokey": "bad_auth",
}
EXPECTED_CLASS = {
    "gpu-dead": "refused",
    "gpu-hung": "timeout",
    "gpu-new": "host_key_unknown",
    "gpu-rebuilt": "host_key_changed",
    "gpu-nokey": "auth",
}
ODD = {"odd-nopython": "no_python", "odd-crash": "agent_error", "odd-motd": "bad_output"}
SLOW = 16  # hosts of group "slow" (0.7 s before the agent starts): for kill -9 and Ctrl-C


def _fleet_hosts() -> list[FleetHost]:
    hosts = [FleetHost(f"gpu{i:02d}", group="rack_a" if i <= HEALTHY // 2 else "rack_b")
             for i in range(1, HEALTHY + 1)]
    hosts += [FleetHost(name, kind, group="faulty") for name, kind in FAULTY.items()]
    hosts += [FleetHost(name, kind, group="odd") for name, kind in ODD.items()]
    hosts += [FleetHost("odd-flaky", "flaky", group="flaky", drops=1),
              FleetHost("odd-stuck", "slow", group="stuck", delay_s=30)]
    hosts += [FleetHost(f"slow{i:02d}", "slow", group="slow", delay_s=0.7) for i in range(1, SLOW + 1)]
    return hosts


@pytest.fixture(scope="session")
def needs_sshd():
    """Every loopback fleet's prerequisites, checked once for the files that start their own
    fleet: root, OpenSSH's sshd, and the python3, ssh and ssh-keygen the fleets run (a skip, a
    failure under CI)."""
    tools = ("python3", "ssh", "ssh-keygen")
    require(os.geteuid() == 0 and os.path.exists(SSHD) and all(shutil.which(t) for t in tools),
            "needs root, OpenSSH's sshd, python3, ssh and ssh-keygen "
            "(apt-get install -y openssh-server openssh-client)")


@pytest.fixture(scope="session")
def needs_chromium():
    """The headless Chromium of the browser tests (a skip, a failure under CI)."""
    require(os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is absent: apt-get install -y chromium")


@pytest.fixture(scope="session")
def layout():
    """What the session fleet holds, for the tests' expectations."""
    return SimpleNamespace(healthy=HEALTHY, faulty=FAULTY, expected_class=EXPECTED_CLASS, odd=ODD, slow=SLOW)


@pytest.fixture(scope="session")
def fleet(tmp_path_factory):
    if os.geteuid() != 0 or not os.path.exists(SSHD) or shutil.which("python3") is None:
        require(False, "needs root and OpenSSH's sshd (apt-get install -y openssh-server)")
    workdir = tmp_path_factory.mktemp("fleet")
    with LocalFleet(
        _fleet_hosts(), workdir,
        children={"h200": ["rack_a", "rack_b"], "lab": ["odd", "flaky", "stuck", "slow"]},
        group_vars={"h200": {"sweep_connect_timeout": 5, "site": "loopback"}, "faulty": {"rack": "r9"}},
    ) as running:
        yield running


@pytest.fixture(autouse=True)
def hermetic_home(tmp_path, monkeypatch):
    """An empty HOME and no ssh-agent: nothing of the developer's ~/.ssh is read."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return home
