"""Variant health.json dicts built from the recorded H200 fixtures, and the Must-show fleet.

Each variant edits a copy of the idle H200 health.json (replayed from a real host) and judges the
contracts again with the agent's own `build_health`, so the contract chain stays what the agent
would write. Used by the unit tests, the browser test and bench/bench_report.py.
"""
from __future__ import annotations

import copy
import zlib
import json
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

from probe_agent.mask import resolve_mask
from probe_agent.probe import build_health

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "health"
H200_MEMORY = 150754820096
_OPTS = SimpleNamespace(deep=False, deadline=0.0)  # what build_health reads of the options


@lru_cache(maxsize=None)
def _fixture(kind: str) -> str:
    return (FIXTURES / f"h200-{kind}-smi.json").read_text()


def base(kind: str = "idle") -> dict:
    """A fresh copy of a recorded H200 health.json (idle, load or fault)."""
    return json.loads(_fixture(kind))


def rejudge(health: dict) -> dict:
    """Resolve the mask and judge the contracts again after an edit with the agent's own
    `build_health` (its chain, verdict, summary, MIG layouts and worst link), from the facts the
    health.json holds."""
    env = health.get("environment") or {}
    health["mask"] = resolve_mask(env, health["gpus"])
    driver = dict(health["driver"])
    settings = dict(health.get("host_settings") or {})
    facts = {"host": health.get("host"), "env": env, "driver": driver,
             "kernel_module": driver.pop("kernel_module", None), "gpus": health["gpus"],
             "mask": health["mask"], "frameworks": health["frameworks"],
             "topology": {k: v for k, v in health["topology"].items()
                          if k != "worst_link_selected"},
             "pci": health.get("pci"), "kernel_log": health.get("kernel_log"),
             "host_settings": settings,
             "nearest_nic": settings.pop("nearest_nic", None), "firmware": health.get("firmware"),
             "load": health.get("load"), "speed": health.get("speed"),
             "run_as": (health.get("probe") or {}).get("user")}  # where the agent writes it (probe.user)
    judged = build_health(facts, _OPTS, (0.0, 0.0), True, None)
    for key in ("contracts", "lowest_broken", "verdict", "summary", "gpus"):
        health[key] = judged[key]
    health["topology"]["worst_link_selected"] = judged["topology"]["worst_link_selected"]
    return health


def h200(n_gpus: int = 8, hostname: str = "gpu01", link: str = "NV18") -> dict:
    """An idle, healthy HGX H200 with `n_gpus` GPUs joined by `link`."""
    h = base("idle")
    card = h["gpus"][0]
    gpus = []
    for i in range(n_gpus):
        g = copy.deepcopy(card)
        g["index"] = i
        g["uuid"] = "GPU-%08x-0000-0000-0000-%012d" % (zlib.crc32(hostname.encode()), i)
        g["pci_bus_id"] = "00000000:%02X:00.0" % (0x18 + 0x10 * i)
        g["nvlinks_active"] = 18
        gpus.append(g)
    h["gpus"] = gpus
    h["driver"]["gpu_count"] = n_gpus
    h["environment"] = {}
    h["host"]["hostname"] = hostname
    h["topology"] = {"source": "nvml" if n_gpus > 1 else "single_gpu", "cpu_affinity": {}, "numa_affinity": {},
                     "pairs": {"%d-%d" % (a, b): link for a in range(n_gpus) for b in range(a + 1, n_gpus)}}
    return rejudge(h)


def _cards(h, gpus):
    return [g for g in h["gpus"] if gpus is None or g["index"] in gpus]


def driver(h, version="590.44.01", cuda="13.1"):
    h["driver"].update(version=version, cuda_driver_version=cuda, nvml_version="13." + version)
    return rejudge(h)


def ecc_off(h, gpus=None):
    for g in _cards(h, gpus):
        g["ecc"].update(current=False, pending=False, pending_mode=False)
    return rejudge(h)


def ecc_pending(h, pending=False, gpus=None):
    for g in _cards(h, gpus):
        g["ecc"]["pending"] = g["ecc"]["pending_mode"] = pending
    return rejudge(h)


