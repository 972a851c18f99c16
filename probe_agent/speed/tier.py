"""The speed-of-light tier (`--speed`): what each selected GPU delivers, measured, within a bound.

Two children do the work: the driver-API child (probe_agent.speed.driver_child: HBM, PCIe, peer
copies, FP32, through ctypes alone) and, where the host's training python has a CUDA torch, the
torch child (probe_agent.speed.torch_child: bf16 GEMM, NCCL all-reduce). The torch child imports
torch while the driver-API figures are taken (import is CPU work only) and touches the GPUs after
them, so the two never share a GPU. Clocks, power and clock-event reasons are sampled throughout, as
`--load` samples them. Refused when another process uses a selected GPU (unless --force, recorded);
every allocation is the children's and ends with them; the whole tier ends within `bound_s`.

Replay: a capture recorded with --speed carries the section (`speed`); a replay with --speed
emits its figures, after the same refusal check against the capture's processes.
"""

import copy
import json
import os
import time

from probe_agent import children
from probe_agent.load import mark_phases, summarize
from probe_agent.speed.figures import assemble
from probe_agent.speed.process import Child, Sampler, contention

# each GPU's own memory and SMs; PCIe and peer copies share the host
PARALLEL = ["hbm", "fp32", "bf16_gemm"]
BUDGETS = {
    "hbm": 0.8,
    "fp32": 0.8,
    "pcie_total": 2.0,
    "p2p_total": 2.0,
    "gemm": 1.2,
    "allreduce": 1.0,
}
# bf16 products before the timed ones: the clocks rise from idle (0.3 s reached the 700 W cap)
GEMM_WARM_S = 0.05
TORCH_PHASE_S = 4.5  # after the driver-API child: CUDA start, GEMM, all-reduce (with room)
# the children stop this long before the bound (their exit, the record's assembly)
END_MARGIN_S = 0.7


def bound_for(gpus):
    """The tier's bound: 15 s on one GPU, 20 s on eight (and more), linear between."""
    return round(15.0 + 5.0 * min(max(gpus, 1) - 1, 7) / 7.0, 2)


def plan_budgets(gpus):
    """Seconds of repetitions per figure (per device, direction or pair), spread
    to fit the bound."""
    pairs = gpus * (gpus - 1)
    return {
        "hbm": BUDGETS["hbm"],
        "fp32": BUDGETS["fp32"],
        "pcie": max(0.1, BUDGETS["pcie_total"] / (2.0 * gpus)),
        "p2p": max(0.02, BUDGETS["p2p_total"] / pairs) if pairs else 0.0,
        "gemm": BUDGETS["gemm"],
        "allreduce": BUDGETS["allreduce"],
    }


def selected_gpus(facts):
    """The NVML indices the device mask selects (every GPU when the mask reads as unset)."""
    gpus = [g.get("index") for g in facts.get("gpus") or []]
    mask = facts.get("mask") or {}
    if mask.get("state") in (None, "unset"):
        return gpus
    return [
        s.get("physical_index")
        for s in mask.get("selected") or []
        if s.get("physical_index") in gpus
    ]


def foreign_use(facts, selected, own_pids=()):
    """One line naming every other process on a selected GPU, or None."""
    found = []
    for g in facts.get("gpus") or []:
        if g.get("index") not in selected:
            continue
        for p in g.get("processes") or []:
            if p.get("pid") in own_pids:
                continue
            used = p.get("used_memory_bytes")
            size = ", %.1f GiB" % (used / 2.0**30) if isinstance(used, (int, float)) else ""
            found.append(
                "GPU %s is used by pid %s (%s%s)"
                % (g.get("index"), p.get("pid"), p.get("name") or "?", size)
            )
    return "; ".join(found) + "; --force to measure anyway" if found else None


def empty_section(opts, bound):
    return {
        "status": "failed",
        "reason": None,
        "forced": bool(getattr(opts, "force", False)),
        "wall_s": 0.0,
        "bound_s": bound,
        "parallel": list(PARALLEL),
        "gpus": [],
        "p2p": [],
        "allreduce": None,
        "samples": None,
        "contention": None,
    }


