import os
import signal
import sys
from pathlib import Path

import pytest

# A suite started in the background by a non-interactive shell (`cmd &` in a script, as a CI runner may
# do) inherits SIGINT ignored (POSIX), and so does every sweep it starts: the Ctrl-C tests would press a
# key nobody hears. Python's own handler is restored, so the suite and its children take Ctrl-C as a
# terminal does.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
CAPTURES = ROOT / "sweep" / "demo" / "captures"


@pytest.fixture(autouse=True)
def no_user_ssh(monkeypatch, tmp_path_factory):
    """Hermetic: no test reads the developer's ~/.ssh, agent or known_hosts."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.delenv("SWEEP_REPLAY", raising=False)
    yield


def pytest_configure(config):
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.path.insert(0, str(ROOT))
