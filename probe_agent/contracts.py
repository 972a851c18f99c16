"""The contract chain, bottom-up, and the lowest broken contract.

Each contract gets a status (ok / broken / warning / not_applicable / unknown), the evidence that
proves it, and a message that names the fix. Everything above the lowest broken contract is a
consequence, not a clue: such contracts carry `consequence_of`.

The checks of the stack are here (driver, device mask, framework, processes); those of the GPUs
themselves in `probe_agent.gpuchecks`, those of the host in `probe_agent.hostchecks`. `CHECKS`
names the one check of each contract of `chain.CONTRACTS`.
"""

from probe_agent import gpuchecks, hostchecks

# plural is re-exported for the checks' callers
from probe_agent.chain import BY_NAME, CONTRACTS, contract, plural  # noqa: F401

# re-exported for their readers (sweep.audit.throttle, sweep.analysis.impact and rows,
# tools/corpus_check.py, which runs against older trees too)
from probe_agent.gpuchecks import FACILITY_CAUSES, link_rank, worst_link  # noqa: F401

from probe_agent.framework import version_tuple

NVML_INIT_ERRORS = {
    "NVMLError_LibraryNotFound": (
        "no NVIDIA driver is installed (libnvidia-ml.so not found)",
        "install the NVIDIA driver that matches this kernel",
    ),
    "NVMLError_DriverNotLoaded": (
        "the NVIDIA kernel module is not loaded",
        "load it (modprobe nvidia) and read dmesg for why it failed",
    ),
    "NVMLError_LibRmVersionMismatch": (
        "driver/library version mismatch: the loaded kernel module and "
        "user-space libnvidia-ml differ (a driver upgrade without reboot)",
        "reboot the host, or unload and reload the nvidia modules",
    ),
    "NVMLError_NoPermission": (
        "permission denied opening the GPU device files",
        "give this user access to /dev/nvidia* (video group, or the container's device list)",
    ),
    "NVMLError_InsufficientPermissions": (
        "permission denied opening the GPU device files",
        "give this user access to /dev/nvidia*",
    ),
}


NO_GPU = (
    "no NVIDIA GPU on this machine: the PCI bus holds no NVIDIA display or 3D controller",
    "run the probe on a GPU host; in a VM or container, pass the GPU through to it",
)


def check_driver(facts):
    d = facts.get("driver", {})
    smi = facts.get("smi_present")
    ev = {k: d.get(k) for k in ("version", "nvml_version", "cuda_driver_version", "gpu_count")}
    ev["kernel_module"] = facts.get("kernel_module")
    present = hostchecks.gpus_present(facts)
    ev["pci"] = present
    pci = facts.get("pci_gpus")
    ev["pci_nvidia_gpus"] = None if pci is None else len(pci)  # None: the bus could not be read
    if pci == [] and (d.get("nvml_error") or not d.get("gpu_count")):
        ev["nvml_error"] = d.get("nvml_error")
        return contract("driver", "broken", NO_GPU[0], ev, NO_GPU[1])
    if d.get("nvml_error"):
        ev["nvml_error"] = d["nvml_error"]
        ev["nvidia_smi_found"] = smi
        return nvml_failed(d["nvml_error"], facts.get("kernel_module"), present, ev)
    if present["missing_from_nvml"]:
        return missing_from_nvml(d.get("gpu_count") or 0, present["missing_from_nvml"], ev)
    # the deadline came before NVML's answers were in: nothing says it sees no GPU
    if "gpu_count" not in d:
        return contract(
            "driver",
            "broken",
            "NVML not read: the probe stopped before NVML counted the GPUs "
            "(probe.incomplete_reason says where)",
            ev,
            "probe again with a longer --deadline; if nvmlInit itself hangs, read dmesg for the "
            "driver",
        )
    if not d.get("gpu_count"):
        return contract(
            "driver",
            "broken",
            "NVML initialised but sees no GPU",
            ev,
            "check that the GPUs are on the bus (lspci), passed through to this VM or container, "
            "and not fallen off the bus (dmesg: Xid 79)",
        )
    return contract(
        "driver",
        "ok",
        "driver %s, CUDA %s, %s%s"
        % (
            d.get("version"),
            d.get("cuda_driver_version"),
            plural(d.get("gpu_count"), "GPU"),
            present["note"],
        ),
        ev,
    )


