"""Benchmark of inventory loading: sweep's builtin loader against `ansible-inventory --list`, same files.

For each size (10,000 and 100,000 hosts by default) it writes one YAML inventory: hosts in racks of
100 (a group each) under two parent groups with their own vars, a `group_vars/` file per parent,
and 200 `host_vars/` files. Then, in fresh processes one after the other (so each is measured alone):

- sweep: `load_inventory(path)` (parse, merge vars in Ansible's precedence, frozen Hosts), wall time
  and the child's peak RSS (`os.wait4`'s ru_maxrss);
- ansible: `ansible-inventory -i path --list` (parse, merge, print JSON), the same two figures.

    python3 bench/bench_inventory.py [--sizes 10000,100000] [--host-vars 200] [--skip-ansible]

Prints a Markdown table (wall and CPU seconds: on a shared machine the CPU time is the figure that
does not depend on the neighbours) and exits 1 when sweep misses its budget (100,000 hosts in 3 s
of CPU).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = {100_000: 3.0}
RACK = 100
SWEEP_CHILD = (
    "import sys, time; sys.path.insert(0, sys.argv[2]); "
    "from sweep import load_inventory; "
    "t, c = time.perf_counter(), time.process_time(); inv = load_inventory(sys.argv[1]); "
    "t, c = time.perf_counter() - t, time.process_time() - c; "
    "assert len(inv.hosts) == int(sys.argv[3]), len(inv.hosts); print(f'{t:.3f} {c:.3f}')"
)


def write_inventory(folder: Path, hosts: int, host_vars: int) -> Path:
    """An inventory of `hosts` hosts in racks of RACK, with group_vars and `host_vars` host_vars files."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["all:", "  vars:", "    ansible_user: ops", "    sweep_connect_timeout: 5", "  children:"]
    racks = -(-hosts // RACK)
    for parent in ("dc1", "dc2"):
        lines += [f"    {parent}:", "      vars:", f"        site: {parent}", "      children:"]
        for rack in range(racks):
            if (rack % 2 == 0) != (parent == "dc1"):
                continue
            lines += [f"        rack{rack:04d}:", "          vars:", f"            rack: {rack}", "          hosts:"]
            for n in range(rack * RACK, min(hosts, (rack + 1) * RACK)):
                lines.append(f"            gpu{n:06d}:")  # addresses from DNS, as most large fleets
    path = folder / "inventory.yml"
    path.write_text("\n".join(lines) + "\n")
    (folder / "group_vars").mkdir(exist_ok=True)
    for parent in ("dc1", "dc2"):
        (folder / "group_vars" / f"{parent}.yml").write_text(f"ntp: ntp.{parent}.example\nsweep_retries: 2\n")
    (folder / "host_vars").mkdir(exist_ok=True)
    step = max(1, hosts // host_vars)
    for n in range(0, hosts, step)[:host_vars]:
        (folder / "host_vars" / f"gpu{n:06d}.yml").write_text(f"ansible_port: 2222\nnote: host {n}\n")
    return path


def measure(argv: list[str], env: dict | None = None) -> tuple[float, float, float, str]:
    """Run argv in a child; (wall s, CPU s, the child's peak RSS in MiB, its stdout's first line)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own rusage, not all children's
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"{argv[0]} failed ({proc.returncode}): {err.read().decode()[-2000:]}")
        return (wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
                (out.read().decode().splitlines() or [""])[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--host-vars", type=int, default=200)
    parser.add_argument("--skip-ansible", action="store_true")
    parser.add_argument("--keep", type=Path, help="write the inventories here and keep them")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="sweep-bench-inventory-"))
    ansible = shutil.which("ansible-inventory")
    rows, missed = [], []
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            path = write_inventory(work / f"h{size}", size, args.host_vars)
            wall, cpu, rss, inner = measure([sys.executable, "-c", SWEEP_CHILD, str(path), str(ROOT), str(size)])
            load_wall, load_cpu = (float(x) for x in inner.split())
            rows.append((size, "sweep load_inventory", load_wall, load_cpu, wall, cpu, rss))
            if size in BUDGET_S and load_cpu > BUDGET_S[size]:
                missed.append(f"{size} hosts: {load_cpu:.2f} s of CPU > {BUDGET_S[size]} s")
            if ansible and not args.skip_ansible:
                env = {**os.environ, "ANSIBLE_INVENTORY_ENABLED": "yaml", "ANSIBLE_HOST_KEY_CHECKING": "False"}
                wall, cpu, rss, _ = measure([ansible, "-i", str(path), "--list", "--output", os.devnull], env)
                rows.append((size, "ansible-inventory --list", None, None, wall, cpu, rss))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print("| hosts | loader | load wall s | load CPU s | process wall s | process CPU s | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    for size, who, load_wall, load_cpu, wall, cpu, rss in rows:
        shown = "| | |" if load_wall is None else f"| {load_wall:.2f} | {load_cpu:.2f} |"
        print(f"| {size:,} | {who} {shown} {wall:.2f} | {cpu:.2f} | {rss:.0f} |")
    print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the end: wall times include waiting "
          "for a CPU; the CPU columns do not)")
    print(f"({args.host_vars} host_vars files, 2 group_vars files, racks of {RACK}; python {sys.version.split()[0]})")
    for line in missed:
        print("over budget:", line)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