def power_cap(h, watts=250.0, gpus=None):
    for g in _cards(h, gpus):
        g["power"]["enforced_limit_w"] = watts
        g["power"]["management_limit_w"] = watts
    return rejudge(h)


def mig(h, profiles=("3g.71gb", "3g.71gb"), gpus=None):
    for g in _cards(h, gpus):
        g["mig"] = {"current": True, "pending": True, "devices": [
            {"index": k, "uuid": "MIG-%s-%d" % (g["uuid"][4:], k), "profile": p} for k, p in enumerate(profiles)]}
    return rejudge(h)


def foreign_process(h, name="python3", pid=4242, gpu=2, used=8 << 30):
    h["gpus"][gpu]["processes"] = [{"pid": pid, "name": name, "used_memory_bytes": used}]
    return rejudge(h)


def hw_thermal(h, gpu=5, sm_mhz=1125):
    g = h["gpus"][gpu]
    g["clock_event_reasons"]["active"] = ["hw_slowdown", "hw_thermal_slowdown"]
    g["clocks"]["sm_mhz"] = sm_mhz
    g["temperature_c"] = 92
    return rejudge(h)


def hbm_hot(h, celsius=92, gpu=4, limit=95):
    """HBM `celsius` on one GPU, `limit - celsius` C below its slowdown threshold (a thermal warning within 5 C)."""
    h["gpus"][gpu]["thermal"] = {"gpu_c": 40, "gpu_slowdown_c": 89, "memory_c": celsius, "memory_max_operating_c": limit}
    return rejudge(h)


def empty_mask(h):
    h["environment"]["CUDA_VISIBLE_DEVICES"] = ""
    return rejudge(h)


def mask(h, value):
    h["environment"]["CUDA_VISIBLE_DEVICES"] = value
    return rejudge(h)


def cpu_torch(h):
    h["frameworks"][0].update(torch_version="2.11.0+cpu", cuda_runtime=None, cudnn=None)
    return rejudge(h)


def torch(h, version="2.10.0+cu129", cuda="12.9"):
    h["frameworks"][0].update(torch_version=version, cuda_runtime=cuda)
    return rejudge(h)


def persistence_off(h, gpus=None):
    for g in _cards(h, gpus):
        g["persistence_mode"] = False
    return rejudge(h)


def app_clocks(h, mhz=1410, default=1980, gpus=None):
    for g in _cards(h, gpus):
        g["clocks"].update(app_sm_mhz=mhz, default_app_sm_mhz=default)
    return rejudge(h)


def link(h, value="SYS"):
    h["topology"]["pairs"] = {k: value for k in h["topology"]["pairs"]}
    return rejudge(h)


def remap(h, gpu=1, failure=False, pending=True):
    h["gpus"][gpu]["remapped_rows"].update(failure=failure, pending=pending)
    return rejudge(h)


def xid(h, code=79, bus="0000:19:00.0", said="GPU has fallen off the bus."):
    """Xid `code` logged once for the GPU at `bus`, the kernel-log section as the agent writes it."""
    from probe_agent.xid import XID_DOCS, parse_xid_lines

    lines = [f"NVRM: Xid (PCI:{bus}): {code}, pid='<unknown>', name=<unknown>, {said}"]
    h["kernel_log"] = {"source": "/dev/kmsg", "tried": {}, "complete": True, "xid_lines": len(lines),
                       "xid": parse_xid_lines(lines), "docs": XID_DOCS}
    return rejudge(h)


def with_speed(health: dict, **kwargs) -> dict:
    """A copy of a health.json (of this agent's schema, 1.4 or later) carrying a derived speed
    section (`sweep.demo.speed.derive_section`), for hostile edits."""
    from probe_agent import HEALTH_SCHEMA_VERSION
    from sweep.demo.speed import derive_section

    out = copy.deepcopy(health)
    out["schema_version"] = HEALTH_SCHEMA_VERSION
    out["speed"] = derive_section([g["index"] for g in out.get("gpus") or ()], **kwargs)
    for entry, g in zip(out["speed"]["gpus"], out.get("gpus") or ()):
        entry["uuid"] = g.get("uuid")
    return out


