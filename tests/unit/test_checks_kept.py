"""Each host's ssh settings are read once a run (issue 52): before any host is contacted,
`check_ssh_settings` reads every host's ssh_config chain, and the ssh engine's transport keeps those
answers (its routes, and which hosts go through OpenSSH's ssh and why) instead of reading them all
again when it probes. What is kept must be what the probe would have found: a host the check sent
through ssh is still probed through ssh, named in the run's note."""

from __future__ import annotations

import pytest

from sweep.collect.checks import check_ssh_settings
from sweep.collect.engines.base import EngineJob
from sweep.collect.engines.ssh import SSHEngine
from sweep.collect.options import SSHOptions
from sweep.collect.ssh import config as ssh_config
from sweep.errors import SSHConfigNote
from sweep.inventory.model import Host

CONFIG = """Host via-agent
  IdentityAgent ~/vault/agent.sock
Host *
  HostName 127.0.0.1
  Port 1
  ControlMaster auto
"""


def host(name: str) -> Host:
    return Host(name=name, address=name, port=None, user=None, key_file=None, python="python3",
                ssh_common_args=None, proxy_jump=None, groups=(), vars={}, settings={})


@pytest.fixture()
def reads(monkeypatch):
    """How many times each host's ssh_config chain is read."""
    counted: dict[str, int] = {}
    check = ssh_config.SSHConfigFile.check

    def counting(self, h):
        counted[h.name] = counted.get(h.name, 0) + 1
        return check(self, h)

    monkeypatch.setattr(ssh_config.SSHConfigFile, "check", counting)
    return counted


@pytest.mark.parametrize("transport", ["auto", "paramiko"])
def test_the_engine_keeps_the_checks_made_before_contact(tmp_path, reads, transport):
    path = tmp_path / "config"
    path.write_text(CONFIG)
    options = SSHOptions(ssh_config=str(path), known_hosts=(str(tmp_path / "known"),),
                         transport=transport, host_deadline=5.0, connect_timeout=2.0, retries=1)
    hosts = [host("gpu01"), host("gpu02")] + ([host("via-agent")] if transport == "auto" else [])
    engine = SSHEngine()
    with pytest.warns(SSHConfigNote) as said:  # the run's notes, said once before contact
        check_ssh_settings(engine, hosts, options)
    assert any("ControlMaster auto is left unused" in str(w.message) for w in said)
    assert reads == {h.name: 1 for h in hosts}
    engine.bind(EngineJob(payload=b"#", forks=2, options=options))
    outcomes = {h.name: o for h, o in engine.run(hosts)}
    # each host was probed (port 1 refuses), and no host's ssh_config was read a second time
    assert {name: o.failure_class for name, o in outcomes.items()} == dict.fromkeys(reads, "refused")
    assert reads == {h.name: 1 for h in hosts}
    if transport == "auto":  # the check's verdict, kept: via-agent went through ssh, and says so
        notes = engine._prober.notes()
        assert any(n.startswith("via-agent through OpenSSH's ssh: IdentityAgent") for n in notes), notes
