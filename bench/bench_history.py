"""Benchmark of `sweep history`: N daily runs of an H-host, G-GPU fleet, generated into a temporary
folder (removed after unless --keep):

  1. full rebuild of the index (no index file),
  2. adding one run to a current index,
  3. the history (index check, timelines, drift, page, CSV/JSON) with the index current,

each in a fresh interpreter; wall time, CPU time (the process and its workers: what a quiet machine
would take, divided by the workers) and peak memory, the largest summed RSS of the process and its
workers (sampled every 50 ms from /proc).

The records are real agent output: the recorded H200 under --load, made into G GPUs
(`sweep.demo.synth`), read by the agent (`--replay --load`), in four configurations (as is, 500 W
cap, another driver, ECC off); per run and host the load summary's SM clock gets a little jitter
(no samples are kept: a record is ~31 KB, the issue's ~3 GB for 90,000). One host in a hundred
degrades on a day of its own. Records are written without fsync (a bench, not a sweep).

    python3 bench/bench_history.py --hosts 1000 --gpus 8 --runs 90
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from probe_agent.main import main as agent_main  # noqa: E402
from sweep.demo import synth  # noqa: E402
from sweep.store import RECORD_VERSION, RUN_FORMAT, RunFolder  # noqa: E402

START = 1_767_225_600  # 2026-01-01T00:00:00Z
DAY = 86400


def configurations(gpus: int, work: Path) -> dict[str, dict]:
    base = synth.derive(synth.base_capture("h200-load"), [synth.multi_gpu(gpus)])
    edits = {"ok": [], "power": [synth.power_cap(500)], "driver": [synth.driver("590.44.01", 13010)],
             "ecc": [synth.ecc(False)]}
    out = {}
    for name, edit in edits.items():
        cap = synth.write(synth.derive(base, edit), work / f"{name}.json")
        with contextlib.redirect_stdout(io.StringIO()):
            agent_main(["--replay", str(cap), "--load", "20", "--force", "--out", str(work / name)])
        health = json.loads((work / name / "health.json").read_text())
        summary = health["load"]["summary"][0]
        health["load"]["samples"] = []
        health["load"]["summary"] = [dict(summary, gpu=i) for i in range(gpus)]
        out[name] = health
    return out


def _story(hosts: int, runs: int) -> dict[str, tuple[str, int]]:
    rng = random.Random(18)
    kinds = ("power", "driver", "ecc")
    return {f"node{n:05d}": (kinds[n % 3], rng.randrange(1, runs)) for n in rng.sample(range(hosts), max(1, hosts // 100))}


def write_run(args) -> str:
    root, day, hosts, configs, story = args
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(START + day * DAY + 3 * 3600))
    folder = RunFolder.create(Path(root) / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(START + day * DAY))}-fleet")
    names = [f"node{n:05d}" for n in range(hosts)]
    for name in names:
        kind, since = story.get(name, ("ok", 0))
        health = dict(configs[kind if day >= since and kind != "ok" else "ok"])
        jitter = 1.0 + (int(hashlib.md5(f"{name}/{day}".encode()).hexdigest()[:4], 16) % 9 - 4) / 1000
        load = dict(health["load"])
        load["summary"] = [dict(s, sm_mhz_median=round(s["sm_mhz_median"] * jitter)) for s in load["summary"]]
        health["load"] = load
        record = {"record_version": RECORD_VERSION, "host": name, "address": "10.0.0.1", "status": "ok",
                  "failure": None, "attempts": 1, "started_at": stamp, "ended_at": stamp, "duration_s": 0.3,
                  "health": health}
        folder.record_path(name).write_text(json.dumps(record))
    folder.write_manifest({"format": RUN_FORMAT, "record_version": RECORD_VERSION, "state": "complete",
                           "started_at": stamp, "ended_at": stamp, "hosts": names, "sessions": []})
    return str(folder.path)


def _tree_rss(pid: int) -> int:
    """Summed RSS (bytes) of `pid` and its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(children.get(p, ()))
    return total


def measure(code: str) -> tuple[float, int, str, float]:
    """(wall s, peak summed RSS bytes, stdout, CPU s of it and its workers) of `code` run by a fresh python3."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    peak = [0]

    def sample():
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, _ = proc.communicate()
    wall = time.perf_counter() - start
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"step failed ({proc.returncode}): {code}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, peak[0], out.strip(), cpu


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=1000)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--runs", type=int, default=90)
    p.add_argument("--workdir", type=Path, default=None, help="where to generate (default: a temp folder)")
    p.add_argument("--workers", type=int, default=None, help="index workers (default: sweep's)")
    p.add_argument("--keep", action="store_true")
    opts = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="sweep-bench-history-", dir=opts.workdir))
    reports = work / "reports"
    try:
        t = time.perf_counter()
        configs = configurations(opts.gpus, work)
        story = _story(opts.hosts, opts.runs)
        jobs = [(str(reports), day, opts.hosts, configs, story) for day in range(opts.runs + 1)]
        with ProcessPoolExecutor(min(os.cpu_count() or 1, 16)) as pool:
            folders = list(pool.map(write_run, jobs))
        extra = Path(folders[-1])
        parked = work / extra.name
        shutil.move(extra, parked)
        size = sum(f.stat().st_size for f in reports.rglob("*.json"))
        print(f"generated {opts.runs} runs x {opts.hosts} hosts x {opts.gpus} GPUs: {size / 2**30:.2f} GiB of records "
              f"in {time.perf_counter() - t:.0f} s; {len(story)} hosts degrade", flush=True)
        workers = "" if opts.workers is None else f", workers={opts.workers}"
        update = ("from sweep.history.index import HistoryIndex, run_folders, default_index_path\n"
                  f"i = HistoryIndex(default_index_path({str(reports)!r}))\n"
                  f"r = i.update(run_folders([{str(reports)!r}]){workers})\n"
                  "print(len(r.read), r.kept)")
        rows = []
        wall, rss, out, cpu = measure(update)
        rows.append(("full rebuild of the index", wall, rss, cpu, f"{out.split()[0]} runs read"))
        print(rows[-1], flush=True)
        shutil.move(parked, extra)
        wall, rss, out, cpu = measure(update)
        rows.append(("adding one run", wall, rss, cpu, f"{out.split()[0]} run read, {out.split()[1]} unchanged"))
        print(rows[-1], flush=True)
        page = ("from sweep.history import build_history\n"
                f"h = build_history([{str(reports)!r}], {str(work / 'out')!r}, floor_mhz=1300)\n"
                "print(len(h.selection.runs), len(h.changed_hosts), len(h.drifted))")
        wall, rss, out, cpu = measure(page)
        runs, changed, drifted = out.split()
        rows.append(("the history (check, timelines, drift, page, CSV/JSON)", wall, rss, cpu,
                     f"{runs} runs, {changed} changed hosts (of {len(story)} degraded), {drifted} drifted"))
        print(rows[-1], flush=True)
        index = reports / ".sweep-history.sqlite"
        html = work / "out" / "history.html"
        print(f"\n| step | wall s | CPU s (all processes) | peak RSS MiB (process + workers) | note |\n|---|---|---|---|---|")
        for name, wall, rss, cpu, note in rows:
            print(f"| {name} | {wall:.1f} | {cpu:.1f} | {rss / 2**20:.0f} | {note} |")
        print(f"\nindex {index.stat().st_size / 2**20:.0f} MiB; history.html {html.stat().st_size / 2**20:.1f} MiB; "
              f"cpus {os.cpu_count()}, usable {len(os.sched_getaffinity(0))}, load average {os.getloadavg()[0]:.1f}")
    finally:
        if not opts.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
