"""Xid and SXid events: NVIDIA driver (and NVSwitch) error reports in the kernel log, counted per
device and code, each with what it means and the repair NVIDIA prescribes for it.

`probe_agent.xid_catalogue` holds NVIDIA's catalogue as data (code -> resolution bucket,
meaning). Here a bucket becomes one of sweep's ACTIONS, the operator's words for it, and the
xid contract's status follows the most severe action found. A code the catalogue does not list
gets the `unknown` action ("not in the catalogue"): treated as broken until someone looks it up.
"""

import re
import time

from probe_agent import xid_catalogue as cat

XID_DOCS = "https://docs.nvidia.com/deploy/xid-errors/index.html"
HARDWARE, APPLICATION, INFORMATIONAL = "hardware", "application", "informational"

# name, label (what the operator does), contract status, kind of event, fix; most severe first
ACTIONS = (
    (
        "inspect",
        "hardware inspection",
        "broken",
        HARDWARE,
        "drain the host and have the GPU, its board or its links inspected; RMA if it recurs",
    ),
    (
        "unknown",
        "not in the catalogue",
        "broken",
        HARDWARE,
        "look the code up in NVIDIA's Xid catalogue, newer than the one sweep carries",
    ),
    ("reboot", "reboot", "broken", HARDWARE, "drain the host and reboot it"),
    (
        "recover_imex",
        "recover the IMEX domain",
        "broken",
        HARDWARE,
        "drain the jobs of the GPU's NVLink domain and recover its IMEX domain "
        "(restart nvidia-imex on its nodes)",
    ),
    (
        "reset_gpu",
        "reset the GPU",
        "broken",
        HARDWARE,
        "drain the GPU's jobs and reset it (nvidia-smi -r), or reboot the host",
    ),
    (
        "software",
        "update or check the driver stack",
        "broken",
        HARDWARE,
        "update the driver / firmware (or check the fabric manager's configuration)",
    ),
    (
        "restart_app",
        "check the application",
        "warning",
        APPLICATION,
        "restart the application; debug it (compute-sanitizer) if it recurs",
    ),
    ("ignore", "informational", "ok", INFORMATIONAL, "none needed"),
)
ACTION = {a[0]: a for a in ACTIONS}
RANK = {a[0]: n for n, a in enumerate(ACTIONS)}
BUCKET_ACTION = {
    "RESTART_APP": "restart_app",
    "RESET_GPU": "reset_gpu",
    "RESTART_BM": "reboot",
    "RESTART_VM": "reboot",
    "IGNORE": "ignore",
    "CONTACT_SUPPORT": "inspect",
    "CHECK_MECHANICALS": "inspect",
    "UPDATE_SWFW": "software",
    "CHECK_UVM": "software",
    "WORKFLOW_XID_45": "ignore",
    "WORKFLOW_XID_48": "reset_gpu",
    "WORKFLOW_NVLINK_ERR": "reset_gpu",
    "WORKFLOW_NVLINK5_ERR": "reset_gpu",
    "XID_154": "ignore",
    # NVSwitch (SXid): a fabric reset means every GPU and switch of the node, so a reboot
    "RESET_FABRIC": "reboot",
    "WORKFLOW_NVLINK_POTENTIALY_FATAL_ERR": "reboot",
    "CHECK_THERMALS": "inspect",
    "CHECK_FM_CONFIG": "software",
    "CHECK_LINK_MECHANICAL_CONNECTIONS": "inspect",
    "INVESTIGATE_LINK_SI": "inspect",
    "UNEXPECTED_ERR_REPORT_ISSUE": "inspect",
    "RUN_FIELDDIAG": "inspect",
}
# Xid 154: NVML's recovery-action value (xid_catalogue.RECOVERY_ACTIONS) -> sweep's action. Drain
# P2P, drain and reset and a bus reset all end in the GPU's jobs drained and the GPU reset.
RECOVERY_ACTION = {
    0: "ignore",
    1: "reset_gpu",
    2: "reboot",
    3: "reset_gpu",
    4: "reset_gpu",
    5: "recover_imex",
    6: "reset_gpu",
    7: "reboot",
}
RECOVERY_TO = re.compile(r"\bto\s+(0x[0-9a-fA-F]+|\d+)?\s*(?:\(([^)]*)\))?\s*$")
LINE = re.compile(r"(S?)Xid \((?:PCI:)?([0-9a-fA-F:.]+)\):\s*(\d+)\s*,?\s*(.*)$")
# The driver's own words for a GPU lost from the bus, with or without an Xid 79 line beside them:
# "NVRM: GPU 0000:06:00.0: GPU has fallen off the bus." (beside Xid 79), "NVRM: The NVIDIA GPU
# 0000:b3:00.0 NVRM: (PCI ID:
# 10de:26b5) installed in this system has NVRM: fallen off the bus ..." (alone; kernlog.joined
# makes it one line)
FALLEN = re.compile(
    r"NVRM: (?:The NVIDIA )?GPU ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?\b.*?"
    r"fallen off the bus"
)
SINCE_BOOT = re.compile(r"^\[\s*(\d+(?:\.\d+)?)\]")
# "Nov 30 12:00:01 host kernel: [ 12.3] ..."
KERN_LOG_STAMP = re.compile(r"kernel: \[\s*(\d+(?:\.\d+)?)\]")
# ISO wall times: journalctl -o short-iso at the line's start, dmesg --time-format iso after its
# facility ("kern :warn : 2025-01-21T04:41:44,283302+00:00 NVRM: ...")
WALL = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:[.,]\d+)?(Z|[+-]\d\d:?\d\d)?")