def nvml_failed(err, kernel_module, present, ev):
    """The broken driver contract of an nvmlInit that failed with `err`: what it means, its fix."""
    what, fix = NVML_INIT_ERRORS.get(
        err,
        ("NVML failed to initialise (%s)" % err, "read dmesg and nvidia-bug-report.sh output"),
    )
    if err == "NVMLError_LibraryNotFound" and kernel_module:
        what = "the kernel module is loaded but libnvidia-ml.so is not found"
        fix = "install the driver's user-space libraries (same version as the module)"
    if present.get("on_bus"):
        what += "; %s on the PCI bus" % plural(present["on_bus"], "NVIDIA GPU")
    return contract("driver", "broken", what, ev, fix)


def missing_from_nvml(listed, missing, ev):
    """The broken driver contract of GPUs on the PCI bus that NVML does not list."""
    return contract(
        "driver",
        "broken",
        "on the PCI bus but not listed by NVML (NVML lists %d, %d more on the bus): %s: fallen "
        "off the bus or failed to initialise" % (listed, len(missing), ", ".join(missing)),
        ev,
        "drain the host; read the kernel log for Xid 79 / RmInitAdapter on %s; reseat or "
        "replace the card, then reboot" % missing[0],
    )


# The mask's fields that are the device_mask contract's evidence.

MASK_EVIDENCE = (
    "cuda_visible_devices",
    "cuda_device_order",
    "nvidia_visible_devices",
    "state",
    "selected",
    "invalid",
    "ignored",
    "lenient",
    "cuda_error",
)


def check_mask(facts):
    m = facts.get("mask") or {}
    ev = {k: m.get(k) for k in MASK_EVIDENCE}
    state = m.get("state")
    count = facts.get("driver", {}).get("gpu_count")
    if state == "empty":
        return contract(
            "device_mask",
            "broken",
            "device mask is set but empty (CUDA_VISIBLE_DEVICES=%r): every GPU is hidden from CUDA "
            "while NVML still sees %s" % (m.get("cuda_visible_devices"), count),
            ev,
            "fix the launcher or scheduler that exports the empty mask",
        )
    if state == "invalid":
        return invalid_mask(m, ev, count)
    if state == "partly_invalid":
        bad = m["invalid"][0]
        return contract(
            "device_mask",
            "warning",
            "device mask entry %r is invalid (%s): CUDA stops there and drops %s"
            % (
                bad["entry"],
                bad["reason"],
                ", ".join(repr(e) for e in m.get("ignored") or []) or "nothing more",
            ),
            ev,
            "remove the invalid entry",
        )
    if m.get("lenient"):
        sloppy = ", ".join("%r as %s" % (x["entry"], x["read_as"]) for x in m["lenient"])
        return contract(
            "device_mask",
            "warning",
            "device mask %r: CUDA reads %s (it ignores what follows a number or a UUID)"
            % (m.get("cuda_visible_devices"), sloppy),
            ev,
            "write plain indices or UUIDs separated by commas",
        )
    sel = m.get("selected") or []
    renum = [
        "cuda:%d is physical GPU %s" % (s["cuda_index"], s["physical_index"])
        for s in sel
        if s["cuda_index"] != s["physical_index"]
    ]
    msg = (
        "unset: CUDA sees all %s" % plural(len(sel), "GPU")
        if state == "unset"
        else "CUDA sees %s%s"
        % (plural(len(sel), "GPU"), ("; " + "; ".join(renum)) if renum else "")
    )
    return contract("device_mask", "ok", msg, ev)


def invalid_mask(m, ev, count):
    """The broken contract of a mask under which CUDA sees no GPU, by why: an unknown
    CUDA_DEVICE_ORDER, an ambiguous UUID prefix, a GPU named twice, or no entry naming a GPU."""
    bad = (m.get("invalid") or [{}])[0]
    if bad.get("position") is None:
        return contract(
            "device_mask",
            "broken",
            "%s: %s, so CUDA sees no GPU (%s)"
            % (bad.get("entry"), bad.get("reason"), m.get("cuda_error")),
            ev,
            "unset CUDA_DEVICE_ORDER or set it to PCI_BUS_ID",
        )
    if bad.get("matches"):
        return contract(
            "device_mask",
            "broken",
            "device mask %r: first entry %r is ambiguous: %s; the agent counts on CUDA seeing "
            "no GPU (what CUDA does with an ambiguous prefix is not recorded)"
            % (m.get("cuda_visible_devices"), bad.get("entry"), bad.get("reason")),
            ev,
            "write enough of the UUID to name one GPU (nvidia-smi -L lists them)",
        )
    if m.get("cuda_error") == "CUDA_ERROR_INVALID_DEVICE":
        return contract(
            "device_mask",
            "broken",
            "device mask %r: entry %r %s, so CUDA refuses the whole "
            "mask and sees no GPU (%s)"
            % (
                m.get("cuda_visible_devices"),
                bad.get("entry"),
                bad.get("reason"),
                m.get("cuda_error"),
            ),
            ev,
            "name each GPU once",
        )
    return contract(
        "device_mask",
        "broken",
        "device mask %r names no GPU of this host: CUDA sees none (first entry %r: %s)"
        % (m.get("cuda_visible_devices"), bad.get("entry"), bad.get("reason")),
        ev,
        "use indices below %s, or this host's GPU UUIDs (nvidia-smi -L), not both" % count,
    )


