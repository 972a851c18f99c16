"""Benchmark of the agent's kernel-log read on a flooded log: N Xid 95 lines over D distinct GPUs
(one public gpud/NVSentinel report: 800k lines, 29 distinct), written as /var/log/kern.log and as
/dev/kmsg records (a plain file here: one read returns many records) under a fake root.

Each read is timed against a plain line scan of the same file (`for line in fh: pass`, binary),
best of --repeat, in this one process, and reported as a ratio: the agent's fold (count, first and
last line per event kind) costs that many plain scans. The time bound (kernlog.SECONDS) is lifted
so that the whole log is read.

    python3 bench/bench_xid.py --lines 800000 --distinct 29
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from probe_agent import kernlog  # noqa: E402
from probe_agent.source import LiveSource  # noqa: E402
from probe_agent.xid import parse_events  # noqa: E402

LINE = "NVRM: Xid (PCI:0000:%02x:00): 95, pid=%d, name=python3, Uncontained: FBHUB. RST: Yes, D-RST: No"


def write(root: Path, lines: int, distinct: int) -> tuple[Path, Path]:
    (root / "var/log").mkdir(parents=True)
    (root / "dev").mkdir()
    kern, kmsg = root / "var/log/kern.log", root / "dev/kmsg"
    with open(kern, "w") as k, open(kmsg, "w") as m:
        for n in range(lines):
            text = LINE % (1 + n % distinct, 1000 + n % 7)
            k.write("Nov 30 07:00:00 gpu07 kernel: [%12.6f] %s\n" % (10 + n / 100, text))
            m.write("3,%d,%d,-;%s\n" % (n, 10_000_000 + n * 10_000, text))
    return kern, kmsg


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def scan(path: Path) -> None:
    with open(path, "rb") as fh:
        for _ in fh:
            pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=800_000)
    parser.add_argument("--distinct", type=int, default=29)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    kernlog.SECONDS = 3600.0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        kern, kmsg = write(root, args.lines, args.distinct)
        print(f"| read ({args.lines} Xid 95 lines, {args.distinct} distinct) | agent | plain scan | ratio | groups, total |")
        print("|---|---|---|---|---|")
        for name, path, journal in (("/var/log/kern.log", kern, None), ("/dev/kmsg", kmsg, None)):
            if name == "/var/log/kern.log":
                kmsg.rename(root / "dev/kmsg.off")
            else:
                (root / "dev/kmsg.off").rename(kmsg)
            source = LiveSource(root=str(root), journalctl=journal)
            answer = {}
            agent = best(lambda: answer.update(source.kernel_log()), args.repeat)
            plain = best(lambda: scan(path), args.repeat)
            groups = parse_events(answer["events"])
            assert answer["source"] == name and answer["complete"], answer["source"]
            print(f"| {name} | {agent:.3f} s | {plain:.3f} s | {agent / plain:.1f}x | "
                  f"{len(groups)}, {sum(g['count'] for g in groups)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
