"""Per-host baselines: what each host's GPU stack looked like when it was known good, and drift
from it.

Layout (baseline version 1), one file per host so a host that joins the fleet later gets its own::

    baseline/
        baseline.json        {"format": "sweep-baseline", "baseline_version": 1, "created_at": ...}
        hosts/gpu01.json     {"format": "sweep-baseline-host", "baseline_version": 1,
                              "host": "gpu01", "set_at": ...,
                              "source": {"run", "run_started_at", "probed_at"},
                              "state": {driver, gpus, topology...},
                              "health": {... the probe, no load samples}}

`set_baseline(run, dir)` adds the hosts the folder lacks and leaves the others (``update=True``
replaces them; ``hosts=`` limits either to some hosts). `compare_to_baseline(records, dir)` compares
each host of a run with its baseline using `sweep.audit.rundiff.host_changes` and keeps the kinds
that are drift of the GPU stack (`sweep.audit.drift`, which words them): gpus (missing / added),
gpu swap, driver, ecc, power, clock policy, mig, modes (persistence), topology, firmware, gpu
model, links (PCIe width, NVLinks active, fabric, GPUs on the PCI bus), link errors (NVLink / PCIe
counters, Xid events) and host settings (CPU governor, NUMA balancing, THP, kernel arguments,
modules, IB / RoCE ports) and speed (a figure of the speed tier that moved more than 10%; the
baseline's figures are also the report's speed reference,
`sweep.analysis.speed.baseline_references`). Framework, host (kernel), environment and
memory-error changes are shown by ``sweep diff``, not as drift.

`audit_section(records, expectations, baseline_dir)` is the dict the report embeds (docs/audits.md).

Exit codes (``sweep baseline ...``): 0 no drift; 5 drift from the baseline (``check``); 2 bad input.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from sweep import exitcodes
from sweep.errors import ConfigError, RunFolderError
from sweep.analysis.names import fold_hosts, host_key
from sweep.audit.drift import Drift, drift_of, value_text
from sweep.audit.rundiff import host_changes
from sweep.text import plural
from sweep.folders import SHARED, make_dirs
from sweep.store import Run, load_run, read_json, safe_name, utc_now, write_json_atomic

BASELINE_VERSION = 1
FORMAT = "sweep-baseline"
HOST_FORMAT = "sweep-baseline-host"
INDEX = "baseline.json"


def host_state(health: dict) -> dict:
    """The audited facts of one probe, small enough to read: driver, cards, modes, topology."""
    topo = health.get("topology") or {}
    return {
        "driver": (health.get("driver") or {}).get("version"),
        "cuda_driver": (health.get("driver") or {}).get("cuda_driver_version"),
        "gpu_count": (health.get("driver") or {}).get("gpu_count"),
        "gpus": [
            {
                "index": g.get("index"),
                "name": g.get("name"),
                "uuid": g.get("uuid"),
                "serial": g.get("serial"),
                "pci_bus_id": g.get("pci_bus_id"),
                "ecc": (g.get("ecc") or {}).get("current"),
                "power_limit_w": (g.get("power") or {}).get("enforced_limit_w"),
                "mig_layout": g.get("mig_layout"),
                "persistence": g.get("persistence_mode"),
            }
            for g in health.get("gpus") or []
        ],
        "worst_link": topo.get("worst_link_selected"),
    }


# --- the folder ------------------------------------------------------------------------------


def _write_json(path: Path, data: Any) -> None:
    """Whole or not at all (store.write_json_atomic); a failure names the baseline folder's fix."""
    try:
        make_dirs(path.parent, SHARED)
        write_json_atomic(path, data, indent=1)
    except (OSError, RunFolderError) as err:
        reason = err.strerror if isinstance(err, OSError) else err.message
        raise ConfigError(
            f"cannot write {path.name} ({reason})",
            where=str(path.parent),
            fix="make the folder writable, or choose another with -o",
        ) from None


def _read_json(path: Path, where: Path) -> dict:
    data = read_json(
        path, ConfigError, "set the baseline again: sweep baseline set RUN_DIR --update"
    )
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path.name} is not a JSON object",
            where=str(where),
            fix="set the baseline again: sweep baseline set RUN_DIR --update",
        )
    return data