def torch_problems(fw, drv, caps):
    """(problems, warnings) of one interpreter's torch against the driver's CUDA and the
    GPUs' capabilities."""
    who, tv = fw.get("interpreter"), fw.get("torch_version")
    problems, warnings = [], []
    rt = fw.get("cuda_runtime")
    if not rt:
        if fw.get("hip_runtime"):
            problems.append(
                "%s: torch %s is a ROCm build (HIP %s) on an NVIDIA host"
                % (who, tv, fw["hip_runtime"])
            )
        else:
            problems.append(
                "%s: torch %s is a CPU-only wheel (torch.version.cuda is None)" % (who, tv)
            )
        return problems, warnings
    if drv:
        d, r = version_tuple(drv), version_tuple(rt)
        if r[:1] > d[:1]:
            problems.append(
                "%s: torch %s needs CUDA %s but the driver supports CUDA %s: crossing a major "
                "version needs the forward-compatibility package or a newer driver"
                % (who, tv, rt, drv)
            )
        elif r > d:
            warnings.append(
                "%s: torch's CUDA %s is newer than the driver's %s (minor-version compatibility: "
                "PTX JIT and new APIs may fail)" % (who, rt, drv)
            )
    arch = fw.get("arch_list")
    if arch and fw.get("cuda_available") is not False:
        for cap in caps:
            sm = "sm_" + cap.replace(".", "")
            if sm not in arch and ("compute_" + cap.replace(".", "")) not in arch:
                problems.append(
                    "%s: torch was built for %s, not for compute capability %s: "
                    "'no kernel image is available'" % (who, ",".join(arch), cap)
                )
    if fw.get("mode") == "deep" and fw.get("cuda_available") is False:
        problems.append("%s: torch.cuda.is_available() is False" % who)
    return problems, warnings


def check_framework(facts):
    results = facts.get("frameworks") or []
    if not results:
        return contract("framework", "not_applicable", "no interpreter was checked", {})
    drv = facts.get("driver", {}).get("cuda_driver_version")
    gpus = facts.get("gpus") or []
    caps = sorted({g.get("compute_capability") for g in gpus if g.get("compute_capability")})
    problems, warnings, found, named_missing = interpreters_read(results, drv, caps)
    ev = {"interpreters": results, "driver_cuda": drv, "compute_capabilities": caps}
    if problems:
        fix = (
            (
                "install a CUDA build of torch for driver CUDA %s (a cuXXX wheel with XXX <= the "
                "driver's)" % drv
                if drv
                else "install a CUDA build of torch once the driver works"
            )
            if any("CPU-only" in p for p in problems)
            else "rebuild or reinstall torch for this host's GPUs and driver"
        )
        return contract("framework", "broken", "; ".join(problems), ev, fix)
    if named_missing:
        return contract(
            "framework",
            "warning",
            "; ".join(warnings),
            ev,
            "install the training environment on this host, or correct sweep_interpreters / "
            "--interpreter (%s)" % ", ".join(named_missing),
        )
    if warnings and not found:
        return contract(
            "framework",
            "not_applicable",
            "; ".join(warnings),
            ev,
            "name the training interpreter with sweep_interpreters / --interpreter",
        )
    if warnings:
        return contract("framework", "warning", "; ".join(warnings), ev)
    fw = found[0]
    return contract(
        "framework",
        "ok",
        "torch %s, CUDA runtime %s%s"
        % (
            fw.get("torch_version"),
            fw.get("cuda_runtime"),
            "" if fw.get("mode") == "deep" else " (metadata; --deep imports torch)",
        ),
        ev,
    )


