"""Benchmark of `sweep report` on a large fleet: 10,000 hosts x 8 GPUs by default.

The fleet is written to disk as a real run folder (manifest.json + hosts/<host>.json, indented as
store.py writes them), built from the recorded H200 health.json with the variants of the Must-show
fleet mixed in (other driver, ECC off, power caps, MIG, foreign processes, HW slowdown, empty mask,
CPU-only torch, unreachable hosts). Then a fresh Python process runs `build_report` on it (load,
compare, render every output) and reports its wall time and peak RSS (resource.getrusage).

    python3 bench/bench_report.py [--hosts 10000] [--gpus 8] [--keep DIR]

Exits 1 when the run misses the budget (10 s, 2 GiB).

    python3 bench/bench_report.py --listed 100000 --records 2

An interrupted sweep instead: a manifest listing `--listed` hosts of which only `--records` have a
record (a `sweep run --wrap` record, with its benchmark figure); the others are `not_probed` rows
whose source is the manifest. The report must stay linear in the hosts listed (issue 23, item 5);
the budget is then 10 s per 100,000 hosts listed.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "unit")]

BUDGET_S = 10.0
BUDGET_RSS_MIB = 2048
PLACEHOLDER = "@@HOST@@"
# variant -> share of the fleet (the rest is the healthy, comparable majority)
MIX = {"unreachable": 0.01, "driver": 0.02, "ecc_off": 0.005, "power_cap": 0.005, "one_card_cap": 0.002,
       "mig_a": 0.001, "mig_b": 0.001, "foreign_process": 0.003, "hw_thermal": 0.001, "empty_mask": 0.001,
       "cpu_torch": 0.001}


def templates(n_gpus: int) -> dict:
    """variant -> a host record serialized with a placeholder host name (built once, reused per host)."""
    import fleet_variants as fv

    special = {v: k for k, v in fv.SPECIAL.items()}  # a Must-show host name of each variant
    out = {}
    for variant in ["healthy", *MIX]:
        if variant == "unreachable":
            rec = fv.record(PLACEHOLDER, None, ("timeout", "no answer within 10 s"))
        else:
            health = fv.must_show_health(special.get(variant, "gpu01"), n_gpus)
            health["host"]["hostname"] = PLACEHOLDER
            rec = fv.record(PLACEHOLDER, health)
            rec["address"] = PLACEHOLDER + ".dc1"
        out[variant] = json.dumps(rec, indent=1, ensure_ascii=False)
    return out


def write_fleet(folder: Path, n_hosts: int, n_gpus: int, seed: int = 7) -> dict:
    """Write the run folder; return how many hosts of each variant it holds."""
    rng = random.Random(seed)
    blobs = templates(n_gpus)
    hosts = folder / "hosts"
    hosts.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"format": "sweep-run", "record_version": 1,
                                                      "state": "complete"}))
    width = len(str(n_hosts))
    counts = {}
    names = [f"gpu{i:0{width}d}" for i in range(1, n_hosts + 1)]
    variants = list(MIX)
    weights = list(MIX.values())
    for name in names:
        r = rng.random()
        variant = "healthy"
        acc = 0.0
        for v, w in zip(variants, weights):
            acc += w
            if r < acc:
                variant = v
                break
        counts[variant] = counts.get(variant, 0) + 1
        (hosts / f"{name}.json").write_text(blobs[variant].replace(PLACEHOLDER, name))
    return counts


def write_interrupted(folder: Path, n_listed: int, n_records: int, n_gpus: int) -> dict:
    """A wrapped run stopped early: the manifest lists n_listed hosts, n_records have a record."""
    import fleet_variants as fv

    hosts = folder / "hosts"
    hosts.mkdir(parents=True)
    width = len(str(n_listed))
    names = [f"gpu{i:0{width}d}" for i in range(1, n_listed + 1)]
    wrap = {"command": ["python3", "bench/matmul_bench.py"], "metrics": [], "force": False, "interval": 0.2,
            "max_samples": 1000, "output_tail": 65536}
    (folder / "manifest.json").write_text(json.dumps({"format": "sweep-run", "record_version": 1,
                                                      "state": "interrupted", "hosts": names,
                                                      "options": {"wrap": wrap}}))
    for i, name in enumerate(names[:n_records]):
        rec = fv.record(name, fv.must_show_health("gpu01", n_gpus))
        rec["wrap"] = {"status": "ok", "why": "tflops 660", "provenance": {},
                       "figures": {"tflops": {"value": 660.0 + i, "unit": "TFLOP/s", "source": "json line"}}}
        (hosts / f"{name}.json").write_text(json.dumps(rec, indent=1))
    return {"listed": n_listed, "records": n_records}


def measure(run: Path, out: Path) -> None:
    """Child process: build the report and print wall time, CPU time and peak RSS as JSON."""
    before_import = time.perf_counter()
    from sweep.report.build import build_report

    start = time.perf_counter()
    result = build_report([run], out)
    wall = time.perf_counter() - start
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    own, children = (u.ru_maxrss / 1024 for u in usage)
    cpu = sum(u.ru_utime + u.ru_stime for u in usage)
    print(json.dumps({"wall_s": round(wall, 2), "import_s": round(start - before_import, 2),
                      "cpu_s": round(cpu, 2), "peak_rss_mib": round(own, 1),
                      "peak_rss_children_mib": round(children, 1), "exit_code": result.exit_code,
                      "classes": len(result.findings.classes), "findings": len(result.findings.findings),
                      "hosts": result.findings.hosts_total,
                      "sizes_kib": {k: round(p.stat().st_size / 1024) for k, p in result.files.items()}}))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10_000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--listed", type=int, help="an interrupted run: the manifest lists this many hosts ...")
    ap.add_argument("--records", type=int, default=2, help="... and this many have a record (with --listed)")
    ap.add_argument("--keep", type=Path, help="write the run folder and report here and keep them")
    ap.add_argument("--measure", nargs=2, type=Path, metavar=("RUN", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.measure:
        measure(*args.measure)
        return 0
    base = args.keep or Path(tempfile.mkdtemp(prefix="sweep-bench-"))
    run, out = base / "run", base / "report"
    try:
        started = time.perf_counter()
        if args.listed is not None:
            counts = write_interrupted(run, args.listed, args.records, args.gpus)
        else:
            counts = write_fleet(run, args.hosts, args.gpus)
        size = sum(p.stat().st_size for p in (run / "hosts").iterdir())
        print(f"wrote {args.listed or args.hosts} host(s) listed x {args.gpus} GPUs to {run} ({size / 2**20:.0f} MiB on disk) "
              f"in {time.perf_counter() - started:.1f} s; mix: {counts}")
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        child = subprocess.run([sys.executable, __file__, "--measure", str(run), str(out)],
                               capture_output=True, text=True, check=False)
        process_wall = time.perf_counter() - started
        if child.returncode:
            print(child.stdout + child.stderr, file=sys.stderr)
            return 2
        figures = json.loads(child.stdout.strip().splitlines()[-1])
        from sweep.analysis.fleet import usable_cpus

        peak = max(figures["peak_rss_mib"], figures["peak_rss_children_mib"])
        print(f"build_report: {figures['wall_s']:.2f} s wall ({figures['cpu_s']:.2f} s CPU over "
              f"{usable_cpus()} usable cores), peak RSS {figures['peak_rss_mib']:.0f} MiB (largest child process, "
              f"a parse worker or the fleet.csv writer: {figures['peak_rss_children_mib']:.0f} MiB); "
              f"whole process with Python start and "
              f"imports ({figures['import_s']:.2f} s): {process_wall:.2f} s; load average before: {load_before:.1f}")
        print(f"{figures['hosts']} hosts, {figures['classes']} classes, {figures['findings']} findings, exit code "
              f"{figures['exit_code']}; output KiB {figures['sizes_kib']}")
        budget = BUDGET_S if args.listed is None else BUDGET_S * max(1.0, args.listed / 100_000)
        ok = figures["wall_s"] < budget and peak < BUDGET_RSS_MIB
        print(f"budget {budget:.0f} s / {BUDGET_RSS_MIB} MiB: {'met' if ok else 'MISSED'}")
        return 0 if ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