def classify(kind, code, text):
    """(bucket, action, meaning) of one event: an Xid or SXid code and the text of its line."""
    table = cat.SXIDS if kind == "sxid" else cat.XIDS
    bucket, meaning = table.get(code, (None, None))
    if bucket is None:
        name = "NVSwitch SXid" if kind == "sxid" else "Xid"
        low = text.lower() if kind == "sxid" else ""
        said = (
            " (the line says %s)" % ("Non-fatal" if "non-fatal" in low else "Fatal")
            if "fatal" in low
            else ""
        )
        if meaning:  # documented, but NVIDIA gives no resolution for it
            return (
                None,
                "unknown",
                "%s: NVIDIA's catalogue gives no resolution for it (%s)" % (meaning, _said(text)),
            )
        return (
            None,
            "unknown",
            "%s not in the catalogue sweep carries (%s)%s: %s"
            % (name, catalogue(kind)["version"], said, _said(text)),
        )
    if bucket == "XID_154":
        return (bucket,) + recovery(text)
    return bucket, BUCKET_ACTION.get(bucket, "unknown"), meaning


def _said(text):
    return "the line says %r" % (text or "").strip()[:160]


def recovery(text):
    """(action, meaning) of an Xid 154 line: "GPU recovery action changed from 0x0 (None) to 0x1
    (PF FLR)". The value after "to" is NVML's recovery action; the words beside it only where the
    line gives no value; a value NVML does not document, or a line that names none, is unknown,
    with the line's words."""
    m = RECOVERY_TO.search(text or "")
    number, words = (m.group(1), (m.group(2) or "").strip()) if m else (None, "")
    value = int(number, 0) if number else cat.RECOVERY_WORDS.get(words.lower())
    if value not in RECOVERY_ACTION:
        return (
            "unknown",
            "the GPU's recovery action changed to one NVML does not document (%s)" % _said(text),
        )
    name, what = cat.RECOVERY_ACTIONS[value]
    shown = ("0x%x" % value if number is None or number.lower().startswith("0x") else number) + (
        " (%s)" % words if words else ""
    )
    return RECOVERY_ACTION[value], "the GPU's recovery action changed to %s: NVML %s, %s" % (
        shown,
        name,
        what,
    )


def group_fields(kind, code, text):
    """The fields a group's judgment fills (bucket, action, its kind, meaning): the one place,
    for the agent's groups and for the controller's reading of a record written before schema
    1.5 (sweep.store)."""
    bucket, action, meaning = classify(kind, code, text)
    return {"bucket": bucket, "action": action, "kind": ACTION[action][3], "meaning": meaning}


def catalogue(kind):
    return cat.SXID_CATALOGUE if kind == "sxid" else cat.XID_CATALOGUE


