"""Faults, hostile hosts and a hostile controller's life: the sweep never hangs, loses nothing, trusts no host.

Real sshds on loopback (sweep.demo.loopback.LocalFleet), the real agent bundle, the real CLI. The single
faults already covered by test_sweep_run.py (refused, blackhole, unknown and changed keys, bad
auth, no python, a crashing agent, a motd instead of JSON, one dropped connection, kill -9 in the
middle, Ctrl-C in-process) are not repeated here.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from sweep.demo import synth
from sweep.cli import main
from sweep.demo.loopback import DEMO_DIR as CAPTURES, FleetHost, LocalFleet
from sweep.collect.run import run_sweep
from sweep.collect.options import AgentOptions, HostSelection
from sweep.store import safe_name

from helpers import CHROMIUM, Tags, chromium, machine_wide_state, read_records as records, require

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
PWNED = "document.title='pwned'"
# C0 controls but newline and tab, DEL, and the C1 controls as UTF-8 (U+0080..U+009F)
RAW_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")
PY36 = ("shift 2  # -I -c: run the bootstrap under a real python3 that says it is 3.6.15\n"
        "exec python3 -c 'import sys; sys.version_info = (3, 6, 15, \"final\", 0); "
        "sys.version = \"3.6.15 (pretend)\"; code = sys.argv.pop(1); exec(compile(code, \"<string>\", \"exec\"))' \"$@\"\n")
TRUNCATED = "cat >/dev/null\nprintf '{\"schema_version\": \"1.0\", \"kind\": \"sweep.health\", \"gpus\": [{\"ind'\n"
HOSTILE_STDERR = ("cat >/dev/null\nprintf 'Traceback (most recent call last):\\n' >&2\n"
                  "printf '\\033[2J\\033]0;pwned\\007RuntimeError: <script>document.title=\"pwned\"</script>\\302\\233\\n' >&2\n"
                  "exit 1\n")
HOSTILE_HOSTNAME = ("SWEEP_REPLAY_HOSTNAME=\"$(printf 'node\\033[31m<img src=x onerror=\"document.title=1\">"
                    "\\302\\233\\033]0;pwned\\007')\" exec python3 \"$@\"\n")
EVIL_NAME = "gpu-<script>document.title='pwned'</script>"
# an inventory name with a control character is refused at load (issue 36 item 2, test_inventory_sources.py);
# this host sends its hostile text in what it reports (HOSTILE_HOSTNAME)
OSC_NAME = "gpu-osc"
CROWD = 10


def _hostile_capture(workdir: Path) -> Path:
    def gpu_name(cap):
        cap["nvml"]["gpu0.name"] = {"value": "NVIDIA H200 <img src=x onerror=\"document.title='pwned'\">\x1b[5m"}
    gpu_name.__doc__ = "hostile GPU name"
    cap = synth.derive(synth.base_capture("h200-idle"), [
        gpu_name, synth.foreign_process(name="evil\x1b[31m<script>document.title='pwned'</script>\x9b2J", mib=512)])
    return synth.write(cap, workdir / "hostile.json")


@pytest.fixture(scope="module")
def faults(needs_sshd, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("faults")
    hang = synth.write(synth.derive(synth.base_capture("h200-idle"), [synth.hang("gpu0.temp")]), workdir / "hang.json")
    hostile = _hostile_capture(workdir)
    hosts = [
        FleetHost("f-ok01", group="okay"), FleetHost("f-ok02", group="okay"),
        FleetHost("f-banner-1s", "slow_banner", group="banner", delay_s=1.0),
        FleetHost("f-banner-4s", "slow_banner", group="banner", delay_s=4.0),
        FleetHost("f-py27", "old_python", group="oldpy"),
        FleetHost("f-py36", group="oldpy", script=PY36),
        FleetHost("f-hang", group="hang", capture=str(hang)),
        FleetHost("f-huge", "huge_output", group="huge"),
        FleetHost("f-truncated", group="output", script=TRUNCATED),
        FleetHost("f-schema", "bad_schema", group="output"),
        FleetHost("f-drop", "drop_mid_output", group="drop"),
        FleetHost("f-crowd00", group="crowd", sshd_options=("MaxStartups 2:100:2",),
                  aliases=tuple(f"f-crowd{i:02d}" for i in range(1, CROWD))),
        FleetHost(EVIL_NAME, group="hostile", capture=str(hostile)),
        FleetHost(OSC_NAME, group="hostile", script=HOSTILE_HOSTNAME),
        FleetHost("f-evil-stderr", group="hostile", script=HOSTILE_STDERR),
    ]
    with LocalFleet(hosts, workdir / "fleet", group_vars={"crowd": {"sweep_retries": 8}}) as running:
        yield running


def sweep(fleet, tmp_path, limit, **ssh):
    started = time.monotonic()
    result = run_sweep(fleet.inventory_path, out=tmp_path / f"run-{limit}", hosts=HostSelection(limit=limit),
                       ssh=fleet.ssh_settings(**ssh))
    return result, records(result.run_dir), time.monotonic() - started


def controller_env(fleet) -> dict:
    env = fleet.controller_env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


# --- host faults ---------------------------------------------------------------------------------


def test_slow_banner_within_the_connect_timeout_is_ok_beyond_it_a_timeout(faults, tmp_path):
    result, found, elapsed = sweep(faults, tmp_path, "banner", connect_timeout=2)
    slow = found["f-banner-1s"]
    assert slow["status"] == "ok" and slow["attempts"] == 1 and slow["duration_s"] >= 1.0
    late = found["f-banner-4s"]
    assert late["failure"] == {"class": "timeout", "message": (
        "f-banner-4s: no SSH banner within 2 s: something accepts TCP connections there but does not answer "
        "as an SSH server; check the host and its sshd")}
    # cut at the 2 s connect timeout, not when the banner came at 4 s (room for a loaded machine)
    assert late["attempts"] == 1 and 2.0 <= late["duration_s"] < 3.9


def test_a_python_older_than_3_8_is_named_with_its_fix(faults, tmp_path):
    result, found, _ = sweep(faults, tmp_path, "oldpy")
    bin_dir = faults.workdir / "bin"
    assert found["f-py27"]["failure"] == {"class": "python_too_old", "message": (
        f"f-py27: '{bin_dir}/python-old_python' is a python older than the 3.8 the agent needs "
        "(Unknown option: -I); install python3 >= 3.8 or set ansible_python_interpreter to one")}
    assert found["f-py36"]["failure"] == {"class": "python_too_old", "message": (
        f"f-py36: '{bin_dir}/python-host-f-py36' is Python 3.6.15 older than the 3.8 the agent needs "
        "(sweep-agent: this python is too old: Python 3.6.15; the agent needs 3.8 or later); "
        "install python3 >= 3.8 or set ansible_python_interpreter to one")}
    assert result.by_class == {"python_too_old": 2}


def test_an_agent_hung_in_a_driver_query_emits_at_its_deadline_or_is_cut_at_the_hosts(faults, tmp_path):
    # the agent's own deadline (0.6 x the host deadline) comes first: an incomplete health.json, recorded ok
    # (what proves which deadline fired is the record itself, not a stopwatch: an ok record cut by the
    # agent's own deadline, or the host deadline's timeout; the time bounds below only tell the host
    # deadline of a few seconds apart from the agent's 30, with room for a loaded machine)
    result, found, elapsed = sweep(faults, tmp_path, "hang", host_deadline=4)
    record = found["f-hang"]
    assert record["status"] == "ok" and record["duration_s"] < 15
    probe = record["health"]["probe"]
    assert probe["complete"] is False
    assert probe["incomplete_reason"] == "deadline of 2.4 s reached while reading GPU 0"
    # an agent told to wait longer than the host may take is cut at the host deadline: timeout
    started = time.monotonic()
    cut = run_sweep(faults.inventory_path, out=tmp_path / "cut", hosts=HostSelection(limit="hang"),
                    ssh=faults.ssh_settings(host_deadline=3), agent=AgentOptions(args=["--deadline", "30"]))
    assert time.monotonic() - started < 15  # not the agent's 30 s
    record = records(cut.run_dir)["f-hang"]
    assert record["failure"] == {"class": "timeout", "message": (
        "f-hang: no answer within the host deadline of 3 s (while the agent ran); check the host, "
        "or raise --host-deadline (sweep_host_deadline)")}
    assert record["duration_s"] < 15


MEASURE_HUGE = """
import json, sys, time
from sweep.inventory.model import load_inventory
def peak_mib():  # VmHWM: this image's own peak (ru_maxrss keeps the pytest worker's, from before exec)
    return int(next(line for line in open("/proc/self/status") if line.startswith("VmHWM:")).split()[1]) / 1024
