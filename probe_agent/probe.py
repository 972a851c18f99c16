"""The probe: read this host step by step under a deadline, then judge the
contracts into health.json.

Used by the agent's command line (`main`) and by `--wrap` (`wrap`), before and after the command.
"""

import copy
import errno
import os
import sys
import threading
import time

from probe_agent import AGENT_VERSION, HEALTH_SCHEMA_VERSION
from probe_agent.collect import read_driver, read_gpu, read_topology
from probe_agent.contracts import evaluate
from probe_agent.gpuchecks import mig_layout, worst_link
from probe_agent.framework import inspect
from probe_agent.jobs import attach_jobs
from probe_agent.hostfacts import (
    gpu_functions,
    nearest_nics,
    read_firmware,
    read_host_settings,
    read_pci_gpus,
)
from probe_agent.mask import resolve_mask, smi_list_gpus
from probe_agent.smi_text import parse_active_reasons, parse_reason_counters, parse_smi_list
from probe_agent.xid import read_kernel_log


def run_probe(src, opts, own_pids=(), started=None):
    """The health.json (full contract chain), read within opts.deadline from
    `started` (default: now).

    Returns (health, done): done is False while a hung driver query still runs in its thread.
    """
    started = started or (time.time(), time.monotonic())
    facts, complete, error, t = collect_by_deadline(src, opts, started)
    done = not t.is_alive()
    if own_pids:
        facts["own_pids"] = sorted(own_pids)
    health = build_health(facts, opts, started, complete, opts.replay)
    if error:
        health["probe"]["incomplete_reason"] = (
            "internal error: " + error[0].strip().splitlines()[-1]
        )
        health["probe"]["traceback"] = error[0][-4000:]
    return health, done


def first_line(text):
    return (text or "").strip().splitlines()[0] if (text or "").strip() else None


def step(facts, name):
    """Name the step in progress (the deadline message names it) and time the one that ended."""
    now = time.monotonic()
    last = facts.get("_step")
    if last is not None and "_step_started" in facts:
        timings = facts.setdefault("_timings", {})
        timings[last] = round(timings.get(last, 0) + now - facts["_step_started"], 4)
    facts["_step"], facts["_step_started"] = name, now


def collect(src, opts, facts):
    """Fill `facts` step by step; `facts['_step']` names the step in progress."""
    read_host(src, facts)
    fw, fw_results = start_frameworks(src, opts)
    step(facts, "PCI bus")  # before the driver: a machine without an NVIDIA GPU is told so
    facts["pci"] = read_pci_gpus(src)
    facts["pci_gpus"] = gpu_functions(facts["pci"])
    step(facts, "nvmlInit")
    ok = read_driver(src, facts)
    if not ok:
        smi = src.command(["nvidia-smi", "-L"], timeout=10.0)
        facts["smi_present"] = smi.get("rc") != 127
        facts["smi_answer"] = first_line(smi.get("stdout")) or first_line(smi.get("stderr"))
        listed = parse_smi_list(smi.get("stdout")) if smi.get("rc") == 0 else []
        # NVML failed but nvidia-smi lists the GPUs: the mask is still resolved against them
        if listed:
            facts["driver"]["smi_list"] = listed
    count = facts["driver"].get("gpu_count") or 0
    step(facts, "kernel log")
    facts["kernel_log"] = read_kernel_log(src)
    step(facts, "host settings")
    facts["host_settings"] = read_host_settings(src, facts["pci"]["gpus"])
    if opts.load and count:
        read_under_load(src, opts, facts, count, fw, fw_results)
    else:
        read_gpus(src, facts, facts, count)
    step(facts, "process owners")
    # the Slurm job and user of each process on the GPUs (none: no read)
    attach_jobs(src, facts.get("gpus"))
    facts["nearest_nic"] = nearest_nics(
        facts.get("gpus") or [],
        facts["pci"]["gpus"],
        facts["host_settings"].get("ib_ports"),
        facts.get("topology"),
    )
    step(facts, "firmware")
    facts["firmware"] = read_firmware(src, facts.get("gpus") or [])
    step(facts, "device mask")
    listed = facts["driver"].get("smi_list")
    facts["mask"] = resolve_mask(facts["env"], facts.get("gpus") or smi_list_gpus(listed))
    facts["mask"]["against"] = "nvidia-smi -L" if listed and not facts.get("gpus") else "nvml"
    step(facts, "framework")
    fw.join(opts.framework_timeout + 5)
    facts["frameworks"] = list(fw_results)
    if getattr(opts, "speed", False) and count:
        step(facts, "speed tier")
        from probe_agent.speed.tier import run_speed

        torch_py = next((f["interpreter"] for f in fw_results if f.get("cuda_runtime")), None)
        facts["speed"] = run_speed(src, opts, facts, count, torch_py)
    step(facts, None)


