"""The contracts of the GPUs themselves, judged from NVML's answers: clocks (and the facility
causes of a slowdown: HW slowdown, thermal, power brake), power (limits and draw), memory (ECC,
retired and remapped rows), topology (the links between the selected GPUs) and layout (MIG). The
contracts of the stack above them (driver, device mask, framework, processes) and `evaluate`, which
runs the chain, are in `probe_agent.contracts`; the host's own in `probe_agent.hostchecks`.
"""

import re

from probe_agent.chain import contract, plural

FACILITY_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
# reason -> (what it is called, its fix): one line and one fix per cause (issue 41)
FACILITY_CAUSES = {
    "hw_slowdown": (
        "HW slowdown",
        "check the host's power delivery and cooling (PSU, fans, inlet temperature)",
    ),
    "hw_thermal_slowdown": (
        "HW thermal slowdown",
        "check fans, airflow and inlet temperature; the GPU is too hot for its clocks",
    ),
    "hw_power_brake_slowdown": (
        "HW power brake",
        "the chassis asserts the power-brake signal: check PSUs and the rack's power budget",
    ),
}
# SOC: older drivers' SYS
LINK_RANK = {"NV": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5, "SOC": 5}


GPU_ITEM = re.compile(r"GPU (\d+): (.*)\Z", re.S)


def fold_numbers(numbers):
    """[0, 1, 2, 4, 5] -> '0-2,4-5'."""
    numbers = sorted(set(numbers))
    runs = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ",".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in runs)


def fold_gpus(items):
    """'GPU 0: X', 'GPU 1: X', 'GPU 3: Y' -> 'GPU 0-1: X; GPU 3: Y': one sentence per
    finding, not per GPU."""
    groups, order = {}, []
    for item in items:
        m = GPU_ITEM.match(item)
        key = m.group(2) if m else item
        if key not in groups:
            groups[key] = []
            order.append(key)
        if m:
            groups[key].append(int(m.group(1)))
    return "; ".join(
        ("GPU %s: %s" % (fold_numbers(groups[k]), k)) if groups[k] else k for k in order
    )


def selected_gpus(facts):

    gpus = facts.get("gpus") or []
    sel = (facts.get("mask") or {}).get("selected")
    if not sel:
        return gpus
    idx = {s["physical_index"] for s in sel}
    return [g for g in gpus if g.get("index") in idx]


def check_clocks(facts):
    rows, broken, warn, notes, causes = [], [], [], [], []
    for g in facts.get("gpus") or []:
        c = g.get("clocks") or {}
        r = g.get("clock_event_reasons") or {}
        active = r.get("active") or []
        rows.append(
            {
                "gpu": g.get("index"),
                "sm_mhz": c.get("sm_mhz"),
                "sm_max_mhz": c.get("sm_max_mhz"),
                "mem_mhz": c.get("mem_mhz"),
                "mem_max_mhz": c.get("mem_max_mhz"),
                "active_reasons": active,
                "reason_counters_us": g.get("reason_counters_us"),
            }
        )
        fac = [a for a in FACILITY_REASONS if a in active]
        # NVML sets hw_slowdown beside the cause it knows: the cause is said, once (issue 41)
        if len(fac) > 1:
            fac.remove("hw_slowdown")
        for a in fac:
            broken.append(
                "GPU %s: %s active (SM %s of %s MHz)"
                % (g.get("index"), FACILITY_CAUSES[a][0], c.get("sm_mhz"), c.get("sm_max_mhz"))
            )
            causes.append(a)
        if "sw_thermal_slowdown" in active:
            warn.append(
                "GPU %s: SW thermal slowdown active (%s C)"
                % (g.get("index"), g.get("temperature_c"))
            )
        if "sw_power_cap" in active:
            notes.append("GPU %s: SW power cap active (expected under load)" % g.get("index"))
        warn += clock_settings_warnings(g.get("index"), c)
    ev = {"gpus": rows}
    if broken:
        return contract(
            "clocks",
            "broken",
            fold_gpus(broken) + ": a facility fault",
            ev,
            "; ".join(FACILITY_CAUSES[a][1] for a in FACILITY_REASONS if a in causes),
        )
    if warn:
        return contract(
            "clocks",
            "warning",
            fold_gpus(warn),
            ev,
            "reset clocks with nvidia-smi -rac / -rgc / -rmc if not intended",
        )
    return contract(
        "clocks", "ok", fold_gpus(notes) or "no clock-event reason beyond idle / power cap", ev
    )