from sweep.collect.ssh.prober import Prober, SSHOptions
from sweep.collect.bundle import bundle_bytes
host = load_inventory(sys.argv[1]).select("f-huge")[0]
prober = Prober(bundle_bytes(), (), SSHOptions(known_hosts=(sys.argv[2],), ssh_config=None, allow_agent=False,
                                               look_for_keys=False))
before = peak_mib()
started = time.monotonic()
outcome = prober.probe(host)
print(json.dumps({"class": outcome.failure_class, "message": outcome.message, "seconds": time.monotonic() - started,
                  "before_mib": before, "grew_mib": peak_mib() - before}))
"""


def test_100_mib_of_output_is_refused_and_the_controller_memory_stays_bounded(faults):
    done = subprocess.run([sys.executable, "-c", MEASURE_HUGE, str(faults.inventory_path),
                           str(faults.known_hosts_path)], capture_output=True, text=True, timeout=60,
                          env=controller_env(faults), check=True)
    got = json.loads(done.stdout)
    assert got["class"] == "output_too_large"
    assert got["message"].startswith("f-huge: the agent wrote more than 16 MiB on stdout; the output was cut off")
    # the peak grows by the 16 MiB cap and its copies, not by the 100 MiB the host sent
    assert got["grew_mib"] < 60, got
    assert got["seconds"] < 10


def test_output_that_is_not_json_or_breaks_the_schema_is_bad_output(faults, tmp_path):
    result, found, _ = sweep(faults, tmp_path, "output")
    truncated = found["f-truncated"]["failure"]
    assert truncated["class"] == "bad_output"
    assert truncated["message"].startswith("f-truncated: the agent's output is not JSON (")
    assert found["f-schema"]["failure"] == {"class": "bad_output", "message": (
        "f-schema: the agent's output is JSON but not a health.json of schema 1.x: it does not match the schema "
        "this sweep reads (health.json: 'host' is "
        "missing); the host runs another or a modified agent: sweep it with this sweep's agent")}
    assert found["f-schema"]["health"] is None


def test_a_connection_dropped_mid_output_is_retried_then_recorded(faults, tmp_path):
    result, found, elapsed = sweep(faults, tmp_path, "drop", host_deadline=20)
    record = found["f-drop"]
    assert record["failure"]["class"] == "agent_error" and record["attempts"] == 3
    assert re.fullmatch(
        r"f-drop: the SSH connection was lost while the agent ran \(\d+ bytes of output read, no exit status\): "
        r"the host or the network dropped it; check the host's sshd log and the network, then sweep the host again",
        record["failure"]["message"])
    assert elapsed < 19  # three attempts, none waited for the 20 s host deadline


def test_more_connections_than_max_startups_all_succeed_after_backoff(faults, tmp_path):
    result, found, _ = sweep(faults, tmp_path, "crowd")
    assert result.fully_swept and result.ok == CROWD, result.failures
    attempts = sorted(record["attempts"] for record in found.values())
    assert attempts[-1] >= 2, "sshd's MaxStartups 2 should have dropped some of the 10 connections"
    assert {record["address"] for record in found.values()} == {faults.addresses["f-crowd00"]}


# --- controller faults ---------------------------------------------------------------------------

KILLED_SWEEP = """
import sys
from sweep.collect.run import run_sweep
from sweep.collect.options import HostSelection, SSHSettings
run_sweep(sys.argv[1], out=sys.argv[2], forks=4, hosts=HostSelection(limit="slow"),
          ssh=SSHSettings(known_hosts=sys.argv[3], ssh_config=None, allow_agent=False, look_for_keys=False))
