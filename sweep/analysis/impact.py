"""What a differing comparability key does to a benchmark: the knowledge table behind every class's
"why".

`RULES[key]` is a list of (when, text) rules; the first whose `when` holds for the case gives the
text, with ``{value}`` and ``{reference}`` (and, for links, ``{mine}``, ``{ref}``, ``{more}``,
``{speed}``) filled in. `when` None always holds.
"""

from __future__ import annotations

from typing import Callable, Optional

from probe_agent.contracts import link_rank

# value, reference (texts), rows, ref_rows (typed: the distinct raw rows of each side), mixed, link
# fields
Case = dict
Rule = tuple[Optional[Callable[[Case], bool]], str]

UNKNOWN = (
    "not read on {where}: the probe could not tell, so the hosts cannot be shown alike on "
    "this key; "
    "read the host's health.json and probe it again"
)


def _any(c: Case, column: str, value, side: str = "rows") -> bool:
    """Whether any typed reading of `side` has `column` equal to `value` (a bool: never a missing
    reading)."""
    return any(r.get(column) is not None and bool(r[column]) is value for r in c[side])


def _pending_change(c: Case, now: str, pending: str) -> bool:
    """A mode change waits for the next reset on this host: the pending mode differs from the
    current."""
    return any(
        r.get(now) is not None and r.get(pending) is not None and r[now] != r[pending]
        for r in c["rows"]
    )


def _ecc_pending(c: Case) -> bool:
    return _pending_change(c, "ecc_current", "ecc_pending")


def _mig_pending(c: Case) -> bool:
    return _pending_change(c, "mig_current", "mig_pending")


def _mig_on(c: Case, side: str = "rows") -> bool:
    """MIG on for the host's text: no GPU off and some GPU on."""
    return not _any(c, "mig_current", False, side) and _any(c, "mig_current", True, side)


def clock_baseline(r: dict):
    """The application clock a GPU runs by default (NVML often has no default application clock on
    H100/H200: the max SM clock is the default then); None where neither was read."""
    return r["default_app_sm_mhz"] if r["default_app_sm_mhz"] is not None else r["sm_max_mhz"]


def clocks_unread(r: dict) -> bool:
    """Whether a GPU's clock policy was not read: its application clock (NVML answers one on every
    GPU that has them), or anything to tell it from the default, is missing."""
    return r["app_sm_mhz"] is None or clock_baseline(r) is None


def default_clocks(r: dict) -> bool:
    """Whether a GPU runs its default clocks: its application clock read and the default one."""
    return not clocks_unread(r) and r["app_sm_mhz"] == clock_baseline(r)


def _off_bus(c: Case) -> bool:
    return any(
        r.get("gpus_on_bus") is not None
        and r.get("gpu_count") is not None
        and r["gpus_on_bus"] != r["gpu_count"]
        for r in c["rows"]
    )


def _typed(c: Case, column: str, side: str = "rows") -> list:
    return [r[column] for r in c[side] if r.get(column) is not None]


def _lower_cap(c: Case) -> bool:
    mine, ref = _typed(c, "power_enforced_w"), _typed(c, "power_enforced_w", "ref_rows")
    return bool(mine and ref and min(mine) < min(ref))


def _nvlinks(link) -> int | None:
    """The NVLink count of a topology code ('NV18' -> 18); None for any other link."""
    return (
        int(link[2:])
        if isinstance(link, str) and link.startswith("NV") and link[2:].isdigit()
        else None
    )


def _nvlink_counts(c: Case) -> bool:
    return _nvlinks(c["mine"]) is not None and _nvlinks(c["ref"]) is not None


def _single_gpu(c: Case, side: str = "rows") -> bool:
    return any(r.get("gpus_selected") is not None and r["gpus_selected"] < 2 for r in c[side])


def _fewer_than_two(c: Case) -> str:
    """The text of a side with no GPU or a single GPU selected (the mask selects none: not
    "single")."""
    none = any(r.get("gpus_selected") == 0 for side in ("rows", "ref_rows") for r in c[side])
    return (
        f"one side has {'no GPU' if none else 'a single GPU'} selected: no GPU-to-GPU "
        "traffic at all, so "
        "multi-GPU results cannot be compared (see GPUs selected)"
    )


def _better_link(c: Case) -> bool:
    mine, ref = link_rank(c["mine"]), link_rank(c["ref"])
    return mine is not None and ref is not None and mine < ref


