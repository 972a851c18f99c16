"""Benchmark of `sweep report` on a large fleet: 10,000 hosts x 8 GPUs by default.

The fleet is written to disk as a real run folder (manifest.json, records.sha256 and
hosts/<host>.json, indented as the first store.py wrote them), built from the recorded H200
health.json with the variants of the Must-show fleet mixed in (other driver, ECC off, power caps,
MIG, foreign processes, HW slowdown, empty mask, CPU-only torch, unreachable hosts). Then a fresh Python process runs `build_report` on it (load,
compare, render every output) and reports its wall time and peak RSS (resource.getrusage).

    python3 bench/bench_report.py [--hosts 10000] [--gpus 8] [--keep DIR]

Exits 1 when the run misses the budget (10 s, 2 GiB).

    python3 bench/bench_report.py --listed 100000 --records 2

An interrupted sweep instead: a manifest listing `--listed` hosts of which only `--records` have a
record (a `sweep run --wrap` record, with its benchmark figure); the others are `not_probed` rows
whose source is the manifest. The report must stay linear in the hosts listed (issue 23, item 5);
the budget is then 10 s per 100,000 hosts listed.

    python3 bench/bench_report.py --against b378d2c [--repeat 3] [--write bench/results/report.md]

Side by side: the same fleet read by this tree and by the tree of a git revision (`git archive REV`,
its own bench_report.py --measure, PYTHONPATH pointing at it), in interleaved repetitions (ABBA
order; each tree byte-compiled first, then one untimed run of each), each run in a fresh process.
On a shared machine only the ratios of neighbouring runs mean much: the table gives every run, the medians and the median of
the per-repetition ratios, with the load average before each run; `--write` keeps it as Markdown.
The run folder is signed as `sweep run` signs it: each record written as sweep writes it (one line), its
SHA-256 in records.sha256 and that line's HMAC under this user's key in records.mac, so the report reads
the records it trusts with orjson alone.

    python3 bench/bench_report.py --foreign --against b378d2c

A folder this user's sweep did not sign (a shard swept from another controller, a colleague's run): the
same records listed in records.sha256 without records.mac, which every record is read strictly from.
Any GPU count (`--gpus 1` and up): a variant's card is the host's last one when it has fewer.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import platform
import statistics
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

from sweep.store import DIGESTS, HOSTS, MACS  # noqa: E402

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
        out[variant] = json.dumps(rec, separators=(",", ":"), ensure_ascii=False)
    return out


def write_fleet(folder: Path, n_hosts: int, n_gpus: int, seed: int = 7, signed: bool = True) -> dict:
    """Write the run folder (`signed`: records.mac as sweep run writes it); how many hosts of each variant it holds."""
    from sweep.trust import line_mac, run_key

    if signed and run_key() is None:
        raise SystemExit("no run key to sign the records with (sweep run makes one): run `sweep run` once, or --foreign")
    rng = random.Random(seed)
    blobs = templates(n_gpus)
    hosts = folder / "hosts"
    hosts.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"format": "sweep-run", "record_version": 1,
                                                      "state": "complete"}))
    digests = []  # records.sha256, as RunFolder.write_record lists each record it writes
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
        blob = (blobs[variant].replace(PLACEHOLDER, name) + "\n").encode("utf-8")
        (hosts / f"{name}.json").write_bytes(blob)
        digests.append(f"{hashlib.sha256(blob).hexdigest()}  {HOSTS}/{name}.json")
    (folder / DIGESTS).write_text("".join(line + "\n" for line in digests))
    if signed:
        (folder / MACS).write_text("".join(f"{line_mac(line.encode())}  {line.split('  ', 1)[1]}\n" for line in digests))
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
    children = usage[1].ru_maxrss / 1024
    # this process's own peak: VmHWM (ru_maxrss keeps the peak of the image before exec, the bench
    # process that wrote the fleet, whatever this one used)
    own = int(next(line for line in open("/proc/self/status") if line.startswith("VmHWM:")).split()[1]) / 1024
    cpu = sum(u.ru_utime + u.ru_stime for u in usage)
    print(json.dumps({"wall_s": round(wall, 2), "import_s": round(start - before_import, 2),
                      "cpu_s": round(cpu, 2), "peak_rss_mib": round(own, 1),
                      "peak_rss_children_mib": round(children, 1), "exit_code": result.exit_code,
                      "classes": len(result.findings.classes), "findings": len(result.findings.health),
                      "hosts": result.findings.hosts_total,
                      "sizes_kib": {k: round(p.stat().st_size / 1024) for k, p in result.files.items()}}))


def measure_tree(tree: Path, run: Path, out: Path) -> dict:
    """One report of `run` by the sweep of `tree` (its own bench_report.py --measure), in a fresh process."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    load = os.getloadavg()[0]
    child = subprocess.run([sys.executable, str(tree / "bench" / "bench_report.py"), "--measure", str(run), str(out)],
                           capture_output=True, text=True, check=False, env=env, cwd=tree)
    if child.returncode:
        raise SystemExit(f"{tree}: bench_report --measure failed\n{child.stdout}{child.stderr}")
    figures = json.loads(child.stdout.strip().splitlines()[-1])
    shutil.rmtree(out, ignore_errors=True)
    return dict(figures, load_before=round(load, 1),
                peak_mib=max(figures["peak_rss_mib"], figures["peak_rss_children_mib"]))


