"""The speed tier's arithmetic: the children's raw timings (JSON lines) into the record's figures.

A child's line is hostile until checked here: times that are not positive finite numbers are
dropped, a figure without one valid repetition is skipped with the reason, never a number. A rate
is `work / seconds` per repetition (work: bytes counted, or FLOPs); the figure is the best
repetition, `spread` = (best - worst) / best.
"""

import math

FIGURE_KEYS = ("hbm", "pcie_h2d", "pcie_d2h", "fp32", "bf16_gemm")
DRIVER_KEYS = ("hbm", "pcie_h2d", "pcie_d2h", "fp32")
METHODS = {  # key -> (unit, method)
    "hbm": ("B/s", "cuMemcpyDtoD"),
    "pcie_h2d": ("B/s", "cuMemcpyHtoD pinned"),
    "pcie_d2h": ("B/s", "cuMemcpyDtoH pinned"),
    "fp32": ("FLOP/s", "ptx fma.rn.f32"),
    "bf16_gemm": ("FLOP/s", "torch.mm bf16 8192x8192x8192"),
    "p2p": ("B/s", "cuMemcpyPeer"),
    "allreduce": ("B/s", "torch.cuda.nccl all_reduce busbw"),
}
NOT_REACHED = "not measured within the tier's bound"


def number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def figure(kind, work, times, nbytes, flops=None):
    """A measured figure from per-repetition GPU seconds (`work` bytes or FLOPs
    each), or skipped."""
    unit, method = METHODS[kind]
    if not (number(work) and work > 0) or not isinstance(times, list):
        return {"skipped": "no valid repetition"}
    rates = [work / t for t in times if number(t) and t > 0]
    rates = [r for r in rates if math.isfinite(r) and r > 0]
    if not rates:
        return {"skipped": "no valid repetition"}
    best = max(rates)
    out = {
        "value": float("%.6g" % best),
        "unit": unit,
        "method": method,
        "bytes": int(nbytes) if number(nbytes) and nbytes >= 0 else 0,
        "repetitions": len(rates),
        "spread": round((best - min(rates)) / best, 5),
        "samples": [float("%.6g" % r) for r in rates],
    }
    if flops is not None and number(flops):
        out["flops"] = float(flops)
    return out


def from_event(kind, ev):
    return figure(kind, ev.get("work"), ev.get("times"), ev.get("bytes"), ev.get("flops"))


def per_gpu(events, uuids):
    """{NVML index: {key: figure}} from figure, error and skipped events (unknown UUIDs ignored)."""
    found = {}
    for ev in events:
        index = uuids.get(ev.get("uuid"))
        if index is None:
            continue
        figs = found.setdefault(index, {})
        kind = ev.get("event")
        if kind == "figure" and ev.get("key") in FIGURE_KEYS:
            figs[ev["key"]] = from_event(ev["key"], ev)
        elif kind == "error":
            keys = ("pcie_h2d", "pcie_d2h") if ev.get("key") == "pcie" else (ev.get("key"),)
            for key in keys:
                if key in FIGURE_KEYS:
                    figs.setdefault(key, {"skipped": "failed: %s" % str(ev.get("error"))[:200]})
        elif kind == "skipped" and "why" in ev:
            for key in DRIVER_KEYS:
                figs.setdefault(key, {"skipped": str(ev["why"])[:200]})
    return found


def pairs(events, uuids):
    """The p2p entries, one per ordered pair measured (or skipped / failed), in (src, dst) order."""
    out = []
    for ev in events:
        if ev.get("event") != "pair":
            continue
        src, dst = uuids.get(ev.get("src")), uuids.get(ev.get("dst"))
        if src is None or dst is None:
            continue
        if "skipped" in ev or "error" in ev:
            entry = {"skipped": str(ev.get("skipped") or "failed: %s" % ev.get("error"))[:200]}
        else:
            entry = from_event("p2p", ev)
        out.append(dict(entry, src=src, dst=dst))
    return sorted(out, key=lambda e: (e["src"], e["dst"]))


def allreduce(events, uuids, selected, torch_note):
    """The all-reduce figure with its ranks, or why it was skipped."""
    for ev in events:
        if ev.get("event") == "allreduce":
            ranks = [uuids.get(u) for u in ev.get("uuids") or []]
            return dict(from_event("allreduce", ev), gpus=sorted(r for r in ranks if r is not None))
        if ev.get("event") == "skipped" and ev.get("key") == "allreduce":
            return {"skipped": str(ev.get("why"))[:200]}
    if len(selected) < 2:
        return {"skipped": "one GPU selected"}
    return {"skipped": torch_note or NOT_REACHED}


def torch_skip(events, torch_note):
    """Why bf16_gemm is missing on a GPU: the torch child's own word, else the parent's note."""
    for ev in events:
        if ev.get("event") == "skipped" and ev.get("key") == "bf16_gemm":
            return str(ev.get("why"))[:200]
    return torch_note or NOT_REACHED


def assemble(events, uuids, selected, torch_note, driver_problem):
    """status, reason, gpus, p2p, allreduce of the section from every child event."""
    events = [ev for ev in events if isinstance(ev, dict)]
    found = per_gpu(events, uuids)
    gemm_why = torch_skip(events, torch_note)
    gpus = []
    for index in selected:
        figs = found.get(index, {})
        for key in FIGURE_KEYS:
            figs.setdefault(
                key,
                {"skipped": gemm_why if key == "bf16_gemm" else (driver_problem or NOT_REACHED)},
            )
        uuid = next((u for u, i in uuids.items() if i == index), None)
        gpus.append({"index": index, "uuid": uuid, "figures": {k: figs[k] for k in FIGURE_KEYS}})
    p2p = pairs(events, uuids)
    measured = [
        f for g in gpus for k, f in g["figures"].items() if k in DRIVER_KEYS and "value" in f
    ]
    wanted = len(gpus) * len(DRIVER_KEYS)
    missing = [
        ("GPU %s %s: %s" % (g["index"], k, f["skipped"]))
        for g in gpus
        for k, f in g["figures"].items()
        if k in DRIVER_KEYS and "skipped" in f
    ]
    status = (
        "measured"
        if measured and len(measured) == wanted
        else ("partial" if measured else "failed")
    )
    reason = None if status == "measured" else (missing[0] if missing else driver_problem)
    return {
        "status": status,
        "reason": reason,
        "gpus": gpus,
        "p2p": p2p,
        "allreduce": allreduce(events, uuids, selected, torch_note),
    }