RULES: dict[str, list[Rule]] = {
    "gpu_model": [
        (
            None,
            "another GPU model: SM count, clocks, memory size and bandwidth all differ; the "
            "results "
            "measure a different product and cannot be pooled with the reference",
        )
    ],
    "memory": [
        (
            None,
            "{value} instead of {reference} per GPU (another SKU, or a different ECC or MIG "
            "setting): "
            "the largest batch or model that fits changes, and usually the memory bandwidth "
            "behind it",
        )
    ],
    "gpu_count": [
        (
            None,
            "{value} instead of {reference} visible to CUDA: a different degree of parallelism; "
            "data-parallel throughput, per-GPU batch and collective sizes change, and a job "
            "sized for "
            "{reference} will not launch the same way",
        )
    ],
    "driver": [
        (
            None,
            "a different driver ({value} vs {reference}): another kernel module, PTX JIT "
            "compiler and "
            "CUDA user-mode libraries; cuBLAS and NCCL heuristics can pick other kernels and "
            "transports, "
            "so timings are not comparable",
        )
    ],
    "cuda_driver": [
        (
            None,
            "the driver speaks {value} instead of {reference}: a framework built for the "
            "newer CUDA "
            "runs through minor-version compatibility or PTX JIT here, with other kernels and a "
            "slower first start",
        )
    ],
    "framework": [
        (
            None,
            "a different framework build ({value} vs {reference}): other cuBLAS, cuDNN and NCCL "
            "versions and other compiled kernels; a speed difference may come from the "
            "software, not "
            "the hardware",
        )
    ],
    "ecc": [
        (
            _ecc_pending,
            "an ECC mode change is pending: it takes effect at the next GPU reset or reboot, "
            "so the "
            "host will not stay as it was benchmarked",
        ),
        (
            lambda c: c["mixed"],
            "ECC differs between this host's GPUs: the cards run at different memory speeds "
            "and capacities, and synchronous multi-GPU work waits for the slowest",
        ),
        (
            lambda c: _any(c, "ecc_current", False),
            "ECC off: about 6% more usable memory where the check bits live in the memory "
            "itself (GDDR cards), and "
            "no ECC work on memory accesses, so memory-bound work runs faster; the host "
            "flatters itself against "
            "ECC-on hosts, and memory errors go undetected",
        ),
        (
            None,
            "ECC on while the reference runs without it: this host pays the ECC overhead "
            "(lower effective "
            "memory bandwidth; about 6% less memory on GDDR cards) and looks slower than it is",
        ),
    ],
    "power_limit": [
        (
            lambda c: c["mixed"],
            "one or more GPUs capped lower than the others: in data- or tensor-parallel work "
            "every step waits for the slowest GPU, so the whole host runs at the capped "
            "card's pace",
        ),
        (
            _lower_cap,
            "a lower power cap ({value} vs {reference}): under sustained load the GPU lowers "
            "its SM "
            "clock to stay under the cap; compute-bound work slows by about the SM clock it loses "
            "(tens of percent at a deep cap), memory-bound work less",
        ),
        (
            None,
            "a higher power cap ({value} vs {reference}): the GPU holds higher clocks under "
            "load than the "
            "reference; its results overstate what the rest of the fleet delivers",
        ),
    ],
    "mig": [
        (_mig_pending, "a MIG mode change is pending: the GPU changes mode at the next reset"),
        (
            lambda c: _mig_on(c) and _mig_on(c, "ref_rows"),
            "another MIG layout ({value} vs {reference}): the slices have other sizes, so a "
            "job lands on a "
            "different fraction of the GPU's SMs, memory and bandwidth",
        ),
        (
            _mig_on,
            "MIG {value}: the benchmark runs on a slice with a fraction of the SMs, memory "
            "and memory bandwidth, "
            "not on the whole GPU; per-slice numbers cannot be compared with whole GPUs",
        ),
        (None, "MIG off: the benchmark gets the whole GPU while the reference gets a slice"),
    ],
    "persistence": [
        (
            lambda c: _any(c, "persistence_mode", False) or c["mixed"],
            "persistence mode off: the driver tears the GPU state down whenever the last "
            "process exits, so every "
            "process start pays driver initialisation (up to seconds per GPU); start-up "
            "latency and short "
            "benchmarks suffer",
        ),
        (None, "persistence on while the reference has it off: processes start faster here"),
    ],
    "compute_mode": [
        (
            None,
            "compute mode {value} instead of {reference}: EXCLUSIVE_PROCESS allows one CUDA "
            "context per GPU, so a second process (a monitor, a multi-process launcher) fails to "
            "start; PROHIBITED allows none; the benchmark may fail rather than slow down",
        )
    ],
    "confidential_compute": [
        (
            lambda c: _any(c, "confidential_compute", True),
            "confidential computing on: host-GPU copies go through encrypted bounce "
            "buffers, so host-to-device bandwidth drops and copy and launch latency "
            "rise; I/O-heavy and small-kernel work slows",
        ),
        (
            None,
            "confidential computing {value} while the reference has it {reference}: copies "
            "and launches run "
            "at a different cost",
        ),
    ],
    "clock_policy": [
        (
            lambda c: (
                any(not clocks_unread(r) for r in c["rows"])
                and all(default_clocks(r) for r in c["rows"] if not clocks_unread(r))
            ),
            "default clocks while the reference pins application clocks: this "
            "host boosts freely, so compute-bound work runs at another SM clock",
        ),
        (
            None,
            "{value} instead of {reference}: the SM clock under load is fixed by the operator, so "
            "compute-bound work runs at that clock, not at the boost clock; the result "
            "reflects the clock "
            "setting, not the hardware",
        ),
    ],
    "link": [
        (lambda c: _single_gpu(c) or _single_gpu(c, "ref_rows"), _fewer_than_two),
        (
            _nvlink_counts,
            "{mine} instead of {ref} between the selected GPUs: {more} NVLink links, so all-reduce "
            "and other collectives run {speed} here",
        ),
        (
            _better_link,
            "a better link than the reference ({value} vs {reference}): collectives are "
            "faster here; "
            "multi-GPU results overstate the reference hosts",
        ),
        (
            None,
            "the selected GPUs talk over {value} instead of {reference}: all-reduce, "
            "all-gather and other "
            "collectives cross PCIe or the host bridge at a fraction of NVLink bandwidth; "
            "multi-GPU scaling "
            "and every communication-bound step slow down",
        ),
    ],
}