"""


@pytest.mark.parametrize("point,at", [("early", 1), ("late", 13)])  # the middle: test_sweep_run.py
def test_kill_9_early_or_late_then_resume_loses_nothing(fleet, layout, tmp_path, point, at, monkeypatch):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_SWEEP, str(fleet.inventory_path), str(run_dir),
                             str(fleet.known_hosts_path)], env=controller_env(fleet), cwd=tmp_path)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and proc.poll() is None:
            if (run_dir / "hosts").is_dir() and len(list((run_dir / "hosts").glob("slow*.json"))) >= at:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the sweep ended before it could be killed"
    finally:
        proc.kill()
        proc.wait()
    before = {p.name: json.loads(p.read_text()) for p in (run_dir / "hosts").glob("*.json")
              if not p.name.startswith(".")}  # whole, or absent
    assert at <= len(before) < layout.slow
    monkeypatch.setenv("HOME", controller_env(fleet)["HOME"])  # the killed sweep's user: its key signed the manifest
    result = run_sweep(None, resume=run_dir, forks=8, ssh=fleet.ssh_settings())
    assert result.fully_swept and result.resumed == len(before)
    found = records(run_dir)  # 0 duplicated, 0 corrupt
    assert sorted(found) == [f"slow{i:02d}" for i in range(1, layout.slow + 1)]  # 0 lost
    for name, record in before.items():  # what was written before the kill is kept as it was
        assert found[record["host"]] == record


@pytest.fixture
def mount_point(tmp_path):
    """A folder to mount a small filesystem on; unmounted after the test."""
    target = tmp_path / "mnt"
    target.mkdir()
    mounted = []

    def mount(*options):
        done = subprocess.run(["mount", "-t", "tmpfs", *options, "tmpfs", str(target)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(target)
        return target

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_disk_stops_the_sweep_with_the_path_and_fix_and_keeps_every_record(
        fleet, tmp_path, mount_point, capsys):
    disk = mount_point("-o", "size=160k")
    run_dir = disk / "run"
    code = main(["run", str(fleet.inventory_path), "--limit", "h200", "--out", str(run_dir),
                 "--known-hosts", str(fleet.known_hosts_path), "--no-report"])
    err = capsys.readouterr().err
    assert code == 2
    assert re.fullmatch(
        rf"sweep: error: {re.escape(str(run_dir / 'hosts'))}: cannot write gpu\d\d\.json \(No space left on "
        r"device\); free space on that filesystem \(or choose a folder elsewhere with --out\), then finish the "
        r"sweep with --resume RUN_DIR: the records already written are kept", err.strip()), err
    kept = records(run_dir)  # every record written is whole; no temporary file is left
    assert 3 <= len(kept) < 50
    subprocess.run(["mount", "-o", "remount,size=4m", str(disk)], check=True)
    resumed = run_sweep(None, resume=run_dir, ssh=fleet.ssh_settings())
    assert resumed.fully_swept and resumed.resumed == len(kept) and len(records(run_dir)) == 50


def test_a_read_only_output_folder_is_refused_before_any_host(fleet, tmp_path, mount_point, capsys):
    read_only = mount_point("-o", "ro,size=64k")
    code = main(["run", str(fleet.inventory_path), "--limit", "gpu01", "--out", str(read_only / "run"),
                 "--known-hosts", str(fleet.known_hosts_path)])
    assert code == 2
    assert capsys.readouterr().err == (
        f"sweep: error: {read_only / 'run'}: cannot create the run folder (Read-only file system); make the "
        "folder writable, or choose another with --out\n")


def test_ctrl_c_on_the_cli_stops_launching_ends_in_flight_and_exits_130(fleet, layout, tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweep.cli", "run", str(fleet.inventory_path), "--limit", "slow", "--forks", "4",
         "--known-hosts", str(fleet.known_hosts_path), "--out", str(run_dir)],
        env=controller_env(fleet), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and proc.poll() is None:
            if (run_dir / "hosts").is_dir() and len(list((run_dir / "hosts").glob("slow*.json"))) >= 4:
                break
            time.sleep(0.01)
        at_signal = len(list((run_dir / "hosts").glob("slow*.json")))
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)  # a hang guard only: what stopped is read from the records
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err.decode()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["state"] == "interrupted" and manifest["sessions"][0]["state"] == "interrupted"
    found = records(run_dir)
    assert at_signal <= len(found) <= at_signal + 4 < layout.slow  # the 4 in flight at most; none launched
    assert manifest["counts"]["pending"] == layout.slow - len(found)
    assert f"interrupted: finish with: sweep run --resume {run_dir}" in err.decode()


# --- hostile strings -----------------------------------------------------------------------------


def _cli(*args, env, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sweep.cli", *args], env=env, cwd=cwd, capture_output=True,
                          timeout=120)


def _no_raw_control(done: subprocess.CompletedProcess) -> None:
    for stream in (done.stdout, done.stderr):
        found = RAW_CONTROL.search(stream)
        assert found is None, f"raw control byte {found.group()!r} in: {stream[max(0, found.start() - 80):found.end() + 80]!r}"


def test_hostile_strings_from_hosts_stay_text_in_the_terminal_and_the_browser(faults, tmp_path):
    env = controller_env(faults)
    run_dir = tmp_path / "run"
    done = _cli("run", str(faults.inventory_path), "--limit", "hostile:okay", "--out", str(run_dir),
                "--known-hosts", str(faults.known_hosts_path), env=env, cwd=tmp_path)
    assert done.returncode in (1, 3, 4), done.stderr.decode()
    _no_raw_control(done)
    found = records(run_dir)
    assert set(found) == {EVIL_NAME, OSC_NAME, "f-evil-stderr", "f-ok01", "f-ok02"}
    # the records keep what the hosts said, as data
    assert "\x1b[31m<img" in found[OSC_NAME]["health"]["host"]["hostname"]
    assert "\x1b[2J" in found["f-evil-stderr"]["stderr"]
    gpu = found[EVIL_NAME]["health"]["gpus"][0]
    assert "<img src=x" in gpu["name"] and "<script>" in json.dumps(gpu["processes"])
    message = found["f-evil-stderr"]["failure"]["message"]
    assert "\x1b" not in message and "\\x1b[2J" in message  # shown, escaped, in the message
    assert "\\x1b[2J" in done.stderr.decode()

    # a second run in which the hostile GPU name changed, for `sweep diff`
    later = tmp_path / "later"
    shutil.copytree(run_dir, later, ignore=shutil.ignore_patterns("report"))
    path = later / "hosts" / f"{safe_name(EVIL_NAME)}.json"
    record = json.loads(path.read_text())
    record["health"]["gpus"][0]["name"] = "H200 \x1b]0;pwned\x07<script>document.title='pwned'</script>\x9b"
    path.write_text(json.dumps(record))
    for args in (["report", str(run_dir), "--out", str(tmp_path / "report")], ["diff", str(run_dir), str(later)]):
        shown = _cli(*args, env=env, cwd=tmp_path)
        assert shown.returncode != 2, shown.stderr.decode()
        _no_raw_control(shown)
    diff = _cli("diff", str(run_dir), str(later), env={**env, "COLUMNS": "400"}, cwd=tmp_path)
    assert "\\x1b]0;pwned\\x07<script>document.title='pwned'</script>\\x9b" in diff.stdout.decode()

    html = (tmp_path / "report" / "report.html").read_text()
    assert "\x1b" not in html and "<script>document" not in html
    assert "&lt;script&gt;document.title" in html
    if not os.access(CHROMIUM, os.X_OK):
        require(False, "/usr/bin/chromium is absent: apt-get install -y chromium")
    page = Tags()
    page.feed(_dom_of(tmp_path / "report" / "report.html"))
    original = Tags()
    original.feed(html)
    assert page.title == original.title and "pwned" not in page.title  # no script ran
    assert not any(tag == "script" for tag, _ in page.tags)
    assert not any(tag == "img" and attrs.get("src") == "x" for tag, attrs in page.tags)


# --- read-only, no root --------------------------------------------------------------------------

PROBE_USER = "sweepprobe"


@pytest.fixture
def probe_user():
    """An unprivileged login user (created here if missing, removed again), the test that uses it
    alone on the machine: the read-only test walks /tmp for what this user owns and changed, so
    another test's fleet of the same user (created, swept, removed meanwhile on another xdist
    worker) read as the agent's writes, and a module's teardown removed the user under the other's
    sweep."""
    import pwd

    with machine_wide_state("probe-user"):
        try:
            pwd.getpwnam(PROBE_USER)
            created = False
        except KeyError:
            # '*': no password, but not a locked account (sshd without PAM refuses locked ones)
            done = subprocess.run(["useradd", "-M", "-d", "/nonexistent", "-s", "/bin/sh", "-p", "*", PROBE_USER],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                pytest.skip(f"cannot add a test user: {done.stderr.strip()}")
            created = True
        try:
            yield pwd.getpwnam(PROBE_USER)
        finally:
            if created:  # the fleet's last sessions may still be ending: userdel waits for them
                deadline = time.monotonic() + 10
                while subprocess.run(["userdel", PROBE_USER], capture_output=True).returncode == 8:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.1)


def _writable_state(user, roots) -> dict:
    """(path -> size, mtime) of every file and folder the user could have written under `roots`."""
    state = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            for name in [*dirs, *files]:
                path = os.path.join(folder, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                state[path] = (st.st_size, st.st_mtime_ns, st.st_uid)
    return state


def test_the_agent_is_read_only_and_needs_no_root(probe_user, tmp_path):
    workdir = Path(tempfile.mkdtemp(prefix="sweep-ro-", dir="/tmp"))
    os.chmod(workdir, 0o755)
    try:
        hosts = [FleetHost("ro-replay"), FleetHost("ro-live", capture="live")]
        with LocalFleet(hosts, workdir / "fleet", user=PROBE_USER) as fleet:
            home = fleet.workdir / "remote-home"
            roots = ["/tmp", "/var/tmp", "/dev/shm", "/run/lock", str(home)]
            roots = [r for r in roots if os.path.isdir(r) and not r.startswith(str(tmp_path))]
            before = _writable_state(probe_user, roots)
            result = run_sweep(fleet.inventory_path, out=tmp_path / "run", ssh=fleet.ssh_settings())
            assert result.fully_swept, result.failures
            after = _writable_state(probe_user, roots)
            found = records(result.run_dir)
        assert found["ro-replay"]["health"]["host"]["hostname"] == "ro-replay"
        live = found["ro-live"]["health"]  # no GPU here: what the agent read, not a failure
        assert live["probe"]["complete"] is True and live["driver"]["nvml_error"] == "NVMLError_LibraryNotFound"
        owned = sorted(p for p, (_, _, uid) in after.items() if uid == probe_user.pw_uid and p not in before)
        assert owned == []
        changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p)
                         and (after.get(p) or before.get(p))[2] == probe_user.pw_uid)
        assert changed == []
        assert not any(p.startswith(str(home) + "/") for p in after)  # nothing written in its HOME
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_capture_other_users_cannot_read_is_replayed_to_a_host_of_another_login_user(probe_user, tmp_path):
    """Issue 48: a checkout under a 0700 folder (a clone under /root, a mktemp -d): the loopback fleet hands
    its hosts' login user a copy of the capture it can read, so the agent replays it instead of failing
    with Permission denied."""
    private = Path(tempfile.mkdtemp(prefix="sweep-private-", dir="/tmp"))  # 0700, as mkdtemp makes it
    workdir = Path(tempfile.mkdtemp(prefix="sweep-ro-", dir="/tmp"))
    os.chmod(workdir, 0o755)
    try:
        capture = private / "h200-idle.json"
        shutil.copyfile(CAPTURES / "h200-idle.json", capture)
        with LocalFleet([FleetHost("ro-private", capture=str(capture))], workdir / "fleet",
                        user=PROBE_USER) as fleet:
            result = run_sweep(fleet.inventory_path, out=tmp_path / "run", ssh=fleet.ssh_settings())
        assert result.fully_swept, result.failures
        assert records(result.run_dir)["ro-private"]["health"]["gpus"][0]["name"] == "NVIDIA H200"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)


# --- secrets -------------------------------------------------------------------------------------

PASSPHRASE = "correct-horse-7Qx!passphrase"
PASSWORD = "hunter2-Zk9-ssh-password"
BECOME = "s3cr3t-Become-Pw-41"


def test_secrets_appear_in_no_record_manifest_log_or_report(faults, tmp_path):
    key = tmp_path / "enc_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", PASSPHRASE, "-C", "sweep-test", "-f", str(key)],
                   check=True)
    authorized = faults.workdir / "keys" / "authorized_keys"
    authorized.write_text(authorized.read_text() + key.with_suffix(".pub").read_text())
    inventory = tmp_path / "secrets.ini"
    lines = ["[gpus]"]
    for name in ("f-ok01", "f-ok02"):
        lines.append(f"{name} ansible_host={faults.addresses[name]} ansible_user=root "
                     f"ansible_ssh_private_key_file={key} ansible_password={PASSWORD} "
                     f"ansible_become_password={BECOME} ansible_ssh_pass={PASSWORD}")
    inventory.write_text("\n".join(lines) + "\n")
    env = controller_env(faults)
    missing = _cli("run", str(inventory), "--known-hosts", str(faults.known_hosts_path), "--out",
                   str(tmp_path / "none"), env=env, cwd=tmp_path)
    assert missing.returncode == 2 and missing.stdout == b""
    assert missing.stderr.decode() == (
        f"sweep: error: {inventory}:2: f-ok01 (and 1 more host): private key file {key} is encrypted and no "
        "passphrase was given; set SWEEP_KEY_PASSPHRASE, or load the key into ssh-agent\n")
    wrong = _cli("run", str(inventory), "--known-hosts", str(faults.known_hosts_path), "--out",
                 str(tmp_path / "none"), env={**env, "SWEEP_KEY_PASSPHRASE": "not-it"}, cwd=tmp_path)
    assert wrong.returncode == 2 and "cannot be decrypted with the passphrase in SWEEP_KEY_PASSPHRASE" in \
        wrong.stderr.decode()
    run_dir = tmp_path / "run"
    done = _cli("run", str(inventory), "--known-hosts", str(faults.known_hosts_path), "--out", str(run_dir),
                env={**env, "SWEEP_KEY_PASSPHRASE": PASSPHRASE}, cwd=tmp_path)
    assert done.returncode in (0, 3, 4), done.stderr.decode()
    assert all(r["status"] == "ok" for r in records(run_dir).values())
    report = _cli("report", str(run_dir), "--out", str(tmp_path / "report"), env=env, cwd=tmp_path)
    files = [p for folder in (run_dir, tmp_path / "report") for p in folder.rglob("*") if p.is_file()]
    assert len(files) >= 8
    texts = [p.read_bytes() for p in files] + [done.stdout, done.stderr, report.stdout, report.stderr,
                                               wrong.stderr, missing.stderr]
    for secret in (PASSPHRASE, PASSWORD, BECOME, "not-it"):
        leaks = [str(p) for p, t in zip(files + ["output"] * 6, texts) if secret.encode() in t]
        assert leaks == [], f"{secret} leaked into {leaks}"


def _dom_of(html_file: Path) -> str:
    return chromium("--dump-dom", html_file.as_uri())
