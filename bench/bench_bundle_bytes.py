"""What the agent bundle's bytes cost the controller: one loopback fleet swept by `run_sweep` in this
process with the full bundle (each module's .py and .pyc) and with a source-only one (no .pyc: the
hosts compile the agent), ABBA; controller CPU per host and wall time of each sweep.

    python3 bench/bench_bundle_bytes.py [--hosts 300] [--forks 32] [--gpus 8]

Needs root and /usr/sbin/sshd (a LocalFleet). Not part of the test suite (issue 52: docs/scaling.md).
"""

from __future__ import annotations

import argparse
import io
import resource
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sweep.collect.run as run_module  # noqa: E402
from sweep.collect.bundle import bundle_bytes  # noqa: E402
from sweep.collect.options import SSHSettings  # noqa: E402
from sweep.demo import synth  # noqa: E402
from sweep.demo.loopback import FleetHost, LocalFleet  # noqa: E402


def source_only(bundle: bytes) -> bytes:
    """The same zipapp without its .pyc files."""
    head, body = bundle[: bundle.index(b"PK")], bundle[bundle.index(b"PK") :]
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(body)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            if not info.filename.endswith(".pyc"):
                zout.writestr(info, zin.read(info))
    return head + out.getvalue()


def cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=300)
    ap.add_argument("--forks", type=int, default=32)
    ap.add_argument("--gpus", type=int, default=8)
    args = ap.parse_args()
    full = bundle_bytes()
    variants = {"full": full, "source-only": source_only(full)}
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
            print("| variant | bundle bytes | ok | CPU ms per host | wall s |\n|---|---:|---:|---:|---:|")
            for n, label in enumerate(["full", "source-only", "source-only", "full"]):
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