def _unread(rows, unread) -> bool:
    """Whether a side holds no typed reading: no row (a host without its GPUs), or every row unread
    by the fact's test `unread` (None: judge the rows as they are)."""
    return unread is not None and all(unread(r) for r in rows)


def impact(
    key: str,
    value: str,
    reference: str,
    rules: list | None = None,
    rows=(),
    ref_rows=(),
    unread=None,
) -> str:
    """What a benchmark on a host with `value` for `key` suffers or gains against `reference`, by
    the first of `rules` (the fact table's, `sweep.analysis.facts`; default `RULES[key]`) that
    holds. `rows` and `ref_rows` are the typed readings behind each side (one per distinct GPU
    value): the rules judge those (and `unread`, a row -> its value was not read, says a side was
    not read), the texts are only filled in."""
    for where, side in (("this host", rows), ("the reference hosts", ref_rows)):
        if _unread(side, unread):
            return UNKNOWN.format(where=where)
    case: Case = {
        "value": value,
        "reference": reference,
        "rows": list(rows),
        "ref_rows": list(ref_rows),
        "mixed": len(rows) > 1 and len(ref_rows) <= 1,
    }
    if key == "link":  # the topology codes themselves (NV18, PIX, SYS), typed
        case["mine"], case["ref"] = (
            next((r.get("worst_link") for r in case[side] if r.get("worst_link")), None)
            for side in ("rows", "ref_rows")
        )
        more = _nvlink_counts(case) and _nvlinks(case["mine"]) > _nvlinks(case["ref"])
        case["more"], case["speed"] = ("more", "faster") if more else ("fewer", "slower")
    for when, text in (
        rules if rules is not None else RULES.get(key, [(None, "{value} instead of {reference}")])
    ):
        if when is None or when(case):
            return text(case) if callable(text) else text.format_map(case)
    raise AssertionError(f"no rule for {key}")  # every list ends with a rule that always holds


def _narrower(c: Case) -> bool:
    mine, ref = _typed(c, "pcie_width"), _typed(c, "pcie_width", "ref_rows")
    return bool(mine and ref and min(mine) < max(ref))


def _trained_down(c: Case) -> str:
    mine, ref = _typed(c, "pcie_width"), _typed(c, "pcie_width", "ref_rows")
    who = "a card" if len(c["rows"]) > 1 else "the cards"
    return (
        f"PCIe {c['value']} instead of {c['reference']}: {who} trained down to {min(mine)} "
        "lanes, so "
        "host-to-GPU copies, data loading and GPUDirect RDMA run at "
        f"{min(mine) / max(ref):.0%} of the "
        "reference's bandwidth there (half at x8 of x16), and synchronous multi-GPU steps "
        "wait for that "
        "GPU; reseat the card or riser"
    )


def _slower_port(c: Case) -> bool:
    """A port of this host runs slower than the reference's fastest: the typed rates, not their
    text."""
    mine, ref = _typed(c, "ib_slowest_gbps"), _typed(c, "ib_fastest_gbps", "ref_rows")
    return bool(mine and ref and min(mine) < max(ref))


