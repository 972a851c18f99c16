"""health-report.md: the same facts as health.json, in triage order, for a person."""

import re

from probe_agent.chain import STATUSES
from probe_agent.xid import ACTION

TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
ENTITY = re.compile(r"&(?=[A-Za-z#])")
MARK = dict(STATUSES)


def clean(text):
    """Host-supplied text as one safe Markdown line: no control characters, no table breaks."""
    text = "-" if text is None else str(text)
    text = "".join(ch if ch >= " " and ch != "\x7f" else " " for ch in text)
    # CommonMark backslash escapes, not HTML entities: a tag or an entity cannot start,
    # `<=` stays readable
    return TAG_OPEN.sub(r"\\<", ENTITY.sub(r"\\&", text.replace("\\", "\\\\").replace("|", "\\|")))


def render_markdown(health):
    gpus = health.get("gpus") or []
    lines = verdict_lines(health) + contracts_table(health) + host_summary(health)
    lines += gpus_table(gpus)
    lines += (
        links_section(gpus)
        + xid_section(health.get("kernel_log"), xid_read_as(health))
        + host_section(health)
    )
    lines += load_section(health.get("load")) + speed_section(health.get("speed"))
    return "\n".join(lines) + "\n"


def verdict_lines(health):
    """The title, the lowest broken contract with its fix (or the verdict), and why a probe is
    incomplete."""
    host = health.get("host") or {}
    probe = health.get("probe") or {}
    lines = ["# GPU health of %s" % clean(host.get("hostname")), ""]
    lowest = health.get("lowest_broken")
    if lowest:
        c = next(c for c in health["contracts"] if c["name"] == lowest)
        lines += [
            "**Lowest broken contract: %s.** %s" % (clean(c["title"]), clean(c["message"])),
            "",
        ]
        if c.get("fix"):
            lines += ["Fix: %s" % clean(c["fix"]), ""]
        lines += ["Everything above it is a consequence, not a clue.", ""]
    else:
        lines += ["**Verdict: %s.** %s" % (health.get("verdict"), clean(health.get("summary"))), ""]
    if not probe.get("complete", True):
        lines += ["**Incomplete:** %s" % clean(probe.get("incomplete_reason")), ""]
    return lines


def contracts_table(health):
    """One row a contract, in chain order, consequences marked."""
    lines = ["| # | contract | status | finding | fix |", "|---|---|---|---|---|"]
    for n, c in enumerate(health.get("contracts") or [], 1):
        status = MARK.get(c["status"], c["status"])
        if c.get("consequence_of"):
            status += " (consequence of %s)" % c["consequence_of"]
        lines.append(
            "| %d | %s | %s | %s | %s |"
            % (n, clean(c["title"]), status, clean(c["message"]), clean(c.get("fix") or ""))
        )
    lines.append("")
    return lines


def host_summary(health):
    """## Host: the machine, its driver, and how the probe ran."""
    host = health.get("host") or {}
    probe = health.get("probe") or {}
    drv = health.get("driver") or {}
    return [
        "## Host",
        "",
        "- hostname %s, kernel %s, %s, %s CPUs"
        % (
            clean(host.get("hostname")),
            clean(host.get("kernel")),
            clean(host.get("os")),
            host.get("cpus"),
        ),
        "- driver %s, NVML %s, CUDA driver API %s"
        % (
            clean(drv.get("version")),
            clean(drv.get("nvml_version")),
            clean(drv.get("cuda_driver_version")),
        ),
        "- probe %s (%s mode), %.3f s%s"
        % (
            probe.get("version"),
            probe.get("mode"),
            probe.get("duration_s") or 0,
            ", replayed from %s" % clean(probe["replay"]) if probe.get("replay") else "",
        ),
        "",
    ]


