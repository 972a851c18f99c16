"""What the agent bundle's bytes cost the controller, and what the hosts pay instead.

One loopback fleet swept by `run_sweep` in this process with the zipapp (`bundle_bytes`: each module's
.py and .pyc, per-file deflate, 527 KB) and with what a sweep sends since issue 52 (`wire_bytes`: the
sources alone in one zlib stream, 157 KB; the hosts compile the agent), ABBA; controller CPU per host
and wall time of each sweep. Then the host's side: the CPU of one agent run (the bootstrap reading
either payload on stdin, `--replay` of the same capture), alternating, `--host-runs` of each.

    python3 bench/bench_bundle_bytes.py [--hosts 300] [--forks 32] [--gpus 8] [--host-runs 8]

Needs root and /usr/sbin/sshd (a LocalFleet). Not part of the test suite (issue 52: docs/scaling.md).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sweep.collect.run as run_module  # noqa: E402
from sweep.collect.bundle import bundle_bytes, remote_command, wire_bytes  # noqa: E402
from sweep.collect.options import SSHSettings  # noqa: E402
from sweep.demo import synth  # noqa: E402
from sweep.demo.loopback import FleetHost, LocalFleet  # noqa: E402


def cpu(who: int = resource.RUSAGE_SELF) -> float:
    own = resource.getrusage(who)
    return own.ru_utime + own.ru_stime


def host_cpu_ms(payload: bytes, capture: str) -> float:
    """CPU of one agent run as a host runs it: `remote_command` under this python, the payload on
    stdin."""
    command = remote_command(sys.executable, len(payload), ["--replay", capture])
    before = cpu(resource.RUSAGE_CHILDREN)
    done = subprocess.run(["sh", "-c", command], input=payload, capture_output=True, check=True)
    assert json.loads(done.stdout)["gpus"], done.stderr
    return 1000 * (cpu(resource.RUSAGE_CHILDREN) - before)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=300)
    ap.add_argument("--forks", type=int, default=32)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--host-runs", type=int, default=8)
    args = ap.parse_args()
    variants = {"zipapp": bundle_bytes(), "wire": wire_bytes()}
    with tempfile.TemporaryDirectory(prefix="sweep-bundle-") as tmp:
        tmp = Path(tmp)
        capture = synth.derive(synth.base_capture(), [synth.multi_gpu(args.gpus)])
        capture = str(synth.write(capture, tmp / "capture.json"))
        hosts = [FleetHost(f"gpu{i:03d}", capture=capture) for i in range(1, args.hosts + 1)]
        with LocalFleet(hosts, tmp / "fleet") as fleet:
            ssh = SSHSettings(
                known_hosts=str(fleet.known_hosts_path),
                ssh_config=None,
                allow_agent=False,
                look_for_keys=False,
            )
            env = fleet.controller_env()
            import os

            os.environ.update(env)
            print(
                "| variant | bundle bytes | ok | CPU ms per host | wall s |\n|---|---:|---:|---:|---:|"
            )
            for n, label in enumerate(["zipapp", "wire", "wire", "zipapp"]):
                run_module._bundle = lambda payload=variants[label]: payload
                start, wall = cpu(), time.monotonic()
                result = run_module.run_sweep(
                    fleet.inventory_path,
                    out=tmp / f"run{n}",
                    forks=args.forks,
                    ssh=ssh,
                    report={"no_report": True},
                )
                print(
                    f"| {label} | {len(variants[label]):,} | {result.ok} | "
                    f"{1000 * (cpu() - start) / args.hosts:.2f} | {time.monotonic() - wall:.1f} |",
                    flush=True,
                )
        host: dict[str, list[float]] = {label: [] for label in variants}
        for n in range(args.host_runs):
            for label in sorted(variants, reverse=n % 2 == 1):
                host[label].append(host_cpu_ms(variants[label], capture))
        print("\n| payload | host CPU ms per agent run, median | runs |\n|---|---:|---|")
        for label, runs in host.items():
            print(
                f"| {label} | {statistics.median(runs):.1f} | {', '.join(f'{r:.0f}' for r in runs)} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
