"""Run a command under the agent's eyes (`--wrap -- COMMAND ...`): the provenance envelope.

The agent probes the host (the full contract chain, the normal health.json), starts the command,
samples every GPU while it runs, probes again after it exits, and writes one
`provenance.json` into `--out`: the command's argv, exit code and wall time, both probes, the
samples, and a short verdict (throttling seen, SM clock against its max, other processes, what
changed between the two probes). The format is docs/provenance.md and
schema/provenance-1.schema.json.

The command is passed through untouched: it inherits the agent's stdin, stdout and stderr and
environment, and the agent exits with its exit code (128+N when a signal N ended it, as a shell
reports it; 127 / 126 when it cannot be started). The agent itself writes nothing to stdout or
stderr in this mode except a message when its own work fails (exit 125 then, as `timeout` and
`env` do).

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
import argparse
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time

from probe_agent import AGENT_VERSION
from probe_agent.collect import Reader, read_processes
from probe_agent.contracts import plural
from probe_agent.lifetime import become_subreaper, end_leftovers, tracking_of
from probe_agent.probe import check_paths, run_probe, write_atomic
from probe_agent.thin import DEFAULT_MAX_SAMPLES, Stream

PROVENANCE_SCHEMA_VERSION = "1.1"
# Fields compared between the probe before and the probe after the command, per GPU.
WATCHED_GPU_FIELDS = (
    ("uuid",), ("lost",), ("ecc", "current"), ("ecc", "pending"), ("ecc", "volatile_uncorrected"),
    ("remapped_rows", "pending"), ("retired_pages_pending",), ("power", "enforced_limit_w"),
    ("power", "management_limit_w"), ("mig", "current"), ("mig_layout",), ("persistence_mode",),
    ("compute_mode",), ("clocks", "app_sm_mhz"), ("pcie", "width"), ("nvlink", "active"),
    ("nvlink", "errors", "replay_errors"), ("nvlink", "errors", "recovery_errors"), ("nvlink", "errors", "crc_errors"),
)
WATCHED_DRIVER_FIELDS = ("version", "cuda_driver_version", "kernel_module", "gpu_count")
EXIT_WRAPPER_FAILED = 125
EXIT_REFUSED = 124  # --refuse without --force: the command was not started (provenance.json says why)


def split_command(argv):
    """(the agent's own arguments, the command after the first `--` or None)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, None


def usage_error(message):
    sys.stderr.write("sweep-agent: %s\n" % message)
    return 2


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
        return int(text[text.rindex(")") + 2:].split()[1])  # the name may hold spaces and ')'
    except (ValueError, IndexError):
        return None


def take_sample(src, count, t, attribution):
    """`load.sample` of every GPU, plus each GPU's compute processes with their attribution."""
    from probe_agent.load import sample

    raw = sample(src, count, t)
    s = {"t": round(t, 3), "gpus": [dict(g) for g in (raw or {}).get("gpus") or []]}
    for g in s["gpus"]:
        i = g.get("index")
        if src.replaying and "processes" in g:  # a capture whose samples carry their own process lists
            g["processes"] = [dict(p, owner=attribution.of(p.get("pid"))) for p in g["processes"] or []]
            g.setdefault("processes_unreadable", 0)
            continue
        r = KeepRaw(src, {})
        procs = read_processes(src, r, "gpu%d." % i, src.handle(i))
        g["processes"] = None if procs is None else [
            {"pid": p["pid"], "name": p["name"], "used_memory_bytes": p["used_memory_bytes"],
             "owner": attribution.of(p["pid"])} for p in procs]
        # entries the source could not turn into {pid, name, ...}: a process is there, unknown whose
        g["processes_unreadable"] = sum(1 for p in r.raw or [] if not isinstance(p, dict))
    return s


class KeepRaw(Reader):
    """A Reader that keeps the raw process list answer (read_processes skips what it cannot read)."""

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
            "error": self.error or ("sampler stalled in a driver query" if self.is_alive() else None),
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


class OutputTail(threading.Thread):
    """Reads the command's stdout+stderr (`--emit`), keeps the last `limit` bytes and counts them all."""

    def __init__(self, limit):
        threading.Thread.__init__(self, name="sweep-output", daemon=True)
        self.limit, self.total, self.buf, self.pipe = limit, 0, bytearray(), None

    def run(self):
        while True:
            chunk = self.pipe.read1(65536) if hasattr(self.pipe, "read1") else self.pipe.read(65536)
            if not chunk:
                return
            self.total += len(chunk)
            self.buf += chunk
            del self.buf[:-self.limit]

    def section(self):
        return {"tail": bytes(self.buf).decode("utf-8", "replace"), "bytes": self.total,
                "truncated": self.total > len(self.buf), "tail_limit_bytes": self.limit}


def run_command(command, on_start, capture=None, timeout=None, tether=False):
    """Start the command, wait for it; returns its command section.

    Without `capture` the command has the agent's stdio. With an OutputTail, it reads /dev/null,
    its output goes to the tail, and it runs in its own session: at `timeout` seconds its whole
    process group is ended. Whatever the command leaves running when it is over (its group, every
    descendant, daemonised or not) is ended too: `command.leftovers` (probe_agent/lifetime.py).
    With `tether`, the end of the agent's stdin (the controller closed the SSH session: Ctrl-C, its
    deadline) ends the command too.
    """
    section = {"argv": list(command), "cwd": os.getcwd(), "pid": None, "exit_code": None, "signal": None,
               "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "wall_s": 0.0, "error": None,
               "timeout_s": timeout, "timed_out": False}
    t0 = time.monotonic()
    subreaper = become_subreaper()  # before the command starts: what it orphans comes back to the agent
    proc = start_command(command, capture, section)
    if proc is None:
        return section, t0
    group = capture is not None
    if capture is not None:
        capture.pipe = proc.stdout
        capture.start()
    if tether:
        watch_stdin(proc, section)
    on_start(proc.pid, t0)
    rc = wait_forwarding(proc, group, timeout, section)
    section["wall_s"] = round(time.monotonic() - t0, 4)
    # the command is over: its process group and every descendant still running are ended
    left = end_leftovers(os.getpid(), proc.pid if group else None, tracking=tracking_of(subreaper))
    section["leftovers"] = left
    if left["ended"] or left["not_ended"]:
        section["leftover_killed"] = not left["not_ended"]
    if capture is not None:
        capture.join(2.0)
        left["output_open"] = capture.is_alive()  # held by a process the agent could not end
    if rc < 0:
        section["signal"] = signal_name(-rc)
        rc = 128 - rc
    section["exit_code"] = rc
    return section, t0



def start_command(command, capture, section):
    """The command's process (its output to `capture`, in a session of its own), or None with the error in
    `section` (127: not found, 126: not runnable)."""
    try:
        if capture is None:
            proc = subprocess.Popen(command)
        else:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        missing = isinstance(exc, FileNotFoundError)
        section["exit_code"] = 127 if missing else 126
        section["error"] = "%s: %s" % (command[0], "command not found" if missing else exc.strerror or exc)
        if capture is None:
            sys.stderr.write("sweep-agent: %s\n" % section["error"])
        return None
    section["pid"] = proc.pid
    return proc


def wait_forwarding(proc, group, timeout, section):
    """Wait for the command (at `timeout`: TERM, then KILL 5 s later) while passing signals on; its status."""
    # After the exec (so that the command inherits default dispositions): a terminal's Ctrl-C
    # reaches the command through its process group, the agent outlives it to write the record;
    # a TERM or HUP sent to the agent alone is passed on.
    forward = lambda signum, frame: end(proc, group, signum)
    old = {}
    for name, handler in (("SIGINT", signal.SIG_IGN), ("SIGQUIT", signal.SIG_IGN),
                          ("SIGTERM", forward), ("SIGHUP", forward)):
        sig = getattr(signal, name, None)
        if sig is not None:
            try:
                old[sig] = signal.signal(sig, handler)
            except (ValueError, OSError):
                pass
    try:
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            section["timed_out"] = True
            end(proc, group, signal.SIGTERM)
            try:
                return proc.wait(5.0)
            except subprocess.TimeoutExpired:
                end(proc, group, signal.SIGKILL)
                return proc.wait()
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)