def stamp(line, booted_at):
    """(seconds since boot, wall time ISO UTC) of a kernel-log line; None for
    what it does not say."""
    since = SINCE_BOOT.search(line) or KERN_LOG_STAMP.search(line[:80])
    seconds = float(since.group(1)) if since else None
    wall = None
    m = WALL.search(line[:80])
    if m:
        wall = m.group(1) + ("Z" if m.group(2) in (None, "Z", "+00:00", "+0000") else m.group(2))
    elif seconds is not None and isinstance(booted_at, (int, float)):
        wall = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(booted_at + seconds))
    return seconds, wall


def parse_events(events, booted_at=None):
    """Group folded events (first line, last line, count) per (kind, device, code): count, first and
    last time and message, NVIDIA's bucket, sweep's action, kind, meaning. Xid first, then SXid."""
    groups, unseen = {}, {}
    for first, last, count in events or ():
        m = LINE.search(first) if isinstance(count, int) else None
        fell = FALLEN.search(first) if not m and isinstance(count, int) else None
        if fell:  # the GPU's Xid 79, where the log holds no Xid 79 line for it
            said = first[fell.start() :].strip()[:300]
            unseen.setdefault(("xid", fell.group(1).lower(), 79), [first, last, 0, said])[2] += (
                count
            )
            continue
        if not m:
            continue
        kind, bus, code = "sxid" if m.group(1) else "xid", m.group(2).lower(), int(m.group(3))
        # the event's detail, counted where its first line is not read
        if kind == "sxid" and m.group(4).startswith("Data"):
            unseen.setdefault((kind, bus, code), [first, last, 0, None])[2] += count
            continue
        g = groups.get((kind, bus, code))
        if g is None:
            g = groups[(kind, bus, code)] = _group(kind, bus, code, first, booted_at)
        g["count"] += count
        g["last_s"], g["last_at"] = stamp(last, booted_at)
        g["last"] = (LINE.search(last) or m).group(4).strip()[:300]
        if g["code"] == 154 and kind == "xid":
            j = group_fields(kind, 154, g["last"])
            g["bucket"], g["action"], g["kind"], g["meaning"] = (
                j["bucket"],
                j["action"],
                j["kind"],
                j["meaning"],
            )
    for key, (first, last, count, said) in unseen.items():
        if key not in groups:
            g = groups[key] = _group(key[0], key[1], key[2], first, booted_at, said)
            g["count"] = count
            g["last_s"], g["last_at"] = stamp(last, booted_at)
            g["last"] = said or LINE.search(last).group(4).strip()[:300]
    return sorted(groups.values(), key=lambda g: (RANK[g["action"]], g["bus_id"], g["code"]))


def _group(kind, bus, code, first, booted_at, said=None):
    text = said or LINE.search(first).group(4).strip()
    j = group_fields(kind, code, text)
    first_s, first_at = stamp(first, booted_at)
    return {
        "type": kind,
        "bus_id": bus,
        "code": code,
        "count": 0,
        "kind": j["kind"],
        "bucket": j["bucket"],
        "action": j["action"],
        "meaning": j["meaning"],
        "first": text[:300],
        "last": None,
        "first_s": first_s,
        "first_at": first_at,
        "last_s": None,
        "last_at": None,
    }


def parse_xid_lines(lines):
    """Xid groups of kernel-log lines kept one by one (tests, old captures)."""
    from probe_agent.kernlog import legacy_fold

    return parse_events(legacy_fold(lines))


def read_kernel_log(src):
    """The kernel-log section of health.json: where it was read from, which boot, the
    Xid and SXid groups."""
    answer = src.kernel_log()
    boot = answer.get("boot") or {}
    booted_at = boot.get("booted_at") if isinstance(boot.get("booted_at"), (int, float)) else None
    groups = parse_events(answer.get("events"), booted_at)
    return {
        "source": answer.get("source"),
        "tried": answer.get("tried") or {},
        "complete": answer.get("complete", True),
        "boot": {
            "id": boot.get("id"),
            "booted_at": None
            if booted_at is None
            else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(booted_at)),
        },
        "xid_lines": sum(g["count"] for g in groups if g["type"] == "xid"),
        "dropped": answer.get("dropped") or 0,
        "xid": [g for g in groups if g["type"] == "xid"],
        "sxid": [g for g in groups if g["type"] == "sxid"],
        "catalogue": {
            "xid": cat.XID_CATALOGUE,
            "sxid": cat.SXID_CATALOGUE,
            "xid154_recovery": cat.RECOVERY_SOURCE,
        },
        "docs": XID_DOCS,
    }