def read_host(src, facts):
    """The host's name, kernel, OS, environment and loaded NVIDIA module."""
    step(facts, "host")
    facts["host"] = src.host()
    facts["run_as"] = run_as()
    facts["env"] = src.env()
    files = src.files()
    facts["kernel_module"] = first_line(files.get("/proc/driver/nvidia/version"))
    osr = files.get("/etc/os-release") or ""
    facts["host"]["os"] = next(
        (l.split("=", 1)[1].strip('"') for l in osr.splitlines() if l.startswith("PRETTY_NAME=")),
        None,
    )


def run_as():
    """Who runs this probe (the live process, also under --replay): what it could not read, it
    could not read as this user. {"name", "uid", "groups"}; the name is None where the passwd
    database has no entry."""
    uid = os.geteuid()
    try:
        import pwd

        name = pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        name = None
    groups = []
    try:
        import grp

        for gid in sorted(set(os.getgroups()) | {os.getegid()}):
            try:
                groups.append(grp.getgrgid(gid).gr_name)
            except KeyError:
                groups.append(str(gid))
    except (ImportError, OSError):
        pass
    return {"name": name, "uid": uid, "groups": groups}


def start_frameworks(src, opts):
    """Inspect the training interpreters in a thread of their own: (the thread,
    the list it fills)."""
    interpreters = opts.interpreter or ["python3"]
    fw_results = []

    def frameworks():
        for interp in interpreters:
            result = inspect(src, interp, opts.deep, opts.framework_timeout)
            # the operator's training interpreter, not our default
            result["named"] = bool(opts.interpreter)
            fw_results.append(result)

    fw = threading.Thread(target=frameworks, daemon=True)
    fw.start()
    return fw, fw_results


def read_gpus(src, facts, into, count):
    """Every GPU, the topology and the clock-event reason counters (nvidia-smi, in a
    thread) into `into`."""
    perf = {}
    pt = None
    if count:

        def perf_read():
            text = src.command(["nvidia-smi", "-q", "-d", "PERFORMANCE"], timeout=10.0).get(
                "stdout", ""
            )
            perf.update(counters=parse_reason_counters(text), active=parse_active_reasons(text))

        pt = threading.Thread(target=perf_read, daemon=True)
        pt.start()
    gpus = []
    into["gpus"] = gpus
    for i in range(count):
        step(facts, "GPU %d" % i)
        gpus.append(read_gpu(src, i))
    step(facts, "topology")
    read_topology(src, into, count)
    if pt is not None:
        pt.join(12.0)
    for g in gpus:
        g["reason_counters_us"] = (perf.get("counters") or {}).get(g.get("pci_bus_id"))
        reasons = g.get("clock_event_reasons") or {}
        said = (perf.get("active") or {}).get(g.get("pci_bus_id"))
        # NVML did not answer: nvidia-smi's words
        if reasons.get("active") is None and said is not None:
            reasons.update(active=said, source="nvidia-smi -q")


def read_under_load(src, opts, facts, count, fw, fw_results):
    """--load: an idle read first (refused when other processes use the GPUs), then
    the GPUs under load."""
    from probe_agent.load import run_load, summarize

    step(facts, "idle read before load")
    pre = {}
    read_gpus(src, facts, pre, count)
    foreign = [p for g in pre["gpus"] for p in (g.get("processes") or [])]
    if foreign and not opts.force and not src.replaying:
        facts["load"] = {
            "refused": "other processes use the GPUs (%s); --force to load anyway"
            % ", ".join("pid %s" % p.get("pid") for p in foreign)
        }
        facts.update(pre)
        return
    fw.join(opts.framework_timeout + 5)
    engine = opts.load_engine
    torch_py = next((f["interpreter"] for f in fw_results if f.get("cuda_runtime")), None)
    if engine == "auto":
        engine = "torch" if torch_py else "ptx"
    step(facts, "load")
    section = run_load(
        src,
        count,
        opts.load,
        engine,
        torch_py or "python3",
        opts.interval,
        lambda: read_gpus(src, facts, facts, count),
    )
    section["summary"] = summarize(
        section["samples"],
        {g["index"]: (g.get("clocks") or {}).get("sm_max_mhz") for g in facts.get("gpus") or []},
    )
    facts["load"] = section
    facts["own_pids"] = [section.get("pid")]


def collect_by_deadline(src, opts, started):
    """collect() in a thread, waited for until opts.deadline after `started`.

    Returns (facts, complete, error tracebacks, thread): complete only when every answer was in by
    the deadline, not merely by the time we looked; the thread is still alive after a hung query.
    """
    facts, error, finished = {}, [], []

    def worker():
        try:
            collect(src, opts, facts)
        except Exception:  # reported in health.json, never a traceback instead of output
            import traceback

            error.append(traceback.format_exc())
        finished.append(time.monotonic())

    deadline_at = started[1] + max(opts.deadline, 0.0)
    t = threading.Thread(target=worker, daemon=True)
    t.start()
    t.join(max(deadline_at - time.monotonic(), 0.0))
    complete = bool(finished) and finished[0] <= deadline_at and not error
    return facts, complete, error, t


