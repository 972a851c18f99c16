import os
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# A suite started in the background by a non-interactive shell (`cmd &` in a script, as a CI runner may
# do) inherits SIGINT ignored (POSIX), and so does every sweep it starts: the Ctrl-C tests would press a
# key nobody hears. Python's own handler is restored, so the suite and its children take Ctrl-C as a
# terminal does.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
CAPTURES = ROOT / "sweep" / "demo" / "captures"

# Generated tests cannot turn a build red at random: under the suite every @given test sees the same
# examples on every run (derandomize: seeded from the test's own source), with no example database
# and nothing timed (no deadline, no too_slow health check: a busy machine is not a failure). The
# random search is bench/bench_hypothesis.py (profile "explore"): a contributor runs it on purpose
# and pins what it finds as an @example of the test. These profiles must be loaded before a test
# module builds its settings(...) objects, which copy the values loaded at that moment.
_UNTIMED = dict(database=None, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deterministic", derandomize=True, **_UNTIMED)
settings.register_profile("explore", derandomize=False, **_UNTIMED)
settings.load_profile(os.environ.get("SWEEP_HYPOTHESIS_PROFILE", "deterministic"))


@pytest.fixture(autouse=True)
def no_user_ssh(monkeypatch, tmp_path_factory):
    """Hermetic: no test reads the developer's ~/.ssh, agent or known_hosts."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.delenv("SWEEP_REPLAY", raising=False)
    yield


def worker_loopback_range() -> tuple[int, int]:
    """This pytest-xdist worker's own slice of the 127.A.x.y blocks (A = second octet): the whole range
    split evenly by PYTEST_XDIST_WORKER (gw0, gw1, ...), so fleets and addresses of parallel workers
    cannot meet. Without xdist, the whole range."""
    from sweep.demo.loopback import loopback_range

    low, high = loopback_range()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return low, high
    index, count = int(worker[2:]), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    size = (high - low + 1) // count
    if size < 1:
        raise pytest.UsageError(f"{count} workers cannot share the loopback range {low}-{high}")
    return low + index * size, low + (index + 1) * size - 1


SLOW_TESTS = ROOT / "tests" / "slow_tests.txt"  # measured: bench/suite_durations.py --write-slow


def pytest_collection_modifyitems(config, items):
    """The unit tests measured slow are marked `slow`: the quick loop (`-m "not slow" tests/unit`) leaves them
    to the full suite, which runs everything."""
    slow = {line.strip() for line in SLOW_TESTS.read_text().splitlines() if line.strip() and not line.startswith("#")}
    for item in items:
        if item.nodeid.split("[")[0] in slow:
            item.add_marker(pytest.mark.slow)


def pytest_configure(config):
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.path.insert(0, str(ROOT))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # LocalFleet (here and in the CLIs tests start) reads it
        os.environ["SWEEP_LOOPBACK_RANGE"] = "%d-%d" % worker_loopback_range()