def record(name: str, health: dict | None, failure: tuple[str, str] | None = None, groups=None) -> dict:
    """A run folder's host record (record_version 1) around `health`, or a failed one."""
    rec = {"record_version": 1, "host": name, "address": name + ".dc1", "status": "failed" if failure else "ok",
           "failure": {"class": failure[0], "message": failure[1]} if failure else None,
           "attempts": 3 if failure else 1, "started_at": "2026-11-29T18:12:23.000Z",
           "ended_at": "2026-11-29T18:12:24.500Z", "duration_s": 1.5, "health": None if failure else health}
    if groups is not None:
        rec["groups"] = list(groups)
    return rec


def write_run(folder: Path, records, manifest: dict | None = None, indent=1) -> Path:
    """Write `records` as a run folder (manifest.json + hosts/<name>.json), as sweep.store lays it out."""
    from sweep.store import safe_name

    hosts = folder / "hosts"
    hosts.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps(manifest or {
        "format": "sweep-run", "record_version": 1, "state": "complete"}))
    for rec in records:
        (hosts / (safe_name(rec["host"]) + ".json")).write_text(json.dumps(rec, indent=indent, ensure_ascii=False))
    return folder


# The Must-show fleet: host -> (variant, expected reason). The rest are the reference pool.
MIG_A = ("3g.71gb", "3g.71gb")
MIG_B = ("1g.18gb",) * 7
UNREACHABLE = {"gpu42": ("refused", "connection refused on port 22"),
               "gpu43": ("timeout", "no answer within 10 s"),
               "gpu44": ("host_key_changed", "the host key differs from known_hosts")}
SPECIAL = {
    "gpu31": "driver", "gpu32": "driver", "gpu33": "driver", "gpu34": "driver",
    "gpu05": "ecc_off", "gpu12": "ecc_off", "gpu19": "ecc_off",
    "gpu07": "power_cap", "gpu08": "power_cap", "gpu09": "one_card_cap",
    "gpu21": "mig_a", "gpu22": "mig_b",
    "gpu14": "foreign_process", "gpu16": "hw_thermal",
    "gpu25": "empty_mask", "gpu26": "cpu_torch",
}


def must_show_health(name: str, n_gpus: int = 8) -> dict:
    """The health.json of a Must-show host; a variant's card is the last one when the host has fewer."""
    h = h200(n_gpus, name)
    variant = SPECIAL.get(name)
    if variant == "driver":
        driver(h)
    elif variant == "ecc_off":
        ecc_off(h)
    elif variant == "power_cap":
        power_cap(h, 250.0)
    elif variant == "one_card_cap":
        power_cap(h, 250.0, gpus={min(3, n_gpus - 1)})
    elif variant == "mig_a":
        mig(h, MIG_A)
    elif variant == "mig_b":
        mig(h, MIG_B)
    elif variant == "foreign_process":
        foreign_process(h, "python3", 4242, gpu=min(2, n_gpus - 1))
    elif variant == "hw_thermal":
        hw_thermal(h, gpu=min(5, n_gpus - 1))
    elif variant == "empty_mask":
        empty_mask(h)
    elif variant == "cpu_torch":
        cpu_torch(h)
    return h


def must_show_fleet(n_hosts: int = 44, n_gpus: int = 8, extra=()) -> list[dict]:
    """Records of gpu01..gpuNN: two drivers, ECC off x3, 250 W caps, MIG x2, faults, 3 unreachable."""
    records = []
    for i in range(1, n_hosts + 1):
        name = "gpu%02d" % i
        if name in UNREACHABLE:
            records.append(record(name, None, UNREACHABLE[name]))
        else:
            records.append(record(name, must_show_health(name, n_gpus)))
    records.extend(extra)
    return records


def reference_pool(n_hosts: int = 44) -> list[str]:
    """The hosts the Must-show fleet's reference class should hold."""
    names = ["gpu%02d" % i for i in range(1, n_hosts + 1)]
    return [n for n in names if n not in UNREACHABLE and SPECIAL.get(n) in (None, "foreign_process", "hw_thermal")]
