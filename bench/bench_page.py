"""The report page at fleet scale: its height and size in headless Chromium, and a screenshot of its
first screen, for fleets of 43, 300 and 3,000 hosts (issue 54), by this tree and by another
revision.

    python3 bench/bench_page.py [--hosts 43,300,3000] [--against 970fdb3] [--shots docs/screenshots]

43 hosts: the loopback demo's fleet as its records come out of `sweep demo` (`--demo RUN`, a run
folder it wrote), or else the Must-show fleet of tests/unit/fleet_variants; 300 and 3,000 hosts: the
synthetic fleet of bench/bench_report.py (the recorded H200 with the Must-show variants mixed in).
Each tree writes its report of the same run folder in a fresh process; Chromium (1400 x 900) then
loads it, and the page's height (document scrollHeight, CSS px) and report.html's bytes are printed
as a Markdown table. `--shots DIR` saves report-NNNN-<tree>.png: the first screen of each page.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "unit"), str(ROOT / "bench")]

from bench_report import write_fleet  # noqa: E402

REPORT = (
    "import sys; from sweep.report.build import build_report; "
    "build_report([sys.argv[1]], sys.argv[2])"
)


def fleet(folder: Path, hosts: int, demo: Path | None) -> Path:
    """A run folder of `hosts` hosts (the demo's own run for 43 when given)."""
    if hosts == 43 and demo is not None:
        return demo
    if hosts <= 50:
        import fleet_variants as fv

        return fv.write_run(folder, fv.must_show_fleet()[:hosts])
    write_fleet(folder, hosts, 8)
    return folder


def report_of(tree: Path, run: Path, out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-c", REPORT, str(run), str(out)],
        check=True,
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        stdout=subprocess.DEVNULL,
    )
    return out / "report.html"


def measure(html: Path, shot: Path | None) -> tuple[int, int]:
    """(page height in CSS px, bytes) of a report in Chromium at 1400 x 900; the first screen to
    `shot`."""
    from browser_page import Page

    with Page(html.resolve().as_uri(), width=1400, height=900) as page:
        height = int(page.evaluate("document.documentElement.scrollHeight"))
        if shot is not None:
            page.screenshot(shot)
    return height, html.stat().st_size


def tree_of(rev: str, base: Path) -> Path:
    """The tree of a git revision, unpacked under `base` (`git archive`)."""
    out = base / f"tree-{rev}"
    out.mkdir()
    archive = subprocess.run(
        ["git", "archive", rev], cwd=ROOT, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="43,300,3000")
    parser.add_argument("--against", help="a git revision to measure beside this tree")
    parser.add_argument("--demo", type=Path, help="the run folder of a `sweep demo` (its 43 hosts)")
    parser.add_argument("--shots", type=Path, help="save the first screen of each page here")
    args = parser.parse_args(argv)
    rows = ["| hosts | tree | page height (px) | report.html |", "|---:|---|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="sweep-bench-page-") as tmp:
        base = Path(tmp)
        trees = [("this", ROOT)] + (
            [(args.against, tree_of(args.against, base))] if args.against else []
        )
        for n in (int(x) for x in args.hosts.split(",")):
            run = fleet(base / f"run-{n}", n, args.demo)
            for name, tree in trees:
                html = report_of(tree, run, base / f"report-{n}-{name}")
                shot = (
                    args.shots / f"report-{n:04d}-{'after' if name == 'this' else 'before'}.png"
                    if args.shots
                    else None
                )
                height, size = measure(html, shot)
                rows.append(f"| {n} | {name} | {height:,} | {size / 1024:,.0f} KiB |")
                print(rows[-1], flush=True)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
