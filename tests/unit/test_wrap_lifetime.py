"""Nothing a wrapped command starts outlives its run: the real agent (`--wrap`, GPU answers replayed)
runs commands that daemonise in each of the usual ways; afterwards no process of theirs is left
(read from /proc) and the provenance says exactly what the agent ended, and what it could not."""
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lifetime_parts import DOUBLE_FORK, kill_marked, running
from probe_agent import lifetime

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "sweep" / "demo" / "captures" / "h200-load.json"
_serial = itertools.count(1)

DAEMON = "echo $$ > {pidfile}; exec sleep {marker}"
FORMS = {  # how a command leaves a process behind; each one outlived its run before the subreaper
    "setsid &": "setsid sh -c '%s' >/dev/null 2>&1 &" % DAEMON,
    "( setsid & )": "( setsid sh -c '%s' >/dev/null 2>&1 & )" % DAEMON,
    "nohup & (same group)": "nohup sh -c '%s' >/dev/null 2>&1 &" % DAEMON,
    "python double fork with setsid": "%s -c \"%s\" >/dev/null 2>&1" % (sys.executable, DOUBLE_FORK),
}
# the command ends once its daemon runs `sleep` (so that what is left is known), as a launcher would
UNTIL_STARTED = '\nuntil [ "$(cat /proc/$(cat {pidfile} 2>/dev/null)/comm 2>/dev/null)" = sleep ]; do sleep 0.01; done'


@pytest.fixture()
def marker():
    """A command-line marker unique to this test (`sleep 3001.<n>`); whatever holds it is killed at the end."""
    mark = "3001.%d%03d" % (os.getpid(), next(_serial))
    yield mark
    kill_marked(mark)


def wrap(tmp_path, script, *options):
    """The agent wrapping `sh -c script`: (exit code, provenance's command section)."""
    out = tmp_path / "out"
    args = ["--emit"] if "--emit" in options else ["--out", str(out)]
    args += [o for o in options if o not in ("--emit", "--out")]
    proc = subprocess.run([sys.executable, "-m", "probe_agent", "--wrap", *args, "--interval", "0.2",
                           "--replay", str(CAPTURE), "--", "sh", "-c", script], cwd=ROOT, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300)
    assert proc.stderr == "", proc.stderr
    text = proc.stdout if "--emit" in options else (out / "provenance.json").read_text()
    return proc.returncode, json.loads(text)["command"]


@pytest.mark.parametrize("mode", ["--emit", "--out"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_daemonised_descendant_is_ended_and_named(tmp_path, marker, form, mode):
    pidfile = tmp_path / "daemon.pid"
    code, cmd = wrap(tmp_path, (FORMS[form] + UNTIL_STARTED).format(marker=marker, pidfile=pidfile), mode)
    assert code == 0 and cmd["exit_code"] == 0
    assert running(marker) == set()  # nothing of the command's is left on the host
    left = cmd["leftovers"]
    assert left["tracking"] == "subreaper" and left["not_ended"] == []
    assert cmd["leftover_killed"] is True
    daemon = int(pidfile.read_text())
    ended = {e["pid"]: e for e in left["ended"]}
    assert daemon in ended, left  # the daemon, by pid and name (a double fork's middle process may be there too)
    assert ended[daemon]["name"] == "sleep" and ended[daemon]["signal"] in ("SIGTERM", "SIGKILL")
    assert cmd["pid"] not in ended


def test_a_command_that_leaves_nothing_says_so(tmp_path, marker):
    code, cmd = wrap(tmp_path, "sleep 0.3 & wait; : %s" % marker, "--emit")
    assert code == 0 and running(marker) == set()
    assert cmd["leftovers"]["ended"] == [] and cmd["leftovers"]["not_ended"] == []
    assert "leftover_killed" not in cmd  # nothing was left, so nothing was killed


def test_a_descendant_that_ignores_sigterm_gets_sigkill_at_the_timeout(tmp_path, marker):
    script = ("setsid sh -c 'trap \"\" TERM; sleep %s; :' >/dev/null 2>&1 &\n"
              "trap '' TERM; sleep %s; :") % (marker, marker)
    code, cmd = wrap(tmp_path, script, "--emit", "--command-timeout", "3")
    assert code == 0 and cmd["timed_out"] is True and cmd["signal"] == "SIGKILL"
    assert running(marker) == set()
    ended = {e["name"]: e["signal"] for e in cmd["leftovers"]["ended"]}
    # the daemon's shell ignored SIGTERM: it needed SIGKILL; its sleep went with SIGTERM or SIGKILL
    assert ended.get("sh") == "SIGKILL" and "sleep" in ended, cmd["leftovers"]
    assert cmd["leftover_killed"] is True


EPERM_RUNNER = r'''
import json, os, subprocess, sys
from probe_agent import lifetime
child = subprocess.Popen(["sleep", sys.argv[1]], stdout=subprocess.DEVNULL)  # holds none of our pipes
real_kill = os.kill
def kill(pid, signum):
    if pid == child.pid:
        raise PermissionError(1, "Operation not permitted")
    return real_kill(pid, signum)
lifetime.os.kill = kill
try:
    left = lifetime.end_leftovers(os.getpid(), grace=0.2)
finally:
    lifetime.os.kill = real_kill
    child.kill()
    child.wait()
print(json.dumps({"child": child.pid, "left": left}))
'''


def test_a_process_that_cannot_be_signalled_is_named_and_leftover_killed_is_false(marker):
    """EPERM (a descendant that became another user) cannot be made here without a setuid program:
    the refusal is injected into os.kill for one real child of a process of its own (never pytest,
    whose other children are not this test's); the scan and the record are real."""
    proc = subprocess.run([sys.executable, "-c", EPERM_RUNNER, marker], cwd=ROOT, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0
    got = json.loads(proc.stdout)
    child, left = got["child"], got["left"]
    assert left["not_ended"] == [{"pid": child, "name": "sleep",
                                  "why": "not permitted to signal it (EPERM): it runs as another user"}]
    assert left["ended"] == []


def test_without_the_subreaper_the_record_says_what_may_be_missed():
    assert lifetime.tracking_of(None) == "subreaper"
    text = lifetime.tracking_of("not Linux")
    assert text.startswith("parent chain only (no subreaper: not Linux)") and "not found" in text