def _check_version(data: dict, fmt: str, name: str, where: Path) -> None:
    if data.get("format") != fmt:
        raise ConfigError(
            f"{name} is not a sweep baseline file (format {data.get('format')!r})",
            where=str(where),
            fix="pass the folder sweep baseline set wrote, with --baseline",
        )
    if data.get("baseline_version") != BASELINE_VERSION:
        raise ConfigError(
            f"{name} has baseline version {data.get('baseline_version')!r}; this sweep reads "
            f"version {BASELINE_VERSION}",
            where=str(where),
            fix="use the sweep version that wrote it, or set a new baseline in another folder (-o)",
        )


def read_baseline(baseline_dir: str | Path) -> dict[str, dict]:
    """host -> its baseline file (validated); ConfigError when the folder holds no baseline."""
    root = Path(baseline_dir)
    index = root / INDEX
    if not index.is_file():
        raise ConfigError(
            "no baseline here (no baseline.json)",
            where=str(root),
            fix=f"record one first: sweep baseline set RUN_DIR -o {root}",
        )
    _check_version(_read_json(index, root), FORMAT, INDEX, root)
    out = {}
    for path in sorted((root / "hosts").glob("*.json")):
        if path.name.startswith("."):
            continue
        data = _read_json(path, root)
        _check_version(data, HOST_FORMAT, f"hosts/{path.name}", root)
        if isinstance(data.get("host"), str) and isinstance(data.get("health"), dict):
            out[data["host"]] = data
    return dict(sorted(out.items(), key=lambda kv: host_key(kv[0])))


def _failure_of(rec: dict) -> tuple[str, str] | None:
    """(failure class, message) of a record without a usable health.json; None for
    a reachable host."""
    if rec.get("status") == "ok" and isinstance(rec.get("health"), dict):
        return None
    failure = rec.get("failure") or {}
    return failure.get("class") or "failed", failure.get("message") or "no health.json"


@dataclass
class SetResult:
    """What `set_baseline` did, host by host."""

    baseline_dir: str
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    # {"host", "reason"}: failed in that run, or not healthy
    skipped: list[dict] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [
            f"{self.baseline_dir}: {len(self.added)} added, {len(self.updated)} updated, "
            f"{len(self.kept)} kept (use --update to replace), {len(self.skipped)} skipped"
        ]
        out += [f"skipped {s['host']}: {s['reason']}" for s in self.skipped]
        return out


# the verdict's states without a fault: what a baseline may take as known-good
HEALTHY_STATES = ("pool", "other_class")


def unhealthy_hosts(run: Run) -> dict[str, str]:
    """Host -> why the verdict of `run` does not call it healthy ("broken: power: GPU 0-7: enforced
    power limit 250 W ..."), for every answering host not in the pool or another class
    (`HEALTHY_STATES`)."""
    from sweep.analysis.compare import compare
    from sweep.analysis.fleet import load_fleet
    from sweep.analysis.speed import speed_section
    from sweep.analysis.verdict import cause_key, make_verdict
    from sweep.analysis.xid import xid_section

    fleet = load_fleet([run.path])
    findings = compare(fleet)
    verdict = make_verdict(
        fleet, findings, speed_section(fleet, findings), None, xid_section(fleet)
    )
    out = {}
    for host, state in verdict.states.items():
        if state in HEALTHY_STATES or state == "unreachable":
            continue
        cause = verdict.cause(host)  # the verdict's one cause of the host
        out[host] = state.replace("_", " ") + (
            f": {cause_key(cause)}: {cause.cause}" if cause else ""
        )
    return out


