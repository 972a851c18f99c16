"""The contracts that fleet health checkers judge beside the GPU's own state: GPUs on the bus vs
the driver, GPU fabric, Xid events, thermal headroom, PCIe and NVLink links, host settings."""

from probe_agent.chain import contract, plural
from probe_agent.hostfacts import norm_bus_id
from probe_agent.xid import ACTION, RANK, XID_DOCS

THERMAL_MARGIN_C = 5  # "near" a threshold: within this many degrees
GOOD_GOVERNORS = ("performance",)


def gpus_present(facts):
    """NVIDIA GPUs on the PCI bus against the ones NVML lists; a card the driver should see but NVML
    does not is missing. A card hidden from this container, or bound to another driver, is noted."""
    pci = facts.get("pci") or {}
    nvml = {
        norm_bus_id(g.get("pci_bus_id")) for g in facts.get("gpus") or [] if g.get("pci_bus_id")
    }
    lost = ["GPU %s" % g.get("index") for g in facts.get("gpus") or [] if g.get("lost")]
    out = {
        "readable": pci.get("readable"),
        "error": pci.get("error"),
        "on_bus": None,
        "missing_from_nvml": list(lost),
        "hidden": [],
        "other_driver": [],
        "note": "",
    }
    if not pci.get("readable"):
        return out  # the evidence says why (error); the message stays what NVML saw
    on_bus = pci.get("gpus") or []
    out["on_bus"] = len(on_bus)
    driver_gpus = pci.get("driver_gpus")
    mask = (facts.get("env") or {}).get("NVIDIA_VISIBLE_DEVICES")
    for g in on_bus:
        bus = g["bus_id"]
        if bus in nvml:
            continue
        if g.get("driver") not in (None, "nvidia"):
            out["other_driver"].append("%s (%s)" % (bus, g["driver"]))
        elif driver_gpus is not None and bus not in driver_gpus:
            out["hidden"].append(bus)  # the driver does not show it here: a container's device list
        elif mask not in (None, "", "all") and driver_gpus is None:
            out["hidden"].append(bus)
        else:
            out["missing_from_nvml"].append(bus)
    notes = []
    if out["hidden"]:
        notes.append("%d more on the bus hidden from this container" % len(out["hidden"]))
    if out["other_driver"]:
        notes.append("bound to another driver: %s" % ", ".join(out["other_driver"]))
    out["note"] = ("; " + "; ".join(notes)) if notes else ""
    return out


def check_fabric(facts):
    rows = [dict(g.get("fabric") or {}, gpu=g.get("index")) for g in facts.get("gpus") or []]
    ev = {"gpus": rows}
    states = {r.get("state") for r in rows}
    if not rows or states <= {None, "not_supported"}:
        return contract(
            "fabric",
            "not_applicable",
            "no GPU fabric (no NVSwitch, or not supported by this driver)",
            ev,
        )
    bad = [
        r
        for r in rows
        if r.get("state") in ("not_started", "in_progress")
        or (r.get("state") == "completed" and r.get("status") not in (None, 0))
    ]
    if bad:
        if len(bad) == len(rows) > 1 and len({(r["state"], r.get("status")) for r in bad}) == 1:
            desc = "all %d GPUs %s" % (len(rows), bad[0]["state"])
        else:
            desc = ", ".join("GPU %s %s" % (r["gpu"], r["state"]) for r in bad)
        status = sorted({r["status"] for r in bad if r.get("status") not in (None, 0)})
        desc += " (status %s)" % ", ".join(map(str, status)) if status else ""
        return contract(
            "fabric",
            "broken",
            "GPU fabric not completed: %s: CUDA answers 'system not yet initialized' (error 802)"
            % desc,
            ev,
            "start nvidia-fabricmanager (systemctl status nvidia-fabricmanager; its version must "
            "equal the driver's) and read its log",
        )
    return contract("fabric", "ok", "GPU fabric completed on %s" % plural(len(rows), "GPU"), ev)


# what a read refused for want of privilege says (an OSError's class name, journalctl's words)
# who journalctl shows the system's journal
JOURNAL_GROUPS = frozenset({"systemd-journal", "adm", "wheel"})
DENIED = (
    "PermissionError",
    "insufficient permissions",
    "Permission denied",
    "Operation not permitted",
)


