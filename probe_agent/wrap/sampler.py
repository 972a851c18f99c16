"""`--wrap`'s sampler: every GPU sampled on a fixed grid while the command runs,
each process attributed.

Why the sampler costs the benchmark nothing measurable:
- it runs in the agent's process, one thread, and *sleeps* between samples
  (`threading.Event.wait`, a blocking wait, not a poll); the main thread sits in `waitpid`;
- a sample is a handful of cheap NVML reads per GPU (those of `load.sample`, plus the process
  list): driver ioctls on the CPU, no CUDA context, nothing on the GPU;
- the samples follow a fixed grid (t0 + k*interval); a late sample skips ticks, it never
  catches up in a burst;
- on Linux the sampler thread lowers its own priority (nice +10), so that a CPU-bound
  command wins any contention for a core; the command keeps the priority it had;
- what the sampler cost is measured and kept: `sampler.read_ms_median`, `read_ms_max`,
  `cpu_s` (the thread's CPU time) and `busy_fraction` (reading time / wall time).
`bench/bench_wrap.py` measures the effect on a benchmark's throughput (wrapped vs unwrapped).

Which GPU processes are the command's own: a process whose parent chain (/proc/PID/stat)
reaches the command's pid. Everything else is another process, except a pid this PID
namespace cannot see (a container): that one is listed as unattributed. Under replay, the
recorded pids belong to another machine: every recorded process is another process except the
recording's own load (`load.pid` of the capture).
"""

import math
import os
import sys
import threading
import time

from probe_agent.collect import Reader, read_processes
from probe_agent.wrap.sample_stream import DEFAULT_MAX_SAMPLES, Stream


class Attribution(object):
    """Tells the command's own GPU processes from the others (see the module docstring)."""

    def __init__(self, root_pid, replay_own=None):
        self.root = root_pid
        self.replay_own = replay_own  # None when live; the recording's own load pids on replay
        self.cache = {}

    def of(self, pid):
        """'command', 'other' or 'not_visible'."""
        if pid not in self.cache:
            self.cache[pid] = self._classify(pid)
        return self.cache[pid]

    def own_pids(self):
        return set(p for p, who in self.cache.items() if who == "command")

    def _classify(self, pid):
        if self.replay_own is not None:
            return "command" if pid in self.replay_own else "other"
        if not isinstance(pid, int):
            return "not_visible"
        seen = 0
        while pid and pid > 1 and seen < 256:
            if pid == self.root:
                return "command"
            ppid = parent_pid(pid)
            if ppid is None:
                return "not_visible" if seen == 0 else "other"
            pid, seen = ppid, seen + 1
        return "other"


def parent_pid(pid):
    try:
        with open("/proc/%d/stat" % pid) as fh:
            text = fh.read()
    except (OSError, ValueError):
        return None
    try:
        return int(text[text.rindex(")") + 2 :].split()[1])  # the name may hold spaces and ')'
    except (ValueError, IndexError):
        return None


def take_sample(src, count, t, attribution):
    """`load.sample` of every GPU, plus each GPU's compute processes with their attribution."""
    from probe_agent.load import sample

    raw = sample(src, count, t)
    s = {"t": round(t, 3), "gpus": [dict(g) for g in (raw or {}).get("gpus") or []]}
    for g in s["gpus"]:
        i = g.get("index")
        # a capture whose samples carry their own process lists
        if src.replaying and "processes" in g:
            g["processes"] = [
                dict(p, owner=attribution.of(p.get("pid"))) for p in g["processes"] or []
            ]
            g.setdefault("processes_unreadable", 0)
            continue
        r = KeepRaw(src, {})
        procs = read_processes(src, r, "gpu%d." % i, src.handle(i))
        g["processes"] = (
            None
            if procs is None
            else [
                {
                    "pid": p["pid"],
                    "name": p["name"],
                    "used_memory_bytes": p["used_memory_bytes"],
                    "owner": attribution.of(p["pid"]),
                }
                for p in procs
            ]
        )
        # entries the source could not turn into {pid, name, ...}: a process is there, unknown whose
        g["processes_unreadable"] = sum(1 for p in r.raw or [] if not isinstance(p, dict))
    return s


class KeepRaw(Reader):
    """A Reader that keeps the raw process list answer (read_processes skips
    what it cannot read)."""

    raw = None

    def get(self, key, field, fn, *args):
        value = Reader.get(self, key, field, fn, *args)
        if fn == "nvmlDeviceGetComputeRunningProcesses":
            self.raw = value
        return value


class Sampler(threading.Thread):
    """Samples every `interval` seconds on a fixed grid, sleeping in between, until stopped."""

    def __init__(self, src, count, interval, t0, attribution, max_samples=DEFAULT_MAX_SAMPLES):
        threading.Thread.__init__(self, name="sweep-sampler", daemon=True)
        self.src, self.count, self.interval, self.t0 = src, count, interval, t0
        self.attribution = attribution
        self.stream = Stream(max_samples)
        self.read_s = []
        self.cpu_s = None
        self.niced = False
        self.error = None
        self._halt = threading.Event()

    def stop(self):
        self._halt.set()

    def run(self):
        self.niced = lower_priority()
        cpu0 = time.thread_time()
        tick = 0
        try:
            while not self._halt.is_set():
                start = time.monotonic()
                s = take_sample(self.src, self.count, start - self.t0, self.attribution)
                self.read_s.append(time.monotonic() - start)
                if s["gpus"]:
                    self.stream.add(s)
                now = time.monotonic()
                tick = max(tick + 1, int(math.ceil((now - self.t0) / self.interval)))
                self._halt.wait(max(0.0, self.t0 + tick * self.interval - now))
        except Exception as exc:  # the command goes on; the provenance says why samples stopped
            self.error = "%s: %s" % (type(exc).__name__, exc)
        self.cpu_s = round(time.thread_time() - cpu0, 4)

    def report(self, wall_s):
        import statistics

        ms = [x * 1000.0 for x in self.read_s]
        return {
            "interval_s": self.interval,
            "samples": self.stream.seen,
            "read_ms_median": round(statistics.median(ms), 3) if ms else None,
            "read_ms_max": round(max(ms), 3) if ms else None,
            "cpu_s": self.cpu_s,
            "busy_fraction": round(sum(self.read_s) / wall_s, 5) if wall_s else None,
            "niced": self.niced,
            "error": self.error
            or ("sampler stalled in a driver query" if self.is_alive() else None),
        }


def lower_priority():
    """nice +10 for the calling thread only (Linux: a thread has its own nice value)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        return True
    except (OSError, AttributeError):
        return False
