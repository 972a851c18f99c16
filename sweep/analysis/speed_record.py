"""The one reader of a health document's `speed` section (schema 1.4): every field validated as
hostile.

A host sends what it likes: NaN, negatives, strings, absurd sizes, a figure in the wrong unit, a
bandwidth no GPU can deliver. `read_speed(health)` keeps a figure only when it is a measurement
the method could have produced (a finite number above zero, in the figure's unit, at most the
method's ceiling: `speed_reference.CEILINGS`, or for PCIe the GPU's own link raw rate x 1.05),
with sane size, repetitions and spread; every other one is *rejected* with the field it came
in and why, and never shown as real. A `{"skipped": reason}` figure is skipped, said as such.

The fleet frames read their speed columns from here (`gpu_figure`, `host_figure`), the tier's
judgment (`sweep.analysis.speed`) reads the rejections and the envelope.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from sweep.analysis.speed_reference import CEILINGS, FIGURES, LINK_CEILING, UNITS, link_raw_bps
from sweep.text import visible

STATUSES = ("measured", "partial", "refused", "failed")
MAX_BYTES = 2**40  # no copy of the tier moves a terabyte in one go
MAX_REPETITIONS = 10_000
MAX_GPUS = 64
MAX_TEXT = 300
# the key under which the frames hand a GPU reader its validated figures (never a JSON key)
VALIDATED = object()


@dataclass
class SpeedRecord:
    """A validated `speed` section: what may be shown as real, and what was rejected (field,
    why)."""

    status: Optional[str] = None
    reason: Optional[str] = None
    forced: bool = False
    wall_s: Optional[float] = None
    gpus: dict = field(default_factory=dict)  # GPU index -> {figure: value}
    skipped: dict = field(default_factory=dict)  # (GPU index or None, figure) -> reason
    p2p: list = field(default_factory=list)  # (src, dst, value)
    allreduce: Optional[float] = None
    # GPU index -> the envelope's medians during the tier
    envelope: dict = field(default_factory=dict)
    # (GPU, pid, name) of each process that appeared during the tier
    contended: list = field(default_factory=list)
    rejected: list = field(default_factory=list)  # (field, why)


def _text(value, limit=MAX_TEXT) -> Optional[str]:
    return visible(value, keep="")[:limit] if isinstance(value, str) and value else None


def _shown(value) -> str:
    text = repr(value) if not isinstance(value, str) else repr(value[:40])
    return visible(text[:60], keep="")


def finite_number(value) -> Optional[float]:
    """A finite int or float (never a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _problem(name: str, fig: dict, ceiling: Optional[float]) -> Optional[tuple]:
    """(the sub-field, why) a measured figure is not a measurement, or None when it may be shown."""
    value = finite_number(fig.get("value"))
    if value is None:
        return "value", f"is {_shown(fig.get('value'))}, not a finite number: not a measurement"
    if value <= 0:
        return "value", f"is {value:g}: a measured rate is above zero"
    if fig.get("unit") != UNITS[name]:
        return (
            "unit",
            f"is {_shown(fig.get('unit'))}, not {UNITS[name]}: the unit of {name} is {UNITS[name]}",
        )
    if ceiling is not None and value > ceiling:
        return (
            "value",
            f"is {value:g} {UNITS[name]}, above what the method can measure ({ceiling:g} "
            f"{UNITS[name]})",
        )
    size, reps, spread = fig.get("bytes"), fig.get("repetitions"), fig.get("spread")
    if size is not None and (finite_number(size) is None or not 0 < size <= MAX_BYTES or size % 1):
        return "bytes", f"is {_shown(size)}: not a size the tier copies (1 B to 1 TiB)"
    if reps is not None and (
        isinstance(reps, bool) or not isinstance(reps, int) or not 0 < reps <= MAX_REPETITIONS
    ):
        return "repetitions", f"is {_shown(reps)}: not a count of repetitions"
    if spread is not None and (finite_number(spread) is None or not 0 <= spread <= 1):
        return "spread", f"is {_shown(spread)}: (max - min) / best lies between 0 and 1"
    flops = fig.get("flops")  # compute figures: the operations of one repetition
    if flops is not None and (finite_number(flops) is None or not 0 < flops <= 1e20):
        return "flops", f"is {_shown(flops)}: not a count of operations"
    return None


def _figure(out: SpeedRecord, where: str, name: str, fig, ceiling, gpu=None) -> Optional[float]:
    """The value of one figure, or None (skipped, or rejected into `out.rejected`)."""
    if isinstance(fig, dict) and "skipped" in fig and "value" not in fig and _text(fig["skipped"]):
        out.skipped[(gpu, name)] = _text(fig["skipped"])
        return None
    if not isinstance(fig, dict):
        out.rejected.append(
            (where, f'is {_shown(fig)}: neither a measured figure nor {{"skipped": reason}}')
        )
        return None
    problem = _problem(name, fig, ceiling)
    if problem:
        out.rejected.append((f"{where}.{problem[0]}", problem[1]))
        return None
    return float(fig["value"])


def _gpu_ceiling(name: str, link: tuple) -> Optional[float]:
    if name.startswith("pcie_"):
        raw = link_raw_bps(*link)
        return (raw if raw is not None else link_raw_bps(6, 16)) * LINK_CEILING
    return CEILINGS[name]


def _links(health: dict) -> dict:
    """GPU index -> (max gen, width) of its PCIe link, as the probe read it (for the PCIe
    ceilings)."""
    out = {}
    for g in health.get("gpus") or ():
        pcie = g.get("pcie") if isinstance(g, dict) else None
        if isinstance(pcie, dict) and isinstance(g.get("index"), int):
            out[g["index"]] = (pcie.get("max_gen"), pcie.get("width"))
    return out


def _read_gpus(out: SpeedRecord, gpus, links: dict) -> None:
    if not isinstance(gpus, list):
        if gpus is not None:
            out.rejected.append(("speed.gpus", f"is {_shown(gpus)}, not a list"))
        return
    for n, entry in enumerate(gpus[:MAX_GPUS]):
        where = f"speed.gpus[{n}]"
        index = entry.get("index") if isinstance(entry, dict) else None
        if (
            isinstance(index, bool)
            or not isinstance(index, int)
            or not 0 <= index < 1024
            or index in out.gpus
        ):
            out.rejected.append(
                (where + ".index", f"is {_shown(index)}: not the index of one GPU of this host")
            )
            continue
        figures = entry.get("figures")
        if not isinstance(figures, dict):
            out.rejected.append(
                (where + ".figures", f"is {_shown(figures)}, not an object of figures")
            )
            continue
        out.gpus[index] = {}
        for name in FIGURES:
            if name in figures:
                value = _figure(
                    out,
                    f"{where}.figures.{name}",
                    name,
                    figures[name],
                    _gpu_ceiling(name, links.get(index, (None, None))),
                    index,
                )
                if value is not None:
                    out.gpus[index][name] = value
    if len(gpus) > MAX_GPUS:
        out.rejected.append(
            ("speed.gpus", f"lists {len(gpus)} GPUs; no host has more than {MAX_GPUS}")
        )


def _read_host(out: SpeedRecord, speed: dict) -> None:
    pairs = speed.get("p2p")
    if isinstance(pairs, list):
        for n, pair in enumerate(pairs[: MAX_GPUS * MAX_GPUS]):
            ends = (pair.get("src"), pair.get("dst")) if isinstance(pair, dict) else (None, None)
            if (
                not all(
                    isinstance(e, int) and not isinstance(e, bool) and e in out.gpus for e in ends
                )
                or ends[0] == ends[1]
            ):
                out.rejected.append(
                    (f"speed.p2p[{n}]", f"joins {_shown(ends)}: not two measured GPUs of this host")
                )
                continue
            value = _figure(
                out, f"speed.p2p[{n}]", "p2p", pair, CEILINGS["p2p"], f"{ends[0]}-{ends[1]}"
            )
            if value is not None:
                out.p2p.append((ends[0], ends[1], value))
    elif pairs is not None:
        out.rejected.append(("speed.p2p", f"is {_shown(pairs)}, not a list"))
    if "allreduce" in speed and speed["allreduce"] is not None:
        out.allreduce = _figure(
            out, "speed.allreduce", "allreduce", speed["allreduce"], CEILINGS["allreduce"]
        )


def _read_envelope(out: SpeedRecord, samples) -> None:
    """The medians of the envelope sampled during the tier (load.summary's shape), per GPU."""
    summary = samples.get("summary") if isinstance(samples, dict) else None
    for row in summary if isinstance(summary, list) else ():
        if (
            not isinstance(row, dict)
            or not isinstance(row.get("gpu"), int)
            or isinstance(row.get("gpu"), bool)
        ):
            continue
        env = {
            k: finite_number(row.get(k))
            for k in (
                "sm_mhz_median",
                "power_w_median",
                "enforced_limit_w",
                "sw_power_cap_fraction",
                "hw_slowdown_fraction",
            )
        }
        for k in ("sw_power_cap_fraction", "hw_slowdown_fraction"):
            if env[k] is not None and not 0 <= env[k] <= 1:
                env[k] = None
        for k in ("sm_mhz_median", "power_w_median", "enforced_limit_w"):
            if env[k] is not None and not 0 <= env[k] <= 1e5:
                env[k] = None
        out.envelope[row["gpu"]] = env


def read_speed(health) -> Optional[SpeedRecord]:
    """The validated `speed` section of a health document; None when the tier was not asked for."""
    speed = health.get("speed") if isinstance(health, dict) else None
    if speed is None:
        return None
    out = SpeedRecord()
    if not isinstance(speed, dict):
        out.rejected.append(("speed", f"is {_shown(speed)}, not an object"))
        return out
    status = speed.get("status")
    out.status = status if status in STATUSES else None
    if out.status is None:
        out.rejected.append(
            ("speed.status", f"is {_shown(status)}, not one of {', '.join(STATUSES)}")
        )
    out.reason = _text(speed.get("reason"))
    out.forced = speed.get("forced") is True
    wall = finite_number(speed.get("wall_s"))
    out.wall_s = wall if wall is not None and 0 <= wall <= 3600 else None
    _read_gpus(out, speed.get("gpus"), _links(health))
    _read_host(out, speed)
    _read_envelope(out, speed.get("samples"))
    _read_contention(out, speed.get("contention"))
    return out


def _read_contention(out: SpeedRecord, contention) -> None:
    """The processes the host says appeared during the tier; a section it cannot be is rejected
    (and, not knowing, the figures are taken as contended: never judged on a word that does not
    parse)."""
    if contention is None:
        return
    procs = contention.get("processes") if isinstance(contention, dict) else None
    if not isinstance(procs, list) or not isinstance(contention.get("contended"), bool):
        out.rejected.append(
            ("speed.contention", f"is {_shown(contention)}, not {{contended, processes}}")
        )
        out.contended.append((None, None, "unreadable contention section"))
        return
    for p in procs[:MAX_GPUS]:
        if isinstance(p, dict):
            gpu, pid = p.get("gpu"), p.get("pid")
            out.contended.append(
                (
                    gpu if isinstance(gpu, int) else None,
                    pid if isinstance(pid, int) else None,
                    _text(p.get("name"), 60),
                )
            )
    if contention["contended"] and not out.contended:
        out.contended.append((None, None, None))


def read_contended(health) -> Optional[str]:
    """'GPU 0: pid 4242 (python3)' a process that appeared during the tier, '; ' between; None: not
    contended."""
    record = read_speed(health)
    if record is None or not record.contended:
        return None
    return "; ".join(
        f"GPU {'?' if gpu is None else gpu}: pid {'?' if pid is None else pid} ({name or '?'})"
        for gpu, pid, name in record.contended
    )


# --- the frames' readers (the fact table's `reads`) ----------------------------------------------


def gpu_figure(name: str):
    """A reader of one GPU's validated figure `name` (the frames hand it under VALIDATED)."""

    def read(g):
        return (g.get(VALIDATED) or {}).get(name)

    read.__name__ = f"read_speed_{name}"
    return read


def gpu_view(g: dict, record: Optional[SpeedRecord]) -> dict:
    """The GPU dict a reader sees: with its validated figures (and envelope) where the host ran the
    tier."""
    if record is None or not isinstance(g.get("index"), int):
        return g
    figures = dict(record.gpus.get(g["index"]) or {})
    figures["_envelope"] = record.envelope.get(g["index"])
    return {**g, VALIDATED: figures}


def host_figure(name: str):
    """A reader of a host figure: the slowest validated GPU pair (p2p) or the all-reduce bus
    bandwidth."""

    def read(health):
        record = read_speed(health)
        if record is None:
            return None
        if name == "p2p":
            return min((v for _, _, v in record.p2p), default=None)
        return record.allreduce

    read.__name__ = f"read_speed_{name}"
    return read


def read_rejected(health) -> Optional[str]:
    """The rejected fields of a host's speed section, one 'field: why' a line (None when none)."""
    record = read_speed(health)
    return "\n".join(f"{f}: {why}" for f, why in record.rejected) or None if record else None


def read_status(health) -> Optional[str]:
    record = read_speed(health)
    return None if record is None else (record.status or "invalid")


def read_skipped(health) -> Optional[str]:
    """The figures the tier skipped, one 'GPU figure: reason' a line ('- allreduce: ...' for a host
    figure)."""
    record = read_speed(health)
    if record is None:
        return None
    return (
        "\n".join(
            f"{'-' if gpu is None else gpu} {name}: {why}"
            for (gpu, name), why in record.skipped.items()
        )
        or None
    )


def read_forced(health) -> Optional[bool]:
    record = read_speed(health)
    return None if record is None else record.forced


def read_reason(health) -> Optional[str]:
    record = read_speed(health)
    return None if record is None else record.reason
