"""The speed tier's moving parts: a child process that speaks JSON lines, and the NVML sampler.

A `Child` reads its stdout in a thread (each line a JSON object; anything else is dropped) and is
stopped by wall-clock time, never left running: `wait_until(t)` kills it at t. The `Sampler`
takes `load.sample` every interval in a thread, as `--load` does, until stopped.
"""

import json
import subprocess
import threading
import time

from probe_agent.collect import Reader, read_processes
from probe_agent.load import sample

STDERR_KEPT = 400


class Child(object):
    """One child process; `events` fills with its JSON lines, `ready` is set at {"event": "ready"}.

    `preamble` (the agent's bundle, for a child that imports it from memory: probe_agent.children)
    is written first on its stdin, in a thread; with `stdin` the pipe then stays open for `send`.
    """

    def __init__(self, argv, preamble=b"", stdin=False):
        self.events, self.err, self.ready = [], [], threading.Event()
        self.killed, self.feeder = False, None
        try:
            self.proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.PIPE if stdin or preamble else subprocess.DEVNULL,
            )
        except OSError as exc:
            self.proc, self.start_error = (
                None,
                "cannot start %s: %s" % (argv[0], exc.strerror or exc),
            )
            self.ready.set()
            return
        self.start_error = None
        if preamble:
            self.feeder = threading.Thread(
                target=self._feed, args=(preamble, not stdin), daemon=True
            )
            self.feeder.start()
        self.readers = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=lambda: self.err.append(self.proc.stderr.read()), daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _feed(self, data, close):
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
            if close:
                self.proc.stdin.close()
        except (OSError, ValueError):
            pass

    def _read(self):
        for line in iter(self.proc.stdout.readline, b""):
            try:
                event = json.loads(line.decode("utf-8", "replace"))
            except ValueError:
                continue
            if isinstance(event, dict):
                self.events.append(event)
                if event.get("event") == "ready":
                    self.ready.set()
        self.ready.set()  # ended without saying ready: nobody waits for it

    def wait_ready(self, until):
        """True once the child said it is ready (by wall-clock time `until`) and still runs."""
        self.ready.wait(max(0.0, until - time.time()))
        return (
            self.proc is not None
            and any(e.get("event") == "ready" for e in self.events)
            and self.proc.poll() is None
        )

    def send(self, line):
        if self.feeder is not None:
            self.feeder.join(5.0)
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass

    def wait_until(self, until):
        """Wait for the child to end; kill it at wall-clock time `until`. Its output
        is read to the end."""
        if self.proc is None:
            return
        try:
            self.proc.wait(max(0.0, until - time.time()))
        except subprocess.TimeoutExpired:
            self.stop()
        for reader in self.readers:
            reader.join(5.0)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.killed = True
            self.proc.kill()
            self.proc.wait()
        if self.proc is not None and self.proc.stdin:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def problem(self):
        """Why the child gave less than it should: not started, stopped at the
        bound, an error exit."""
        if self.start_error:
            return self.start_error
        if self.killed:
            return "stopped at the tier's bound"
        errors = [
            e.get("error") for e in self.events if e.get("event") == "error" and "uuid" not in e
        ]
        if errors:
            return str(errors[0])[:200]
        rc = self.proc.poll()
        if rc not in (0, None):
            tail = b"".join(self.err).decode("utf-8", "replace").strip()[-STDERR_KEPT:]
            return "exit %s%s" % (rc, ": " + tail.splitlines()[-1] if tail else "")
        return None


def with_processes(src, s):
    """The sample with each GPU's compute processes (a replayed sample carries its own, or none)."""
    for g in (s or {}).get("gpus") or []:
        if src.replaying or not isinstance(g.get("index"), int):
            continue
        procs = read_processes(
            src, Reader(src, {}), "speed.gpu%d." % g["index"], src.handle(g["index"])
        )
        g["processes"] = (
            None if procs is None else [{"pid": p["pid"], "name": p["name"]} for p in procs]
        )
    return s


def contention(samples, facts, own_pids):
    """The processes that appeared on a GPU during the tier (not there before it, not the tier's
    own): {"contended", "processes": [{gpu, pid, name, first_seen_s}]}. The figures are then
    recorded as contended, not judged."""
    before = {
        (g.get("index"), p.get("pid"))
        for g in facts.get("gpus") or []
        for p in g.get("processes") or []
    }
    seen, found = set(), []
    for s in samples:
        for g in s.get("gpus") or []:
            for p in g.get("processes") or []:
                if not isinstance(p, dict):
                    continue
                key = (g.get("index"), p.get("pid"))
                if p.get("pid") in own_pids or key in before or key in seen:
                    continue
                seen.add(key)
                found.append(
                    {
                        "gpu": g.get("index"),
                        "pid": p.get("pid"),
                        "name": p.get("name"),
                        "first_seen_s": s.get("t"),
                    }
                )
    return {"contended": bool(found), "processes": found}


class Sampler(object):
    """load.sample() of every GPU (with its compute processes) each `interval` seconds in a
    thread, until stop()."""

    def __init__(self, src, count, interval):
        self.src, self.count, self.interval = src, count, max(interval, 0.05)
        self.samples, self.done = [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.t0 = time.monotonic()

    def start(self):
        self.thread.start()

    def _run(self):
        while not self.done.is_set():
            try:
                s = with_processes(
                    self.src, sample(self.src, self.count, time.monotonic() - self.t0)
                )
            except Exception:  # a sample that cannot be read is not a reason to stop the tier
                s = None
            if s is not None:
                self.samples.append(s)
            self.done.wait(self.interval)

    def stop(self):
        self.done.set()
        self.thread.join(5.0)
        return list(self.samples)