def set_baseline(
    run: Run | str | Path,
    baseline_dir: str | Path,
    *,
    update: bool = False,
    hosts: Iterable[str] = (),
    unhealthy: bool = False,
) -> SetResult:
    """Record each reachable host of `run` that its verdict calls healthy as its baseline
    (`unhealthy`: every reachable host); the others are skipped, each named with its state and
    cause; existing hosts are kept unless `update`."""
    run = run if isinstance(run, Run) else load_run(run)
    root = Path(baseline_dir)
    if root.exists() and not root.is_dir():
        raise ConfigError(
            "is a file, not a folder", where=str(root), fix="choose another folder with -o"
        )
    wanted = list(hosts)
    unknown = [h for h in wanted if h not in run.records]
    if unknown:
        raise ConfigError(
            f"no record of {', '.join(unknown)} in this run",
            where=str(run.path),
            fix="name hosts the run swept (see its hosts/ folder)",
        )
    existing = read_baseline(root) if (root / INDEX).is_file() else {}
    if not (root / INDEX).is_file():
        _write_json(
            root / INDEX,
            {"format": FORMAT, "baseline_version": BASELINE_VERSION, "created_at": utc_now()},
        )
    result = SetResult(str(root))
    now = utc_now()
    not_healthy = {} if unhealthy else unhealthy_hosts(run)
    for name, rec in run.records.items():
        if wanted and name not in wanted:
            continue
        failed = _failure_of(rec)
        if failed:
            result.skipped.append(
                {"host": name, "reason": f"{failed[0]} in that run ({failed[1]})"}
            )
            continue
        if name in not_healthy:
            result.skipped.append(
                {
                    "host": name,
                    "reason": f"{not_healthy[name]} (not known-good: --unhealthy takes it)",
                }
            )
            continue
        if name in existing and not update:
            result.kept.append(name)
            continue
        _write_host_baseline(root, run, name, rec, now)
        (result.updated if name in existing else result.added).append(name)
    return result


def _write_host_baseline(root: Path, run: Run, name: str, rec: dict, now: str) -> None:
    """The host's baseline file: its health from `run` (the load's samples left out), its state,
    and where and when it was read."""
    health = dict(rec["health"])
    if isinstance(health.get("load"), dict):
        health["load"] = {k: v for k, v in health["load"].items() if k != "samples"}
    _write_json(
        root / "hosts" / f"{safe_name(name)}.json",
        {
            "format": HOST_FORMAT,
            "baseline_version": BASELINE_VERSION,
            "host": name,
            "set_at": now,
            "source": {
                "run": str(Path(run.path).resolve()),
                "run_started_at": run.manifest.get("started_at"),
                "probed_at": rec.get("ended_at"),
            },
            "state": host_state(health),
            "health": health,
        },
    )


# --- drift -----------------------------------------------------------------------------------


@dataclass
class BaselineComparison:
    """Drift per host, and the hosts that could not be compared."""

    baseline_dir: str
    drift: list[Drift] = field(default_factory=list)
    compared: list[str] = field(default_factory=list)
    no_baseline: list[str] = field(default_factory=list)  # in the run, not in the baseline
    absent: list[str] = field(default_factory=list)  # in the baseline, not in the run
    # {"host", "reason"}: failed in the run
    unjudged: list[dict] = field(default_factory=list)

    @property
    def drifted_hosts(self) -> list[str]:
        return sorted({d.host for d in self.drift}, key=host_key)

    @property
    def exit_code(self) -> int:
        return exitcodes.OFF if self.drift else exitcodes.OK

    def as_dict(self) -> dict:
        return {
            "dir": self.baseline_dir,
            "compared": self.compared,
            "drifted_hosts": self.drifted_hosts,
            "drift": [d.as_dict() for d in self.drift],
            "no_baseline": self.no_baseline,
            "absent": self.absent,
            "unjudged": self.unjudged,
        }


def _records(records) -> dict[str, dict]:
    if isinstance(records, (str, os.PathLike)):
        return load_run(records).records
    if isinstance(records, Run):
        return records.records
    if isinstance(records, Mapping):
        return dict(records)
    return {r["host"]: r for r in records}


def compare_to_baseline(records, baseline_dir: str | Path) -> BaselineComparison:
    """Each host of `records` (a Run, a run folder path, host -> record, or a list of records)
    against its baseline."""
    base = read_baseline(baseline_dir)
    recs = _records(records)
    out = BaselineComparison(str(baseline_dir))
    for name in sorted(recs, key=host_key):
        rec = recs[name]
        if name not in base:
            out.no_baseline.append(name)
            continue
        failed = _failure_of(rec)
        if failed:
            out.unjudged.append({"host": name, "reason": f"{failed[0]}: {failed[1]}"})
            continue
        out.compared.append(name)
        out.drift.extend(drift_of(name, host_changes(base[name]["health"], rec["health"])))
    out.absent = [h for h in base if h not in recs]
    return out