def interpreters_read(results, drv, caps):
    """Each interpreter's torch judged: (problems, warnings, interpreters with torch, interpreters
    the host's inventory named that are missing or have no torch)."""
    problems, warnings, found, named_missing = [], [], [], []
    for fw in results:
        who = fw.get("interpreter")
        if fw.get("error"):
            if fw.get("not_found") and fw.get("named"):
                named_missing.append(who)
                warnings.append(
                    "%s: the training interpreter named for this host is not here" % who
                )
                continue
            (warnings if fw.get("not_found") else problems).append("%s: %s" % (who, fw["error"]))
            continue
        tv = fw.get("torch_version")
        if not tv:
            if fw.get("named"):
                named_missing.append(who)
            warnings.append("%s: no torch installed" % who)
            continue
        found.append(fw)
        bad, odd = torch_problems(fw, drv, caps)
        problems += bad
        warnings += odd
    return problems, warnings, found, named_missing


BUSY_FIX = "the node runs a job: probe it again when the job ends (sweep run --retry-failed busy)"


def jobs_text(processes):
    """'job 41234 (user op)', 'job 41234 (user op), job 41240 (user ml)': each
    job once, in order."""
    said = []
    for p in processes:
        job = p.get("job") or {}
        text = "job %s (user %s)" % (job.get("id"), job.get("user") or p.get("user") or "?")
        if text not in said:
            said.append(text)
    return ", ".join(said[:5]) + (" and %d more" % (len(said) - 5) if len(said) > 5 else "")


def check_processes(facts):
    own = set(facts.get("own_pids") or [])
    found = []
    for g in facts.get("gpus") or []:
        for p in g.get("processes") or []:
            if p.get("pid") in own:
                continue
            found.append(dict(p, gpu=g.get("index")))
    ev = {"processes": found}
    if any((g.get("processes") is None) for g in facts.get("gpus") or []):
        ev["note"] = "process list not readable on some GPUs"
    # every one a running job's: the node is busy, not faulty
    if found and all(p.get("job") for p in found):
        return contract("processes", "warning", "busy: %s" % jobs_text(found), ev, BUSY_FIX)
    if found:
        desc = ", ".join(
            "%s (pid %s%s, %s) on GPU %s"
            % (
                p.get("name"),
                p.get("pid"),
                ", user %s" % p["user"] if p.get("user") else "",
                mib(p.get("used_memory_bytes")),
                p.get("gpu"),
            )
            for p in found[:5]
        )
        return contract(
            "processes",
            "warning",
            "%s on the GPUs: %s" % (plural(len(found), "other process", "other processes"), desc),
            ev,
            "stop them, or benchmark elsewhere: they take memory and SM time",
        )
    return contract("processes", "ok", "no other compute process on the GPUs", ev)


def mib(n):
    return "?" if n is None else "%d MiB" % (n // 1048576)


# The check that judges each contract of `chain.CONTRACTS` (which holds their order
# and dependencies).
CHECKS = {
    "driver": check_driver,
    "fabric": hostchecks.check_fabric,
    "xid": hostchecks.check_xid,
    "device_mask": check_mask,
    "framework": check_framework,
    "processes": check_processes,
    "thermal": hostchecks.check_thermal,
    "clocks": gpuchecks.check_clocks,
    "power": gpuchecks.check_power,
    "memory": gpuchecks.check_memory,
    "links": hostchecks.check_links,
    "topology": gpuchecks.check_topology,
    "layout": gpuchecks.check_layout,
    "host": hostchecks.check_host,
}


def evaluate(facts):
    """The contracts in chain order, the lowest broken one marked, those above
    it as consequences."""
    nvml_ok = not facts.get("driver", {}).get("nvml_error") and facts.get("driver", {}).get(
        "gpu_count"
    )
    out = []
    for spec in CONTRACTS:
        if spec.needs_nvml and not nvml_ok:
            out.append(
                contract(spec.name, "unknown", "not read: NVML is unusable on this host", {})
            )
            continue
        try:
            out.append(CHECKS[spec.name](facts))
        except Exception as exc:  # a contract that cannot be judged is unknown, never a crash
            out.append(
                contract(
                    spec.name,
                    "unknown",
                    "could not be judged (%s: %s)" % (type(exc).__name__, exc),
                    {},
                )
            )
    lowest = next((c["name"] for c in out if c["status"] == "broken"), None)
    if lowest:
        for c in out:
            if c["name"] == lowest or c["status"] not in ("broken", "unknown"):
                continue
            if lowest in BY_NAME[c["name"]].consequence_of:
                c["consequence_of"] = lowest
    return out, lowest