def clock_settings_warnings(index, c):
    """Warnings for clocks someone set: locked SM or memory clocks below the GPU's maximum, or
    application clocks off their default."""
    warn = []
    for name, top in (("sm", c.get("sm_max_mhz")), ("mem", c.get("mem_max_mhz"))):
        low, high = c.get("p0_%s_min_mhz" % name), c.get("p0_%s_max_mhz" % name)
        if high and top and high < top:
            warn.append(
                "GPU %s: %s clock locked to %s-%s MHz (the GPU allows up to %s MHz)"
                % (index, name.upper() if name == "sm" else "memory", low, high, top)
            )
    if (
        c.get("app_sm_mhz")
        and c.get("default_app_sm_mhz")
        and c["app_sm_mhz"] != c["default_app_sm_mhz"]
    ):
        warn.append(
            "GPU %s: application clocks set to %s MHz (default %s)"
            % (index, c["app_sm_mhz"], c["default_app_sm_mhz"])
        )
    return warn


def check_power(facts):

    rows, broken, warn = [], [], []
    for g in facts.get("gpus") or []:
        p = g.get("power") or {}
        rows.append(dict(p, gpu=g.get("index")))
        enf, dft = p.get("enforced_limit_w"), p.get("default_limit_w")
        if enf is None or dft is None:
            continue
        if enf < dft:
            broken.append(
                "GPU %s: enforced power limit %g W is below the default %g W"
                % (g.get("index"), enf, dft)
            )
        elif enf > dft:
            warn.append(
                "GPU %s: enforced power limit %g W is above the default %g W"
                % (g.get("index"), enf, dft)
            )
    ev = {"gpus": rows}
    if broken:
        dft = rows[0].get("default_limit_w")
        return contract(
            "power",
            "broken",
            fold_gpus(broken),
            ev,
            "restore it with nvidia-smi -pl %g (or record the intended cap in the expectations "
            "file)" % dft,
        )
    if warn:
        return contract(
            "power", "warning", fold_gpus(warn), ev, "nvidia-smi -pl DEFAULT if not intended"
        )
    if not rows:
        return contract("power", "unknown", "no power readings", ev)
    return contract(
        "power",
        "ok",
        "enforced limit = default (%s W)"
        % (
            ", ".join(
                sorted(
                    {
                        "%g" % r["enforced_limit_w"]
                        for r in rows
                        if r.get("enforced_limit_w") is not None
                    }
                )
            )
            or "?"
        ),
        ev,
    )


def check_memory(facts):
    rows, broken, warn = [], [], []
    for g in facts.get("gpus") or []:
        e, rr = g.get("ecc") or {}, g.get("remapped_rows") or {}
        i = g.get("index")
        rows.append(
            {
                "gpu": i,
                "ecc": e,
                "remapped_rows": g.get("remapped_rows"),
                "retired_pages_pending": g.get("retired_pages_pending"),
            }
        )
        if rr.get("failure"):
            broken.append("GPU %s: row remapping failed: replace the card" % i)
        if e.get("volatile_uncorrected"):
            broken.append(
                "GPU %s: %s uncorrected ECC errors since the last reset"
                % (i, e["volatile_uncorrected"])
            )
        if rr.get("pending"):
            warn.append("GPU %s: a row remap is pending: reset the GPU to apply it" % i)
        if g.get("retired_pages_pending"):
            warn.append("GPU %s: page retirement pending: reset the GPU" % i)
        if e.get("current") is False:
            warn.append("GPU %s: ECC is off" % i)
        pending_mode = e.get("pending_mode", e.get("pending"))
        if (
            e.get("current") is not None
            and pending_mode is not None
            and e["current"] != pending_mode
        ):
            warn.append(
                "GPU %s: ECC change pending (%s -> %s) until the next reset"
                % (i, onoff(e["current"]), onoff(pending_mode))
            )
    ev = {"gpus": rows}
    if broken:
        return contract(
            "memory", "broken", fold_gpus(broken), ev, "drain the host and replace or RMA the card"
        )
    if warn:
        return contract(
            "memory",
            "warning",
            fold_gpus(warn),
            ev,
            "nvidia-smi -e 1 and a GPU reset to turn ECC on; reset to apply pending changes",
        )
    return contract("memory", "ok", "ECC on, no pending remap, no uncorrected error", ev)


def onoff(v):
    return "on" if v else "off"


def link_rank(link):
    if link is None:
        return None
    if link.startswith("NV"):
        return 0
    return LINK_RANK.get(link, 6)


def link_order(link):
    """The worse the link, the higher: its class, then among NVLinks the fewer the worse
    (NV4 below NV18)."""
    count = link[2:] if link.startswith("NV") else ""
    return link_rank(link), -int(count) if count.isdigit() else 0


def selected_pairs(facts):
    idx = sorted(g.get("index") for g in selected_gpus(facts))
    return ["%d-%d" % (idx[a], idx[b]) for a in range(len(idx)) for b in range(a + 1, len(idx))]