def show_rows(baseline_dir: str | Path, hosts: Iterable[str] = ()) -> list[dict]:
    """One summary row per host of a baseline (for ``sweep baseline show``)."""
    wanted = set(hosts)
    baseline = read_baseline(baseline_dir)
    unknown = sorted(wanted - set(baseline))
    if unknown:
        raise ConfigError(
            f"--host {', '.join(unknown)}: not in this baseline",
            where=str(baseline_dir),
            fix=f"name one of its hosts ({fold_hosts(sorted(baseline))}), or leave --host out",
        )
    rows = []
    for name, data in baseline.items():
        if wanted and name not in wanted:
            continue
        st = data.get("state") or host_state(data["health"])
        gpus = st.get("gpus") or []

        def distinct(key):
            vals = sorted({value_text(g.get(key)) for g in gpus})
            return ",".join(vals) if vals else "-"

        rows.append(
            {
                "host": name,
                "set_at": data.get("set_at"),
                "driver": st.get("driver"),
                "gpus": len(gpus),
                "models": distinct("name"),
                "ecc": distinct("ecc"),
                "power_limit_w": distinct("power_limit_w"),
                "mig_layout": distinct("mig_layout"),
                "persistence": distinct("persistence"),
                "worst_link": st.get("worst_link"),
                "run": (data.get("source") or {}).get("run"),
            }
        )
    return rows


# --- the section the report embeds -----------------------------------------------------------


def audit_section(records, expectations=None, baseline_dir: str | Path | None = None) -> dict:
    """Expectation findings and baseline drift of one run, for summary.json, the HTML
    report and `sweep audit`.

    `records`: a run folder path, a `Run`, host -> record, or a list of records (records read
    with `load_run` carry their inventory groups; others are judged without groups). A run's hosts
    are the ones its manifest lists: one listed without a record is not judged.
    `expectations`: an `Expectations`, a path to an expectations file, or None.
    Shape (docs/audits.md)::

        {"schema": "sweep.audit/1",
         "expectations": null | {"file", "hosts_judged",
                                 "findings": [{"host","rule","expected","actual","message"}],
                                 "hosts_off": [...], "unjudged": [{"host","reason"}],
                                 "unmatched": [{"section","name","where","message"}]},
         "baseline": null | {"dir", "compared", "drifted_hosts",
                             "drift": [{"host","kind","message","changes"}],
                             "no_baseline", "absent", "unjudged"},

         "hosts_listed": N, "unjudged": [{"host","reason"}],
         "headline": [str, ...], "exit_code": 0 | 1 | 5}

    `exit_code` is 1 (exitcodes.INCOMPLETE) when some listed host was not judged by every audit
    asked for, else 5 (OFF) when a host is off its expectations or drifted, else 0. Each name of the
    expectations file that matches no audited host is also issued as an `ExpectationsWarning`.
    """
    run = _as_run(records)
    recs = _records(run if run is not None else records)
    listed = list(dict.fromkeys([*(run.listed if run is not None else ()), *recs]))
    section: dict[str, Any] = {
        "schema": "sweep.audit/1",
        "expectations": None,
        "baseline": None,
        "hosts_listed": len(listed),
        "unjudged": [],
        "headline": [],
        "exit_code": 0,
    }
    if expectations is not None:
        part = section["expectations"] = _expectations_part(recs, listed, expectations)
        section["headline"] += _off_expectations_headline(part)
    if baseline_dir is not None:
        cmp = compare_to_baseline(recs, baseline_dir)
        section["baseline"] = cmp.as_dict()
        section["headline"] += _drift_headline(cmp)
    if section["expectations"] or section["baseline"]:
        section["unjudged"] = _unjudged(section, listed, recs, baseline_dir)
    if section["unjudged"]:
        names = [u["host"] for u in section["unjudged"]]
        section["headline"].append(
            f"{plural(len(names), 'host')} of the run not judged: {fold_hosts(names)}; the "
            f"audit covers {len(listed) - len(names)} of {plural(len(listed), 'host')}"
        )
    section["exit_code"] = _audit_exit_code(section)
    return section


