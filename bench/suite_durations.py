"""Where the suite's time goes: per file and per test, from pytest's junit XML; and the quick loop's list.

    python -m pytest -q -p no:cacheprovider -n 4 --junitxml=/tmp/suite.xml tests   # README command 2's pytest
    python bench/suite_durations.py /tmp/suite.xml [--top 25] [--write-slow 3.0]

Prints the files by their tests' summed time (setup, call and teardown: a module-scoped fleet is in its
first test's figure) and the slowest tests. `--write-slow S` rewrites tests/slow_tests.txt: every unit test
function one of whose cases took S seconds or more in that run, except each module's fastest function, so
that the quick loop (`-m "not slow" tests/unit`, marked by tests/conftest.py) still runs every module.
Not part of the test suite.
"""
from __future__ import annotations

import argparse
import collections
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SLOW_LIST = REPO / "tests" / "slow_tests.txt"


def cases(junit: Path) -> list[tuple[str, str, float]]:
    """(module path, function name without parameters, seconds) of every test case in the XML."""
    out = []
    for case in ET.parse(junit).iter("testcase"):
        module = case.get("classname", "").replace(".", "/") + ".py"
        out.append((module, case.get("name", "").split("[")[0], float(case.get("time", 0))))
    return out


def slow_functions(found, threshold: float) -> list[str]:
    longest: dict[tuple[str, str], float] = collections.defaultdict(float)
    for module, function, seconds in found:
        if module.startswith("tests/unit/"):
            longest[module, function] = max(longest[module, function], seconds)
    by_module = collections.defaultdict(list)
    for (module, function), seconds in longest.items():
        by_module[module].append((seconds, function))
    slow = []
    for module, functions in by_module.items():
        fastest = min(functions)[1]
        slow += [f"{module}::{f}" for s, f in functions if s >= threshold and f != fastest]
    return sorted(slow)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--write-slow", type=float, default=None, metavar="SECONDS")
    args = parser.parse_args()
    found = cases(args.junit)
    files, counts = collections.Counter(), collections.Counter()
    for module, _, seconds in found:
        files[module] += seconds
        counts[module] += 1
    print(f"{len(found)} tests, {sum(files.values()):.0f} s summed\n\n| file | tests | seconds |\n| --- | --- | --- |")
    for module, seconds in files.most_common(args.top):
        print(f"| {module} | {counts[module]} | {seconds:.1f} |")
    print("\n| test | seconds |\n| --- | --- |")
    for module, function, seconds in sorted(found, key=lambda c: -c[2])[:args.top]:
        print(f"| {module}::{function} | {seconds:.1f} |")
    if args.write_slow is not None:
        slow = slow_functions(found, args.write_slow)
        SLOW_LIST.write_text(f"# unit tests of which a case took >= {args.write_slow:g} s (bench/suite_durations.py "
                             "--write-slow): marked slow, left out of the quick loop\n" + "\n".join(slow) + "\n")
        print(f"\nwrote {len(slow)} functions to {SLOW_LIST}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