def gpus_table(gpus):
    """## GPUs: one row a GPU: identity, ECC, power cap, clocks, clock-event reasons, MIG."""
    if not gpus:
        return []
    lines = [
        "## GPUs",
        "",
        "| GPU | name | UUID | ECC | power W (enforced / default) | SM MHz (now / max) | "
        "reasons | MIG |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for g in gpus:
        p, c = g.get("power") or {}, g.get("clocks") or {}
        lines.append(
            "| %s | %s | %s | %s | %s / %s | %s / %s | %s | %s |"
            % (
                g.get("index"),
                clean(g.get("name")),
                clean(g.get("uuid")),
                {True: "on", False: "off"}.get((g.get("ecc") or {}).get("current"), "?"),
                p.get("enforced_limit_w"),
                p.get("default_limit_w"),
                c.get("sm_mhz"),
                c.get("sm_max_mhz"),
                clean(", ".join((g.get("clock_event_reasons") or {}).get("active") or []) or "-"),
                clean(g.get("mig_layout") or "off"),
            )
        )
    lines.append("")
    return lines


def dash(value):
    return "-" if value is None else value


def link_text(p):
    if not p or p.get("width") is None:
        return "not readable"
    return "gen%s x%s (max gen%s x%s; GPU gen%s)" % (
        p.get("gen"),
        p.get("width"),
        p.get("max_gen"),
        p.get("max_width"),
        p.get("gpu_max_gen"),
    )


def links_section(gpus):
    if not gpus:
        return []
    out = [
        "## Links, fabric and temperatures",
        "",
        "| GPU | bus id | PCIe | replays | NVLink active / links | NVLink errors | fabric | GPU C "
        "(slowdown) | HBM C (max) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for g in gpus:
        n, t, p = g.get("nvlink") or {}, g.get("thermal") or {}, g.get("pcie") or {}
        errors = n.get("errors")
        out.append(
            "| %s | %s | %s | %s | %s | %s | %s | %s (%s) | %s (%s) |"
            % (
                g.get("index"),
                clean(g.get("pci_bus_id")),
                link_text(p),
                dash(p.get("replay_counter")),
                "%s / %s" % (n.get("active"), n.get("links")) if n.get("links") else "none",
                clean(", ".join("%s %s" % kv for kv in sorted(errors.items()) if kv[1] is not None))
                if errors
                else "-",
                clean((g.get("fabric") or {}).get("state") or "not supported"),
                dash(t.get("gpu_c")),
                dash(t.get("gpu_slowdown_c")),
                dash(t.get("memory_c")),
                dash(t.get("memory_max_operating_c")),
            )
        )
    return out + [""]


def xid_section(log, read_as=None):
    """The kernel log's Xid events; `read_as`: the user it could not be read as (the xid
    contract's evidence)."""
    if not log:
        return []
    if not log.get("source"):
        tried = log.get("tried") or {}
        who = " as user %s" % clean(read_as) if read_as else ""
        return [
            "## Xid events",
            "",
            "Kernel log not readable%s: %s"
            % (who, clean("; ".join("%s: %s" % kv for kv in sorted(tried.items())) or "not read")),
            "",
        ]
    xids = list(log.get("xid") or []) + list(log.get("sxid") or [])
    cat = (log.get("catalogue") or {}).get("xid") or {}
    out = [
        "## Xid events",
        "",
        "Read from %s since boot; catalogue: %s (%s, %s)"
        % (
            clean(log.get("source")),
            cat.get("url") or log.get("docs"),
            cat.get("version"),
            cat.get("date"),
        ),
        "",
    ]
    if not xids:
        return out + ["No Xid event.", ""]
    out += [
        "| bus id | event | count | first | last | meaning | NVIDIA's bucket | action | last "
        "message |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for x in xids:
        label = ACTION[x["action"]][1] if x.get("action") in ACTION else x.get("action")
        out.append(
            "| %s | %s %s | %s | %s | %s | %s | %s | %s | %s |"
            % (
                clean(x["bus_id"]),
                "SXid" if x.get("type") == "sxid" else "Xid",
                x["code"],
                x["count"],
                x.get("first_at") or x.get("first_s"),
                x.get("last_at") or x.get("last_s"),
                clean(x.get("meaning")),
                x.get("bucket"),
                clean(label),
                clean(x.get("last")),
            )
        )
    return out + [""]


def xid_read_as(health):
    """The user the xid contract says the kernel log was not readable as, or None."""
    for c in health.get("contracts") or []:
        if c.get("name") == "xid":
            return (c.get("evidence") or {}).get("read_as")
    return None


def host_section(health):
    h = health.get("host_settings") or {}
    pci = health.get("pci") or {}
    if not h and not pci:
        return []
    gov = h.get("cpu_governor")
    out = [
        "## Host settings",
        "",
        "- NVIDIA GPUs on the PCI bus: %s"
        % (
            ", ".join(clean(g["bus_id"]) for g in pci.get("gpus") or []) or "none"
            if pci.get("readable")
            else "not readable (%s)" % clean(pci.get("error"))
        ),
        "- CPU governor: %s"
        % (clean(", ".join("%s x%d" % kv for kv in sorted(gov.items()))) if gov else "not exposed"),
        "- NUMA balancing: %s; transparent huge pages: %s"
        % (dash(h.get("numa_balancing")), clean(h.get("transparent_hugepages"))),
        "- kernel arguments: %s"
        % clean(" ".join(h.get("kernel_args") or []) or "none of iommu / pci="),
        "- modules: %s"
        % clean(", ".join(k for k, v in sorted((h.get("modules") or {}).items()) if v) or "-"),
    ]
    for p in h.get("ib_ports") or []:
        out.append(
            "- %s port %s: %s, %s, %s, %s"
            % (
                clean(p["device"]),
                p.get("port"),
                clean(p.get("state")),
                clean(p.get("phys_state")),
                clean(p.get("rate")),
                clean(p.get("link_layer")),
            )
        )
    for gpu, nic in sorted((h.get("nearest_nic") or {}).items()):
        out.append(
            "- GPU %s nearest NIC: %s (%s)" % (gpu, clean(nic.get("nic")), clean(nic.get("link")))
        )
    unread = h.get("unreadable") or {}
    if unread:
        out.append(
            "- not readable: %s" % clean(", ".join("%s (%s)" % kv for kv in sorted(unread.items())))
        )
    return out + [""]


def load_section(load):
    """The --load summary: one row per GPU over the load's busy window."""
    lines = []
    if not (load and load.get("summary")):
        return lines
    lines += [
        "## Under load (%s s, %s engine)" % (load.get("seconds"), load.get("engine")),
        "",
        "| GPU | samples | SM MHz min / median / max | power W max / limit | SW power cap | HW "
        "slowdown |",
        "|---|---|---|---|---|---|",
    ]
    for s in load["summary"]:
        lines.append(
            "| %s | %s | %s / %s / %s | %s / %s | %.0f%% | %.0f%% |"
            % (
                s["gpu"],
                s["samples"],
                s["sm_mhz_min"],
                s["sm_mhz_median"],
                s["sm_mhz_max_allowed"],
                s["power_w_max"],
                s["enforced_limit_w"],
                100 * s["sw_power_cap_fraction"],
                100 * s["hw_slowdown_fraction"],
            )
        )
    if load.get("started_s") is not None:
        lines += [
            "",
            "Samples from the load's start (%.1f s after the child was spawned) to its end; "
            "%d earlier or later samples are kept in health.json, not summarised."
            % (
                load["started_s"],
                sum(
                    1
                    for x in load.get("samples") or []
                    if isinstance(x, dict) and x.get("phase") in ("before", "after")
                ),
            ),
        ]
    lines.append("")
    return lines


SPEED_COLUMNS = (
    ("hbm", "HBM GB/s", 1e9),
    ("pcie_h2d", "PCIe H2D GB/s", 1e9),
    ("pcie_d2h", "PCIe D2H GB/s", 1e9),
    ("fp32", "FP32 TFLOP/s", 1e12),
    ("bf16_gemm", "bf16 GEMM TFLOP/s", 1e12),
)


def speed_cell(fig, scale, unit=""):
    """A figure as `value (spread %)`, or `skipped: why`; a value that is not a positive
    number is not shown."""
    fig = fig if isinstance(fig, dict) else {}
    value = fig.get("value")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf"):
        spread = fig.get("spread")
        return "%.1f%s" % (value / scale, unit) + (
            " (%.1f%%)" % (100 * spread) if isinstance(spread, (int, float)) else ""
        )
    return "skipped: %s" % clean(fig.get("skipped") or "no figure")


def speed_section(speed):
    """--speed: one row per GPU (best of the repetitions, their spread), the peer pairs
    and the all-reduce."""
    if not isinstance(speed, dict):
        return []
    head = "## Speed (%s%s, %.1f s of %.0f s)" % (
        clean(speed.get("status")),
        ", forced" if speed.get("forced") else "",
        speed.get("wall_s") or 0,
        speed.get("bound_s") or 0,
    )
    lines = [head, ""] + (["%s" % clean(speed["reason"]), ""] if speed.get("reason") else [])
    if speed.get("gpus"):
        lines += [
            "| GPU | " + " | ".join(c[1] for c in SPEED_COLUMNS) + " |",
            "|---" * (len(SPEED_COLUMNS) + 1) + "|",
        ]
        for g in speed["gpus"]:
            figs = g.get("figures") or {}
            lines.append(
                "| %s | %s |"
                % (
                    g.get("index"),
                    " | ".join(speed_cell(figs.get(k), s) for k, _, s in SPEED_COLUMNS),
                )
            )
        lines.append("")
    for p in speed.get("p2p") or []:
        lines.append(
            "- GPU %s -> GPU %s: %s" % (p.get("src"), p.get("dst"), speed_cell(p, 1e9, " GB/s"))
        )
    if isinstance(speed.get("allreduce"), dict):
        lines += [
            "- all-reduce bus bandwidth: %s" % speed_cell(speed["allreduce"], 1e9, " GB/s"),
            "",
        ]
    lines += [
        "Measured at once on every GPU: %s; the others one GPU at a time."
        % clean(", ".join(speed.get("parallel") or [])),
        "",
    ]
    return lines