def watch_stdin(proc, section):
    """A thread that ends the command's process group when the agent's stdin reaches its end."""
    def watch():
        try:
            while sys.stdin.buffer.read(65536):
                pass
        except (OSError, ValueError):
            pass
        if proc.poll() is None:
            section["ended_by"] = "the controller closed the session"
            end(proc, True, signal.SIGTERM)
            try:
                proc.wait(5.0)
            except subprocess.TimeoutExpired:
                end(proc, True, signal.SIGKILL)

    threading.Thread(target=watch, name="sweep-tether", daemon=True).start()


def end(proc, group, signum):
    """Send `signum` to the command (its whole process group when it has its own)."""
    try:
        if group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
    except OSError:
        pass


def refusal(before, replay_own):
    """Why the command must not start on this host (`--refuse`): a broken contract, another process."""
    reasons = []
    if before.get("lowest_broken"):
        low = next((c for c in before.get("contracts") or [] if c.get("name") == before["lowest_broken"]), {})
        reasons.append("broken contract %s: %s" % (before["lowest_broken"], low.get("message") or "?"))
    if not before["probe"]["complete"]:
        reasons.append("the probe before did not finish: %s" % before["probe"].get("incomplete_reason"))
    others = [(g.get("index"), p) for g in before.get("gpus") or [] for p in g.get("processes") or []
              if replay_own is None or p.get("pid") not in replay_own]
    if others:
        reasons.append("%d other process(es) on the GPUs: %s" % (len(others), ", ".join(
            "%s (pid %s, GPU %s)" % (p.get("name"), p.get("pid"), i) for i, p in others[:3])))
    return reasons


