"""health-report.md: the same facts as health.json, in triage order, for a person."""

import re

TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
ENTITY = re.compile(r"&(?=[A-Za-z#])")
MARK = {"ok": "ok", "broken": "BROKEN", "warning": "warning", "not_applicable": "n/a", "unknown": "unknown"}


def clean(text):
    """Host-supplied text as one safe Markdown line: no control characters, no table breaks."""
    text = "-" if text is None else str(text)
    text = "".join(ch if ch >= " " and ch != "\x7f" else " " for ch in text)
    # CommonMark backslash escapes, not HTML entities: a tag or an entity cannot start, `<=` stays readable
    return TAG_OPEN.sub(r"\\<", ENTITY.sub(r"\\&", text.replace("\\", "\\\\").replace("|", "\\|")))


def render_markdown(health):
    host = health.get("host") or {}
    probe = health.get("probe") or {}
    lines = ["# GPU health of %s" % clean(host.get("hostname")), ""]
    lowest = health.get("lowest_broken")
    if lowest:
        c = next(c for c in health["contracts"] if c["name"] == lowest)
        lines += ["**Lowest broken contract: %s.** %s" % (clean(c["title"]), clean(c["message"])), ""]
        if c.get("fix"):
            lines += ["Fix: %s" % clean(c["fix"]), ""]
        lines += ["Everything above it is a consequence, not a clue.", ""]
    else:
        lines += ["**Verdict: %s.** %s" % (health.get("verdict"), clean(health.get("summary"))), ""]
    if not probe.get("complete", True):
        lines += ["**Incomplete:** %s" % clean(probe.get("incomplete_reason")), ""]
    lines += ["| # | contract | status | finding | fix |", "|---|---|---|---|---|"]
    for n, c in enumerate(health.get("contracts") or [], 1):
        status = MARK.get(c["status"], c["status"])
        if c.get("consequence_of"):
            status += " (consequence of %s)" % c["consequence_of"]
        lines.append("| %d | %s | %s | %s | %s |" % (n, clean(c["title"]), status, clean(c["message"]),
                                                    clean(c.get("fix") or "")))
    lines.append("")
    drv = health.get("driver") or {}
    lines += ["## Host", "",
              "- hostname %s, kernel %s, %s, %s CPUs" % (clean(host.get("hostname")), clean(host.get("kernel")),
                                                       clean(host.get("os")), host.get("cpus")),
              "- driver %s, NVML %s, CUDA driver API %s" % (clean(drv.get("version")), clean(drv.get("nvml_version")),
                                                          clean(drv.get("cuda_driver_version"))),
              "- probe %s (%s mode), %.3f s%s" % (probe.get("version"), probe.get("mode"), probe.get("duration_s") or 0,
                                                 ", replayed from %s" % clean(probe["replay"]) if probe.get("replay") else ""),
              ""]
    gpus = health.get("gpus") or []
    if gpus:
        lines += ["## GPUs", "", "| GPU | name | UUID | ECC | power W (enforced / default) | SM MHz (now / max) | "
                  "reasons | MIG |", "|---|---|---|---|---|---|---|---|"]
        for g in gpus:
            p, c = g.get("power") or {}, g.get("clocks") or {}
            lines.append("| %s | %s | %s | %s | %s / %s | %s / %s | %s | %s |" % (
                g.get("index"), clean(g.get("name")), clean(g.get("uuid")),
                {True: "on", False: "off"}.get((g.get("ecc") or {}).get("current"), "?"),
                p.get("enforced_limit_w"), p.get("default_limit_w"), c.get("sm_mhz"), c.get("sm_max_mhz"),
                clean(", ".join((g.get("clock_event_reasons") or {}).get("active") or []) or "-"),
                clean(g.get("mig_layout") or "off")))
        lines.append("")
    load = health.get("load")
    if load and load.get("summary"):
        lines += ["## Under load (%s s, %s engine)" % (load.get("seconds"), load.get("engine")), "",
                  "| GPU | samples | SM MHz min / median / max | power W max / limit | SW power cap | HW slowdown |",
                  "|---|---|---|---|---|---|"]
        for s in load["summary"]:
            lines.append("| %s | %s | %s / %s / %s | %s / %s | %.0f%% | %.0f%% |" % (
                s["gpu"], s["samples"], s["sm_mhz_min"], s["sm_mhz_median"], s["sm_mhz_max_allowed"],
                s["power_w_max"], s["enforced_limit_w"], 100 * s["sw_power_cap_fraction"],
                100 * s["hw_slowdown_fraction"]))
        lines.append("")
    return "\n".join(lines) + "\n"