def run_speed(src, opts, facts, count, torch_python):
    """The speed section: refused, replayed, or measured by the children within its bound."""
    t0 = time.monotonic()
    selected = selected_gpus(facts)
    section = empty_section(opts, bound_for(len(selected)))
    if not selected:
        section["reason"] = "no GPU is selected (the device mask hides every GPU)"
        return section
    refusal = foreign_use(facts, selected, facts.get("own_pids") or ())
    if refusal and not opts.force:
        section.update(status="refused", reason=refusal)
    elif src.replaying and not measures(src):
        section = replay_section(src, section)
    else:
        section = measure(src, opts, facts, count, torch_python, section, t0)
    section["wall_s"] = round(time.monotonic() - t0, 3) if measures(src) else section["wall_s"]
    if hasattr(src, "speed_meta"):
        src.speed_meta = copy.deepcopy(section)
    return section


def measures(src):
    """True when the tier's children run: a live source, or a replay told to measure
    (SWEEP_REPLAY_MEASURE)."""
    return not src.replaying or getattr(src, "measures", False)


def replay_section(src, section):
    """The recorded section of the capture, marked forced as asked now; failed
    when it holds none."""
    recorded = src.data.get("speed")
    if not isinstance(recorded, dict):
        section["reason"] = (
            "the capture %s holds no speed figures (recorded without --speed); record one with "
            "--speed --record" % os.path.basename(src.path)
        )
        return section
    out = dict(
        section,
        **{k: copy.deepcopy(v) for k, v in recorded.items() if k in section and k != "forced"},
    )
    out["forced"] = section["forced"]
    return out


def driver_command(plan):
    """(argv, stdin preamble) of the driver-API child: works however the agent was loaded
    (probe_agent.children)."""
    return children.command("speed-driver", [json.dumps(plan)])


def measure(src, opts, facts, count, torch_python, section, t0):
    """Run both children under the bound, sampling throughout; the assembled section."""
    budgets = plan_budgets(len(selected_gpus(facts)))
    end = time.time() + section["bound_s"] - (time.monotonic() - t0) - END_MARGIN_S
    sampler = Sampler(src, count, opts.interval)
    sampler.start()
    torch_child = (
        Child(*children.command("speed-torch", python=torch_python), stdin=True)
        if torch_python
        else None
    )
    driver_end = end - (TORCH_PHASE_S if torch_child else 0.0)
    driver = Child(*driver_command({"stop_at": driver_end, "budgets": budgets}))
    driver.wait_until(driver_end + 1.0)
    checked = ", ".join(f.get("interpreter") or "?" for f in facts.get("frameworks") or [])
    torch_lines = []
    torch_note = (
        None
        if torch_child
        else "no CUDA torch in this host's python" + (" (%s)" % checked if checked else "")
    )
    if torch_child:
        torch_lines, torch_note = run_torch(torch_child, budgets, end)
    samples = sampler.stop()
    own = set(facts.get("own_pids") or ()) | {
        c.proc.pid for c in (driver, torch_child) if c and c.proc
    }
    section["contention"] = contention(samples, facts, own)
    mark_phases(samples, 0.0, None)
    max_sm = {
        g["index"]: (g.get("clocks") or {}).get("sm_max_mhz") for g in facts.get("gpus") or []
    }
    section["samples"] = {
        "interval_s": opts.interval,
        "samples": samples,
        "summary": summarize(samples, max_sm),
    }
    uuids = {g.get("uuid"): g.get("index") for g in facts.get("gpus") or [] if g.get("uuid")}
    section.update(
        assemble(
            driver.events + torch_lines, uuids, selected_gpus(facts), torch_note, driver.problem()
        )
    )
    return section


def run_torch(child, budgets, end):
    """Start the torch child's GPU work once it is ready (or stop it); (its events, why a
    figure is missing)."""
    if not child.wait_ready(end - TORCH_PHASE_S + 1.0):
        child.stop()
        return [], "torch did not import within the tier's bound (%s)" % (
            child.problem() or "still importing"
        )
    child.send(
        json.dumps(
            {
                "stop_at": end,
                "gemm": budgets["gemm"],
                "allreduce": budgets["allreduce"],
                "warm": GEMM_WARM_S,
            }
        )
    )
    child.wait_until(end + 0.5)
    return child.events, child.problem()