def worst_link(facts):
    """The worst link class among the pairs of GPUs the mask selects: None for fewer than 2, and
    None where a selected pair's link was not read (a lower bound is no worst link)."""
    pairs = (facts.get("topology") or {}).get("pairs") or {}
    worst = None
    for pair in selected_pairs(facts):
        link = pairs.get(pair)
        if link is None:
            return None
        if worst is None or link_order(link) > link_order(worst):
            worst = link
    return worst


def check_topology(facts):
    topo = facts.get("topology") or {}
    sel = selected_gpus(facts)
    ev = {
        "pairs": topo.get("pairs"),
        "source": topo.get("source"),
        "cpu_affinity": topo.get("cpu_affinity"),
        "numa_affinity": topo.get("numa_affinity"),
        "selected": [g.get("index") for g in sel],
    }
    # rows of the matrix not read, each with why (said only where there are some)
    if topo.get("unread"):
        ev["unread"] = topo["unread"]
    if len(sel) < 2:
        return contract(
            "topology", "not_applicable", "fewer than two GPUs selected: no GPU-to-GPU link", ev
        )
    worst = worst_link(facts)
    ev["worst_link"] = worst
    if worst is None:
        missing = [p for p in selected_pairs(facts) if p not in (topo.get("pairs") or {})]
        unread = "; ".join(sorted(set((topo.get("unread") or {}).values())))[:300]
        if topo.get("pairs"):
            return contract(
                "topology",
                "unknown",
                "links between the selected GPUs not read: %s%s"
                % (
                    ", ".join(missing[:8])
                    + (" and %d more" % (len(missing) - 8) if len(missing) > 8 else ""),
                    " (%s)" % unread if unread else "",
                ),
                ev,
                "run nvidia-smi topo -m on the host and read those rows",
            )
        return contract(
            "topology",
            "unknown",
            "link classes could not be read",
            ev,
            "run nvidia-smi topo -m on the host",
        )
    all_links = list((topo.get("pairs") or {}).values())
    if link_rank(worst) > 0 and any(l.startswith("NV") for l in all_links):
        return contract(
            "topology",
            "warning",
            "the selected GPUs talk over %s although this host has NVLink between other GPUs: "
            "the mask crosses PCIe instead of NVLink" % worst,
            ev,
            "choose GPUs joined by NVLink (nvidia-smi topo -m)",
        )
    return contract("topology", "ok", "worst link between the selected GPUs: %s" % worst, ev)


def check_layout(facts):
    rows, warn = [], []
    cc = facts.get("driver", {}).get("confidential_compute")
    for g in facts.get("gpus") or []:
        mig = g.get("mig") or {}
        i = g.get("index")
        rows.append(
            {
                "gpu": i,
                "name": g.get("name"),
                "uuid": g.get("uuid"),
                "serial": g.get("serial"),
                "vbios": g.get("vbios"),
                "pci_bus_id": g.get("pci_bus_id"),
                "memory_total_bytes": g.get("memory_total_bytes"),
                "mig_current": mig.get("current"),
                "mig_pending": mig.get("pending"),
                "mig_layout": mig_layout(g),
                "persistence_mode": g.get("persistence_mode"),
                "compute_mode": g.get("compute_mode"),
            }
        )
        if (
            mig.get("current") is not None
            and mig.get("pending") is not None
            and mig["current"] != mig["pending"]
        ):
            warn.append(
                "GPU %s: MIG mode change pending (%s -> %s) until the next reset"
                % (i, onoff(mig["current"]), onoff(mig["pending"]))
            )
        if g.get("persistence_mode") is False:
            warn.append("GPU %s: persistence mode off (each new client pays driver start-up)" % i)
        if g.get("compute_mode") not in (None, "default"):
            warn.append("GPU %s: compute mode %s" % (i, g.get("compute_mode")))
    ev = {"gpus": rows, "confidential_compute": cc}
    if warn:
        return contract(
            "layout",
            "warning",
            fold_gpus(warn),
            ev,
            "nvidia-smi -pm 1 for persistence (or nvidia-persistenced); reset the GPU for pending "
            "modes",
        )
    migs = [r for r in rows if r["mig_current"]]
    msg = "MIG on for %s" % plural(len(migs), "GPU") if migs else "MIG off"
    return contract("layout", "ok", msg + "; persistence on; compute mode default", ev)


def mig_layout(g):
    mig = g.get("mig") or {}
    if not mig.get("current"):
        return None
    return (
        "+".join(sorted(d.get("profile") or "?" for d in mig.get("devices") or []))
        or "(no instances)"
    )
