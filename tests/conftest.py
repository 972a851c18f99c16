import os
import sys
from pathlib import Path

import pytest

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