def unprivileged(facts):
    """The user name (or "uid N") the probe ran as, when that is not root; None for
    root or not known."""
    who = facts.get("run_as") or {}
    if who.get("uid") in (None, 0):
        return None
    return who.get("name") or "uid %s" % who["uid"]


def denied(error):
    return any(word in str(error) for word in DENIED)


def check_xid(facts):
    """Xid and SXid events since boot, judged by the repair NVIDIA prescribes
    (`probe_agent.xid.ACTIONS`): broken when one needs more than the application restarted, a
    warning when only an application faulted."""
    log = facts.get("kernel_log") or {}
    groups = list(log.get("xid") or []) + list(log.get("sxid") or [])
    ev = {
        "source": log.get("source"),
        "tried": log.get("tried"),
        "xid": log.get("xid") or [],
        "sxid": log.get("sxid") or [],
        "docs": XID_DOCS,
    }
    if not log.get("source"):
        return kernel_log_not_read(log.get("tried") or {}, unprivileged(facts), ev)
    worst = min((g["action"] for g in groups), key=RANK.__getitem__, default=None)
    status = ACTION[worst][2] if worst else None
    if status in ("broken", "warning"):
        shown = [g for g in groups if ACTION[g["action"]][2] == status]
        tail = (
            " (kernel log, %s)" % log["source"]
            if status == "broken"
            else ": application faults, the GPU itself is fine"
        )
        return contract(
            "xid",
            status,
            "; ".join(_said(g) for g in shown[:6]) + tail,
            ev,
            "; ".join(_fixes(shown)) + (" (" + XID_DOCS + ")" if status == "broken" else ""),
        )
    user, user_groups = unprivileged(facts), set((facts.get("run_as") or {}).get("groups") or ())
    if log.get("source") == "journalctl -k" and user and not user_groups & JOURNAL_GROUPS:
        # journalctl shows a user outside these groups only the user's own messages
        return journal_hidden_from(user, ev)
    if log.get("complete") is False:
        return contract(
            "xid",
            "unknown",
            "no Xid in the part of the kernel log read before its bound (%s)" % log["source"],
            ev,
            "read the rest with dmesg | grep Xid",
        )
    if groups:
        return contract(
            "xid",
            "ok",
            "only informational events since boot (%s): %s"
            % (log["source"], "; ".join(_said(g) for g in groups[:6])),
            ev,
        )
    return contract("xid", "ok", "no Xid since boot (%s)" % log["source"], ev)


def kernel_log_not_read(tried, user, ev):
    """The xid contract when no kernel log could be read (`tried`: each source, why not):
    unknown, with the fix for a user the log is closed to."""
    said = "; ".join("%s: %s" % kv for kv in sorted(tried.items())) or "not read"
    if user and any(denied(why) for why in tried.values()):
        ev["read_as"] = user
        return contract(
            "xid",
            "unknown",
            "kernel log not readable as user %s (%s): Xid events are unknown, "
            "not absent" % (user, said),
            ev,
            "sweep with --become (or ansible_become: true) to read it as root, or let user %s "
            "read it (sysctl kernel.dmesg_restrict=0, or the systemd-journal group)" % user,
        )
    return contract(
        "xid",
        "unknown",
        "kernel log not readable (%s)" % said,
        ev,
        "give the probe read access to the kernel log (dmesg_restrict, systemd-journal group) "
        "to see Xid events",
    )


def journal_hidden_from(user, ev):
    """The xid contract when journalctl -k answered a user outside the journal's groups: it shows
    such a user no kernel message, so no Xid there says nothing."""
    ev["read_as"] = user
    return contract(
        "xid",
        "unknown",
        "kernel log not readable as user %s: journalctl -k shows no kernel "
        "message to a user outside the %s groups: Xid events are unknown, not absent"
        % (user, "/".join(sorted(JOURNAL_GROUPS))),
        ev,
        "sweep with --become (or ansible_become: true), or add user %s to the systemd-journal "
        "group" % user,
    )


def _said(g):

    name = "SXid" if g.get("type") == "sxid" else "Xid"
    return "%s %d on %s x%d: %s" % (name, g["code"], g["bus_id"], g["count"], g["meaning"])