NO_NVLINK = "NVMLError_NotSupported"  # the NVLink state query's answer on a GPU without NVLink


def nvlinks_unread(r: dict) -> bool:
    """Whether a GPU's NVLinks were not read: no nvlink section (an agent before schema 1.1, a GPU
    lost), or no link answered for another reason than NVML's "not supported" (a GPU without NVLink:
    a reading)."""
    return r["nvlink_links"] is None or (
        r["nvlink_links"] == 0 and r.get("nvlink_error") not in (None, NO_NVLINK)
    )


def governor_unread(r: dict) -> bool:
    """Whether a host's CPU governor was not read: no governor read (none, or only policies whose
    governor could not be read) where sysfs was not seen to expose no cpufreq at all (that is a
    reading)."""
    return r.get("cpufreq_exposed") is not False and r["cpu_governor"] in (None, "unreadable")


def _no_cpufreq(c: Case, side: str = "rows") -> bool:
    return any(r.get("cpufreq_exposed") is False for r in c[side])


def _more_nvlinks(c: Case) -> bool:
    """Every GPU of this host has more NVLinks up than any of the reference's (the typed counts;
    "none" is 0)."""
    mine, ref = (
        _typed(c, "nvlink_active", side) or [0 for r in c[side] if r.get("nvlink_links") == 0]
        for side in ("rows", "ref_rows")
    )
    return bool(mine and ref) and min(mine) > max(ref)


def _performance_here(c: Case) -> bool:
    """This host's CPUs all run the performance governor and the reference's read do not."""
    mine, ref = _typed(c, "cpu_governor"), _typed(c, "cpu_governor", "ref_rows")
    return mine == ["performance"] * len(c["rows"]) and bool(ref) and "performance" not in ref


# the keys of schema 1.2: GPUs present, PCIe link, NVLinks, IB rate, CPU governor
RULES.update(
    {
        "gpus_present": [
            (
                _off_bus,
                "{value}: a GPU is on the PCI bus but the driver does not list it (fallen "
                "off the bus or failed to "
                "initialise); the host runs with fewer GPUs than it has, and a job sized for "
                "the full host will not "
                "launch the same way",
            ),
            (
                None,
                "{value} GPUs instead of {reference}: a different host size; per-host "
                "throughput differs",
            ),
        ],
        "pcie": [
            (_narrower, _trained_down),
            (
                None,
                "PCIe {value} instead of {reference}: host-to-GPU bandwidth differs (each "
                "generation doubles it), so "
                "copies and data loading run at another speed",
            ),
        ],
        "nvlinks": [
            (
                _more_nvlinks,
                "{value} NVLinks active against {reference}: more links carry GPU-to-GPU "
                "traffic here, so "
                "all-reduce and other collectives run faster on this host; multi-GPU results "
                "overstate the "
                "reference hosts",
            ),
            (
                None,
                "{value} NVLinks active instead of {reference}: fewer links carry GPU-to-GPU "
                "traffic, so "
                "all-reduce and other collectives run slower on this host, and the step "
                "waits for them",
            ),
        ],
        "ib_rate": [
            (
                _slower_port,
                "network ports at {value} instead of {reference}: inter-node all-reduce runs "
                "at the slowest "
                "port's rate, so multi-node scaling measured here is lower; a port trained "
                "down (cable, "
                "transceiver) or on another fabric",
            ),
            (
                None,
                "network ports {value} instead of {reference}: inter-node collectives run at "
                "another rate",
            ),
        ],
        "cpu_governor": [
            (
                _no_cpufreq,
                "no CPU frequency governor exposed here while the reference runs "
                "{reference}: a VM, or "
                "frequency scaling left to the BIOS, so the OS cannot tell how these CPUs "
                "clock under load; "
                "host-side steps (data loading, kernel launches) may run at another "
                "frequency; check the "
                "hypervisor's or the BIOS's power profile",
            ),
            (
                lambda c: _no_cpufreq(c, "ref_rows"),
                "CPU governor {value} while the reference hosts expose none (VMs, or "
                "frequency scaling left to the "
                "BIOS): the OS cannot tell how theirs clock under load, so host-side steps "
                "may not run alike",
            ),
            (
                _performance_here,
                "CPU governor performance while the reference runs {reference}: these CPUs hold "
                "their frequency under load, so data loading, kernel launches and host-side "
                "steps run "
                "faster and steadier here than on the reference hosts, whose CPUs change frequency",
            ),
            (
                None,
                "CPU governor {value} instead of {reference}: the CPUs change frequency "
                "under load, so data "
                "loading, kernel launch latency and host-side steps vary run to run; "
                "small-kernel and input-bound "
                "work slows",
            ),
        ],
    }
)