def signal_name(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return "signal %d" % n


def dig(d, path):
    for k in path:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def probe_changes(before, after):
    """Driver, ECC, power limit, MIG and identity fields that differ between the two probes."""
    out = []
    complete = before["probe"]["complete"] and after["probe"]["complete"]

    def add(field, a, b):
        # a probe cut short by its deadline lacks fields: absent is then "not read", not a change
        if a != b and (complete or (a is not None and b is not None)):
            out.append({"field": field, "before": a, "after": b})

    for k in WATCHED_DRIVER_FIELDS:
        add("driver." + k, (before.get("driver") or {}).get(k), (after.get("driver") or {}).get(k))
    ga = {g.get("index"): g for g in before.get("gpus") or []}
    gb = {g.get("index"): g for g in after.get("gpus") or []}
    for i in sorted(set(ga) | set(gb), key=str):
        if i not in ga or i not in gb:
            out.append({"field": "gpus[%s]" % i, "before": "present" if i in ga else None,
                        "after": "present" if i in gb else None})
            continue
        for path in WATCHED_GPU_FIELDS:
            add("gpus[%s].%s" % (i, ".".join(path)), dig(ga[i], path), dig(gb[i], path))
    return out


def counter_deltas(before, after):
    """Per GPU, how much each clock-event reason counter (us) grew between the two probes."""
    ca = {g.get("index"): g.get("reason_counters_us") or {} for g in before.get("gpus") or []}
    out = {}
    for g in after.get("gpus") or []:
        a, b = ca.get(g.get("index")) or {}, g.get("reason_counters_us") or {}
        keys = sorted(k for k in b if isinstance(b.get(k), int) and isinstance(a.get(k), int))
        if keys:
            out[g.get("index")] = {k: b[k] - a[k] for k in keys}
    return out


def seen_processes(before, stream, after, attribution, owner):
    """Processes of one attribution, from the probes and every sample (`stream`), keyed by pid."""
    found = {}

    def note(pid, name, gpu, where, used=None):
        p = found.setdefault(pid, {"pid": pid, "name": name, "gpus": [], "first_seen_s": None,
                                   "samples_seen": 0, "present_before": False, "present_after": False,
                                   "max_used_memory_bytes": None})
        p["name"] = p["name"] or name
        if gpu not in p["gpus"]:
            p["gpus"].append(gpu)
        if where:
            p["present_" + where] = True
        if isinstance(used, int):
            p["max_used_memory_bytes"] = max(p["max_used_memory_bytes"] or 0, used)
        return p

    for where, health in (("before", before), ("after", after)):
        for g in (health or {}).get("gpus") or []:
            for proc in g.get("processes") or []:
                # live, a process on the GPU before the command started is not the command's, even
                # when it has exited since (its pid is no longer visible)
                live_before = where == "before" and attribution.replay_own is None
                if ("other" if live_before else attribution.of(proc.get("pid"))) == owner:
                    note(proc.get("pid"), proc.get("name"), g.get("index"), where, used=proc.get("used_memory_bytes"))
    for pid, seen in stream.processes(owner).items():
        p = None
        for gpu in seen["gpus"]:
            p = note(pid, seen["name"], gpu, None, seen["max_used_memory_bytes"])
        if p is not None:
            p["first_seen_s"], p["samples_seen"] = seen["first_seen_s"], seen["samples_seen"]
    for p in found.values():
        p["gpus"].sort()
    return sorted(found.values(), key=lambda p: (str(p["pid"])))


def verdict(before, stream, after, attribution):
    """The short answer: was this run's machine the machine the number claims? (`stream`: every sample)"""
    max_sm = {g.get("index"): (g.get("clocks") or {}).get("sm_max_mhz") for g in before.get("gpus") or []}
    gpus = stream.summaries(max_sm)
    deltas = counter_deltas(before, after)
    for g in gpus:
        g["reason_counters_delta_us"] = deltas.get(g["gpu"])
    pick = lambda key, fn: fn([g[key] for g in gpus if g.get(key) is not None]) if any(
        g.get(key) is not None for g in gpus) else None
    counted_hw = any((d or {}).get(k, 0) > 0 for d in deltas.values()
                     for k in ("hw_thermal_slowdown", "hw_power_braking", "hw_slowdown"))
    v = {
        "samples": stream.seen,
        "hw_slowdown": bool((pick("hw_slowdown_fraction", max) or 0) > 0 or counted_hw),
        "hw_slowdown_fraction": pick("hw_slowdown_fraction", max),
        "sw_power_cap_fraction": pick("sw_power_cap_fraction", max),
        "sw_thermal_fraction": pick("sw_thermal_fraction", max),
        "sm_mhz_min": pick("sm_mhz_min", min),
        "sm_mhz_median": pick("sm_mhz_median", min),
        "sm_mhz_max_allowed": pick("sm_mhz_max_allowed", max),
        "other_processes": seen_processes(before, stream, after, attribution, "other"),
        "unattributed_processes": seen_processes(before, stream, after, attribution, "not_visible"),
        "unreadable_process_entries": stream.unreadable_max,
        "changes": probe_changes(before, after),
        "gpus": gpus,
    }
    v["summary"] = summary_line(v, before, after)
    return v


def summary_line(v, before, after):
    parts = []
    if not v["samples"]:
        parts.append("no GPU samples")
    else:
        parts.append("HW slowdown seen" if v["hw_slowdown"] else "no HW slowdown")
        parts.append("SW power cap active in %d%% of samples" % round(100 * (v["sw_power_cap_fraction"] or 0)))
        if v["sm_mhz_median"] is not None:
            parts.append("SM clock median %s MHz (min %s) of %s MHz max" % (
                fmt(v["sm_mhz_median"]), fmt(v["sm_mhz_min"]), fmt(v["sm_mhz_max_allowed"])))
    others = v["other_processes"]
    parts.append("%s on the GPUs: %s" % (plural(len(others), "other process", "other processes"), ", ".join(
        "%s (pid %s)" % (p["name"], p["pid"]) for p in others[:3])) if others else "no other process on the GPUs")
    if v["unattributed_processes"]:
        parts.append("%s not visible from here" % plural(len(v["unattributed_processes"]), "process", "processes"))
    if v["unreadable_process_entries"]:
        parts.append("up to %s per GPU unreadable: other processes may be missed"
                     % plural(v["unreadable_process_entries"], "process entry", "process entries"))
    ch = v["changes"]
    parts.append("changed between the probes: " + ", ".join(
        "%s %s -> %s" % (c["field"], c["before"], c["after"]) for c in ch[:3]) if ch
        else "nothing changed between the probes")
    for name, h in (("before", before), ("after", after)):
        if h.get("lowest_broken"):
            parts.append("probe %s: lowest broken contract %s" % (name, h["lowest_broken"]))
        if not h["probe"]["complete"]:
            parts.append("probe %s incomplete" % name)
    return "; ".join(parts)


def fmt(x):
    return "?" if x is None else ("%d" % x if float(x).is_integer() else "%.1f" % x)


def main(opts, command):
    """`--wrap`: probe, run the command while sampling, probe again; write OUT/provenance.json
    (or, with `--emit`, print it on stdout with the tail of the command's output)."""
    src = open_source(opts, command)
    if isinstance(src, int):
        return src
    opts = argparse.Namespace(**dict(vars(opts), load=0.0))  # the command is the load
    import statistics  # noqa: F401  imported now: the first sample must not pay for it
    import probe_agent.load  # noqa: F401

    before, before_done = run_probe(src, opts)
    count = (before.get("driver") or {}).get("gpu_count") or 0
    replay_own = None
    if src.replaying:
        recorded = src.data.get("load") or {}
        replay_own = set([recorded.get("pid")] + list(recorded.get("own_pids") or [])) - set([None])
    state = {}

    def on_start(pid, t0):
        state["attribution"] = Attribution(pid, replay_own)
        if before_done and (count or src.replaying):
            state["sampler"] = Sampler(src, count, opts.interval, t0, state["attribution"], opts.max_samples)
            state["sampler"].start()

    reasons = refusal(before, replay_own) if opts.refuse else []
    capture = OutputTail(opts.output_tail) if opts.emit else None
    section = run_unless_refused(opts, command, on_start, capture, reasons)
    sampler = state.get("sampler")
    attribution = state.get("attribution") or Attribution(None, set())
    if sampler is not None:
        sampler.stop()
        sampler.join(5.0)
    stream = (sampler.stream if sampler is not None else Stream(opts.max_samples)).finish()
    after, after_done = run_probe(src, opts, attribution.own_pids())
    try:
        provenance = {
            "kind": "sweep.provenance",
            "schema_version": PROVENANCE_SCHEMA_VERSION,
            "agent": {"version": AGENT_VERSION, "python": sys.version.split()[0], "replay": opts.replay},
            "command": section,
            "sampler": sampler_report(sampler, section, opts.interval, before_done),
            "before": before,
            "samples": stream.samples(),
            "thinning": stream.report(),
            "intervals": stream.intervals,
            "after": after,
            "verdict": verdict(before, stream, after, attribution),
        }
        if capture is not None:
            provenance["output"] = capture.section()
        write_provenance(opts, src, provenance, attribution)
    except Exception as exc:
        sys.stderr.write("sweep-agent: the command ended (exit %s) but provenance.json was not written: %s: %s\n"
                         % (section["exit_code"], type(exc).__name__, exc))
        return EXIT_WRAPPER_FAILED
    code = 0 if opts.emit else (section["exit_code"] if section["exit_code"] is not None else EXIT_REFUSED)
    if section.get("refused") and not opts.emit:
        sys.stderr.write("sweep-agent: not started: %s; --force to run it anyway\n" % section["refused"])
    hung = not (before_done and after_done) or (sampler is not None and sampler.is_alive())
    return finish(src, hung, code)



def run_unless_refused(opts, command, on_start, capture, reasons):
    """The command section: the command run, or (`reasons` under --refuse, no --force) not started."""
    if reasons and not opts.force:
        section = {"argv": list(command), "cwd": os.getcwd(), "pid": None, "exit_code": None, "signal": None,
                   "started_at": None, "wall_s": 0.0, "error": None, "timeout_s": opts.command_timeout,
                   "timed_out": False}
    else:
        section, _ = run_command(command, on_start, capture, opts.command_timeout, opts.emit and opts.tether)
    if opts.refuse:
        section["refused"] = None if (opts.force or not reasons) else "; ".join(reasons)
        section["forced"] = list(reasons) if (opts.force and reasons) else None
    return section


def write_provenance(opts, src, provenance, attribution):
    """provenance.json into OUT (--emit: on stdout), and with --record the capture a replay reads."""
    section = provenance["command"]
    if opts.emit:
        sys.stdout.write(json.dumps(provenance, separators=(",", ":")) + "\n")
        sys.stdout.flush()
    else:
        write_atomic(os.path.join(opts.out, "provenance.json"), json.dumps(provenance, indent=1) + "\n")
    if opts.record:  # replayed later, the wrapped command's processes are its own again
        src.load_meta = {"engine": "wrap", "argv": section["argv"], "seconds": section["wall_s"],
                         "interval_s": opts.interval, "pid": section["pid"], "exit_code": section["exit_code"],
                         "own_pids": sorted(attribution.own_pids())}
        write_atomic(opts.record, json.dumps(src.capture(opts.note), indent=1) + "\n")

def open_source(opts, command):
    """The source of GPU answers for --wrap (live, recording or replay), or the usage error's exit code."""
    from probe_agent.source import LiveSource, RecordingSource, ReplaySource

    if not command:
        return usage_error("--wrap needs a command after --: sweep-agent --wrap --out DIR -- COMMAND ...")
    if not opts.out and not opts.emit:
        return usage_error("--wrap needs --out DIR: the command owns stdout, provenance.json goes to DIR")
    if not opts.interval > 0:
        return usage_error("--interval must be > 0 seconds (got %g)" % opts.interval)
    if opts.command_timeout is not None and not opts.command_timeout > 0:
        return usage_error("--command-timeout must be > 0 seconds (got %g)" % opts.command_timeout)
    if opts.max_samples < 2:
        return usage_error("--max-samples must be 2 or more (got %d)" % opts.max_samples)
    if opts.replay and opts.record:
        return usage_error("--replay and --record exclude each other")
    problem = check_paths(opts)
    if problem:
        return usage_error(problem.replace("for health.json and health-report.md", "for provenance.json"))
    try:
        return ReplaySource(opts.replay) if opts.replay else (RecordingSource() if opts.record else LiveSource())
    except (OSError, ValueError) as exc:
        return usage_error("cannot replay %s: %s" % (opts.replay, exc))


def sampler_report(sampler, section, interval, before_done):
    """provenance.json's "sampler": what the sampler did, or why it never started."""
    if sampler is not None:
        return sampler.report(section["wall_s"])
    return {"interval_s": interval, "samples": 0, "read_ms_median": None, "read_ms_max": None, "cpu_s": None,
            "busy_fraction": None, "niced": False,
            "error": "not started: " + ("the command was refused" if section.get("refused") else
                                        "no GPU" if before_done else "the probe before did not finish")}


def finish(src, hung, exit_code):
    """Shut NVML down (once per probe's nvmlInit) and return `exit_code`; after a hung query, exit at once."""
    if not hung:
        for _ in range(2):
            try:
                src.nvml("nvmlShutdown", "nvmlShutdown")
            except Exception:
                pass
    if hung:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_code)  # a hung driver query must not keep the process alive
    return exit_code