def _fixes(groups):
    """One fix per action, naming its codes: "Xid 79: reboot: drain the host and reboot it"."""
    codes = {}
    for g in groups:
        codes.setdefault(g["action"], []).append(
            "%s %d" % ("SXid" if g.get("type") == "sxid" else "Xid", g["code"])
        )
    return [
        "%s: %s: %s" % ("/".join(sorted(set(c), key=c.index)), ACTION[a][1], ACTION[a][4])
        for a, c in sorted(codes.items(), key=lambda kv: RANK[kv[0]])
    ]


def thermal_findings(g):
    """(broken, warnings) for one GPU: at or above a threshold, or within the margin of slowdown."""
    t, i = g.get("thermal") or {}, g.get("index")
    broken, warn = [], []
    for what, now, limits in (
        (
            "GPU",
            t.get("gpu_c"),
            (("shutdown", t.get("gpu_shutdown_c")), ("slowdown", t.get("gpu_slowdown_c"))),
        ),
        ("HBM", t.get("memory_c"), (("slowdown", t.get("memory_max_operating_c")),)),
    ):
        if now is None:
            continue
        for name, limit in limits:
            if not limit:
                continue
            if now >= limit:
                broken.append(
                    "GPU %s: %s at %s C, at or above its %s threshold %s C"
                    % (i, what, now, name, limit)
                )
                break
            if name == "slowdown" and now >= limit - THERMAL_MARGIN_C:
                warn.append(
                    "GPU %s: %s at %s C, %s C below its slowdown threshold %s C"
                    % (i, what, now, limit - now, limit)
                )
    return broken, warn


def check_thermal(facts):
    rows, broken, warn = [], [], []
    for g in facts.get("gpus") or []:
        rows.append(dict(g.get("thermal") or {}, gpu=g.get("index")))
        b, w = thermal_findings(g)
        broken += b
        warn += w
    ev = {"gpus": rows, "margin_c": THERMAL_MARGIN_C}
    fix = "check cooling: fans, airflow, inlet temperature, blanking panels, the GPU's heat sink"
    if broken:
        return contract("thermal", "broken", "; ".join(broken), ev, fix)
    if warn:
        return contract("thermal", "warning", "; ".join(warn), ev, fix)
    read = [r for r in rows if r.get("gpu_c") is not None]
    if not read:
        return contract("thermal", "unknown", "no temperature readable", ev)
    hbm = any(r.get("memory_c") is not None for r in read)
    # the temperatures themselves are evidence: a message that moved with every
    # degree would be a change
    return contract(
        "thermal",
        "ok",
        "GPU%s more than %d C below the slowdown threshold"
        % (" and HBM" if hbm else "", THERMAL_MARGIN_C),
        ev,
    )


def under_load(facts):
    load = facts.get("load") or {}
    return bool(load.get("samples")) and not load.get("refused")


def pcie_findings(facts, g, loaded):
    """(broken, notes) for one GPU's PCIe link; generation is judged only under load."""
    p, i = g.get("pcie") or {}, g.get("index")
    broken, notes = [], []
    w, mw = p.get("width"), p.get("max_width")
    if w and mw and w < mw:
        broken.append(
            "GPU %s (%s): PCIe link x%d, the link supports x%d: %s the host-to-GPU bandwidth"
            % (i, g.get("pci_bus_id"), w, mw, "half" if w * 2 == mw else "%d/%d of" % (w, mw))
        )
    gen, mg = p.get("gen"), p.get("max_gen")
    if loaded:
        sampled = [
            s.get("pcie_gen_max")
            for s in (facts.get("load") or {}).get("summary") or []
            if s.get("gpu") == i and s.get("pcie_gen_max") is not None
        ]
        seen = max(sampled + ([gen] if gen else [])) if (sampled or gen) else None
        if seen and mg and seen < mg:
            broken.append("GPU %s: PCIe gen%d under load, the link supports gen%d" % (i, seen, mg))
    elif gen and mg and gen < mg:
        notes.append(
            "GPU %s: PCIe gen%d of gen%d at idle (power saving; not judged without --load)"
            % (i, gen, mg)
        )
    return broken, notes


