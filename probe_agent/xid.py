"""Xid events: NVIDIA driver error reports in the kernel log, grouped per GPU and code, with what
each common code means and what to do.

The catalogue follows NVIDIA's Xid documentation (XID_DOCS). Codes that mean hardware, firmware or
link trouble are `hardware` (the contract is broken); codes an application causes are
`application` (a warning: the GPU is fine, a program faulted).
"""
import re

XID_DOCS = "https://docs.nvidia.com/deploy/xid-errors/index.html"
HARDWARE, APPLICATION = "hardware", "application"

# code: (kind, meaning, action)
CATALOGUE = {
    13: (APPLICATION, "graphics engine exception (an application fault, e.g. out-of-range access)",
         "debug the application (compute-sanitizer); if it recurs across programs, run diagnostics"),
    31: (APPLICATION, "GPU memory page fault (an application's illegal address)",
         "debug the application; if it recurs across programs, run diagnostics"),
    43: (APPLICATION, "GPU stopped processing (a user application fault)", "restart the application"),
    45: (APPLICATION, "preemptive cleanup after an earlier error (a process was stopped)",
         "read the Xid before it; none needed on its own"),
    48: (HARDWARE, "double-bit ECC error (uncorrectable memory error)",
         "drain the host, reset the GPU; if it recurs, replace (RMA) the card"),
    61: (HARDWARE, "internal micro-controller breakpoint / warning (firmware)", "reset the GPU; update the driver"),
    62: (HARDWARE, "internal micro-controller halt (firmware)", "reset the GPU; update the driver; RMA if it recurs"),
    63: (HARDWARE, "ECC page retirement or row-remapping event recorded", "reset the GPU to apply the remap"),
    64: (HARDWARE, "ECC page retirement or row-remapping recording failure", "drain the host; replace (RMA) the card"),
    74: (HARDWARE, "NVLink error", "reset the GPU; check the NVLink bridge / baseboard; RMA if it recurs"),
    79: (HARDWARE, "GPU has fallen off the bus",
         "drain the host; check PCIe seating, risers, power and thermals; reboot; RMA if it recurs"),
    92: (HARDWARE, "high single-bit ECC error rate", "watch the counters; replace the card if the rate stays high"),
    94: (APPLICATION, "contained ECC error (only the affected application was stopped)",
         "restart the application; reset the GPU when convenient to retire the page"),
    95: (HARDWARE, "uncontained ECC error (every application on the GPU was affected)",
         "drain the host and reset the GPU; RMA if it recurs"),
    109: (APPLICATION, "context switch timeout", "restart the application; update the driver if it recurs"),
    119: (HARDWARE, "GSP RPC timeout (the GPU's system processor stopped answering)",
          "reset the GPU or reboot; update the driver; RMA if it recurs"),
    120: (HARDWARE, "GSP error", "reset the GPU or reboot; update the driver; RMA if it recurs"),
    140: (HARDWARE, "unrecovered ECC error", "drain the host and reset the GPU; RMA if it recurs"),
    154: (HARDWARE, "GPU recovery action required (the driver asks for a reset or reboot)",
          "do the recovery action the log line names (GPU reset, node reboot, or drain and reset)"),
}
UNKNOWN = (HARDWARE, "Xid not in sweep's short catalogue", "look it up in NVIDIA's Xid catalogue")

XID_LINE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]+)\):\s*(\d+)\s*,?\s*(.*)$")


def parse_xid_lines(lines):
    """Group Xid lines per (GPU bus id, code): count, first and last message, kind, meaning, action."""
    groups = {}
    for line in lines or []:
        m = XID_LINE.search(line)
        if not m:
            continue
        bus, code, rest = m.group(1).lower(), int(m.group(2)), m.group(3).strip()
        g = groups.get((bus, code))
        if g is None:
            kind, meaning, action = CATALOGUE.get(code, UNKNOWN)
            g = groups[(bus, code)] = {"bus_id": bus, "code": code, "count": 0, "kind": kind, "meaning": meaning,
                                       "action": action, "first": rest[:300], "last": None}
        g["count"] += 1
        g["last"] = rest[:300]
    return sorted(groups.values(), key=lambda g: (g["kind"] != HARDWARE, g["bus_id"], g["code"]))


def read_kernel_log(src):
    """The kernel-log section of health.json: where it was read from, and the Xid groups."""
    answer = src.kernel_log()
    lines = answer.get("lines") or []
    return {"source": answer.get("source"), "tried": answer.get("tried") or {}, "complete": answer.get("complete", True),
            "xid_lines": len([l for l in lines if XID_LINE.search(l)]), "xid": parse_xid_lines(lines),
            "docs": XID_DOCS}
