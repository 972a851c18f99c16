"""`--wrap`'s verdict: whether the run's machine was the machine the number claims (throttling,
SM clock against its max, other processes, what changed between the two probes), and
`--refuse`'s reasons.
"""

from probe_agent.contracts import plural

# Fields compared between the probe before and the probe after the command, per GPU.
WATCHED_GPU_FIELDS = (
    ("uuid",),
    ("lost",),
    ("ecc", "current"),
    ("ecc", "pending"),
    ("ecc", "volatile_uncorrected"),
    ("remapped_rows", "pending"),
    ("retired_pages_pending",),
    ("power", "enforced_limit_w"),
    ("power", "management_limit_w"),
    ("mig", "current"),
    ("mig_layout",),
    ("persistence_mode",),
    ("compute_mode",),
    ("clocks", "app_sm_mhz"),
    ("pcie", "width"),
    ("nvlink", "active"),
    ("nvlink", "errors", "replay_errors"),
    ("nvlink", "errors", "recovery_errors"),
    ("nvlink", "errors", "crc_errors"),
)

WATCHED_DRIVER_FIELDS = ("version", "cuda_driver_version", "kernel_module", "gpu_count")


def refusal(before, replay_own):
    """Why the command must not start on this host (`--refuse`): a broken
    contract, another process."""
    reasons = []
    if before.get("lowest_broken"):
        low = next(
            (c for c in before.get("contracts") or [] if c.get("name") == before["lowest_broken"]),
            {},
        )
        reasons.append(
            "broken contract %s: %s" % (before["lowest_broken"], low.get("message") or "?")
        )
    if not before["probe"]["complete"]:
        reasons.append(
            "the probe before did not finish: %s" % before["probe"].get("incomplete_reason")
        )
    others = [
        (g.get("index"), p)
        for g in before.get("gpus") or []
        for p in g.get("processes") or []
        if replay_own is None or p.get("pid") not in replay_own
    ]
    if others:
        reasons.append(
            "%d other process(es) on the GPUs: %s"
            % (
                len(others),
                ", ".join(
                    "%s (pid %s, GPU %s)" % (p.get("name"), p.get("pid"), i) for i, p in others[:3]
                ),
            )
        )
    return reasons


def field_at(d, path):
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
            out.append(
                {
                    "field": "gpus[%s]" % i,
                    "before": "present" if i in ga else None,
                    "after": "present" if i in gb else None,
                }
            )
            continue
        for path in WATCHED_GPU_FIELDS:
            add("gpus[%s].%s" % (i, ".".join(path)), field_at(ga[i], path), field_at(gb[i], path))
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
        p = found.setdefault(
            pid,
            {
                "pid": pid,
                "name": name,
                "gpus": [],
                "first_seen_s": None,
                "samples_seen": 0,
                "present_before": False,
                "present_after": False,
                "max_used_memory_bytes": None,
            },
        )
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
                    note(
                        proc.get("pid"),
                        proc.get("name"),
                        g.get("index"),
                        where,
                        used=proc.get("used_memory_bytes"),
                    )
    for pid, seen in stream.processes(owner).items():
        p = None
        for gpu in seen["gpus"]:
            p = note(pid, seen["name"], gpu, None, seen["max_used_memory_bytes"])
        if p is not None:
            p["first_seen_s"], p["samples_seen"] = seen["first_seen_s"], seen["samples_seen"]
    for p in found.values():
        p["gpus"].sort()
    return sorted(found.values(), key=lambda p: str(p["pid"]))


def verdict(before, stream, after, attribution):
    """The short answer: was this run's machine the machine the number claims?
    (`stream`: every sample)"""
    max_sm = {
        g.get("index"): (g.get("clocks") or {}).get("sm_max_mhz") for g in before.get("gpus") or []
    }
    gpus = stream.summaries(max_sm)
    deltas = counter_deltas(before, after)
    for g in gpus:
        g["reason_counters_delta_us"] = deltas.get(g["gpu"])
    pick = lambda key, fn: (
        fn([g[key] for g in gpus if g.get(key) is not None])
        if any(g.get(key) is not None for g in gpus)
        else None
    )
    counted_hw = any(
        (d or {}).get(k, 0) > 0
        for d in deltas.values()
        for k in ("hw_thermal_slowdown", "hw_power_braking", "hw_slowdown")
    )
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
        parts.append(
            "SW power cap active in %d%% of samples"
            % round(100 * (v["sw_power_cap_fraction"] or 0))
        )
        if v["sm_mhz_median"] is not None:
            parts.append(
                "SM clock median %s MHz (min %s) of %s MHz max"
                % (fmt(v["sm_mhz_median"]), fmt(v["sm_mhz_min"]), fmt(v["sm_mhz_max_allowed"]))
            )
    others = v["other_processes"]
    parts.append(
        "%s on the GPUs: %s"
        % (
            plural(len(others), "other process", "other processes"),
            ", ".join("%s (pid %s)" % (p["name"], p["pid"]) for p in others[:3]),
        )
        if others
        else "no other process on the GPUs"
    )
    if v["unattributed_processes"]:
        parts.append(
            "%s not visible from here"
            % plural(len(v["unattributed_processes"]), "process", "processes")
        )
    if v["unreadable_process_entries"]:
        parts.append(
            "up to %s per GPU unreadable: other processes may be missed"
            % plural(v["unreadable_process_entries"], "process entry", "process entries")
        )
    ch = v["changes"]
    parts.append(
        "changed between the probes: "
        + ", ".join("%s %s -> %s" % (c["field"], c["before"], c["after"]) for c in ch[:3])
        if ch
        else "nothing changed between the probes"
    )
    for name, h in (("before", before), ("after", after)):
        if h.get("lowest_broken"):
            parts.append("probe %s: lowest broken contract %s" % (name, h["lowest_broken"]))
        if not h["probe"]["complete"]:
            parts.append("probe %s incomplete" % name)
    return "; ".join(parts)


def fmt(x):
    return "?" if x is None else ("%d" % x if float(x).is_integer() else "%.1f" % x)