def nvlink_findings(facts, g):
    n, i = g.get("nvlink") or {}, g.get("index")
    exist, active = n.get("links") or 0, n.get("active") or 0
    if not exist or active == exist:
        return [], []
    pairs = (facts.get("topology") or {}).get("pairs") or {}
    peers = {k: v for k, v in pairs.items() if str(i) in k.split("-") and v.startswith("NV")}
    down = ", ".join(str(k) for k in n.get("inactive_links") or [])
    if active or peers:
        return [
            "GPU %s: %d of %d NVLinks active (down: %s); NV%d becomes NV%d%s"
            % (i, active, exist, down, exist, active, "" if len(peers) <= 1 else " to each peer")
        ], []
    return [], ["GPU %s: %d NVLinks, none active (no NVLink peer)" % (i, exist)]


# One fix per cause of a broken links contract (issue 41: a PCIe x8 link was told to replace
# the NVLink bridge).
LINK_FIXES = {
    "pcie_width": (
        "reseat the card and check its slot and riser (a narrow link is a seating or "
        "riser fault), then the slot's BIOS link-width setting (lspci -vv: LnkSta against LnkCap)"
    ),
    "pcie_gen": (
        "check the slot's BIOS PCIe generation setting and the riser or retimer; reseat "
        "the card (lspci -vv: LnkSta against LnkCap)"
    ),
    "nvlink": (
        "reset the GPU (or reboot); replace the NVLink bridge or board if links stay down "
        "(nvidia-smi nvlink -s)"
    ),
}


def check_links(facts):
    loaded = under_load(facts)
    rows, broken, warn, notes, causes = [], [], [], [], []
    for g in facts.get("gpus") or []:
        rows.append(
            {
                "gpu": g.get("index"),
                "pci_bus_id": g.get("pci_bus_id"),
                "pcie": g.get("pcie"),
                "nvlink": g.get("nvlink"),
            }
        )
        b, n = pcie_findings(facts, g, loaded)
        broken += b
        notes += n
        causes += ["pcie_gen" if "PCIe gen" in x else "pcie_width" for x in b]
        b, w = nvlink_findings(facts, g)
        broken += b
        warn += w
        causes += ["nvlink"] * len(b)
    ev = {"gpus": rows, "generation_judged": loaded, "notes": notes}
    if broken:
        fix = "; ".join(LINK_FIXES[k] for k in LINK_FIXES if k in causes)
        return contract("links", "broken", "; ".join(broken), ev, fix)
    if warn:
        return contract("links", "warning", "; ".join(warn), ev)
    if not any((r.get("pcie") or {}).get("width") for r in rows):
        return contract("links", "unknown", "PCIe link not readable", ev)
    first = rows[0].get("pcie") or {}
    nv = [r for r in rows if (r.get("nvlink") or {}).get("links")]
    # at idle the current generation drops and comes back: the message names the
    # link's, not the moment's
    msg = "PCIe gen%s x%s%s" % (
        first.get("gen") if loaded else first.get("max_gen"),
        first.get("width"),
        " under load" if loaded else " link (generation at idle not judged)",
    )
    if nv:
        msg += "; NVLink %s/%s active" % (
            sum(r["nvlink"]["active"] for r in nv),
            sum(r["nvlink"]["links"] for r in nv),
        )
    return contract("links", "ok", msg, ev)


HOST_FIXES = {
    "governor": "cpupower frequency-set -g performance (and keep it: tuned or a boot setting)",
    "numa": "sysctl kernel.numa_balancing=0",
    "iommu": "add iommu=pt to the kernel command line",
    "nouveau": "blacklist nouveau and rebuild the initramfs",
    "peermem": "modprobe nvidia_peermem (and load it at boot)",
    "port": (
        "bring the port up at the fleet's rate: check the cable and transceiver (ibstat, ibdiagnet)"
    ),
    "acs": (
        "disable ACS P2P redirect on the PCIe switch ports (BIOS, or setpci) for GPU peer traffic"
    ),
}