def side_by_side(run: Path, base: Path, revs: list[str], repeat: int) -> tuple[list[str], list[dict]]:
    """Interleaved runs (ABBA) of this tree and of each of `revs`' trees on the same run folder."""
    head = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                          text=True, check=False).stdout.strip() or "this tree"
    trees = {head: ROOT}
    for rev in revs:
        trees[rev] = base / f"tree-{rev}"
        trees[rev].mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(trees[rev])], input=archive, check=True)
    for name, tree in trees.items():
        # each tree byte-compiled ahead (PYTHONDONTWRITEBYTECODE would make every run compile its own
        # sources again), then one untimed run that brings the records into the page cache
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "sweep"), str(tree / "probe_agent")],
                       check=True, stdout=subprocess.DEVNULL, env={k: v for k, v in os.environ.items()
                                                                  if k != "PYTHONDONTWRITEBYTECODE"})
        measure_tree(tree, run, base / f"warm-{name}")
    rows = []
    for i in range(repeat):
        for name in (list(trees) if i % 2 == 0 else list(trees)[::-1]):
            rows.append(dict(measure_tree(trees[name], run, base / f"out-{i}-{name}"), tree=name, repetition=i + 1))
            print(f"  {i + 1}/{repeat} {name}: {rows[-1]['wall_s']:.2f} s wall, {rows[-1]['cpu_s']:.2f} s CPU, "
                  f"peak {rows[-1]['peak_mib']:.0f} MiB (load {rows[-1]['load_before']})", flush=True)
    return list(trees), rows


def ratios_table(names: list[str], rows: list[dict]) -> list[str]:
    """Markdown: every run, the medians per tree, and the median of the per-repetition ratios."""
    lines = ["| repetition | tree | wall s | CPU s | peak RSS MiB | load average before |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['repetition']} | {r['tree']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['peak_mib']:.0f} | "
              f"{r['load_before']} |" for r in rows]
    by = {(r["tree"], r["repetition"]): r for r in rows}
    reps = sorted({r["repetition"] for r in rows})
    keys = ("wall_s", "cpu_s", "peak_mib")
    lines += ["", "| | wall s | CPU s | peak RSS MiB |", "|---|---|---|---|"]
    for t in names:
        m = {k: statistics.median(by[t, i][k] for i in reps) for k in keys}
        lines.append(f"| median, {t} | {m['wall_s']:.2f} | {m['cpu_s']:.2f} | {m['peak_mib']:.0f} |")
    for other in names[1:]:
        r = {k: statistics.median(by[names[0], i][k] / by[other, i][k] for i in reps) for k in keys}
        lines.append(f"| median ratio {names[0]} / {other} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | "
                     f"{r['peak_mib']:.2f} |")
    return lines


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").is_file() else ""
    from sweep.analysis.fleet import usable_cpus

    return (f"{platform.node()}: {usable_cpus()} usable CPUs ({model}), Python {platform.python_version()}, "
            f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def compare_main(args, run: Path, base: Path, counts: dict) -> int:
    """`--against REV`: the side-by-side runs, printed (and written with --write)."""
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    before = machine()
    names, rows = side_by_side(run, base, args.against, args.repeat)
    table = ratios_table(names, rows)
    text = "\n".join([
        f"# sweep report, {args.hosts} hosts x {args.gpus} GPUs: {names[0]} against {', '.join(names[1:])}", "",
        f"`python3 bench/bench_report.py --hosts {args.hosts} --gpus {args.gpus}{' --foreign' if args.foreign else ''} "
        f"{' '.join(f'--against {rev}' for rev in args.against)} --repeat {args.repeat}` ({started}; "
        f"fleet mix {counts})", "",
        f"Machine before: {before}", f"Machine after: {machine()}", "",
        "Each run is a fresh process running `build_report` on the same run folder (wall: build_report alone; "
        "CPU: the whole process and its children, imports included; peak RSS: the largest of the process and "
        "its children). Each tree is byte-compiled (compileall) and run once untimed first; then the runs "
        "alternate (ABBA), so each ratio compares neighbouring runs under the same load.",
        "", *table, ""])
    print(text)
    if args.write:
        args.write.write_text(text)
    peak = max(r["peak_mib"] for r in rows)
    return 0 if peak < BUDGET_RSS_MIB else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10_000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--listed", type=int, help="an interrupted run: the manifest lists this many hosts ...")
    ap.add_argument("--records", type=int, default=2, help="... and this many have a record (with --listed)")
    ap.add_argument("--foreign", action="store_true", help="a folder this user's sweep did not sign (no records.mac)")
    ap.add_argument("--keep", type=Path, help="write the run folder and report here and keep them")
    ap.add_argument("--measure", nargs=2, type=Path, metavar=("RUN", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--against", metavar="REV", action="append",
                    help="also run the sweep of this git revision, interleaved (may be given again)")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions per tree with --against (default 3)")
    ap.add_argument("--write", type=Path, metavar="MD", help="with --against: write the table to this file")
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
            counts = write_fleet(run, args.hosts, args.gpus, signed=not args.foreign)
        size = sum(p.stat().st_size for p in (run / "hosts").iterdir())
        print(f"wrote {args.listed or args.hosts} host(s) listed x {args.gpus} GPUs to {run} ({size / 2**20:.0f} MiB on disk) "
              f"in {time.perf_counter() - started:.1f} s; mix: {counts}")
        if args.against:
            return compare_main(args, run, base, counts)
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
