"""What several test modules need: a run folder's records read strictly, and headless Chromium."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import shutil
import socket
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from sweep.store import is_attempt_file, safe_name

CHROMIUM = "/usr/bin/chromium"


def under_ci() -> bool:
    """True in CI (CI=true), where every prerequisite must be installed."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require(present: bool, missing: str) -> None:
    """Skip a test whose prerequisite is missing here; under CI fail it, so a green run cannot hide a broken install."""
    if present:
        return
    if under_ci():
        pytest.fail(f"prerequisite missing under CI: {missing}", pytrace=False)
    pytest.skip(missing)


def schema_validator(schema: dict):
    """A validator of `schema` (itself checked once): for many documents, as `jsonschema.validate`, which checks
    the schema and builds a validator again on every call (0.1 s each for health-1.schema.json)."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@contextlib.contextmanager
def machine_wide_state(name: str = "machine-users"):
    """Hold the machine's lock on state every test process shares (login users, /etc/sudoers.d files), from
    creating it to removing it. Two xdist workers, or two checkouts' suites, then never create and remove it
    under each other. The become modules also carry ``xdist_group("machine-users")`` for ``--dist loadgroup``,
    but with pytest 9.2 and pytest-xdist 3.8 that grouping silently does nothing (pytest-xdist#1386: it edits
    ``item._nodeid``, which pytest 9.2 no longer reads), and this lock keeps the modules right either way."""
    with open(f"/tmp/sweep-tests-{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def loopback_address() -> tuple[str, int]:
    """A 127.A.x.y address of this test's own and a port free on it: A within this worker's slice
    (SWEEP_LOOPBACK_RANGE, set per pytest-xdist worker by tests/conftest.py), so parallel workers and
    their fleets cannot meet. Loopback only."""
    from sweep.demo.loopback import loopback_range

    low, high = loopback_range()
    rng = random.Random()
    host = f"127.{rng.randint(low, high)}.{rng.randint(200, 254)}.{rng.randint(2, 254)}"
    with socket.socket() as sock:
        sock.bind((host, 0))
        return host, sock.getsockname()[1]


def read_records(run_dir: Path) -> dict[str, dict]:
    """Every record of a run folder, each read whole; fails on a duplicate, a stray or a torn file (earlier
    attempts that --retry-failed set aside are not records of the run)."""
    found = {}
    for path in sorted((run_dir / "hosts").iterdir()):
        assert not path.name.startswith("."), f"leftover temporary file {path.name}"
        if is_attempt_file(path.name):
            continue
        record = json.loads(path.read_text())
        assert path.name == f"{safe_name(record['host'])}.json"
        assert record["host"] not in found
        found[record["host"]] = record
    return found


def chromium(*args, timeout=120) -> str:
    """Run headless Chromium with no network and a fresh profile; return its stdout."""
    profile = tempfile.mkdtemp(prefix="sweep-chromium-")
    try:
        done = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--hide-scrollbars", *args],
            capture_output=True, text=True, timeout=timeout, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Tags(HTMLParser):
    """Tag names and the document <title> (the one in <head>, not the SVG tooltips) of a DOM dump."""

    def __init__(self):
        super().__init__()
        self.tags, self.title, self._in_title, self._in_head = [], "", False, False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_head = self._in_head or tag == "head"
        self._in_title = tag == "title" and self._in_head

    def handle_endtag(self, tag):
        self._in_title = False
        self._in_head = self._in_head and tag != "head"

    def handle_data(self, data):
        if self._in_title:
            self.title += data


def dom_tags(dom: str) -> Tags:
    tags = Tags()
    tags.feed(dom)
    return tags


# The rest of a ProxyCommand relay script once `conn` is connected: stdin to conn, conn to stdout
# (tests/integration/test_injection.py and test_hostile_engines.py put their own first lines above it).
RELAY_LOOP = """def up():
    while True:
        data = os.read(0, 65536)
        if not data:
            conn.shutdown(socket.SHUT_WR)
            return
        conn.sendall(data)
threading.Thread(target=up, daemon=True).start()
while True:
    data = conn.recv(65536)
    if not data:
        break
    os.write(1, data)
"""


def run_over_fleet(fleet, out, *extra: str) -> int:
    """`sweep run` of a LocalFleet's inventory in this process, under the fleet's HOME and known_hosts, with
    no report: its exit code (the records are in `out`)."""
    import os

    from sweep.cli import main

    old = os.environ.get("HOME")
    os.environ["HOME"] = str(fleet.home)
    try:
        known = fleet.ssh_settings().known_hosts[0]
        return main(["run", str(fleet.inventory_path), "--out", str(out), "--known-hosts", str(known),
                     "--no-report", *extra])
    finally:
        os.environ["HOME"] = old