def host_findings(h):
    """[(finding, fix key)] for the host settings that change benchmarks."""
    out = []
    gov = h.get("cpu_governor") or {}
    slow = {k: v for k, v in gov.items() if k not in GOOD_GOVERNORS}
    if slow:
        out.append(
            (
                "CPU frequency governor %s (not performance): host-side work and launch latency "
                "vary"
                % ", ".join(
                    "%s on %d polic%s" % (k, v, "y" if v == 1 else "ies")
                    for k, v in sorted(slow.items())
                ),
                "governor",
            )
        )
    if h.get("numa_balancing") == 1:
        out.append(("automatic NUMA balancing is on: pages migrate under the benchmark", "numa"))
    args = h.get("kernel_args") or []
    if any(a in ("intel_iommu=on", "amd_iommu=on") for a in args) and "iommu=pt" not in args:
        out.append(
            (
                "IOMMU translation on (%s without iommu=pt): P2P and GPUDirect RDMA pay for it"
                % " ".join(args),
                "iommu",
            )
        )
    mods = h.get("modules") or {}
    if mods.get("nouveau"):
        out.append(("nouveau is loaded beside nvidia", "nouveau"))
    out += port_findings(h.get("ib_ports") or [], mods)
    for a in h.get("acs") or []:
        if {"p2p_request_redirect", "p2p_completion_redirect"} & set(a.get("enabled") or []):
            out.append(
                (
                    "ACS P2P redirect on PCIe switch port %s: GPU peer traffic goes up to the root "
                    "complex" % a["bridge"],
                    "acs",
                )
            )
    return out


def port_findings(ports, mods):
    """[(finding, fix key)] for the network ports: no GPUDirect RDMA module, a port down, a port
    slower than its peers of the same link layer."""
    out = []
    if ports and mods and not (mods.get("nvidia_peermem") or mods.get("nv_peer_mem")):
        out.append(
            (
                "nvidia_peermem is not loaded: no GPUDirect RDMA over the network ports (%d)"
                % len(ports),
                "peermem",
            )
        )
    for p in ports:
        if p.get("state") and p["state"] != "ACTIVE":
            out.append(
                (
                    "%s port %s is %s (%s)"
                    % (p["device"], p["port"], p["state"], p.get("phys_state")),
                    "port",
                )
            )
    for layer in sorted({p.get("link_layer") or "" for p in ports}):
        same = [
            p
            for p in ports
            if (p.get("link_layer") or "") == layer
            and p.get("state") == "ACTIVE"
            and p.get("rate_gbps")
        ]
        top = max([p["rate_gbps"] for p in same] or [0])
        for p in same:
            if p["rate_gbps"] < top:
                out.append(
                    (
                        "%s port %s at %g Gb/s while the host's other %s ports run at %g Gb/s"
                        % (p["device"], p["port"], p["rate_gbps"], layer, top),
                        "port",
                    )
                )
    return out


def unread_tail(facts, h):
    """ "; not readable [as user X]: ..." for the host settings (and the ACS config space) the
    probe could not read."""
    unread = dict(h.get("unreadable") or {})
    for a in h.get("acs") or []:
        if a.get("error"):
            unread["ACS of PCIe switch port %s" % a.get("bridge")] = a["error"]
    if not unread:
        return ""
    user = unprivileged(facts)
    who = (
        " as user %s" % user
        if user and any(denied(v) or "needs root" in str(v) for v in unread.values())
        else ""
    )
    return "; not readable%s: %s" % (
        who,
        ", ".join("%s (%s)" % kv for kv in sorted(unread.items())),
    )


def check_host(facts):
    h = facts.get("host_settings") or {}
    ev = dict(h, nearest_nic=facts.get("nearest_nic"))
    facts_read = [
        h.get(k)
        for k in (
            "cpu_governor",
            "numa_balancing",
            "transparent_hugepages",
            "kernel_args",
            "modules",
            "ib_ports",
        )
    ]
    if all(v is None for v in facts_read):
        return contract(
            "host",
            "unknown",
            "host settings not readable (%s)"
            % ", ".join("%s: %s" % kv for kv in sorted((h.get("unreadable") or {}).items()))
            or "not read",
            ev,
        )
    found = host_findings(h)
    tail = unread_tail(facts, h)
    if found:
        fixes = [HOST_FIXES[k] for k in dict.fromkeys(k for _, k in found)]
        return contract(
            "host", "warning", "; ".join(text for text, _ in found) + tail, ev, "; ".join(fixes)
        )
    gov = ", ".join(sorted(h.get("cpu_governor") or {})) or "not exposed"
    return contract(
        "host",
        "ok",
        "CPU governor %s, network ports: %d%s" % (gov, len(h.get("ib_ports") or []), tail),
        ev,
    )