def _as_run(records) -> Run | None:
    """`records` as a Run where it is one or names a run folder; None for records given alone."""
    if isinstance(records, Run):
        return records
    return load_run(records) if isinstance(records, (str, os.PathLike)) else None


def _audit_exit_code(section: dict) -> int:
    """INCOMPLETE where a listed host was not judged, else OFF where a host is off or drifted."""
    if section["unjudged"]:
        return exitcodes.INCOMPLETE
    return exitcodes.OFF if audit_off(section) else exitcodes.OK


def _off_expectations_headline(part: dict) -> list[str]:
    """The headline's line for the hosts off their expectations, with the rules they break."""
    if not part["findings"]:
        return []
    rules = sorted({f["rule"] for f in part["findings"]})
    return [
        f"{plural(len(part['hosts_off']), 'host')} off expectations "
        f"({', '.join(rules)}): {fold_hosts(part['hosts_off'])}"
    ]


def _drift_headline(cmp: BaselineComparison) -> list[str]:
    """The headline's line for the hosts that drifted from their baseline, with the kinds."""
    if not cmp.drift:
        return []
    kinds = sorted({d.kind for d in cmp.drift})
    return [
        f"{plural(len(cmp.drifted_hosts), 'host')} drifted from the baseline "
        f"({', '.join(kinds)}): {fold_hosts(cmp.drifted_hosts)}"
    ]


def audit_off(section: dict) -> bool:
    """Whether an audit section holds an expectation finding or drift from the baseline."""
    return bool((section["expectations"] or {}).get("findings")) or bool(
        (section["baseline"] or {}).get("drift")
    )


def _expectations_part(recs: dict[str, dict], listed: list[str], expectations) -> dict:
    """The "expectations" part of the section; warns of names of the file that
    match no audited host."""
    import warnings

    from sweep.audit.expect import (
        Expectations,
        evaluate_expectations,
        load_expectations,
        unmatched_names,
    )
    from sweep.errors import ExpectationsWarning

    exp = (
        expectations if isinstance(expectations, Expectations) else load_expectations(expectations)
    )
    findings = evaluate_expectations(recs, exp)
    unjudged = [
        {"host": n, "reason": "no health.json (" + str((r.get("failure") or {}).get("class")) + ")"}
        for n, r in recs.items()
        if r.get("status") != "ok" or not isinstance(r.get("health"), dict)
    ]
    unjudged += [{"host": n, "reason": "no record (not swept)"} for n in listed if n not in recs]
    groups = {
        g
        for r in recs.values()
        for g in ([r["groups"]] if isinstance(r.get("groups"), str) else r.get("groups") or ())
    }
    unmatched = unmatched_names(exp, listed, groups)
    for entry in unmatched:
        warnings.warn(entry["message"], ExpectationsWarning, stacklevel=3)
    return {
        "file": str(exp.path),
        "hosts_judged": len(listed) - len(unjudged),
        "findings": [f.as_dict() for f in findings],
        "hosts_off": sorted({f.host for f in findings}, key=host_key),
        "unjudged": unjudged,
        "unmatched": unmatched,
    }


def _unjudged(section: dict, listed: list[str], recs: dict[str, dict], baseline_dir) -> list[dict]:
    """The listed hosts some asked-for audit did not judge, each with the first reason,
    in natural order."""
    reasons: dict[str, str] = {}
    for item in (section["expectations"] or {}).get("unjudged", ()):
        reasons.setdefault(item["host"], item["reason"])
    base = section["baseline"]
    if base is not None:
        for item in base["unjudged"]:
            reasons.setdefault(item["host"], item["reason"])
        for name in base["no_baseline"]:
            reasons.setdefault(
                name, f"no baseline (sweep baseline set RUN -o {baseline_dir} adds it)"
            )
        for name in listed:
            if name not in recs:
                reasons.setdefault(name, "no record (not swept)")
    return [{"host": n, "reason": reasons[n]} for n in sorted(reasons, key=host_key)]