def build_health(facts, opts, started, complete, replay):
    facts = copy.deepcopy(facts)
    contracts, lowest = evaluate(facts)
    statuses = [c["status"] for c in contracts]
    verdict = "broken" if lowest else ("warning" if "warning" in statuses else "ok")
    low = next((c for c in contracts if c["name"] == lowest), None)
    summary = (
        ("lowest broken contract: %s: %s" % (lowest, low["message"]))
        if low
        else (
            "no broken contract; warnings: %s"
            % ", ".join(c["name"] for c in contracts if c["status"] == "warning")
            if verdict == "warning"
            else "every contract holds"
        )
    )
    gpus = facts.get("gpus") or []
    for g in gpus:
        g["mig_layout"] = mig_layout(g)
    health = {
        "schema_version": HEALTH_SCHEMA_VERSION,
        "kind": "sweep.health",
        "probe": {
            "version": AGENT_VERSION,
            "mode": "deep" if opts.deep else "default",
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started[0])),
            "duration_s": round(time.monotonic() - started[1], 4),
            "complete": complete,
            "incomplete_reason": None
            if complete
            else "deadline of %g s reached while reading %s"
            % (opts.deadline, facts.get("_step") or "the last answers"),
            "replay": replay,
            "python": sys.version.split()[0],
            "user": facts.get("run_as"),
            "steps_s": facts.get("_timings") or {},
        },
        "host": facts.get("host") or {},
        "environment": facts.get("env") or {},
        "driver": dict(facts.get("driver") or {}, kernel_module=facts.get("kernel_module")),
        "gpus": gpus,
        "mask": facts.get("mask"),
        "frameworks": facts.get("frameworks") or [],
        "topology": dict(facts.get("topology") or {}, worst_link_selected=worst_link(facts)),
        "pci": facts.get("pci"),
        "kernel_log": facts.get("kernel_log"),
        "host_settings": dict(
            facts.get("host_settings") or {}, nearest_nic=facts.get("nearest_nic") or {}
        ),
        "firmware": facts.get("firmware"),
        "load": facts.get("load"),
        "speed": facts.get("speed"),
        "contracts": contracts,
        "lowest_broken": lowest,
        "verdict": verdict,
        "summary": summary,
    }
    return health


def path_problem(path, want_dir):
    """Why `path` cannot be written as a folder (want_dir) or a file, or None; creates
    a missing folder."""
    if os.path.islink(path):
        return "is a symbolic link; the agent never writes through one"
    if want_dir:
        if os.path.exists(path) and not os.path.isdir(path):
            return "is a file, not a folder"
        try:
            make_dirs(path)
        except OSError as exc:
            return "cannot be created (%s)" % (exc.strerror or exc)
        return None if os.access(path, os.W_OK) else "is not writable"
    if os.path.isdir(path):
        return "is a folder, not a file"
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return "cannot be written: %s is not a folder" % parent
    return None if os.access(parent, os.W_OK) else "cannot be written: %s is not writable" % parent


def check_paths(opts):
    """--out and --record, checked before probing: one line naming the path and the fix, or None."""
    if opts.out:
        why = path_problem(opts.out, True)
        if why:
            return (
                "--out %s %s; give a folder for health.json and health-report.md "
                "(it is created if missing)" % (opts.out, why)
            )
    if opts.record:
        why = path_problem(opts.record, False)
        if why:
            return "--record %s %s; give a file path in a writable folder" % (opts.record, why)
    return None


def temp_name(path):
    """A temporary file name beside `path` that no other writer picks: its pid and 48 random bits.

    Agents of several hosts may share one --out folder (an NFS home, a scratch folder): each writes
    its own temporary file, and the last rename wins with a whole file.
    """
    folder, name = os.path.split(path)
    return os.path.join(folder, ".%s.%d.%s.tmp" % (name, os.getpid(), os.urandom(6).hex()))


def make_dirs(path, mode=0o755):
    """Make `path` and each missing parent with `mode` (the umask can take bits away, never add
    them: os.makedirs gives its mode to the last folder only, the parents 0777 less the umask)."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, mode)
        except FileExistsError:
            if not os.path.isdir(folder):
                raise


def write_atomic(path, text):
    """Write `text` to `path` whole or not at all, never through a link (the controller's rule,
    sweep.store.write_bytes_atomic): the folder opened with O_NOFOLLOW, a temporary file of its own
    made beside it with O_EXCL | O_NOFOLLOW and mode 0644, renamed over `path`; a link at `path` is
    refused. The temporary file is removed when the write or the rename fails."""
    folder, name = os.path.split(os.path.abspath(path))
    tmp = os.path.basename(temp_name(path))
    dir_fd = None
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        if os.path.islink(path):
            raise OSError(errno.ELOOP, "it is a symbolic link; the agent never writes through one")
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o644,
            dir_fd=dir_fd,
        )
    except OSError as err:
        if dir_fd is not None:
            os.close(dir_fd)
        # the file the user asked for, not our temporary name
        err.filename, err.filename2 = path, None
        raise
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as err:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        if isinstance(err, OSError):
            err.filename, err.filename2 = path, None
        raise
    finally:
        os.close(dir_fd)
